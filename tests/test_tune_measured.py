"""Measured rules: table tests over numbers, plus one real server's counters.

Every expected number is worked out by hand below (the arithmetic beside it), including
the memory budget's work_mem ceiling: rules.memory_budget is never used as the oracle."""

from __future__ import annotations

import pytest

from pgaccel.pg.values import setting_bytes
from pgaccel.session.plan import run_shared_buffers
from pgaccel.tune.inputs import TuneInputs
from pgaccel.tune.measured import (SRC_STORAGE, SRC_WAL, InForce, MeasuredStats, apply_changes,
                                   apply_measured, hit_ratio_rule, max_work_mem,
                                   measured_changes, stats_from_delta, storage_rules, wal_rule,
                                   work_mem_rule)
from pgaccel.tune.plan import Change, Plan
from pgaccel.tune.rules import make_plan

from test_tune_profiles import inputs_for

MB, GB = 1024**2, 1024**3
S = {"checkpoint_timeout": "15min", "checkpoint_completion_target": "0.9",
     "max_wal_size": "8GB", "work_mem": "16MB", "shared_buffers": "8GB"}
INP16 = TuneInputs(memory_bytes=32 * GB, cpus=8, pg_version=16, storage="ssd",
                   connections=100, workload="oltp")


def _as_dict(c):
    return None if c is None else c.to_dict()


def _change(name, proposed, reason, source, rule, context=None, advice_only=False,
            inputs=None):
    return {"layer": "postgres", "name": name, "proposed": proposed, "reason": reason,
            "source": source, "current": None, "restart": False, "context": context,
            "advice_only": advice_only, "rule": rule, "inputs": inputs or {}}


# -- stats -----------------------------------------------------------------------------------

def test_stats_from_delta_maps_every_counter():
    d = {"wal_bytes": 1, "ckpt_timed": 2, "ckpt_requested": 3, "db_temp_files": 4,
         "db_temp_bytes": 5, "db_xact_commit": 6, "db_blks_hit": 7, "db_blks_read": 8,
         "db_size_bytes": 9, "other": 10}
    assert stats_from_delta(d, 10.0) == MeasuredStats(
        seconds=10.0, wal_bytes=1, checkpoints_timed=2, checkpoints_req=3, temp_files=4,
        temp_bytes=5, transactions=6, blks_hit=7, blks_read=8, db_size_bytes=9)
    assert stats_from_delta({}, 5.0) == MeasuredStats(seconds=5.0)


@pytest.mark.parametrize("wal, seconds, rate", [
    (600 * MB, 60, 10 * MB), (0, 60, 0.0), (None, 60, None), (600 * MB, 0, None),
    (600 * MB, -1, None)])
def test_wal_rate(wal, seconds, rate):
    assert MeasuredStats(seconds=seconds, wal_bytes=wal).wal_bytes_per_sec == rate


# -- max_wal_size ------------------------------------------------------------------------------

def _wal_inputs(rate, seconds, timeout, cct, timed, req, before):
    return {"wal_bytes": rate * seconds, "seconds": seconds, "wal_bytes_per_sec": rate,
            "checkpoint_timeout_s": timeout, "checkpoint_completion_target": cct,
            "checkpoints_timed": timed, "checkpoints_req": req, "margin": 1.5,
            "max_wal_size_before": before}


def _wal_change(proposed, reason, inputs, advice_only=False):
    return _change("max_wal_size", proposed, reason, SRC_WAL, "measured.max_wal_size",
                   "sighup", advice_only, inputs)


WAL_TAIL = "; needs that much free disk in pg_wal"


