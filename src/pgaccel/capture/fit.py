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

The candidates are raced by successive halving (:func:`rungs`, :func:`keep`): each is tried
on a few drawn tuples, the nearer half (those tied with the nearest first, nearest in time
among them) goes on with twice as many, the same tuples for every candidate, until one is
left.  A candidate far off after
a dozen tuples is not tried 200 times, so the tuples go to the ones still in question.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable, Iterator, Sequence, Tuple, TypeVar

from .replay import ANY_DEFAULT, StatementPlan

WINDOWS = (0.3, 0.1, 0.03, 0.01, 0.003, 0.001)
NUMBERS = ("1", "3", "10", "30", "100", "300", "1000", "3000", "10000")
SIZES = (1, 2, 3, 5, 30, 100)     # an = ANY($n) array's values (as drawn: ANY_DEFAULT, 10)
_RANGE = {"<", "<=", ">", ">=", "between_lo", "between_hi"}


def targets(plan: StatementPlan) -> tuple[list[int], list[int], list[int]]:
    """The parameters to fit: ranges drawn from any row, guessed numbers, and ``= ANY``
    arrays drawn from any rows (how many values the application's list held is not
    captured: in a ledger's report, ``region = ANY($1)`` over 2 of 4 regions replayed with
    10 drawn values read every region, twice the captured rows, at 1.6x its time; nor
    whether it asks for its busiest keys: each size is also tried with the frequent values
    favoured)."""
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
    def arrays_of(k: int, hot: bool) -> tuple[str, StatementPlan]:
        draws = dict(plan.draws)
        for n in arrays:
            draws[n] = replace(draws[n], size=k, hot=hot)
        return (f"{', '.join(f'${n}' for n in arrays)} an array of {k} "
                f"value{'s' if k > 1 else ''}"
                + (", the frequent values favoured" if hot else "")), \
            replace(plan, draws=draws)

    for k in SIZES if arrays else ():
        yield arrays_of(k, False)
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
    # last: where the time allows only some candidates, the ranges and numbers come first
    for k in (ANY_DEFAULT, *SIZES) if arrays else ():
        yield arrays_of(k, True)


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


FIRST_DRAWS = 12    # tuples per candidate in the first rung


def rungs(most: int, first: int = FIRST_DRAWS) -> list[int]:
    """The tuples per candidate after each rung: ``first``, doubling, ending at ``most``
    (``first`` at least 1; ``most`` when ``first`` reaches it)."""
    first = max(1, min(first, most))
    out = [first]
    while out[-1] < most:
        out.append(min(most, 2 * out[-1]))
    return out


class Failed(Exception):
    """A candidate's tuples could not be measured (the server refused or timed out)."""


Measured = Tuple[float, float, float]      # (shared blocks, rows, ms) of one EXPLAIN


def race(cands: Sequence[T], first: int, most: int, captured: tuple[float, float],
         captured_ms: float, measure: Callable[[int, int, int], list[Measured]],
         out_of_time: Callable[[], bool], failed: Callable[[int, Failed], None],
         by_time: list[bool] | None = None
         ) -> list[tuple[T, tuple[float, float], float]]:
    """Successive halving over ``cands``: ``measure(k, lo, hi)`` the candidate ``k`` on
    the drawn tuples ``lo`` .. ``hi`` (the same tuples for every candidate), rungs of
    :func:`rungs` (``first``, doubling, ``most``), :func:`keep` between rungs, until one is
    left, ``most`` is reached or :func:`out_of_time`.  Returns (candidate, (blocks, rows)
    per call, ms per call) of the last rung's survivors that completed it, for
    :func:`choose`.  Time running out or a failure (``failed`` is told) after the first
    rung abandons that rung: what the previous one measured decides.  In the first, time
    running out leaves the later candidates untried (the first is always tried).
    ``by_time`` gets True appended when a rung dropped a candidate tied with the nearest
    in blocks and rows (time told them apart)."""
    got: dict[int, list[Measured]] = {k: [] for k in range(len(cands))}
    alive = list(range(len(cands)))

    def means(ks: list[int]) -> list[tuple[T, tuple[float, float], float]]:
        out = []
        for k in ks:
            g = got[k]
            n = len(g)
            out.append((cands[k], (sum(x[0] for x in g) / n, sum(x[1] for x in g) / n),
                        sum(x[2] for x in g) / n))
        return out

    done = 0
    for rung, n in enumerate(rungs(most, first)):
        finished: list[int] = []
        refused: list[int] = []
        for k in alive:
            if (rung > 0 or finished or refused) and out_of_time():
                break
            try:
                got[k].extend(measure(k, done, n))
            except Failed as e:
                failed(k, e)
                refused.append(k)
                if rung > 0:
                    break
                continue
            finished.append(k)
        if rung > 0 and len(finished) < len(alive):      # abandoned: the last rung decides
            for k in alive:
                del got[k][done:]
            # never one that failed (a statement timeout: far costlier than captured)
            return means([k for k in alive if k not in refused] or alive)
        alive, done = finished, n
        if len(alive) <= 1 or out_of_time():
            break
        measured = means(alive)
        kept = keep(captured, captured_ms, measured)
        ds = [distance(captured, got) for _, got, _ in measured]
        if by_time is not None and captured_ms > 0 and any(
                d <= min(ds) + TIE for i, d in enumerate(ds) if i not in kept):
            by_time.append(True)
        alive = [alive[i] for i in kept]
        if len(alive) <= 1:
            break
    return means(alive)


def keep(captured: tuple[float, float], captured_ms: float,
         tried: Sequence[tuple[T, tuple[float, float], float]]) -> list[int]:
    """Which of ``tried`` (as for :func:`choose`) go on to the next rung, in order: the
    nearer half (rounded up), those tied with the nearest in blocks and rows (within
    :data:`TIE`) first, nearest in time among them, as :func:`choose` will break their
    tie; then the others by their distance."""
    if not tried:
        return []
    ds = [distance(captured, got) for _, got, _ in tried]
    best = min(ds)

    def rank(k: int) -> tuple:
        if ds[k] <= best + TIE:                   # no time captured: the first tried
            return (0, abs(math.log((tried[k][2] + 1e-3) / (captured_ms + 1e-3)))
                    if captured_ms > 0 else 0.0, k)
        return (1, ds[k], k)
    half = set(sorted(range(len(ds)), key=rank)[: (len(ds) + 1) // 2])
    return [k for k in range(len(ds)) if k in half]
