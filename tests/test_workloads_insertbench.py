"""Insert Benchmark: scripts, the fixed-size queue through l.i1, and the q-step validity rule
on a real server."""

from __future__ import annotations

import threading
import time

import pytest

from pgaccel.server.discovery import find_client
from pgaccel.server.target import open_target
from pgaccel.workloads.base import BenchContext, RunParams, get_workload
from pgaccel.errors import UsageError
from pgaccel.workloads.ibplans import QueryPlan, drop_statements
from pgaccel.workloads.pgbench import PgbenchResult
from pgaccel.workloads.steps import StepResult
from pgaccel.workloads.ibscripts import (IIBENCH_RANGES, config, insert_statements,
                                         paced_seconds, point_bounds, query_scripts, table,
                                         write_protocol, write_script, writer_valid)

OPTS = {"rows_per_table": 6000, "i1_rows": 6000, "i2_rows": 500, "query_seconds": 2}


def test_write_script_one_insert_and_one_delete_per_client_branch():
    s = write_script(3, 50, "server", delete=True, pace=False)
    assert s.count("\\if :client_id = 0") == 1 and s.count("\\elif :client_id =") == 2
    for c in range(3):
        branch = s.split(f":client_id = {c}")[1].split("\\elif")[0].split("\\endif")[0]
        assert branch.count(f"INSERT INTO {table(c)} ") == 1
        assert branch.count(f"DELETE FROM {table(c)} ") == 1
        assert "generate_series(1, 50)" in branch
        assert f"\\set dmin_{c} :dhi_{c}" in branch and f"\\set dhi_{c} :dmin_{c} + 50" in branch
        # iibench's delete: the 50 lowest ids from the first not yet deleted
        assert (f"DELETE FROM {table(c)} WHERE transactionid IN (SELECT transactionid FROM "
                f"{table(c)} WHERE transactionid >= :dmin_{c} ORDER BY transactionid ASC "
                "LIMIT 50);") in branch
        # two statements, each its own commit, as iibench's inserter and deleter
        assert "BEGIN;" not in branch and "COMMIT;" not in branch
        assert branch.index("INSERT") < branch.index("DELETE")


def test_client_rows_are_one_multi_row_insert_per_commit_as_iibench_sends():
    """iibench.py: one ``insert into T (...) values (...),(...)`` of rows_per_commit rows,
    autocommit; here for each step's batch size."""
    for rows in (100, 50, 5, 10):
        prelude, stmt = insert_statements(rows, "client")
        assert prelude.count("\\set ") == 5 * rows
        assert stmt.count("INSERT INTO") == 1 and stmt.count("(now(), ") == rows
        assert f":pc{rows}.00" in stmt and f"'aaaaaaa:da{rows}'" in stmt
    s = write_script(1, 100, "client", delete=False, pace=False)
    assert "BEGIN;" not in s                          # one statement: its own commit
    s = write_script(2, 50, "client", delete=True, pace=False)
    assert "BEGIN;" not in s and s.count("INSERT INTO") == 2      # insert, delete: 2 commits
    assert config(RunParams(clients=1)).writer_rows_per_commit == 50     # iq.sh's q steps
    cfg = config(RunParams(clients=1, options={"size": "tiny"}))
    assert cfg.rowgen == "client" and write_protocol(cfg) == "simple"
    srv = config(RunParams(clients=1, options={"size": "tiny", "rowgen": "server"}))
    assert write_protocol(srv) == srv.protocol == "prepared"


def test_query_scripts_and_rules():
    qr = query_scripts(2, "qr")
    assert len(qr) == 3 and all("LIMIT 10" in q for q in qr)
    (qp,) = query_scripts(2, "qp")
    assert qp.count("transactionid IN (") == 2 and ":lo_1" in qp
    assert writer_valid(95.0, 100) and not writer_valid(94.9, 100)
    assert point_bounds(1000, 5000, 600) == (1600, 5000)
    assert point_bounds(1000, 1200, 600) == (1200, 1200)
    assert config(RunParams(clients=3, options={"size": "tiny"})).tables == 3


