"""A round of a step workload side by side: every variant on its own server, the same step
of every variant in turn.

One variant after the other, a variant's whole Insert Benchmark ran before the next one's
began, so one step of two variants was minutes apart and whatever the host did in between
(its speed, the page cache, the other server's background writes) fell on one of them.
Here every variant's server is ready at once (``trial.steps_start``: settings checked,
fresh data, CHECKPOINT) and then, step by step, each variant runs that step while the
others wait: A B for the first step, B A for the second, and so on, the round's order
counterbalanced from round to round, so a step of two variants is seconds apart and neither
always goes first.  The Insert Benchmark goes further: in its query steps every variant's
writers run at once and the queries take turns in 1-second slices (``paired_qsteps.py``);
its load steps but l.x take turns in 1-second slices until each variant's commits are done
(``paired_lsteps.py``).

A variant that has finished a step is checkpointed before the next variant's step starts
(``after_step_checkpoint_s``: not timed): its dirty buffers go to disk then, not inside the
other variant's step.  A step inside a variant's own sequence still starts with whatever the
previous step left (the q steps' writers, the tables' growth), as the benchmark has it.
"""

from __future__ import annotations

import time
from typing import Callable, Iterator, Sequence

from ..decide.model import Trial, WorkloadSpec
from ..errors import BenchError, ServerError
from ..workloads.base import BenchContext
from ..workloads.ibplans import IndexPlan, LoadPlan, QueryPlan
from ..workloads.steps import PgbenchPlan, RepeatPlan, StepResult
from . import paired_lsteps, paired_pgbench, paired_qsteps, paired_repeats, paired_xstep
from .trial import step_trial, steps_start

DESIGN = "steps side by side"
# a step the workload yields as a plan: how every variant's runs in slices, and its design
SLICED = {QueryPlan: (paired_qsteps.sliced_queries, paired_qsteps.DESIGN),
          LoadPlan: (paired_lsteps.sliced_loads, paired_lsteps.DESIGN),
          IndexPlan: (paired_xstep.sliced_indexes, paired_xstep.DESIGN),
          RepeatPlan: (paired_repeats.sliced_repeats, paired_repeats.DESIGN),
          PgbenchPlan: (paired_pgbench.sliced_pgbench, paired_pgbench.DESIGN)}
# the steps' runners that place query clients or backends on CPUs (``pin``)
PLACING = (paired_qsteps.sliced_queries, paired_repeats.sliced_repeats,
           paired_pgbench.sliced_pgbench)


def step_order(names: Sequence[str], step: int) -> list[str]:
    """The variants' turns at step ``step`` (0-based): the round's order (``names``, which
    ``decide.schedule.trial_order`` counterbalances from round to round: A B, B A, B A,
    A B), then reversed at every other step."""
    return list(names) if step % 2 == 0 else list(reversed(names))


def interleaved_steps(items: Sequence[tuple[BenchContext, str, dict[str, object]]],
                      ws: WorkloadSpec, rnd: int, *,
                      note: Callable[[str, str, float], None] = lambda v, s, f: None,
                      pin: bool = True) -> dict[str, list[Trial]]:
    """One round of ``items`` (a server, a variant's name and its settings each) as the
    module docstring says; each variant's trials, one per step.  ``pin``: a q step's
    queries placed on CPUs with their backends (``paired_qsteps``; the steps that write
    are left to the scheduler)."""
    wl, params = ws.workload, ws.params
    names = [name for _, name, _ in items]
    total = len(wl.step_names(params))
    ctxs = {name: ctx for ctx, name, _ in items}
    gens: dict[str, Iterator[StepResult]] = {}
    for ctx, name, settings in items:
        try:
            steps_start(ctx, name, settings, ws)
        except ServerError as e:
            e.variant = name
            raise

        def progress(step: str, frac: float, name: str = name) -> None:
            note(name, step, frac)
        gens[name] = (wl.iter_steps(ctx, params, progress, plans=True)
                      if getattr(wl, "slices_queries", False)
                      else wl.iter_steps(ctx, params, progress))
    out: dict[str, list[Trial]] = {n: [] for n in names}
    for k in range(total):
        order = step_order(names, k)
        done: dict[str, StepResult] = {}
        plans: dict[str, QueryPlan | LoadPlan | IndexPlan | RepeatPlan | PgbenchPlan] = {}
        for name in order:
            try:
                r = next(gens[name])
            except StopIteration:
                raise BenchError(f"{wl.name} on {name!r} ended after {k} of {total} steps.",
                                 "Look at the server log; run again.") from None
            except ServerError as e:
                e.variant = name
                raise
            if isinstance(r, tuple(SLICED)):
                plans[name] = r               # run below, every variant's in slices
                continue
            done[name] = r
            _checkpoint(ctxs[name], name, done)
        design = DESIGN
        if plans:
            kinds = {type(p) for p in plans.values()}
            if len(plans) != len(order) or len(kinds) != 1:
                raise BenchError(f"{wl.name}: step {k + 1} is not the same step for every "
                                 "variant.", "Give every variant the same steps.")
            run, design = SLICED[kinds.pop()]
            step = next(iter(plans.values())).step
            placing = {"pin": pin} if run in PLACING else {}
            done = run(wl, [(ctxs[n], n, plans[n]) for n in order],
                       note=lambda phase, f: [note(n, step, f) for n in order], **placing)
            for name in order:
                _checkpoint(ctxs[name], name, done)
        for name in order:
            r = done[name]
            out[name].append(step_trial(
                name, ws, rnd, r, k, total,
                design=design, turn=order.index(name),
                after_step_checkpoint_s=r.extra.pop("_after_step_checkpoint_s", None),
                server=ctxs[name].target.describe(),
                **{"with": [n for n in names if n != name]}))
    return out


def _checkpoint(ctx: BenchContext, name: str, done: dict[str, StepResult]) -> None:
    """The untimed CHECKPOINT after a variant's step (its seconds kept with the result)."""
    t0 = time.monotonic()
    with ctx.connect() as conn:
        conn.execute("CHECKPOINT")
    done[name].extra["_after_step_checkpoint_s"] = time.monotonic() - t0
