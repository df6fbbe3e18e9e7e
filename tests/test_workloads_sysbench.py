"""sysbench workloads: both drivers issue the same statements per transaction and load the
same schema (real server with pg_stat_statements, real sysbench when installed)."""

from __future__ import annotations

import re
import shutil
from collections import Counter

import pytest
from helpers import settled_counter

from pgaccel.server.discovery import find_client
from pgaccel.server.target import open_target
from pgaccel.workloads.base import BenchContext, RunParams, get_workload
from pgaccel.workloads.sysbench import TESTS, pgbench_script, statements_per_transaction
from pgaccel.workloads.sysbench_cmd import histogram_percentiles, parse_sysbench_output

HAVE_SYSBENCH = shutil.which("sysbench") is not None
KINDS = [
    ("point", r"^SELECT c FROM sbtest\d+ WHERE id\s*=\s*\$1$"),
    ("simple_range", r"^SELECT c FROM sbtest\d+ WHERE id BETWEEN \$1 AND \$2$"),
    ("sum_range", r"^SELECT SUM\(k\) FROM sbtest\d+ WHERE id BETWEEN"),
    ("order_range", r"^SELECT c FROM sbtest\d+ WHERE id BETWEEN \$1 AND \$2 ORDER BY c$"),
    ("distinct_range", r"^SELECT DISTINCT c FROM sbtest\d+ WHERE id BETWEEN"),
    ("update_k", r"^UPDATE sbtest\d+ SET k\s*=\s*k\s*\+\s*(1|\$\d+)"),
    ("update_c", r"^UPDATE sbtest\d+ SET c\s*=" ),
    ("delete", r"^DELETE FROM sbtest\d+ WHERE id"),
    ("insert", r"^INSERT INTO sbtest\d+"),
    ("begin", r"^BEGIN$"),
    ("commit", r"^COMMIT$"),
]


def kind_of(query: str) -> str:
    q = " ".join(query.split()).rstrip(";")
    for kind, pat in KINDS:
        if re.search(pat, q, re.I):
            return kind
    return "other:" + q[:60]


@pytest.fixture(scope="module")
def ctx():
    with open_target() as tg:
        tg.apply({"shared_preload_libraries": "pg_stat_statements"})
        tg.ensure_bench_db()
        c = BenchContext(tg, find_client("pgbench", tg.inst))
        with c.connect() as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        yield c


def commits(ctx) -> int:
    """Commits in the bench database, once the exited backends have flushed their stats."""
    return settled_counter(ctx, "SELECT xact_commit FROM pg_stat_database "
                                "WHERE datname = current_database()")


def statement_counts(ctx, wl, params, txns) -> tuple[Counter, int, int]:
    """Statements by kind (pg_stat_statements) and commits (pg_stat_database) of a run.

    pg_stat_statements counts a prepared BEGIN/COMMIT once, not per execution, so the
    transaction boundaries are checked with the database's commit counter instead."""
    with ctx.connect() as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
    before = commits(ctx)
    res = wl.run_count(ctx, params, txns)
    committed = commits(ctx) - before
    with ctx.connect() as conn:
        rows = conn.execute(
            "SELECT query, calls FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid"
            " WHERE d.datname = current_database()").fetchall()
    counts: Counter = Counter()
    for q, calls in rows:
        k = kind_of(q)
        if k.startswith("other:") and ("pg_stat_statements" in q or "pg_database" in q
                                         or "xact_commit" in q or "pg_stat_clear" in q):
            continue                       # this test's own queries
        if k not in ("begin", "commit", "other:ROLLBACK"):
            counts[k] += calls
    return counts, res.ops, committed


def schema_of(ctx) -> dict:
    with ctx.connect() as conn:
        cols = conn.execute(
            "SELECT table_name, column_name, data_type, character_maximum_length, is_nullable,"
            " column_default IS NOT NULL FROM information_schema.columns"
            " WHERE table_name ~ '^sbtest' ORDER BY 1, ordinal_position").fetchall()
        idx = conn.execute("SELECT tablename, indexdef FROM pg_indexes WHERE tablename ~ "
                           "'^sbtest' ORDER BY 1, 2").fetchall()
        rows = [conn.execute(f"SELECT count(*), count(DISTINCT id), min(id), max(id),"
                             f" min(length(c)), min(k) >= 1 FROM sbtest{t}").fetchone()
                for t in (1, 2)]
    return {"cols": cols, "idx": idx, "rows": rows}


def test_script_picks_a_table_per_group_and_counts_statements():
    name = "sysbench-read-write"
    _, groups, trx, _ = TESTS[name]
    s = pgbench_script(groups, 3, trx)
    sql = [ln for ln in s.splitlines() if ln and not ln.startswith(("\\", "--"))]
    # every statement appears once per table branch; one branch runs per group
    assert len(sql) == 3 * (statements_per_transaction(name)["total"] - 2) + 2
    assert s.count("\\set tnum random(1, 3)") == len(groups)
    assert statements_per_transaction(name) == {"reads": 14, "writes": 4, "other": 2,
                                                "total": 20}
    assert statements_per_transaction("sysbench-point-select")["total"] == 1


