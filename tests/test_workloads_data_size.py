"""data-size-sweep: database size against shared_buffers (real server)."""

from __future__ import annotations

import pytest

from pgaccel.server.discovery import find_client
from pgaccel.server.target import open_target
from pgaccel.workloads.base import BenchContext, RunParams, get_workload
from pgaccel.workloads.data_size import BYTES_PER_SCALE, scales_for
from pgaccel.workloads.steps import params_for


def test_scales_from_multiples_of_shared_buffers():
    sb = 128 * 1024 * 1024
    # ceil(multiple x 128 MB / 15.6 MB per scale unit)
    assert BYTES_PER_SCALE == 15_600_000
    assert scales_for(RunParams(options={"sizes": "0.5,1,2"}), sb) == [5, 9, 18]
    assert scales_for(RunParams(options={"scales": "7,3"}), sb) == [3, 7]


def test_bigger_than_shared_buffers_misses_the_cache():
    wl = get_workload("data-size-sweep")
    params = params_for(wl, {"scales": "1,6", "shared_buffers": "32MB", "duration": 2,
                             "warmup": 1})
    assert wl.required_settings(params) == {"shared_buffers": "32MB"}
    with open_target() as tg:
        tg.apply(wl.required_settings(params))
        tg.ensure_bench_db()
        ctx = BenchContext(tg, find_client("pgbench", tg.inst))
        small, big = wl.run_steps(ctx, params)
        with ctx.connect() as conn:
            accounts = conn.execute("SELECT count(*) FROM pgbench_accounts").fetchone()[0]
    assert accounts == 600_000                      # the last step's data is there
    assert small.extra["size_over_shared_buffers"] < 1 < big.extra["size_over_shared_buffers"]
    assert small.extra["db_size_bytes"] < big.extra["db_size_bytes"]
    assert small.extra["buffer_hit_ratio"] > 0.999
    assert big.extra["buffer_hit_ratio"] < small.extra["buffer_hit_ratio"]
    assert small.ops > 0 and big.ops > 0
    for step in (small, big):
        m = step.metrics
        # per transaction: the step's own server CPU over its transactions, in µs, and
        # plausible for one select-only lookup (a unit slip, x1000, leaves the range)
        assert m["server_cpu_us_per_op"] == pytest.approx(m["server_cpu_s"] * 1e6 / step.ops)
        assert 5 <= m["server_cpu_us_per_op"] <= 3000
    curve = wl.summarize([small, big])["curve"]
    assert [c["scale"] for c in curve] == [1, 6]
