"""Measured rules: table tests over numbers, plus one real server's counters."""

from __future__ import annotations

import pytest

from pgaccel.pg.values import setting_bytes
from pgaccel.session.plan import run_shared_buffers
from pgaccel.tune.measured import (InForce, MeasuredStats, apply_measured, hit_ratio_rule,
                                   max_work_mem, stats_from_delta, wal_rule, work_mem_rule)
from pgaccel.tune.rules import make_plan, memory_budget

from test_tune_profiles import inputs_for

MB, GB = 1024**2, 1024**3
S = {"checkpoint_timeout": "15min", "checkpoint_completion_target": "0.9",
     "max_wal_size": "8GB", "work_mem": "16MB", "shared_buffers": "8GB"}


@pytest.mark.parametrize("rate_mb,timed,req,expected", [
    # 10 MB/s x 900 s x 1.9 x 1.5 = 25.05 GB -> 26GB
    (10, 1, 3, "26GB"),
    (10, 4, 0, "26GB"),        # no forced checkpoint yet, but the rate would force them
    (1, 4, 0, None),           # 2.5 GB per cycle fits in 8GB: nothing to change
    (1, 2, 2, "16GB"),         # fits on average but checkpoints were forced: bursts, double
])
def test_max_wal_size_from_wal_rate(rate_mb, timed, req, expected):
    st = MeasuredStats(seconds=600, wal_bytes=rate_mb * MB * 600, checkpoints_timed=timed,
                       checkpoints_req=req)
    c = wal_rule(st, S, inputs_for("8c-32g"))
    if expected is None:   # enough room: reported with its numbers, nothing changed
        assert c is not None and c.advice_only and c.proposed == "8GB"
        assert c.inputs["wal_bytes_per_sec"] == rate_mb * MB
        return
    assert c.proposed == expected and c.name == "max_wal_size"
    assert c.inputs["wal_bytes_per_sec"] == rate_mb * MB
    assert c.inputs["checkpoints_req"] == req and c.inputs["checkpoint_timeout_s"] == 900


def test_no_wal_numbers_no_rule():
    assert wal_rule(MeasuredStats(seconds=60), S, inputs_for("8c-32g")) is None


@pytest.mark.parametrize("files,bytes_,work_mem,expected,advice", [
    (100, 100 * 10 * MB, "16MB", "32MB", False),  # 10MB spills: 2x -> 32MB (power of two)
    (10, 10 * 400 * MB, "16MB", "cap", False),     # 400MB spills: raised to the budget's edge
    (10, 10 * 400 * MB, "cap", None, True),        # already at the edge: advice only
    (0, 0, "16MB", None, None),                    # no spills, no rule
])
def test_work_mem_from_spills(files, bytes_, work_mem, expected, advice):
    inp = inputs_for("8c-32g")
    settings = make_plan(inp).postgres_settings()
    settings["work_mem"] = work_mem
    if work_mem == "cap":
        settings["work_mem"] = f"{max_work_mem(settings, inp) // MB}MB"
    c = work_mem_rule(MeasuredStats(seconds=60, temp_files=files, temp_bytes=bytes_,
                                    transactions=50000), settings, inp)
    if advice is None:
        assert c is None
        return
    assert c.advice_only == advice
    if expected == "cap":
        assert setting_bytes(c.proposed) == max_work_mem(settings, inp) // MB * MB
        assert "SET LOCAL" in c.reason
    elif expected:
        assert c.proposed == expected
    assert c.inputs["temp_files"] == files and c.inputs["avg_spill_bytes"] == bytes_ // files
    # whatever it proposes as a setting keeps the budget
    if not c.advice_only:
        settings["work_mem"] = c.proposed
        used, limit, _ = memory_budget(settings, inp)
        assert used < limit