def test_parse_sysbench_output():
    out = """[ 1s ] thds: 2 tps: 493.16 qps: 9895.16 (r/w/o: 6930.21/1976.64/988.32) lat (ms,50%): 3.49 err/s: 0.00 reconn/s: 0.00
[ 2s ] thds: 2 tps: 499.58 qps: 9983.53 (r/w/o: 6990.07/1994.31/999.15) lat (ms,50%): 3.82 err/s: 0.00 reconn/s: 0.00
       1.000 |****                                     3
       2.000 |****************************************  6
       9.000 |*                                        1
    transactions:                        1498   (497.86 per sec.)
    queries:                             29960  (9957.20 per sec.)
    ignored errors:                      2      (0.00 per sec.)
    total time:                          3.0084s
         min:                                    0.83
         avg:                                    4.00
         max:                                   70.82
"""
    p = parse_sysbench_output(out)
    assert p["transactions"] == 1498 and p["queries"] == 29960 and p["ignored_errors"] == 2
    assert p["tps_series"] == [493.16, 499.58] and p["latency_p50_series"] == [3.49, 3.82]
    assert p["latency_ms"]["mean"] == 4.0 and p["latency_ms"]["max"] == 70.82
    assert p["latency_ms"]["p50"] == 2.0 and p["latency_ms"]["p95"] == 9.0
    assert histogram_percentiles([(1.0, 9), (5.0, 1)], (90, 99)) == {"p90": 1.0, "p99": 5.0}


@pytest.mark.skipif(not HAVE_SYSBENCH, reason="sysbench is not installed")
def test_both_drivers_load_the_same_schema(ctx):
    wl = get_workload("sysbench-read-only")
    shapes = {}
    for drv in ("sysbench", "pgbench"):
        wl.build(ctx, RunParams(scale=2, options={"table_size": 3000, "driver": drv}))
        shapes[drv] = schema_of(ctx)
    assert shapes["sysbench"] == shapes["pgbench"]
    assert shapes["pgbench"]["rows"][0][:4] == (3000, 3000, 1, 3000)
    assert any("(k)" in d for _, d in shapes["pgbench"]["idx"])


@pytest.mark.skipif(not HAVE_SYSBENCH, reason="sysbench is not installed")
@pytest.mark.parametrize("name", sorted(TESTS))
def test_drivers_issue_the_same_statements_per_transaction(ctx, name):
    wl = get_workload(name)
    prep = RunParams(scale=2, options={"table_size": 3000, "driver": "pgbench"})
    wl.build(ctx, prep)                    # fresh rows: the writers change them
    per_txn = {}
    for drv in ("sysbench", "pgbench"):
        params = RunParams(clients=1, scale=2, options={"table_size": 3000, "driver": drv})
        counts, txns, committed = statement_counts(ctx, wl, params, 40)
        counts2, txns2, committed2 = statement_counts(ctx, wl, params, 80)
        assert (txns, txns2) == (40, 80)
        # exactly one commit per transaction: the difference cancels the commits of the
        # drivers' and this test's own connection set-up
        assert committed2 - committed == 40, (drv, committed, committed2)
        per_txn[drv] = {k: v / txns for k, v in counts.items()}
        assert per_txn[drv] == {k: v / txns2 for k, v in counts2.items()}
    assert per_txn["sysbench"] == per_txn["pgbench"]
    spt = statements_per_transaction(name)
    assert sum(per_txn["pgbench"].values()) == spt["total"] - spt["other"]
    if name == "sysbench-read-write":
        assert per_txn["pgbench"] == {"point": 10, "simple_range": 1, "sum_range": 1,
                                      "order_range": 1, "distinct_range": 1, "update_k": 1,
                                      "update_c": 1, "delete": 1, "insert": 1}


def test_pgbench_driver_runs_timed_with_costs(ctx):
    wl = get_workload("sysbench-point-select")
    params = RunParams(clients=2, scale=2, options={"table_size": 3000, "driver": "pgbench"})
    wl.prepare(ctx, params)
    r = wl.run(ctx, params, 2)
    assert r.ops > 100 and r.throughput > 0
    assert r.client["client_cpu_s"] > 0 and "warnings" in r.extra
    assert r.extra["queries"] == r.ops          # one statement per event


@pytest.mark.skipif(not shutil.which("sysbench"), reason="sysbench is not installed")
def test_sysbench_throughput_is_its_own_count_over_its_own_time(ctx):
    """Not the mean of a window of per-second reports: the trial's throughput is sysbench's
    transaction count over its total time, in the workload and in the trial."""
    from pgaccel.decide.model import TrialSpec
    from pgaccel.lab.trial import run_trial
    wl = get_workload("sysbench-point-select")
    params = RunParams(clients=2, scale=2, duration=6, warmup=0,
                       options={"table_size": 3000, "driver": "sysbench"})
    wl.prepare(ctx, params)
    r = wl.run(ctx, params, 6)
    assert r.extra["throughput_from"] == "totals"
    assert r.throughput == pytest.approx(r.ops / r.duration_s)
    t = run_trial(ctx, TrialSpec("current", {}, wl, params, 0))
    assert t.throughput == pytest.approx(t.metrics["ops"] / t.metrics["duration_s"])
