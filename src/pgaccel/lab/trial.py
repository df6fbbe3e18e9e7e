"""One trial: a variant's settings in effect, data and caches in a known state, a warm-up,
then one measured interval with every cost counted.

Every trial starts the same way, whatever ran before it:

1. the server is restarted with the variant's settings (shared buffers start empty) and the
   settings are checked in pg_settings;
2. for a workload that writes, the bench database is re-created from its template, so
   every trial starts from the same rows (copying a template is seconds where a fresh
   ``pgbench -i`` is minutes, and needs no extra space beyond the template);
3. ``CHECKPOINT``, then every relation is read through the OS page cache and into shared
   buffers with pg_prewarm (``read`` then ``buffer``) — this VM evicts cold page cache
   within about a minute, so without it the previous trial decides what is cached;
4. a warm-up that is not counted, ended once the per-second rate is steady;
5. the measured run, with wait events sampled at about 10 Hz.

A multi-step workload's trial (:func:`run_steps_trial`, the Insert Benchmark's) restarts,
restores the data and checkpoints as in 1-3, without the prewarm (its first step builds the
data), then runs its steps in order, each measured on its own.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import psycopg

from ..errors import BenchError, ServerError
from ..metrics.measure import Measure, checkpoint, prewarm
from ..server.cluster import BENCH_DB
from ..server.target import TEMPLATE_DB, Target
from ..workloads.base import BenchContext, RunResult
from ..metrics.noise import host_noise
from ..workloads.steps import StepResult, warnings_for
from ..decide.model import Trial, TrialSpec, WorkloadSpec
from .settings import verify_settings
from ..decide.stats import is_steady, steady_state


def steady(series: list[float], window: int = 5, tolerance: float = 0.08) -> bool:
    """Warm-up stop rule: the last ``window`` per-second rates vary by less than
    ``tolerance`` (CV) with no significant drift (see stats.is_steady)."""
    return is_steady(series, tolerance, window=window)


# -- data and cache state ------------------------------------------------------------------
def snapshot_template(target: Target) -> None:
    """Copy the prepared bench database to its template (after prepare)."""
    with target.connect() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE_DB}"')
        _terminate(conn, BENCH_DB)
        conn.execute(f'CREATE DATABASE "{TEMPLATE_DB}" TEMPLATE "{BENCH_DB}"')


def restore_from_template(target: Target) -> None:
    with target.connect() as conn:
        _terminate(conn, BENCH_DB)
        conn.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}"')
        conn.execute(f'CREATE DATABASE "{BENCH_DB}" TEMPLATE "{TEMPLATE_DB}"')


def _terminate(conn: psycopg.Connection, db: str) -> None:
    conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                 "WHERE datname = %s AND pid <> pg_backend_pid()", (db,))


# -- the trial -----------------------------------------------------------------------------
def run_trial(ctx: BenchContext, spec: TrialSpec, *, restart: bool = True,
              on_progress: Callable[[str, float], None] | None = None) -> Trial:
    wl, params = spec.workload, spec.params
    note = on_progress or (lambda phase, frac: None)
    not_applied, warm_info = start_state(ctx, spec, restart=restart, note=note)
    note("warm-up", 0.0)
    t_w = time.monotonic()
    if params.warmup >= 1:  # pgbench -T needs whole seconds; 0 means no warm-up
        wl.run(ctx, params, params.warmup, stop_when=lambda s: steady(s), log=False)
    warmup_s = time.monotonic() - t_w

    note("measure", 0.0)
    with Measure(ctx) as meas:
        res: RunResult = wl.run(ctx, params, params.duration,
                                on_progress=lambda t, v: note("measure", t / params.duration))
    if res.ops == 0:
        raise BenchError(f"{wl.name} completed no operations in {params.duration:.0f} s.",
                         "Look at the server log; the server may be overloaded or stuck.")
    lo, hi = steady_state(res.series)
    steady_part = res.series[lo:hi]
    throughput = (sum(steady_part) / len(steady_part)) if steady_part else res.throughput
    if res.extra.get("throughput_from") == "totals":    # the tool's own totals (sysbench,
        # a replay of long statements: workloads/captured.py)
        throughput = res.throughput
    m: dict[str, Any] = {
        "throughput": throughput, "throughput_all": res.throughput,
        "steady_range": [lo, hi], "ops": res.ops, "duration_s": res.duration_s,
        "failed": res.failed, "latency_ms": res.latency_ms,
        **meas.metrics(res.ops, res.client), **warm_info, **res.extra,
    }
    with_warnings(m, res.extra.get("warnings"))
    return Trial(variant=spec.variant, workload=wl.name, round=spec.round,
                 clients=params.clients, started_at=meas.started, throughput=throughput,
                 unit=wl.unit, metrics=m, series=res.series,
                 latency_series=res.latency_series, warmup_s=warmup_s,
                 not_applied=not_applied)


def with_warnings(m: dict[str, Any], extra: list[str] | None = None) -> None:
    """A trial's metrics get their warnings (the workload's and ``steps.warnings_for``'s)
    and the host's noise (``metrics/noise.py``)."""
    m["warnings"] = list(dict.fromkeys([*(extra or []), *warnings_for(m)]))
    noise = host_noise(m)
    if noise is not None:
        m["noise"] = noise