@pytest.mark.parametrize("settings, rate, timed, req, expected", [
    # 10 MB/s x 900 s x 1.9 x 1.5 = 10 MB x 2565 = 25650 MB = 25.05 GB -> 26GB (whole GBs)
    (S, 10 * MB, 1, 3, ("26GB", "10MB/s of WAL x 900s x (1 + 0.9) x 1.5: checkpoints by "
                        "time, not WAL volume (3 of 4 were requested)" + WAL_TAIL)),
    # no forced checkpoint yet, but 26GB > 8GB: the rate would force them
    (S, 10 * MB, 4, 0, ("26GB", "10MB/s of WAL x 900s x (1 + 0.9) x 1.5: checkpoints by "
                        "time, not WAL volume (0 of 4 were requested)" + WAL_TAIL)),
    # 1 MB x 2565 = 2.5 GB -> 3GB fits in 8GB, nothing requested: advice with the numbers
    (S, MB, 4, 0, ("8GB", "measured 1MB/s of WAL: 8GB already holds a checkpoint_timeout's "
                   "worth with margin (needs 3GB); no checkpoint was requested")),
    # fits on average, but 2 of 4 checkpoints were forced: bursts, double 8GB -> 16GB
    (S, MB, 2, 2, ("16GB", "1MB/s of WAL x 900s x (1 + 0.9) x 1.5: checkpoints by time, "
                   "not WAL volume (2 of 4 were requested)" + WAL_TAIL)),
    # 3 MB x 2565 = 7695 MB = 7.5 GB -> 8GB: exactly the current 8GB, which is enough
    (S, 3 * MB, 4, 0, ("8GB", "measured 3MB/s of WAL: 8GB already holds a "
                       "checkpoint_timeout's worth with margin (needs 8GB); no checkpoint was "
                       "requested")),
    # below 1GB the step is 64MB: 0.1 MB/s = 104857.6 B/s x 900 x 1.9 x 1.5 = 268959744 B
    # = 4.008 x 64MB -> 5 x 64MB = 320MB; the current "256" is in max_wal_size's unit, MB
    ({**S, "max_wal_size": "256"}, 104857.6, 4, 0,
     ("320MB", "102kB/s of WAL x 900s x (1 + 0.9) x 1.5: checkpoints by time, not WAL "
      "volume (0 of 4 were requested)" + WAL_TAIL)),
])
def test_max_wal_size_from_wal_rate(settings, rate, timed, req, expected):
    st = MeasuredStats(seconds=600, wal_bytes=rate * 600, checkpoints_timed=timed,
                       checkpoints_req=req)
    before = "256MB" if settings["max_wal_size"] == "256" else "8GB"
    proposed, reason = expected
    used = _wal_inputs(rate, 600, 900, 0.9, timed, req, before)
    if rate == 104857.6:
        used["wal_bytes_per_sec"] = 104858      # recorded in whole bytes per second
    assert _as_dict(wal_rule(st, settings, INP16)) == _wal_change(
        proposed, reason, used, advice_only=reason.startswith("measured"))


def test_max_wal_size_with_the_server_defaults():
    """No plan values: checkpoint_timeout 300 (s), completion target 0.9, max_wal_size 1024
    (MB); 1 MB/s x 300 x 1.9 x 1.5 = 855 MB -> 14 x 64MB = 896MB, within 1GB; no checkpoint
    counters: 0 and 0."""
    st = MeasuredStats(seconds=600, wal_bytes=600 * MB)
    assert _as_dict(wal_rule(st, {}, INP16)) == _wal_change(
        "1GB", "measured 1MB/s of WAL: 1GB already holds a checkpoint_timeout's worth with "
        "margin (needs 896MB); no checkpoint was requested",
        _wal_inputs(MB, 600, 300, 0.9, 0, 0, "1GB"), advice_only=True)


def test_no_wal_numbers_no_rule():
    assert wal_rule(MeasuredStats(seconds=60), S, INP16) is None
    assert wal_rule(MeasuredStats(seconds=0, wal_bytes=MB), S, INP16) is None


# -- the memory budget's work_mem ceiling, by hand ---------------------------------------------
# worst case = shared_buffers + max_connections x work_mem x hash_mem_multiplier x factor
#              + max_parallel_workers x work_mem x hash_mem_multiplier
#              + autovacuum_max_workers x (autovacuum_work_mem, or maintenance_work_mem at -1)
#              + maintenance_work_mem,    which must stay below 90% of memory.
# factor (per query): oltp/web/ingest 1, mixed 2, analytics 3.
B = {"shared_buffers": "8GB", "maintenance_work_mem": "1GB", "autovacuum_work_mem": "-1",
     "autovacuum_max_workers": "3", "max_connections": "100", "max_parallel_workers": "8",
     "hash_mem_multiplier": "2.0", "work_mem": "16MB"}
