"""The Insert Benchmark's query steps side by side, in slices.

A q step runs queries as fast as they go while background writers insert and delete at a
fixed rate. Taken one variant after the other (``paired_steps``), the same q step of two
variants was 8 seconds apart or more, and this host's speed moves 15-40% from one second to
the next: A/A intervals of the q steps were ±35-45% after 3 rounds. Here every variant's
writers run throughout (each server keeps its own paced writers, as the benchmark has them:
started before the warm-up turns, ended when the last slice has, as pgbench's own ``-T``
ends a run), and the variants' query clients take turns in slices
(``paired.STEP_SLICE_S``, 0.1 s; ``paired.slice_order``: A B B A ..., three or more
rotated, A B C D, B C D A, ...), each one pgbench for the step, stopped between its
slices (``workloads/slices.PausedPgbench``), its costs counted over its own slices only
(``metrics/sliced.SlicedMeasure``). Every variant first gets an unmeasured quarter second
(``WARMUP_S``: its caches warm; its connections are already open, since placing its clients
ran them until every session was there). The queries only read, so each variant's query
clients run as one pgbench per CPU with their backends placed beside it
(``workloads/pinning.py``, as select-only's in ``paired.paired_round``); the writers are
left to the scheduler.

What differs from the step taken alone: the host also runs the other servers' writers (the
same load for every variant), and the writers' own pgbench CPU is not in the step's
client CPU.  The rule of the step is unchanged: its writers must reach 95% of their target
rate, here from their start to the end of the last slice (``InsertBenchmark.judge_writers``;
``ibscripts.paced_seconds``: the commits that ended by then against those due a period
before it).
Until November 28 they ran a fixed ``-T`` sized to the slices with two seconds to spare:
the step then waited for them after its last slice, and on a host slower to switch turns
the last slices would have run without them.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any, Callable, Sequence

from ..metrics.sliced import SlicedMeasure
from ..workloads.base import BenchContext, load_threads
from ..workloads.ibscripts import paced_seconds, write_protocol
from ..workloads.ibplans import QueryPlan
from ..workloads.slices import PausedPgbench
from ..workloads.steps import StepResult
from . import paired
from .paired import run_slices, slice_order

DESIGN = "q step in slices"
# each variant's unmeasured first turn.  It was 1 s: 4 s of every q step with four variants,
# 16 s of the example's 175-second round, when its first measured slices ran 96-99% of the
# trial's median (run 20261128-083701-38ed); see docs/measurements.md, "Warm-up turns"
WARMUP_S = 0.25
PLACE_TIMEOUT_S = 5.0   # how long the query sessions may take to appear and be placed


def _place_all(procs: dict[str, PausedPgbench], ctxs: dict[str, BenchContext]
               ) -> dict[str, str | None]:
    """Every variant's query backends placed on their pgbench's CPU before the writers
    start: all query pgbench processes run (unmeasured) until their sessions are there and
    placed, then stop.  Per variant: None when placed, else why not (its queries then run
    where the scheduler puts them, ``paired._place``).  The queries only read: placed, a
    query and its backend do not wait for each other across CPUs, as select-only's did not
    (docs/measurements.md); left to the scheduler, q-step slices ran at half rate whenever a
    query pgbench and both backends shared one of this VM's two CPUs."""
    placing = [n for n, p in procs.items() if p.shares]
    for n in placing:
        procs[n].resume()
    try:
        return {n: (paired._place(procs[n], ctxs[n], timeout=PLACE_TIMEOUT_S, settle=2)
                    if n in placing else None) for n in procs}
    finally:
        for n in placing:
            procs[n].pause()


def _pinned(p: PausedPgbench, problem: str | None, asked: bool) -> dict[str, Any]:
    """The trial's ``pinned``: ``paired._pinned``, but the reason for not placing is
    ``--no-pin`` alone (the queries only read)."""
    if not p.shares:
        return {"on": False}
    return paired._pinned(p, problem, asked)


