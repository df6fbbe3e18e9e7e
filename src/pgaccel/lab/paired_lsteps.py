"""The Insert Benchmark's load steps side by side, in slices.

A load step (l.i0, l.i1, l.i2) is a fixed amount of work: so many commits per client.
Taken one variant after the other (``paired_steps``), two variants' same step were seconds
to minutes apart, and this host's speed moves 15-40% within seconds: in two A/A runs the
load steps' pairs were 4-16% apart and their intervals ±10-45% after 3 rounds, while the q
steps, taking turns in slices, were 1-7% apart.  So here every variant's pgbench for the
step is started at once and stopped (``workloads/slices.PausedPgbench`` with ``-t``), and
the variants take turns in slices (``paired.STEP_SLICE_S``, 0.1 s), A B B A ... (A B C B C A
... for three or more: ``paired.turn_order``), each pgbench resumed for its slice
and stopped after it, until its commits are done (its last slice ends when it does; the
others go on taking turns without it).  A variant's rate is its rows over the seconds of
its own slices; its per-second series is its slices' rates.

Its costs: the load generator's CPU and the host over its own slices, as for every sliced
trial, but the server's CPU, context switches and I/O from its first slice to its end
(``SlicedMeasure(server_spans=True)``): a load step leaves background work (checkpoints,
WAL writing, autovacuum of the queues) that falls in the other variants' slices, and every
second of that server's work belongs to its own load.

What differs from the step taken alone: while one variant loads, the others' servers may
still write back what their last slice dirtied (each server's own work, the same for every
variant), and the step's rate leaves out the seconds its pgbench was stopped.  l.x (one
CREATE INDEX per table) cannot be stopped in the middle: the variants take turns index by
index instead (``paired_xstep.py``).
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Callable, Sequence

from ..metrics.sliced import SlicedMeasure
from ..workloads.base import BenchContext
from ..workloads.ibscripts import write_protocol
from ..workloads.ibplans import LoadPlan
from ..workloads.slices import PausedPgbench, wall_shift
from ..workloads.steps import StepResult
from . import paired

DESIGN = "load step in slices"


def take_turns(names: Sequence[str], turn: int, done: set[str]) -> list[str]:
    """The variants' slices in turn ``turn`` (0-based), those not ``done``: A B, B A, A B
    ...; three or more rotated, A B C, B C A, C A B ... (``paired.turn_order``)."""
    return [n for n in paired.turn_order(names, turn) if n not in done]


def sliced_loads(wl, items: Sequence[tuple[BenchContext, str, LoadPlan]], *,
                 note: Callable[[str, float], None] = lambda n, f: None
                 ) -> dict[str, StepResult]:
    """One load step of every variant in ``items`` (its server, name and plan, in the
    round's order) as the module docstring says; a :class:`StepResult` per variant."""
    names = [n for _, n, _ in items]
    ctxs = {n: c for c, n, _ in items}
    plans = {n: p for _, n, p in items}
    windows: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    slice_s = paired.STEP_SLICE_S
    with ExitStack() as stack:
        procs: dict[str, PausedPgbench] = {}
        for name in names:
            plan = plans[name]
            procs[name] = wl.paused_scripts(stack, ctxs[name], plan.cfg, [plan.script],
                                            protocol=write_protocol(plan.cfg),
                                            defines=plan.defines,
                                            transactions=plan.transactions,
                                            siblings=len(names))
        meas = {n: stack.enter_context(SlicedMeasure(ctxs[n], procs[n].cpu,
                                                     server_spans=True)) for n in names}
        shift = wall_shift()      # see paired.run_slices
        done: set[str] = set()
        turn = 0
        while len(done) < len(names):
            for name in take_turns(names, turn, done):
                p, m = procs[name], meas[name]
                m.begin()
                t0 = time.monotonic()         # before it runs: a commit it ends at once counts
                p.resume()
                ended = p.wait_end(slice_s)
                if not ended:
                    p.pause()
                t1 = time.monotonic()         # stopped: it logs no commit after this
                m.end()
                windows[name].append((t0, t1))
                if ended:
                    done.add(name)
                    m.__exit__(None, None, None)
                note("measure", len(done) / len(names))
            turn += 1
        logs = {n: procs[n].finish(timeout=60) for n in names}
    out = {}
    for name in names:
        plan = plans[name]
        res = paired.sliced_step(plan.step, "inserts/s", logs[name], windows[name], shift,
                                 meas[name], none=f"{plan.step} of {name!r} completed no commit.",
                                 design=DESIGN, slice_s=slice_s, per_op=plan.rows)
        out[name] = wl.finish_load(ctxs[name], plan, res)
    return out