# 32GB: limit int(34359738368 x 0.9) = 30923764531; fixed 8GB + 3 x 1GB + 1GB = 12GB
# = 12884901888, leaving 18038862642 bytes
EDGE = {"shared_buffers": "2960MB", "maintenance_work_mem": "64MB", "autovacuum_work_mem": "-1",
        "autovacuum_max_workers": "3", "max_connections": "100", "max_parallel_workers": "0",
        "hash_mem_multiplier": "1", "work_mem": "4MB"}
# fixed 2960MB + 3 x 64MB + 64MB = 3216MB = 3372220416; per MB of work_mem 100 x 1 x 1 = 100MB


def _inp(memory=32 * GB, workload="oltp"):
    return TuneInputs(memory_bytes=memory, cpus=8, pg_version=16, storage="ssd",
                      connections=100, workload=workload)


@pytest.mark.parametrize("settings, memory, workload, cap_mb", [
    # per MB of work_mem: 100 x 2 x 1 + 8 x 2 = 216 MB; 18038862642 / 226492416 = 79.6 -> 79
    (B, 32 * GB, "oltp", 79),
    (B, 32 * GB, "web", 79),
    # mixed: 100 x 2 x 2 + 16 = 416 MB; 18038862642 / 436207616 = 41.4 -> 41
    (B, 32 * GB, "mixed", 41),
    # analytics: 100 x 2 x 3 + 16 = 616 MB; 18038862642 / 645922816 = 27.9 -> 27
    (B, 32 * GB, "analytics", 27),
    # autovacuum_work_mem 256MB instead of maintenance's 1GB: fixed 8GB + 768MB + 1GB
    # = 10468982784, leaving 20454781746; / 226492416 = 90.3 -> 90
    ({**B, "autovacuum_work_mem": "256MB"}, 32 * GB, "oltp", 90),
    # 10GB: limit int(10737418240 x 0.9) = 9663676416; 9663676416 - 3372220416 = 6000MB,
    # exactly 60 x 100MB: 60MB would reach the limit (it must stay below): 59
    (EDGE, 10 * GB, "oltp", 59),
    # 2 bytes more memory: limit 9663676417, 60MB leaves 1 byte: 60
    (EDGE, 10 * GB + 2, "oltp", 60),
    # shared_buffers 9GB: fixed 9GB + 256MB = 9932111872 > 9663676416: no room at all
    ({**EDGE, "shared_buffers": "9GB"}, 10 * GB, "oltp", 0),
])
def test_max_work_mem_by_hand(settings, memory, workload, cap_mb):
    assert max_work_mem(settings, _inp(memory, workload)) == cap_mb * MB


# -- work_mem from spills ------------------------------------------------------------------------

WM_SRC = "PostgreSQL docs: Resource Consumption > Memory"
ONLY_THOSE = "(SET LOCAL work_mem / ALTER ROLE ... SET)"


def _wm_inputs(files, bytes_, xacts, per_1000, before, cap, factor=1):
    return {"temp_files": files, "temp_bytes": bytes_, "avg_spill_bytes": bytes_ // files,
            "transactions": xacts, "temp_files_per_1000_xacts": per_1000,
            "work_mem_before": before, "budget_max_work_mem": cap, "per_query_factor": factor}


