"""Insert Benchmark: scripts, the fixed-size queue through l.i1, and the q-step validity rule
on a real server."""

from __future__ import annotations

import re
import threading
import time

import pytest

from pgaccel.server.discovery import find_client
from pgaccel.server.target import open_target
from pgaccel.workloads.base import BenchContext, RunParams, get_workload
from pgaccel.workloads.insertbench import (config, insert_statements, point_bounds,
                                           query_scripts, table, write_script, writer_valid)

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
        assert branch.index("BEGIN;") < branch.index("INSERT") < branch.index("DELETE") \
            < branch.index("COMMIT;")


def test_client_rowgen_binds_every_value_within_pgbench_limits():
    prelude, stmts = insert_statements(100, "client")
    assert prelude.count("\\set ") == 500           # 5 values per row
    inserts = [x for x in stmts.split("\n") if x.startswith("INSERT")]
    assert len(inserts) == 2                        # 100 rows: two 50-row statements
    for st in inserts:
        assert len(set(re.findall(r":\w+", st))) == 250 < 255
    s = write_script(1, 100, "client", delete=False, pace=False)
    assert "BEGIN;" in s and "COMMIT;" in s         # still one commit of 100 rows


def test_query_scripts_and_rules():
    qr = query_scripts(2, "qr")
    assert len(qr) == 3 and all("LIMIT 10" in q for q in qr)
    (qp,) = query_scripts(2, "qp")
    assert qp.count("transactionid IN (") == 2 and ":lo_1" in qp
    assert writer_valid(95.0, 100) and not writer_valid(94.9, 100)
    assert point_bounds(1000, 5000, 600) == (1600, 5000)
    assert point_bounds(1000, 1200, 600) == (1200, 1200)
    assert config(RunParams(clients=3, options={"size": "tiny"})).tables == 3


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
    assert load.metrics["server_cpu_us_per_op"] > 0 and "write_kb_per_op" in load.metrics
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
    assert len(samples) >= 3 and all(s == [6000, 6000] for s in samples), samples
    with ctx.connect() as conn:
        lo, hi = conn.execute(f"SELECT min(transactionid), max(transactionid) "
                              f"FROM {table(0)}").fetchone()
    assert (lo, hi) == (6001, 12000)                 # the 6000 oldest rows are gone


def test_query_step_is_valid_only_when_writers_keep_their_rate(ib):
    ctx, wl = ib
    (qp,) = wl.run_steps(ctx, RunParams(clients=2, options={**OPTS, "steps": "qp100"}))
    assert qp.unit == "queries/s" and qp.ops > 100 and qp.valid, qp.note
    assert 0.95 <= qp.extra["writer_fraction"] <= 1.1
    assert "vacuum_checkpoint_s" in qp.extra
    assert counts(ctx, 2) == [6000, 6000]            # the writers delete as they insert
    cfg = config(RunParams(clients=2, options=OPTS))
    impossible = wl.query_step(ctx, cfg, "qr", 10_000_000)
    assert not impossible.valid and "invalid" in impossible.note
