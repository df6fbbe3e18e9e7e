"""A step of timed runs side by side, run by run (parallel-scan's degrees).

parallel-scan times a few runs of one query at one degree (``RepeatPlan``).  Taken whole
one variant after the other (``paired_steps``), the degree-0 A/A of
``examples/parallel-degree.toml`` had pairs 9-14% apart on the 2-core VM: a slow spell of
the host of 0.3 s or so slowed every run of one variant's step (a 26 ms count(*) ran 34-47
ms seven times running) and none of the other's.  Here every variant's plan is readied
(its connection, forced degree and warm-up run; untimed), then the variants take turns at
each run: run 1 of A, of B, run 2 of B, of A, and so on (``paired_lsteps.take_turns``), so
such a spell falls on both.

Taking turns was not enough by itself: a serial count(*) here runs in about 26 ms or about
41 ms, for spells of a second or so, on either vCPU independently (a scratch script that
pinned one backend to CPU 0, CPU 1 or neither: all three had both speeds).  Each variant's
backend stays on the CPU the scheduler gave it, so one variant could sit on a slow vCPU
for a whole step while the other ran fast.  So, with ``pin``, every variant's backend runs
on the same CPU, the highest this process may use (``hostspeed.probe_cpu``: the CPU speed
probe's too): their turns then see the same CPU's spells.  A step of several clients
(in-server-loop's loops: a run is one call on every client at once) has client i's backend
of every variant on the i-th CPU from the top (``pinning.pin_clients``).  The parallel
workers a leader starts are not placed.

A variant's rate is its plan's to say (parallel-scan: 1 over the median run); its server's
CPU, context switches and I/O count during its own runs only (``SlicedMeasure``), and its
per-second series is each run's rate.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Callable, Sequence

from ..errors import BenchError
from ..metrics.sliced import SlicedMeasure
from ..workloads.base import BenchContext
from ..workloads.pinning import pin_clients
from ..workloads.slices import wall_shift
from ..workloads.steps import RepeatPlan, StepResult, enough_runs, warnings_for
from .paired_lsteps import take_turns
from .paired_xstep import _no_client   # queries sent from pgaccel's own thread, not counted

DESIGN = "runs in turns"


def _done(plan: RepeatPlan, times) -> float:
    """How far the step is, 0..1, for the progress line."""
    times = list(times)
    n = min((len(t) for t in times), default=0)
    f = n / plan.repeats if plan.repeats else 1.0
    if plan.seconds:
        f = max(f, min(sum(t) for t in times) / plan.seconds) if times else 0.0
    return min(1.0, f)


def sliced_repeats(wl, items: Sequence[tuple[BenchContext, str, RepeatPlan]], *,
                   note: Callable[[str, float], None] = lambda n, f: None,
                   pin: bool = True) -> dict[str, StepResult]:
    """One step of every variant in ``items`` (its server, name and plan, in the round's
    order) as the module docstring says; a :class:`StepResult` per variant, each completed
    by its plan's ``finish``.  The servers are this host's (the lab's side-by-side
    clusters), so ``pin`` may place their backends."""
    names = [n for _, n, _ in items]
    ctxs = {n: c for c, n, _ in items}
    plans = {n: p for _, n, p in items}
    if len({(p.repeats, p.seconds) for p in plans.values()}) != 1:
        raise BenchError(f"{wl.name}: step {items[0][2].step} has different numbers of runs "
                         "for the variants.", "Give every variant the same repeats.")
    first = items[0][2]
    times: dict[str, list[float]] = {n: [] for n in names}
    windows: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    started: list[str] = []
    try:
        for n in names:
            plans[n].start()
            started.append(n)
        cpus = (pin_clients([list(plans[n].backend_pids()) for n in names]) if pin
                else None)
        with ExitStack() as stack:
            meas = {n: stack.enter_context(SlicedMeasure(ctxs[n], _no_client)) for n in names}
            j = 0
            while not enough_runs(first, times.values()):
                for name in take_turns(names, j, set()):
                    m = meas[name]
                    m.begin()
                    t0 = time.monotonic()
                    times[name].append(plans[name].once())
                    windows[name].append((t0, time.monotonic()))
                    m.end()
                j += 1
                note("measure", _done(first, times.values()))
            for name in names:
                meas[name].__exit__(None, None, None)
    except BaseException:
        for n in started:
            plans[n].abort()
        raise
    shift = wall_shift()
    out = {}
    for name in names:
        ts, w = times[name], windows[name]
        ops = len(ts) * plans[name].ops_per_run
        m = {**meas[name].metrics(ops), "design": DESIGN, "slices": len(ts),
             "backend_cpu": cpus[0] if cpus and len(cpus) == 1 else None,
             "backend_cpus": cpus,
             "slice_windows": [[round(a + shift, 3), round(b + shift, 3)] for a, b in w]}
        secs = sum(ts)
        res = StepResult(step=plans[name].step, ops=ops, seconds=secs,
                         throughput=len(ts) / secs if secs > 0 else 0.0,
                         unit=plans[name].unit, metrics=m,
                         series=[1.0 / x for x in ts if x > 0], warnings=warnings_for(m))
        out[name] = plans[name].finish(ts, res)
    return out
