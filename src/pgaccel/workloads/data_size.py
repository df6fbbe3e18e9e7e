"""Database size against shared_buffers (study 004): TPS as the data outgrows the cache.

One step per pgbench scale, smallest first: ``pgbench -i -s SCALE``, CHECKPOINT, every
relation read into the OS page cache and as much as fits into shared buffers (pg_prewarm),
a short warm-up, then a measured select-only (or tpcb-like) run.  Scales come from
multiples of the server's shared_buffers (``sizes=0.5,1,2,4``: about 15.6 MB per scale
unit) or are given directly (``scales=...``).

What it shows: throughput and buffer hit ratio against database size / shared_buffers.
Above 1x the misses are served from the OS page cache (the machine's RAM), so the drop is
the cost of going through the kernel; data beyond RAM would add disk reads on top.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import UsageError
from ..pg.values import setting_bytes
from ..util import format_bytes
from .base import BenchContext, RunParams, load_threads, register
from .builtin import SELECT_ONLY, TPCB_LIKE
from .pgbench import run_pgbench
from .steps import (ProgressFn, StepResult, StepWorkload, measured_step, option,
                    timed_seconds)

BYTES_PER_SCALE = 15_600_000          # pgbench_accounts + indexes per scale unit (PG 13-17)
WARM_CAP_S = 10                       # a size's warm-up runs at most this long


def scales_for(params: RunParams, shared_buffers_bytes: int) -> list[int]:
    explicit = option(params, "scales", "")
    if explicit:
        try:
            scales = sorted({int(x) for x in str(explicit).split(",") if x.strip()})
        except ValueError:
            raise UsageError(f"scales={explicit!r}: give pgbench scales like 1,10,50.") from None
    else:
        text = str(option(params, "sizes", "0.5,1,2,4"))
        try:
            mult = [float(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise UsageError(f"sizes={text!r}: give multiples of shared_buffers like "
                             "0.5,1,2,4.") from None
        scales = sorted({max(1, math.ceil(m * shared_buffers_bytes / BYTES_PER_SCALE))
                         for m in mult})
    if not scales or scales[0] < 1:
        raise UsageError("Scales must be at least 1.")
    return scales


class DataSizeSweep(StepWorkload):
    name = "data-size-sweep"
    summary = ("pgbench select-only (or tpcb-like) at database sizes below and above "
               "shared_buffers: TPS and hit ratio against size")
    unit = "tps"
    writes = True
    defaults = {"clients": 2, "duration": 20, "warmup": 5, "sizes": "0.5,1,2,4"}
    knobs = {
        "sizes": "database sizes as multiples of shared_buffers (0.5,1,2,4)",
        "scales": "explicit pgbench scales instead of sizes",
        "script": "select-only (default) or tpcb-like",
        "shared_buffers": "shared_buffers to run with (applied as a required setting)",
        "duration": "measured seconds per size",
    }

    def data_key(self, params: RunParams) -> dict:
        return {"workload": self.name}

    def build(self, ctx: BenchContext, params: RunParams) -> None:
        """Nothing: each step loads its own scale."""

    def required_settings(self, params: RunParams) -> dict[str, str]:
        sb = option(params, "shared_buffers", "")
        return {"shared_buffers": str(sb)} if sb else {}

    def step_names(self, params: RunParams) -> list[str]:
        """Planned steps; without scales/shared_buffers options they assume PostgreSQL's
        default 128MB (run_steps sizes them from the server's real shared_buffers)."""
        sb = option(params, "shared_buffers", "") or "128MB"
        return [f"scale={s}" for s in scales_for(params, setting_bytes(str(sb), "8kB"))]

    def least_seconds(self, params: RunParams) -> float:
        """Every size's warm-up and measured seconds (:meth:`measure`); loading the data
        of each size comes on top."""
        return len(self.step_names(params)) * sum(timed_seconds(params, WARM_CAP_S))

    def run_steps(self, ctx: BenchContext, params: RunParams,
                  on_progress: ProgressFn | None = None) -> list[StepResult]:
        from ..metrics.measure import prewarm
        script = option(params, "script", "select-only")
        if script not in ("select-only", "tpcb-like"):
            raise UsageError(f"script={script!r}: use select-only or tpcb-like.")
        loader = SELECT_ONLY if script == "select-only" else TPCB_LIKE
        with ctx.database() as db:
            sb = setting_bytes(str(db.settings(["shared_buffers"])["shared_buffers"]["setting"]),
                               "8kB")
        results = []
        for scale in scales_for(params, sb):
            step = f"scale={scale}"
            if on_progress:
                on_progress(step, 0.0)
            loader.build(ctx, RunParams(scale=scale))
            loader.mark_prepared(ctx, RunParams(scale=scale))   # the pgbench data is this now
            with ctx.database() as db:
                db.conn.execute("VACUUM ANALYZE")
                db.conn.execute("CHECKPOINT")
                size = db.database_size()
            warm = prewarm(ctx)
            res = self.measure(ctx, params, script, step)
            res.extra.update({"scale": scale, "db_size_bytes": size,
                              "db_size": format_bytes(size), "shared_buffers_bytes": sb,
                              "size_over_shared_buffers": size / sb,
                              "buffer_hit_ratio": res.metrics.get("pg", {}).get(
                                  "buffer_hit_ratio"), **warm})
            results.append(res)
            if on_progress:
                on_progress(step, 1.0)
        return results

    def measure(self, ctx: BenchContext, params: RunParams, script: str,
                step: str) -> StepResult:
        kw: dict[str, Any] = dict(builtin=script, clients=params.clients,
                                  threads=load_threads(params.threads, params.clients),
                                  protocol=params.protocol, rate=params.rate,
                                  session_options=ctx.target.session_options,
                                  workdir=ctx.workdir)
        warm, secs = timed_seconds(params, WARM_CAP_S)
        if warm:
            run_pgbench(ctx.pgbench, ctx.bench_conninfo(), duration=warm, log=False, **kw)
        holder: dict[str, Any] = {}

        def body():
            r = run_pgbench(ctx.pgbench, ctx.bench_conninfo(), duration=secs, log=True, **kw)
            holder["r"] = r
            return r.transactions, float(secs), r.client
        res = measured_step(ctx, step, self.unit, body)
        r = holder["r"]
        res.series, res.latency_ms = r.tps_series, r.latency_ms
        return res

    def summarize(self, results: list[StepResult]) -> dict[str, Any]:
        rows = [{"scale": r.extra["scale"], "db_size": r.extra["db_size"],
                 "x_shared_buffers": round(r.extra["size_over_shared_buffers"], 2),
                 "tps": r.throughput, "buffer_hit_ratio": r.extra.get("buffer_hit_ratio")}
                for r in results]
        out: dict[str, Any] = {"curve": rows}
        inside = [r["tps"] for r in rows if r["x_shared_buffers"] <= 0.9]
        outside = [r["tps"] for r in rows if r["x_shared_buffers"] > 1.1]
        if inside and outside:
            out["tps_drop_beyond_shared_buffers"] = 1 - min(outside) / max(inside)
        return out


DATA_SIZE_SWEEP = register(DataSizeSweep())
