"""Fitting what nothing captured to what the capture measured (pure).

A range whose bounds were not captured (``o.id > $1``, ``created_at BETWEEN $1 AND $2``
without ``--with-values``) drawn from any row selects a random share of the table, and a
number nothing captured (``now() - $1 * interval '1 hour'``) is a guess: either can make a
statement cost several times what it cost on the user's server.  pg_stat_statements
measured each statement's shared blocks and rows per call, which do not depend on the host.
So each such statement is tried with a few candidates (a range that selects 30%, 10%, ...
0.1% of the rows; the number 1, 3, 10, ... 10000), each run by EXPLAIN (ANALYZE, BUFFERS) on
the restored data, and the candidate whose blocks and rows per call come nearest the
captured ones (blocks and rows together) is kept, said per statement.  Where several come
equally near (an aggregate over a sequential scan reads every block and returns one row per
group whatever its range selects), the time per call breaks the tie: the one whose
EXPLAIN ANALYZE time is nearest the captured mean.  Time depends on the host, so it only
chooses among candidates the host-free numbers cannot tell apart.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Iterator, Sequence, TypeVar

from .replay import StatementPlan

WINDOWS = (0.3, 0.1, 0.03, 0.01, 0.003, 0.001)
NUMBERS = ("1", "3", "10", "30", "100", "300", "1000", "3000", "10000")
SIZES = (1, 2, 3, 5, 30, 100)     # an = ANY($n) array's values (as drawn: ANY_DEFAULT, 10)
_RANGE = {"<", "<=", ">", ">=", "between_lo", "between_hi"}


def targets(plan: StatementPlan) -> tuple[list[int], list[int], list[int]]:
    """The parameters to fit: ranges drawn from any row, guessed numbers, and ``= ANY``
    arrays drawn from any rows (how many values the application's list held is not
    captured: in a ledger's report, ``region = ANY($1)`` over 2 of 4 regions replayed with
    10 drawn values read every region, twice the captured rows, at 1.6x its time)."""
    if plan.skipped or plan.writes or plan.tuples:
        return [], [], []
    ranges = [n for n, d in plan.draws.items() if d.kind == "column" and d.op in _RANGE]
    numbers = [n for n, d in plan.draws.items()
               if d.kind == "const" and d.why == "guess" and d.values
               and d.values[0][0] == "1"]
    arrays = [n for n, d in plan.draws.items() if d.kind == "column" and d.op == "any"]
    return ranges, numbers, arrays


def candidates(plan: StatementPlan) -> Iterator[tuple[str, StatementPlan]]:
    """(what it is, the plan with it) for each candidate, the plan as it is first."""
    ranges, numbers, arrays = targets(plan)
    yield "as drawn", plan
    for k in SIZES if arrays else ():
        draws = dict(plan.draws)
        for n in arrays:
            draws[n] = replace(draws[n], size=k)
        yield (f"{', '.join(f'${n}' for n in arrays)} an array of {k} "
               f"value{'s' if k > 1 else ''}"), replace(plan, draws=draws)
    for w in WINDOWS if ranges else ():
        draws = dict(plan.draws)
        for n in ranges:
            draws[n] = replace(draws[n], window=w)
        yield f"a range over {w:.1%} of the rows", replace(plan, draws=draws)
    for v in NUMBERS[1:] if numbers else ():
        draws = dict(plan.draws)
        for n in numbers:
            draws[n] = replace(draws[n], values=((v, 1),))
        yield f"{', '.join(f'${n}' for n in numbers)} = {v}", replace(plan, draws=draws)


def distance(captured: tuple[float, float], got: tuple[float, float]) -> float:
    """How far a candidate's (blocks, rows) per call is from the captured: the sum of the
    log ratios of the blocks and of the rows (a scan reads the same blocks for any bound of
    a seq-scanned range, and an index scan's rows and blocks move together)."""
    cb, cr = captured
    gb, gr = got
    return abs(math.log((gb + 1) / (cb + 1))) + abs(math.log((gr + 1) / (cr + 1)))


TIE = 0.05          # distances this close to the best are a tie (about 5% in blocks or rows)
T = TypeVar("T")


def choose(captured: tuple[float, float], captured_ms: float,
           tried: Sequence[tuple[T, tuple[float, float], float]]) -> tuple[T, bool] | None:
    """The candidate to keep among ``tried`` ((candidate, (blocks, rows) per call, ms per
    call), in the order tried), and whether time broke a tie; None when none was tried.
    The nearest in blocks and rows; among those within :data:`TIE` of it, the nearest in
    time (log ratio), the first tried on equal footing."""
    if not tried:
        return None
    ds = [distance(captured, got) for _, got, _ in tried]
    best = min(ds)
    tied = [k for k, d in enumerate(ds) if d <= best + TIE]
    if len(tied) == 1 or captured_ms <= 0:
        return tried[tied[0]][0], False
    k = min(tied, key=lambda k: (abs(math.log((tried[k][2] + 1e-3) / (captured_ms + 1e-3))),
                                 k))
    return tried[k][0], k != tied[0]