@pytest.mark.parametrize("transactions, fraction, valid", [
    (8, 1.00, True),      # 4 commits a table in 2 s of 0.5-second periods: every one on time
    (7, 1.00, True),      # the last not ended by the end: due in the last period, not owed
    (6, 1.00, True),      # the 6 owed (due up to one period before the end)
    (5, 5 / 6, False),    # one owed commit missing
    (3, 0.5, False),      # stopped half-way
])
def test_single_q_step_writers_owe_the_commits_due_a_period_before_the_end(
        transactions, fraction, valid):
    """Writers paced to 200 rows/s (2 tables, 50 rows a commit) in a 2-second q step."""
    wl = get_workload("insert-benchmark")
    plan = QueryPlan(step="qp100", seconds=2.0, cfg=config(RunParams(clients=2, options=OPTS)),
                     defines={"period": "0.500000"}, wrpc=50, target=200, writer="",
                     queries=[])
    assert plan.cfg.tables == 2
    w = PgbenchResult(transactions=transactions, failed=0, duration_s=2.0, tps=4.0,
                      latency_ms={}, tps_series=[], latency_p50_series=[], summary_tps=3.5)
    secs = wl.writer_run_seconds(plan, w)
    res = wl.judge_writers(StepResult("qp100", 100, 2.0, 50.0, "queries/s"), plan,
                           transactions, secs)
    assert res.extra["writer_fraction"] == pytest.approx(fraction, abs=1e-3)
    assert res.valid is valid and ("invalid" in res.note) is not valid


def _paced(work: float, period: float, span: float) -> int:
    """Commits of one paced writer that ended within ``span``: each sleeps until its due
    time (one every ``period``, the first one period in) or starts at once when late, and
    takes ``work`` seconds."""
    t, due, n = 0.0, period, 0
    while True:
        t = max(t, due) + work
        if t > span:
            return n
        n, due = n + 1, due + period


@pytest.mark.parametrize("work, span, fraction", [
    (0.25, 4.0, 1.0),     # on time: 100% (judged to the last commit's end, 7 commits in
                          # 3.75 s read 93%, invalid)
    (0.49, 4.0, 1.0),     # each commit takes almost a period: still every one on time
    (0.25, 4.2, 1.0),     # any phase of the schedule against the end
    (0.55, 4.0, 6 / 7),   # each takes longer than a period: behind, 6 of the 7 owed
    (0.60, 16.0, 25 / 31),  # the same over a long step (it kept 0.5 / 0.6 = 83% of the
                            # rate after its first commit)
    (0.25, 16.0, 1.0),
])
def test_paced_writers_owe_the_commits_due_a_period_before_the_end(work, span, fraction):
    done = _paced(work, 0.5, span)
    secs = paced_seconds(done, 1, 0.5, span)
    assert done * 0.5 / secs == pytest.approx(fraction, abs=1e-9)
    assert writer_valid(100 * done * 0.5 / secs, 100) is (fraction >= 0.95)


def test_paced_writers_of_several_tables_and_none():
    assert paced_seconds(12, 3, 0.5, 2.0) == pytest.approx(2.0)   # 3 tables, 4 each
    assert paced_seconds(6, 3, 0.5, 2.0) == pytest.approx(1.5)    # 9 owed: 6 / 9 of the rate
    assert paced_seconds(0, 2, 0.5, 0.6) == pytest.approx(0.25)   # none owed, none done: 0


def test_index_passes_drop_what_they_built_and_are_bounded():
    creates = ["CREATE INDEX ib_purchases_1_marketsegment ON ib_purchases_1 (productid)",
               "create unique index t_u on t (a)"]
    assert drop_statements(creates) == ["DROP INDEX t_u",
                                        "DROP INDEX ib_purchases_1_marketsegment"]
    with pytest.raises(ValueError):
        drop_statements(["CREATE INDEX ON t (a)"])          # unnamed: nothing to drop
    assert config(RunParams(clients=2, options=OPTS)).index_passes == 1
    assert config(RunParams(clients=2, options={**OPTS, "index_passes": 3})).index_passes == 3
    for bad in (0, 11):
        with pytest.raises(UsageError, match="index_passes"):
            config(RunParams(clients=2, options={**OPTS, "index_passes": bad}))


@pytest.fixture(scope="module")
def ib():
    with open_target() as tg:
        tg.apply({})
        tg.ensure_bench_db()
        ctx = BenchContext(tg, find_client("pgbench", tg.inst))
        wl = get_workload("insert-benchmark")
        yield ctx, wl


def counts(ctx, tables):
    with ctx.connect() as conn:
        return [conn.execute(f"SELECT count(*) FROM {table(c)}").fetchone()[0]
                for c in range(tables)]


