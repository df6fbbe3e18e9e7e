"""The Insert Benchmark's l.x side by side, index by index.

l.x creates three secondary indexes on every table: a few CREATE INDEX statements, each
lasting a fraction of a second at --size small, which cannot be stopped in the middle as a
pgbench can (``paired_lsteps.py``).  Taken whole one variant after the other
(``paired_steps``), two variants' l.x were a second or more apart, and in A/A labs their
rounds' pairs were 3-9% apart.  Here the variants take turns at each index instead: the
first index of every table of A, then of B, the second of B, then of A, and so on (the
round's order, reversed at every other index; three or more variants rotate instead:
``paired_lsteps.take_turns``).  Within a turn
the variant's tables are indexed at once, a connection each, as the step taken whole does.

The first turn waits ``SETTLE_S`` after the previous step's checkpoints.  Started right
after them, the step's very first turn was the slow one: in A/As of l.i0 and l.x on four
servers (8 rounds each) the first turn of the first index ran 8.6% below that index's mean
(up to 15% in a round) while every other place was within 3.3%.  The host's /proc showed
nothing left to write by then, so it is taken to be the disk below the VM still busy with
the checkpoints' 380 MB when the first index build syncs its own.  A second's wait took the
deficit to +0.3% and the intervals from ±2.9-4.0% to ±2.2-3.1%; warming up on CPU work
instead (reading the tables, or a series) took it away too, but left the step's last turns
slower by up to 8% (docs/measurements.md, "l.x's first turn").

A variant's rate is its table rows over the seconds of its own turns; its per-second series
is each turn's rate (rows indexed per second for that index).  Its server's CPU, context
switches and I/O count from its first turn to the end of the step
(``SlicedMeasure(server_spans=True)``): the index builds leave dirty pages that its
checkpointer and the kernel write back while the others take their turns.

With ``index_passes`` above 1 (the example's at --size small) every index is built that many
times: after each pass but the last, every variant drops its indexes (between turns, not
timed; its server's counts still span it), and the turns go on rotating where the pass left
them.  A variant's turns within a round vary independently (in eight four-server A/As its
rounds' means spread about as its turns' spread over the square root of three predicts), so
twice the turns narrow l.x's pairs by about the square root of two for about 4 seconds more
a round.  A later pass finds the hint bits already set by the first, as the benchmark's
second and third indexes do.

What differs from the step taken whole: a table's next index waits until every table of
the variant has its previous one (a barrier at each index; with one table per client and
tables of one size they end close together), and each index commits by itself (taken whole,
a table's three commit together).
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Callable, Sequence

from ..metrics.sliced import SlicedMeasure
from ..workloads.base import BenchContext
from ..workloads.ibplans import IndexPlan
from ..workloads.insertbench import index_at_once
from ..workloads.slices import wall_shift
from ..workloads.steps import StepResult, warnings_for
from .paired_lsteps import take_turns

DESIGN = "index step in turns"
# seconds between the previous step's checkpoints and l.x's first turn (module docstring)
SETTLE_S = 1.0


def _no_client() -> tuple[float, int]:
    """The load generator's CPU: the statements are sent from pgaccel's own threads, whose
    CPU is not counted (nor is it for l.x taken whole)."""
    return 0.0, 0


def _one_index(conns: Sequence, statements: Sequence[str], **kw) -> None:
    """Run ``statements[i]`` on ``conns[i]``, each committed, all at once (``kw``: for
    ``index_at_once``)."""
    def one(conn, stmt: str) -> None:
        conn.execute(stmt)
        conn.commit()
    index_at_once([lambda c=c, s=s: one(c, s) for c, s in zip(conns, statements)], **kw)


def sliced_indexes(wl, items: Sequence[tuple[BenchContext, str, IndexPlan]], *,
                   note: Callable[[str, float], None] = lambda n, f: None
                   ) -> dict[str, StepResult]:
    """l.x of every variant in ``items`` (its server, name and plan, in the round's order)
    as the module docstring says; a :class:`StepResult` per variant."""
    names = [n for _, n, _ in items]
    ctxs = {n: c for c, n, _ in items}
    plans = {n: p for _, n, p in items}
    n_idx = max(p.indexes for p in plans.values())
    passes = max(p.passes for p in plans.values())
    windows: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    with ExitStack() as stack:
        conns = {n: [stack.enter_context(ctxs[n].connect())
                     for _ in plans[n].statements] for n in names}
        time.sleep(SETTLE_S)
        meas = {n: stack.enter_context(SlicedMeasure(ctxs[n], _no_client, server_spans=True))
                for n in names}
        for p in range(passes):
            if p:       # the previous pass's indexes, dropped between turns (module docstring)
                for name in names:
                    if p < plans[name].passes:
                        for drops in zip(*plans[name].drops):
                            _one_index(conns[name], drops,
                                       what="Dropping the previous pass's indexes")
            for j in range(n_idx):
                for name in take_turns(names, p * n_idx + j, set()):
                    stmts = [s[j] for s in plans[name].statements if j < len(s)]
                    if not stmts or p >= plans[name].passes:
                        continue
                    m = meas[name]
                    m.begin()
                    t0 = time.monotonic()
                    _one_index(conns[name], stmts)
                    t1 = time.monotonic()
                    m.end()
                    windows[name].append((t0, t1))
                note("measure", (p * n_idx + j + 1) / (passes * n_idx))
        for name in names:
            meas[name].__exit__(None, None, None)
    shift = wall_shift()
    out = {}
    for name in names:
        plan, w = plans[name], windows[name]
        secs = sum(b - a for a, b in w)
        m = {**meas[name].metrics(plan.ops), "design": DESIGN, "slices": len(w),
             "slice_windows": [[round(a + shift, 3), round(b + shift, 3)] for a, b in w]}
        res = StepResult(step=plan.step, ops=plan.ops, seconds=secs,
                         throughput=plan.ops / secs if secs > 0 else 0.0, unit="rows/s",
                         metrics=m, series=[plan.rows / (b - a) for a, b in w if b > a],
                         warnings=warnings_for(m), note=plan.note)
        res.extra.update(plan.extra)
        out[name] = res
    return out