@pytest.mark.parametrize("workload, work_mem, files, bytes_, xacts, expected", [
    # 10MB spills: 2 x 10MB = 20MB -> the next power of two, 32MB, within 79MB;
    # 100 files / 50000 transactions = 2.0 per 1000
    ("oltp", "16MB", 100, 100 * 10 * MB, 50000, (
        "32MB", False, "100 temp files averaging 10MB: 2x that in memory avoids the spill "
        "(within the budget, max 79MB)", 2.0)),
    # 12MB spills: 24MB -> 32MB (3 files / 7000 transactions = 0.429 per 1000)
    ("oltp", "16MB", 3, 3 * 12 * MB, 7000, (
        "32MB", False, "3 temp files averaging 12MB: 2x that in memory avoids the spill "
        "(within the budget, max 79MB)", 0.429)),
    # 400MB spills: 800MB -> 1GB, above the budget's 79MB: raised to 79MB
    # (10 files / 3000 transactions = 3.333 per 1000)
    ("oltp", "16MB", 10, 10 * 400 * MB, 3000, (
        "79MB", False, "10 temp files averaging 400MB: raised to the memory budget's limit; "
        "the larger sorts still spill, so raise work_mem for those queries only " + ONLY_THOSE,
        3.333)),
    # mixed: the budget's edge is 41MB
    ("mixed", "16MB", 10, 10 * 400 * MB, None, (
        "41MB", False, "10 temp files averaging 400MB: raised to the memory budget's limit; "
        "the larger sorts still spill, so raise work_mem for those queries only " + ONLY_THOSE,
        None)),
    # already at the edge: advice, with the 1GB the spills want
    ("oltp", "79MB", 10, 10 * 400 * MB, None, (
        "1GB", True, "spills average 400MB but the memory budget allows work_mem up to 79MB "
        "for every connection: raise it only for the spilling queries " + ONLY_THOSE, None)),
    # 8MB spills: 2 x 8MB = 16MB exactly, the current value: nothing to raise (advice)
    ("oltp", "16MB", 4, 4 * 8 * MB, 0, (
        "16MB", True, "spills average 8MB but the memory budget allows work_mem up to 79MB "
        "for every connection: raise it only for the spilling queries " + ONLY_THOSE, None)),
    # 100kB spills: 200kB, at least 1MB; below the current 16MB (advice keeps 16MB)
    ("oltp", "16MB", 10, 10 * 100 * 1024, None, (
        "16MB", True, "spills average 100kB but the memory budget allows work_mem up to 79MB "
        "for every connection: raise it only for the spilling queries " + ONLY_THOSE, None)),
    # 3MB spills: 6MB -> 8MB, above the current 4096 (kB, the unit of work_mem) = 4MB
    ("oltp", "4096", 2, 2 * 3 * MB, None, (
        "8MB", False, "2 temp files averaging 3MB: 2x that in memory avoids the spill (within "
        "the budget, max 79MB)", None)),
])
def test_work_mem_from_spills(workload, work_mem, files, bytes_, xacts, expected):
    proposed, advice, reason, per_1000 = expected
    factor = {"oltp": 1, "mixed": 2}[workload]
    cap = "79MB" if workload == "oltp" else "41MB"
    before = "4MB" if work_mem == "4096" else work_mem
    c = work_mem_rule(MeasuredStats(seconds=60, temp_files=files, temp_bytes=bytes_,
                                    transactions=xacts), {**B, "work_mem": work_mem},
                      _inp(workload=workload))
    assert _as_dict(c) == _change(
        "work_mem", proposed, reason, WM_SRC, "measured.work_mem",
        None if advice else "user", advice,
        _wm_inputs(files, bytes_, xacts, per_1000, before, cap, factor))


def test_work_mem_defaults_to_the_servers_4mb():
    """No work_mem in the plan: the default 4096 kB; 3MB spills want 8MB."""
    settings = {k: v for k, v in B.items() if k != "work_mem"}
    c = work_mem_rule(MeasuredStats(seconds=60, temp_files=2, temp_bytes=6 * MB), settings,
                      _inp())
    assert (c.proposed, c.inputs["work_mem_before"]) == ("8MB", "4MB")


@pytest.mark.parametrize("files, bytes_", [(0, 0), (5, 0), (0, 100), (None, None),
                                           (5, None), (None, 100)])
def test_no_spills_no_rule(files, bytes_):
    st = MeasuredStats(seconds=60, temp_files=files, temp_bytes=bytes_)
    assert work_mem_rule(st, B, _inp()) is None


# -- buffer hit ratio ------------------------------------------------------------------------------

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