def sliced_queries(wl, items: Sequence[tuple[BenchContext, str, QueryPlan]], *,
                   note: Callable[[str, float], None] = lambda n, f: None,
                   pin: bool = True) -> dict[str, StepResult]:
    """One q step of every variant in ``items`` (its server, name and plan, in the round's
    order) as the module docstring says; a :class:`StepResult` per variant.  ``pin``: each
    variant's query clients in one pgbench per CPU with their backends (:func:`_place_all`);
    the writers are left to the scheduler."""
    names = [n for _, n, _ in items]
    ctxs = {n: c for c, n, _ in items}
    plans = {n: p for _, n, p in items}
    slice_s = paired.STEP_SLICE_S
    k = max(1, int(round(next(iter(plans.values())).seconds / slice_s)))
    order = slice_order(names, k)
    windows: dict[str, list[tuple[float, float]]] = {n: [] for n in names}

    with ExitStack() as stack:
        procs: dict[str, PausedPgbench] = {}
        for name in names:
            plan = plans[name]
            tables = plan.cfg.tables          # a query client per table
            shares = paired.host_shares(tables, load_threads(None, tables)) if pin else None
            procs[name] = wl.paused_scripts(
                stack, ctxs[name], plan.cfg, plan.queries, defines=plan.defines, shares=shares,
                expect_seconds=plan.seconds + PLACE_TIMEOUT_S + 1.0, siblings=len(names))
        placed = _place_all(procs, ctxs)
        writers: dict[str, PausedPgbench] = {}
        begun: dict[str, float] = {}        # where each schedule starts, on this host's clock
        for name in names:
            defines = wl.writer_defines(ctxs[name], plans[name])   # the schedule starts now
            begun[name] = time.time()
            writers[name] = wl.paused_scripts(
                stack, ctxs[name], plans[name].cfg, [plans[name].writer], threads=1,
                protocol=write_protocol(plans[name].cfg), defines=defines)
        for name in names:                   # they run until every slice has ended
            writers[name].resume()
        for name in names:                   # a warm-up turn each, not measured
            procs[name].resume()
            time.sleep(WARMUP_S)
            if procs[name].shares and placed[name] is None:   # still all there, all placed?
                placed[name] = paired._place(procs[name], ctxs[name], timeout=0, settle=1)
            procs[name].pause()
        meas = {n: stack.enter_context(SlicedMeasure(ctxs[n], procs[n].cpu)) for n in names}
        shift = run_slices(order, procs, meas, windows, note, slice_s)
        for name in names:
            meas[name].__exit__(None, None, None)
        ended = time.time()
        for p in (*writers.values(), *procs.values()):
            p.end()                          # all at once: a writer may be in its pace's sleep
        written = {n: writers[n].finish(timeout=60) for n in names}
        logs = {n: procs[n].finish(timeout=60) for n in names}
    out = {}
    for name in names:
        ends_us, failed = written[name].ends_us, written[name].failed
        # the commits that ended by the end of the last slice: one begun before it may end
        # after it (pgbench finishes its transactions), and the schedule is judged to it.
        # The writers log whole (no expected length: a few dozen lines a step), so the
        # weight is 1; a sample's lines would each stand for 1 / sampling commits
        done = int(round(((ends_us <= ended * 1e6) & ~failed).sum()
                         / written[name].sampling))
        w_secs = paced_seconds(done, plans[name].cfg.tables,
                               float(plans[name].defines["period"]), ended - begun[name])
        res = paired.sliced_step(plans[name].step, "queries/s", logs[name], windows[name],
                                 shift, meas[name],
                                 none=f"The query clients of {name!r} completed no query in "
                                      "their slices.",
                                 design=DESIGN, slice_s=slice_s,
                                 writer_seconds=round(ended - begun[name], 3),
                                 pinned=_pinned(procs[name], placed.get(name), pin))
        res.extra.update(plans[name].extra)
        res.extra["query_client_cpu_s"] = res.metrics.get("client_cpu_s")
        out[name] = wl.judge_writers(res, plans[name], done, w_secs)
    return out