def test_tables_keep_a_constant_row_count_through_l_i1(ib):
    ctx, wl = ib
    params = RunParams(clients=2, options={**OPTS, "steps": "l.i0,l.x"})
    load, index = wl.run_steps(ctx, params)
    assert load.ops == 2 * 6000 and counts(ctx, 2) == [6000, 6000]
    # per inserted row: the step's own counters over its rows, each from its own counter
    m = load.metrics
    assert m["server_cpu_us_per_op"] == pytest.approx(m["server_cpu_s"] * 1e6 / 12000)
    assert m["write_kb_per_op"] == pytest.approx(m["disk_write_bytes"] / 1024 / 12000)
    assert m["read_kb_per_op"] == pytest.approx(m["disk_read_bytes"] / 1024 / 12000)
    assert m["wal_bytes_per_op"] == pytest.approx(m["pg"]["wal_bytes"] / 12000)
    # and plausible for a row of a few columns with its primary key (the secondary indexes
    # come later): a unit slip (x1000) leaves these ranges
    assert 1 <= m["server_cpu_us_per_op"] <= 2000
    assert 50 <= m["wal_bytes_per_op"] <= 5000
    with ctx.connect() as conn:
        n_idx = conn.execute("SELECT count(*) FROM pg_indexes WHERE tablename = %s",
                             (table(0),)).fetchone()[0]
    assert n_idx == 4                                # primary key + 3 secondary

    samples: list[list[int]] = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            samples.append(counts(ctx, 2))
            time.sleep(0.05)
    t = threading.Thread(target=sample)
    t.start()
    try:
        (i1,) = wl.run_steps(ctx, RunParams(clients=2, options={**OPTS, "steps": "l.i1"}))
    finally:
        stop.set()
        t.join()
    assert i1.ops == 2 * 6000 and i1.valid, i1.note
    # insert and delete commit separately (as iibench's): at most one batch of 50 above
    assert len(samples) >= 3, samples
    assert all(6000 <= n <= 6050 for s in samples for n in s), samples
    assert counts(ctx, 2) == [6000, 6000]
    with ctx.connect() as conn:
        lo, hi = conn.execute(f"SELECT min(transactionid), max(transactionid) "
                              f"FROM {table(0)}").fetchone()
    assert (lo, hi) == (6001, 12000)                 # the 6000 oldest rows are gone


def test_the_default_rows_have_iibench_values_and_batches(ib):
    """What l.i0 put in the tables by default: iibench's value ranges and data column, and
    100 rows per commit."""
    ctx, wl = ib
    with ctx.connect() as conn:
        x0 = conn.execute("SELECT xact_commit FROM pg_stat_database "
                          "WHERE datname = current_database()").fetchone()[0]
    (load,) = wl.run_steps(ctx, RunParams(clients=1, options={**OPTS, "steps": "l.i0"}))
    assert load.ops == 6000
    with ctx.connect() as conn:
        row = conn.execute(
            f"SELECT min(cashregisterid), max(cashregisterid), min(productid), max(productid),"
            f" min(customerid), max(customerid), min(price), max(price),"
            f" min(length(data)), max(length(data)), bool_and(data LIKE 'aaaaaaa___'),"
            f" count(DISTINCT substr(data, 8)) FROM {table(0)}").fetchone()
        time.sleep(1.0)                   # pgbench's backends report their stats at exit
        x1 = conn.execute("SELECT xact_commit FROM pg_stat_database "
                          "WHERE datname = current_database()").fetchone()[0]
    for i, col in enumerate(("cashregisterid", "productid", "customerid", "price")):
        lo, hi = IIBENCH_RANGES[col]
        assert lo <= row[2 * i] and row[2 * i + 1] <= hi, col
        assert row[2 * i + 1] - row[2 * i] > 0.9 * (hi - lo), col    # the whole range used
    assert row[8] == row[9] == 10 and row[10] and row[11] > 500
    # 60 commits of 100 rows (plus a few of pgaccel's own around the step)
    assert 60 <= x1 - x0 <= 90, x1 - x0


def index_scans(ctx, tables):
    """Each table's heap scans so far (a CREATE INDEX reads its table once)."""
    time.sleep(1.0)                       # backends report their stats at most once a second
    with ctx.connect() as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        return [conn.execute("SELECT seq_scan FROM pg_stat_user_tables WHERE relname = %s",
                             (table(c),)).fetchone()[0] for c in range(tables)]