@pytest.mark.parametrize("hit, read, db, sb, why", [
    # 8GB database in 8GB of shared_buffers: fits (the edge is <=)
    (999, 1, 8 * GB, "8GB", "the database (8.0GB) fits in shared_buffers (8GB)"),
    # 99 / 100 = 0.99 exactly: not below 0.99, no word about misses
    (99, 1, 4 * GB, "8GB", "the database (4.0GB) fits in shared_buffers (8GB)"),
    (98, 2, 4 * GB, "8GB", "the database (4.0GB) fits in shared_buffers (8GB); misses are "
     "first reads after start"),
    # 16GB: exactly half of 32GB still fits in memory
    (950, 50, 16 * GB, "8GB", "the database (16.0GB) exceeds shared_buffers (8GB) but fits "
     "in memory: misses are served by the OS cache; a larger shared_buffers (within the "
     "budget) would turn them into hits"),
    # 20GB: more than half of 32GB (and less than all of it)
    (950, 50, 20 * GB, "8GB", "the database (20.0GB) is larger than half of memory: reads "
     "reach the disk; storage speed and indexes matter more than shared_buffers"),
    # sizes for the sentence: 1023 MB is 1023MB, 1 GB is 1.0GB, 1.5 MB rounds to 2MB,
    # 900 kB is 900kB
    (999, 1, 1023 * MB, "4GB", "the database (1023MB) fits in shared_buffers (4GB)"),
    (999, 1, GB, "4GB", "the database (1.0GB) fits in shared_buffers (4GB)"),
    (999, 1, 3 * MB // 2, "4GB", "the database (2MB) fits in shared_buffers (4GB)"),
    (999, 1, 900 * 1024, "4GB", "the database (900kB) fits in shared_buffers (4GB)"),
    (999, 1, MB, "4GB", "the database (1MB) fits in shared_buffers (4GB)"),
])
def test_hit_ratio_edges(hit, read, db, sb, why):
    st = MeasuredStats(seconds=60, blks_hit=hit, blks_read=read, db_size_bytes=db)
    c = hit_ratio_rule(st, InForce(sb, SRC), INP16)
    assert c.reason == why + TAIL.format(sb)


def test_hit_ratio_change_whole():
    """2 hits, 1 read: 0.666666.. -> proposed 0.6667, recorded to 5 places 0.66667."""
    st = MeasuredStats(seconds=60, blks_hit=2, blks_read=1, db_size_bytes=300 * MB)
    assert _as_dict(hit_ratio_rule(st, InForce("16384", SRC), INP16)) == _change(
        "buffer_hit_ratio", "0.6667",
        "the database (300MB) exceeds shared_buffers (128MB) but fits in memory: misses are "
        "served by the OS cache; a larger shared_buffers (within the budget) would turn them "
        "into hits" + TAIL.format("128MB"),
        "pg_stat_database blks_hit/blks_read", "measured.hit_ratio", None, True,
        {"blks_hit": 2, "blks_read": 1, "hit_ratio": 0.66667, "db_size_bytes": 300 * MB,
         "shared_buffers_bytes": 128 * MB, "shared_buffers_source": SRC,
         "memory_bytes": 32 * GB})


@pytest.mark.parametrize("hit, read, proposed", [
    (None, 5, None), (5, None, None), (None, None, None), (0, 0, None),
    (1, 0, "1.0000"), (5, 5, "0.5000"), (0, 5, "0.0000")])
def test_hit_ratio_counters(hit, read, proposed):
    st = MeasuredStats(seconds=60, blks_hit=hit, blks_read=read, db_size_bytes=GB)
    c = hit_ratio_rule(st, InForce("8GB", SRC), INP16)
    assert (c.proposed if c else None) == proposed


# -- applying measured changes to a plan ------------------------------------------------------------

def _plan():
    """A hand-made plan: the budget settings of B (work_mem ceiling 79MB at 32GB, oltp),
    max_wal_size 8GB (server has 1GB), work_mem 16MB (server has 4MB)."""
    def ch(name, value, **kw):
        return Change("postgres", name, value, "rule of thumb", rule=f"rules.{name}", **kw)
    return Plan({}, [ch(k, v) for k, v in B.items() if k != "work_mem"] + [
        ch("checkpoint_timeout", "15min", context="sighup"),
        ch("checkpoint_completion_target", "0.9", context="sighup"),
        ch("max_wal_size", "8GB", current="1GB", context="sighup"),
        ch("work_mem", "16MB", current="4MB", context="user"),
        Change("postgres", "work_mem", "64MB", "advice for reports", advice_only=True),
        Change("linux", "vm.swappiness", "1", "linux"),
    ])


def test_measured_changes_in_order():
    """WAL (10 MB/s -> 26GB), work_mem (10MB spills -> 32MB), then the hit ratio."""
    st = MeasuredStats(seconds=600, wal_bytes=6000 * MB, checkpoints_timed=1,
                       checkpoints_req=3, temp_files=100, temp_bytes=1000 * MB,
                       blks_hit=99, blks_read=1, db_size_bytes=GB)
    got = measured_changes(st, _plan().postgres_settings(), _inp(), InForce("8GB", SRC))
    assert [(c.name, c.proposed, c.advice_only) for c in got] == [
        ("max_wal_size", "26GB", False), ("work_mem", "32MB", False),
        ("buffer_hit_ratio", "0.9900", True)]


def test_apply_measured_replaces_and_keeps_current():
    plan = _plan()
    st = MeasuredStats(seconds=600, wal_bytes=6000 * MB, checkpoints_timed=1,
                       checkpoints_req=3, temp_files=100, temp_bytes=1000 * MB,
                       blks_hit=99, blks_read=1, db_size_bytes=GB)
    apply_measured(plan, st, _inp(), shared_buffers=InForce("128MB", "test"))
    got = [(c.layer, c.name, c.proposed, c.current, c.context, c.advice_only, c.rule)
           for c in plan.changes]
    assert got[len(B) - 1:] == [
        ("postgres", "checkpoint_timeout", "15min", None, "sighup", False,
         "rules.checkpoint_timeout"),
        ("postgres", "checkpoint_completion_target", "0.9", None, "sighup", False,
         "rules.checkpoint_completion_target"),
        # replaced in place, with the plan's current value and context
        ("postgres", "max_wal_size", "26GB", "1GB", "sighup", False, "measured.max_wal_size"),
        ("postgres", "work_mem", "32MB", "4MB", "user", False, "measured.work_mem"),
        ("postgres", "work_mem", "64MB", None, None, True, ""),        # advice stays
        ("linux", "vm.swappiness", "1", None, None, False, ""),
        ("postgres", "buffer_hit_ratio", "0.9900", None, None, True, "measured.hit_ratio"),
    ]


def test_apply_changes_keeps_current_restart_and_context_or_appends():
    plan = Plan({}, [Change("postgres", "a", "1", "old", current="0", restart=True,
                            context="postmaster"),
                     Change("postgres", "b", "1", "advice", advice_only=True)])
    new_a = Change("postgres", "a", "2", "new", context="sighup")
    new_b = Change("postgres", "b", "2", "new")
    apply_changes(plan, [new_a, new_b])
    assert plan.changes[0] is new_a
    assert (new_a.proposed, new_a.current, new_a.restart, new_a.context) == \
        ("2", "0", True, "postmaster")
    # b's only change was advice: the new one is added, the advice kept
    assert plan.changes[1:] == [Change("postgres", "b", "1", "advice", advice_only=True), new_b]
    assert (new_b.current, new_b.restart, new_b.context) == (None, False, None)


# -- storage, from fio -----------------------------------------------------------------------------

def _fio(lat, iops1, iops32):
    return {"qd1": {"iops": iops1, "lat_ms": lat}, "qd32": {"iops": iops32, "lat_ms": lat}}


def test_storage_rules_whole():
    """A virtio disk: 0.0734 ms <= 0.25 -> 1.1; 58528 / 13725 = 4.264x, 2 x 4.264 = 8.53,
    log2 = 3.09 -> 2^3 = 8; recorded: latency to 3 places, IOPS whole, speedup to 2."""
    nums = {"qd1_lat_ms": 0.073, "qd1_iops": 13725, "qd32_iops": 58528, "speedup": 4.26}
    assert [c.to_dict() for c in storage_rules(_fio(0.0734, 13725.4, 58528.2))] == [
        _change("random_page_cost", "1.1", "measured: a random 8 kB read waits 0.07 ms at "
                "queue depth 1", SRC_STORAGE, "measured.random_page_cost", inputs=nums),
        _change("effective_io_concurrency", "8", "measured: 32 queued reads give 4.3x the "
                "IOPS of one (58528 vs 13725)", SRC_STORAGE,
                "measured.effective_io_concurrency", inputs=nums),
        _change("maintenance_io_concurrency", "8", "same measured depth for VACUUM/ANALYZE "
                "prefetch", SRC_STORAGE, "measured.maintenance_io_concurrency", inputs=nums),
    ]


@pytest.mark.parametrize("lat, rpc", [
    (0.02, "1.1"), (0.25, "1.1"), (0.2501, "1.5"), (1.0, "1.5"), (1.01, "2.0"), (4.0, "2.0"),
    (4.5, "3.0"), (8.0, "3.0"), (8.01, "4.0"), (20.0, "4.0")])
def test_random_page_cost_steps(lat, rpc):
    assert storage_rules(_fio(lat, 1000, 1000))[0].proposed == rpc


@pytest.mark.parametrize("iops1, iops32, eic", [
    (1000, 1000, "2"),       # 1x: 2 x 1 = 2 = 2^1
    (1000, 500, "2"),        # 0.5x: 2 x 0.5 = 1 -> 2^0 = 1, at least 2
    (1000, 1500, "4"),       # 3 -> log2 1.58 -> 2^2
    (1000, 2800, "4"),       # 5.6 -> log2 2.49 -> 2^2
    (1000, 3000, "8"),       # 6 -> log2 2.58 -> 2^3
    (1000, 64000, "128"),    # 128 = 2^7
    (1000, 100000, "256"),   # 100x: 200 -> log2 7.6 -> 2^8 = 256
    (1000, 200000, "256"),   # 200x: 400 -> log2 8.6 -> 2^9 = 512, at most 256
    (1, 4, "8"),             # 1 IOPS at QD1 still counts: 4x -> 8 -> 2^3
    (0, 5000, "2"),          # no QD1 IOPS: no speedup measured, 1x
])
def test_io_concurrency_from_the_speedup(iops1, iops32, eic):
    ch = storage_rules(_fio(0.1, iops1, iops32))
    assert (ch[1].proposed, ch[2].proposed) == (eic, eic)


@pytest.mark.slow
def test_stats_from_a_real_server_delta():
    """A real server's counters (Database.counters) feed the rules through stats_from_delta."""
    from pgaccel.metrics.pg import delta
    from pgaccel.server.database import Database
    from pgaccel.server.cluster import Cluster
    from pgaccel.server.discovery import choose_server
    inst = choose_server()
    with Cluster.create_throwaway(inst) as c:
        c.start({"work_mem": "64kB", "max_wal_size": "32MB", "checkpoint_timeout": "30s"})
        with c.connect() as conn:
            before = Database(conn).counters()
            conn.execute("CREATE TABLE t AS SELECT g, md5(g::text) AS m "
                         "FROM generate_series(1, 200000) g")
            conn.execute("SELECT m FROM t ORDER BY m").fetchall()
            conn.execute("VACUUM t")
            after = Database(conn).counters()
    d = delta(before, after)
    assert d["tables_vacuum"] == 1          # the tables' (auto)vacuum counts travel too
    st = stats_from_delta(d, 10.0)
    assert st.wal_bytes and st.wal_bytes > 5 * MB
    assert st.temp_files and st.temp_files >= 1 and st.temp_bytes > 1 * MB
    inp = inputs_for("8c-32g", major := inst.major)
    settings = {"work_mem": "64kB", "max_wal_size": "32MB", "checkpoint_timeout": "30s",
                "checkpoint_completion_target": "0.9", "shared_buffers": "128MB"}
    assert wal_rule(st, settings, inp).inputs["wal_bytes"] == st.wal_bytes
    w = work_mem_rule(st, {**make_plan(inp).postgres_settings(), "work_mem": "64kB"}, inp)
    assert w and setting_bytes(w.proposed) > 64 * 1024 and major >= 13
