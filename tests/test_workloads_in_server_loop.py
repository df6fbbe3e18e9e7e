"""in-server-loop: the PL/pgSQL and C loops execute exactly n queries (counted by the
server's index-scan statistics); the steps report the client-plus-network share."""

from __future__ import annotations

import os
import stat

import pytest
from helpers import settled_counter

from pgaccel.server.discovery import find_client
from pgaccel.server.target import open_target
from pgaccel.workloads.base import BenchContext, RunParams, get_workload
from pgaccel.workloads.in_server_loop import (C_FUNC, PLPGSQL_FUNC, CVariantUnavailable,
                                              install_functions, pgxs_available)


@pytest.fixture(scope="module")
def ctx():
    with open_target() as tg:
        tg.apply({})
        tg.ensure_bench_db()
        c = BenchContext(tg, find_client("pgbench", tg.inst))
        wl = get_workload("in-server-loop")
        wl.prepare(c, RunParams(scale=1))
        yield c


def accounts_index_scans(ctx) -> int:
    """idx_scan of pgbench_accounts once exited backends have flushed their counters."""
    return settled_counter(ctx, "SELECT idx_scan FROM pg_stat_user_tables "
                                "WHERE relname = 'pgbench_accounts'")


@pytest.mark.parametrize("func", [PLPGSQL_FUNC, C_FUNC])
def test_loop_executes_n_queries(ctx, func):
    assert install_functions(ctx) is None          # PGXS is installed here: C builds
    before = accounts_index_scans(ctx)
    with ctx.connect() as conn:
        assert conn.execute(f"SELECT {func}(1234)").fetchone()[0] == 1234
    assert accounts_index_scans(ctx) - before == 1234


def test_steps_report_loop_rates_beside_the_client_driven_rate(ctx):
    wl = get_workload("in-server-loop")
    params = RunParams(scale=1, clients=1, duration=1, warmup=0, options={"n": 2000})
    results = wl.run_steps(ctx, params)
    assert [r.step for r in results] == ["select-only", "loop-plpgsql", "loop-c"]
    assert all(r.valid and r.ops > 0 for r in results), [r.note for r in results]
    loop = results[2]
    assert loop.ops == loop.extra["calls"] * 2000 and loop.unit == "queries/s"
    # inside the server the client does nearly nothing per query
    assert loop.metrics["client_cpu_us_per_op"] < results[0].metrics["client_cpu_us_per_op"]
    s = wl.summarize(results)
    assert 0 < s["outside_query_share"] < 1 and s["outside_query_share_vs"] == "loop-c"
    assert s["plpgsql_vs_c"] > 0
    # the sentence bench and the lab print says the same share
    said = wl.conclusion({r.step: r.throughput for r in results})
    assert said.startswith(f"the client and the network took {s['outside_query_share']:.0%} "
                           "of each query's time: pgbench's select-only ran "
                           f"{results[0].throughput:,.0f} queries/s")


def test_missing_pgxs_names_the_package(tmp_path):
    # PGXS is installed on this machine; a pg_config pointing at a missing PGXS stands in
    # for a host without postgresql-server-dev.
    fake = tmp_path / "pg_config"
    fake.write_text("#!/bin/sh\necho /nonexistent/lib/pgxs/src/makefiles/pgxs.mk\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(CVariantUnavailable, match="postgresql-server-dev-15"):
        pgxs_available(str(fake), 15)


def test_real_pgxs_is_found(ctx):
    pg_config = ctx.target.inst.path("pg_config")
    assert os.path.exists(pgxs_available(pg_config, ctx.target.inst.major))