def test_max_work_mem_is_the_budget_edge():
    inp = inputs_for("8c-32g")
    s = make_plan(inp).postgres_settings()
    cap = max_work_mem(s, inp)
    s["work_mem"] = f"{cap // 1024}kB"
    assert memory_budget(s, inp)[0] < memory_budget(s, inp)[1]
    s["work_mem"] = f"{cap // 1024 + 2048}kB"
    assert memory_budget(s, inp)[0] >= memory_budget(s, inp)[1]


SRC = "where it was read"
TAIL = " (measured with shared_buffers {}: where it was read)"


@pytest.mark.parametrize("hit,read,db,sb,reason,sb_bytes", [
    # the issue: proposed 8GB (S), measured with 128MB; 300 MB database, 830/1000 = 0.83
    (830, 170, 300 * MB, "128MB",
     "the database (300MB) exceeds shared_buffers (128MB) but fits in memory: misses are "
     "served by the OS cache; a larger shared_buffers (within the budget) would turn them "
     "into hits" + TAIL.format("128MB"), 128 * MB),
    # pg_settings form: 16384 x 8kB = 128MB
    (830, 170, 300 * MB, "16384", "the database (300MB) exceeds shared_buffers (128MB) but "
     "fits in memory: misses are served by the OS cache; a larger shared_buffers (within the "
     "budget) would turn them into hits" + TAIL.format("128MB"), 128 * MB),
    # 4 GB in 8 GB, 0.999 >= 0.99: nothing to explain
    (999, 1, 4 * GB, "8GB", "the database (4.0GB) fits in shared_buffers (8GB)"
     + TAIL.format("8GB"), 8 * GB),
    # 4 GB in 8 GB, 0.95 < 0.99: misses are the first reads
    (950, 50, 4 * GB, "8GB", "the database (4.0GB) fits in shared_buffers (8GB); misses are "
     "first reads after start" + TAIL.format("8GB"), 8 * GB),
    # 12 GB > 8 GB but <= 16 GB (half of 32 GB)
    (950, 50, 12 * GB, "8GB", "the database (12.0GB) exceeds shared_buffers (8GB) but fits in "
     "memory: misses are served by the OS cache; a larger shared_buffers (within the budget) "
     "would turn them into hits" + TAIL.format("8GB"), 8 * GB),
    # 100 GB > 16 GB
    (800, 200, 100 * GB, "8GB", "the database (100.0GB) is larger than half of memory: reads "
     "reach the disk; storage speed and indexes matter more than shared_buffers"
     + TAIL.format("8GB"), 8 * GB),
    # not known (not recorded, or SHOW refused): never the plan's value instead
    (830, 170, 300 * MB, None, "the database is 300MB; it cannot be set against "
     "shared_buffers" + TAIL.format("unknown"), None),
    (830, 170, 300 * MB, "(needs superuser or pg_read_all_settings)", "the database is 300MB; "
     "it cannot be set against shared_buffers" + TAIL.format("unknown"), None),
    (830, 170, None, "128MB", "database size unknown" + TAIL.format("128MB"), 128 * MB),
])
def test_hit_ratio_uses_the_measured_shared_buffers(hit, read, db, sb, reason, sb_bytes):
    st = MeasuredStats(seconds=60, blks_hit=hit, blks_read=read, db_size_bytes=db)
    c = hit_ratio_rule(st, InForce(sb, SRC), inputs_for("8c-32g"))
    assert c.advice_only and c.name == "buffer_hit_ratio"
    assert c.proposed == f"{hit / (hit + read):.4f}"
    assert c.reason == reason
    assert c.inputs["shared_buffers_bytes"] == sb_bytes
    assert c.inputs["shared_buffers_source"] == SRC


def test_hit_ratio_in_a_plan_is_the_measured_not_the_proposed():
    inp = inputs_for("8c-32g")
    plan = make_plan(inp)
    proposed = plan.postgres_settings()["shared_buffers"]
    assert setting_bytes(proposed, "8kB") > GB     # the plan proposes GBs ...
    st = MeasuredStats(seconds=60, blks_hit=830, blks_read=170, db_size_bytes=300 * MB)
    apply_measured(plan, st, inp, shared_buffers=InForce("128MB", SRC))
    c = plan.get("buffer_hit_ratio")                # ... the trials ran with 128MB
    assert c.inputs["shared_buffers_bytes"] == 128 * MB
    assert "exceeds shared_buffers (128MB)" in c.reason and proposed not in c.reason


