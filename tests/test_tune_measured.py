"""Measured rules: table tests over numbers, plus one real server's counters."""

from __future__ import annotations

import pytest

from pgaccel.pg.values import setting_bytes
from pgaccel.tune.measured import (MeasuredStats, apply_measured, hit_ratio_rule,
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


@pytest.mark.parametrize("db_gb,ratio,phrase", [
    (4, 0.999, "fits in shared_buffers"),
    (12, 0.95, "fits in memory"),
    (100, 0.80, "reach the disk"),
])
def test_hit_ratio_advice(db_gb, ratio, phrase):
    st = MeasuredStats(seconds=60, blks_hit=int(ratio * 1e6), blks_read=int((1 - ratio) * 1e6),
                       db_size_bytes=db_gb * GB)
    c = hit_ratio_rule(st, S, inputs_for("8c-32g"))
    assert c.advice_only and phrase in c.reason
    assert c.inputs["hit_ratio"] == pytest.approx(ratio, abs=1e-4)


def test_apply_measured_replaces_and_keeps_current():
    inp = inputs_for("8c-32g")
    plan = make_plan(inp, current={"max_wal_size": "1GB"})
    st = MeasuredStats(seconds=100, wal_bytes=50 * MB * 100, checkpoints_timed=0,
                       checkpoints_req=5, blks_hit=99, blks_read=1, db_size_bytes=GB)
    apply_measured(plan, st, inp)
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