def start_state(ctx: BenchContext, spec: TrialSpec, *, restart: bool = True,
                note: Callable[[str, float], None] = lambda phase, frac: None
                ) -> tuple[list[str], dict[str, Any]]:
    """Steps 1-3 of every trial (the module docstring): the variant's settings in effect and
    checked, the data restored, CHECKPOINT, prewarm.  Returns the settings this target could
    not apply and what the checkpoint and prewarm did."""
    target, wl = ctx.target, spec.workload
    not_applied: list[str] = []
    if restart or target.settings != spec.settings:
        note("restart", 0.0)
        not_applied = target.apply(spec.settings)
    mismatches = verify_settings(target, {k: v for k, v in spec.settings.items()
                                          if k not in not_applied})
    if mismatches:
        raise ServerError(
            f"Variant {spec.variant!r} is not what it claims: "
            + "; ".join(f"{m['name']} is {m['actual']!r}, expected {m['expected']!r}"
                        for m in mismatches),
            "A setting did not take effect (overridden elsewhere, or needs a restart this "
            "target cannot do); the variant is not measured.")
    if wl.writes:
        restore_from_template(target)
    checkpointed = checkpoint(ctx)
    note("prewarm", 0.0)
    return not_applied, {**prewarm(ctx), "checkpoint": checkpointed}


def steps_start(ctx: BenchContext, variant: str, settings: dict[str, object],
                ws: WorkloadSpec) -> None:
    """Where every step sequence starts: restart with ``settings`` (the variant's, with the
    workload's requirements: ``Experiment.settings_for``; checked in pg_settings), fresh
    data for writers, CHECKPOINT."""
    wl, target = ws.workload, ctx.target
    merged = dict(settings)
    not_applied = target.apply(merged)
    bad = verify_settings(target, {k: v for k, v in merged.items() if k not in not_applied})
    if bad:
        raise ServerError(
            f"Variant {variant!r} is not what it claims: "
            + "; ".join(f"{m['name']} is {m['actual']!r}, expected {m['expected']!r}"
                        for m in bad),
            "A setting did not take effect; the variant is not measured.")
    if wl.writes:
        restore_from_template(target)
    with ctx.connect() as conn:
        conn.execute("CHECKPOINT")


def step_trial(variant: str, ws: WorkloadSpec, rnd: int, r: StepResult, index: int,
               total: int, **more: Any) -> Trial:
    """One measured step as a :class:`Trial` (``workload`` is ``NAME/STEP``); ``more``:
    what the design adds to its metrics."""
    m = {**r.metrics, "throughput": r.throughput, "ops": r.ops, "duration_s": r.seconds,
         "latency_ms": r.latency_ms, "step": r.step, "step_index": index,
         "steps_total": total, "valid": r.valid, "note": r.note,
         "extra": r.extra, "warnings": r.warnings, **more}
    assert STEP_KEYS <= set(m)
    return Trial(variant=variant, workload=f"{ws.name}/{r.step}", round=rnd,
                 clients=ws.params.clients, started_at=time.time(),
                 throughput=r.throughput, unit=r.unit, metrics=m, series=r.series)


def run_steps_trial(ctx: BenchContext, variant: str, settings: dict[str, object],
                    ws: WorkloadSpec, rnd: int,
                    on_progress: Callable[[str, float], None] | None = None) -> list[Trial]:
    """One trial of a multi-step workload, one variant alone: ``steps_start``, then every
    step in order; one :class:`Trial` per step."""
    steps_start(ctx, variant, settings, ws)
    results = ws.workload.run_steps(ctx, ws.params, on_progress)
    return [step_trial(variant, ws, rnd, r, i, len(results)) for i, r in enumerate(results)]


# what run_steps_trial adds to a step's own metrics (step_result_of takes them back out)
STEP_KEYS = frozenset({"throughput", "ops", "duration_s", "latency_ms", "step", "step_index",
                       "steps_total", "valid", "note", "extra", "warnings"})


def step_result_of(t: Trial) -> StepResult:
    """A step's trial (:func:`run_steps_trial`) back as the workload's StepResult, for its
    ``summarize``."""
    m = t.metrics
    return StepResult(step=m.get("step", t.workload.split("/")[-1]), ops=m.get("ops", 0),
                      seconds=m.get("duration_s", 0.0), throughput=t.throughput, unit=t.unit,
                      metrics={k: v for k, v in m.items() if k not in STEP_KEYS},
                      valid=m.get("valid", True), note=m.get("note", ""),
                      latency_ms=m.get("latency_ms") or {}, series=list(t.series),
                      extra=m.get("extra") or {}, warnings=m.get("warnings") or [])