RUN = {"id": "R1", "variants": [{"name": "baseline", "settings": {}},
                                {"name": "tuned", "settings": {"shared_buffers": "6016MB"}}]}
DOC = {"run_id": "R1", "server": {"shared_buffers": "128MB"}}


@pytest.mark.parametrize("run,doc,variant,value,source", [
    # the baseline's {} are the server's settings: the value run.json recorded
    (RUN, DOC, "baseline", "128MB",
     "the server's value recorded in run R1, which the 'baseline' variant ran with"),
    # no run.json (written with --out elsewhere): unknown, not the tuned variant's
    (RUN, None, "baseline", None,
     "run R1 records neither a 'baseline' setting nor the server's value"),
    # a variant's own setting wins over the server's
    (RUN, DOC, "tuned", "6016MB", "the 'tuned' variant of run R1 set it"),
    ({"id": "R2", "variants": [{"name": "baseline", "settings": {"shared_buffers": "1GB"}}]},
     DOC, "baseline", "1GB", "the 'baseline' variant of run R2 set it"),
])
def test_run_shared_buffers(run, doc, variant, value, source):
    assert run_shared_buffers(run, doc, variant) == InForce(value, source)


def test_apply_measured_replaces_and_keeps_current():
    inp = inputs_for("8c-32g")
    plan = make_plan(inp, current={"max_wal_size": "1GB"})
    st = MeasuredStats(seconds=100, wal_bytes=50 * MB * 100, checkpoints_timed=0,
                       checkpoints_req=5, blks_hit=99, blks_read=1, db_size_bytes=GB)
    apply_measured(plan, st, inp, shared_buffers=InForce("128MB", "test"))
    c = plan.get("max_wal_size")
    assert c.rule == "measured.max_wal_size" and c.current == "1GB"
    assert setting_bytes(c.proposed, "MB") > 8 * GB
    assert plan.get("buffer_hit_ratio").advice_only
    assert [x.name for x in plan.changes].count("max_wal_size") == 1


def test_stats_from_a_real_server_delta():
    """metrics.pg snapshots of a real server feed the rules through stats_from_delta."""
    from pgaccel.metrics.pg import delta, snapshot
    from pgaccel.server.cluster import Cluster
    from pgaccel.server.discovery import choose_server
    inst = choose_server()
    with Cluster.create_throwaway(inst) as c:
        c.start({"work_mem": "64kB", "max_wal_size": "32MB", "checkpoint_timeout": "30s"})
        with c.connect() as conn:
            before = snapshot(conn)
            conn.execute("CREATE TABLE t AS SELECT g, md5(g::text) AS m "
                         "FROM generate_series(1, 200000) g")
            conn.execute("SELECT m FROM t ORDER BY m").fetchall()
            after = snapshot(conn)
    st = stats_from_delta(delta(before, after), 10.0)
    assert st.wal_bytes and st.wal_bytes > 5 * MB
    assert st.temp_files and st.temp_files >= 1 and st.temp_bytes > 1 * MB
    inp = inputs_for("8c-32g", major := inst.major)
    settings = {"work_mem": "64kB", "max_wal_size": "32MB", "checkpoint_timeout": "30s",
                "checkpoint_completion_target": "0.9", "shared_buffers": "128MB"}
    assert wal_rule(st, settings, inp).inputs["wal_bytes"] == st.wal_bytes
    w = work_mem_rule(st, {**make_plan(inp).postgres_settings(), "work_mem": "64kB"}, inp)
    assert w and setting_bytes(w.proposed) > 64 * 1024 and major >= 13