def test_l_x_in_passes_builds_every_index_again_and_keeps_one_of_each(ib):
    ctx, wl = ib
    wl.run_steps(ctx, RunParams(clients=2, options={**OPTS, "steps": "l.i0"}))
    before = index_scans(ctx, 2)
    (index,) = wl.run_steps(ctx, RunParams(clients=2, options={**OPTS, "steps": "l.x",
                                                               "index_passes": 2}))
    # 3 builds a table a pass: 6 scans of each table, and twice its rows indexed
    assert [a - b for a, b in zip(index_scans(ctx, 2), before)] == [6, 6]
    assert index.ops == 2 * 2 * 6000 and index.extra["index_passes"] == 2
    assert "built 2 times" in index.note
    with ctx.connect() as conn:
        names = sorted(r[0] for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = %s", (table(1),)))
    assert names == sorted([f"{table(1)}_pkey", f"{table(1)}_marketsegment",
                            f"{table(1)}_registersegment", f"{table(1)}_pdc"])


def test_query_step_is_valid_only_when_writers_keep_their_rate(ib):
    ctx, wl = ib
    # 6 s, not OPTS' 2: each writer commits every 0.5 s, and in 2 s one commit that ended
    # 0.1-0.3 s late on a busy disk read 90-96% (full suite, November 28; again beside dd)
    (qp,) = wl.run_steps(ctx, RunParams(clients=2, options={**OPTS, "steps": "qp100",
                                                           "query_seconds": 6}))
    assert qp.unit == "queries/s" and qp.ops > 100 and qp.valid, qp.note
    assert 0.95 <= qp.extra["writer_fraction"] <= 1.1
    assert "vacuum_checkpoint_s" in qp.extra
    assert counts(ctx, 2) == [6000, 6000]            # the writers delete as they insert
    cfg = config(RunParams(clients=2, options=OPTS))
    impossible = wl.query_step(ctx, cfg, "qr", 10_000_000)
    assert not impossible.valid and "invalid" in impossible.note


def test_load_analyze_is_auto_or_after():
    assert config(RunParams(clients=2, options=OPTS)).load_analyze == "auto"
    assert config(RunParams(clients=2, options={**OPTS, "load_analyze": "after"})
                  ).load_analyze == "after"
    with pytest.raises(UsageError, match="load_analyze='never'"):
        config(RunParams(clients=2, options={**OPTS, "load_analyze": "never"}))


def analyze_state(ctx):
    """(autoanalyze_count, analyze_count, reloptions) of the first table."""
    with ctx.connect() as conn:
        return conn.execute(
            "SELECT s.autoanalyze_count, s.analyze_count, c.reloptions "
            "FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid "
            "WHERE s.relname = %s", (table(0),)).fetchone()


def test_load_analyze_after_holds_autoanalyze_off_l_i0_and_analyzes_once_when_done():
    """With autovacuum visiting every second, rows far past the analyze threshold are
    analyzed by autovacuum under ``auto`` and not under ``after``, whose one ANALYZE comes
    from finishing the step, with the table's threshold given back."""
    with open_target() as tg:
        tg.apply({"autovacuum_naptime": "1s"})
        tg.ensure_bench_db()
        ctx = BenchContext(tg, find_client("pgbench", tg.inst))
        wl = get_workload("insert-benchmark")
        seen = {}
        for mode in ("auto", "after"):
            cfg = config(RunParams(clients=1, options={**OPTS, "load_analyze": mode}))
            plan = wl.load_plan(ctx, cfg, "l.i0")       # the table made afresh
            with ctx.connect() as conn:
                conn.execute(f"INSERT INTO {table(0)} (dateandtime, cashregisterid, "
                             "customerid, productid, price, data) SELECT now(), 1, 1, 1, 1, "
                             "'x' FROM generate_series(1, 5000)")
            # autovacuum's visits (every second) and its stats: five of them for after
            deadline = time.monotonic() + (12 if mode == "auto" else 5)
            while time.monotonic() < deadline:
                time.sleep(0.5)
                if analyze_state(ctx)[0] and mode == "auto":
                    break
            during = analyze_state(ctx)
            res = wl.finish_load(ctx, plan, StepResult("l.i0", 5000, 1.0, 5000.0, "inserts/s"))
            time.sleep(1.0)                             # the ANALYZE's count reported
            seen[mode] = (during, analyze_state(ctx), res.extra.get("analyzed_after_load"))
    (auto_during, auto_after, auto_flag) = seen["auto"]
    assert auto_during[0] >= 1 and auto_during[2] is None, auto_during
    assert auto_after[1] == 0 and auto_flag is None, auto_after
    (during, after, flag) = seen["after"]
    assert during[0] == 0 and during[1] == 0, during
    assert during[2] == ["autovacuum_analyze_threshold=2147483647"], during
    assert after[0] == 0 and after[1] == 1 and after[2] is None and flag is True, after
