"""A step of one pgbench run side by side, in slices (in-server-loop's select-only).

Taken whole one variant after the other (``paired_steps``), the select-only step of the
in-server-loop A/A (``benchmarks/specs/aa-in-server-loop.toml``) had rounds' pairs about 5%
apart: 3 seconds of one server, then 3 of the other, on a host whose speed moves from second
to second.  Here the step is measured as ``run`` measures a workload (``paired.py``): one
pgbench per variant for the step, stopped between its slices (``workloads/slices.
PausedPgbench``), a warm-up turn each with its clients placed beside their backends where
the step does not write (``paired.warm_in_turn``), then slices of ``paired.SLICE_S`` in
ABBA order, each variant's costs counted over its own slices (``SlicedMeasure``).
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Callable, Sequence

from ..errors import BenchError
from ..metrics.sliced import SlicedMeasure
from ..workloads.base import BenchContext
from ..workloads.slices import PausedPgbench
from ..workloads.steps import PgbenchPlan, StepResult
from . import paired

DESIGN = "pgbench step in slices"
LIMIT_S = 86400      # pgbench's -T: the step ends it (PausedPgbench.finish)


def sliced_pgbench(wl, items: Sequence[tuple[BenchContext, str, PgbenchPlan]], *,
                   note: Callable[[str, float], None] = lambda n, f: None,
                   pin: bool = True) -> dict[str, StepResult]:
    """One step of every variant in ``items`` (its server, name and plan, in the round's
    order) as the module docstring says; a :class:`StepResult` per variant, completed by
    its plan's ``finish``."""
    names = [n for _, n, _ in items]
    ctxs = {n: c for c, n, _ in items}
    plans = {n: p for _, n, p in items}
    first = items[0][2]
    if len({(p.seconds, p.warmup) for p in plans.values()}) != 1:
        raise BenchError(f"{wl.name}: step {first.step} has different lengths for the "
                         "variants.", "Give every variant the same duration and warm-up.")
    k = max(1, int(round(first.seconds / paired.SLICE_S)))
    windows: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    with ExitStack() as stack:
        procs: dict[str, PausedPgbench] = {}
        for n in names:
            ctx, kw = ctxs[n], plans[n].kw
            shares = (paired.host_shares(kw["clients"], kw["threads"])
                      if pin and not plans[n].writes else None)
            procs[n] = PausedPgbench(ctx.pgbench, ctx.bench_conninfo(), kw, LIMIT_S,
                                     session_options=ctx.target.session_options,
                                     workdir=ctx.workdir, shares=shares,
                                     expect_seconds=first.seconds + 2 * max(first.warmup, 5.0),
                                     siblings=len(names))
            stack.callback(procs[n].close)
        note("warm-up", 0.0)
        _, placed = paired.warm_in_turn(names, procs, ctxs, first.warmup)
        meas = {n: stack.enter_context(SlicedMeasure(ctxs[n], procs[n].cpu)) for n in names}
        note("measure", 0.0)
        shift = paired.run_slices(paired.slice_order(names, k), procs, meas, windows, note,
                                  paired.SLICE_S)
        for n in names:
            meas[n].__exit__(None, None, None)
        logs = {n: procs[n].finish(timeout=60) for n in names}
    out = {}
    for n in names:
        plan = plans[n]
        res = paired.sliced_step(plan.step, plan.unit, logs[n], windows[n], shift, meas[n],
                                 none=f"{wl.name} completed no transactions in {n!r}'s "
                                      f"slices of {plan.step}.",
                                 design=DESIGN, slice_s=paired.SLICE_S, per_op=plan.per_tx,
                                 pinned=paired._pinned(procs[n], placed.get(n), pin))
        out[n] = plan.finish(res)
    return out
