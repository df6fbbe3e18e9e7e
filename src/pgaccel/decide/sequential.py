"""Looking after every round without inflating false positives (pure).

`run` adds rounds until every comparison is decided (``until_decided``): it looks at the
interval after round ``first``, ``first + 1``, ... up to ``last`` and stops at the first
decisive one.  Each look at 95% is a 5% chance of "faster" or "slower" between identical
configs, and eight looks add up: simulated with pgaccel's own comparison, two identical
configs came out "faster" or "slower" in 17.7% of 2,000 experiments of 3..10 rounds.

So each look uses a stricter level, found by *alpha spending* (Lan and DeMets; the power
family of Kim and DeMets): of the 5% chance of a wrong "faster" or "slower" the user allows,
the looks up to round ``n`` may use ``alpha * (n / last) ** RHO`` in all.  Early looks, with
few rounds, spend little and need a clear difference; the last look spends what is left.
With ``RHO = 2`` and looks after rounds 3..10 that is 99.6% at round 3 and 97.4% at round
10.  A constant level for every look (Pocock's boundary, pgaccel's rule before) needed
98.8% at each, so the late looks, where a 5-8% difference gets decided, were stricter.  A
run the budget stops before ``last`` (its rounds ran slower than the pace its last look was
fixed from) spends the rest at the look where it stops (``end``).

The paired t statistic of normal differences does not depend on their scale, so the levels
depend only on (confidence, first, last): they are found once by simulating experiments of
standard normal differences with a fixed seed and cached.  A look whose share of the error
is too small for the simulation to place (fewer than ``MIN_EVENTS`` simulated rejections)
uses the share itself as its p-value threshold, which is conservative (tests/test_sequential.py
checks the overall rate with drift and trial noise).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..util import LazyModule

_st = LazyModule("scipy.stats")      # imported at the first interval, not at start

SIMULATIONS = 100_000
SEED = 20261123
RHO = 2.0
MIN_EVENTS = 50


@lru_cache(maxsize=64)
def look_levels(confidence: float, first: int, last: int, rho: float = RHO,
                end: int | None = None) -> tuple[float, ...]:
    """The confidence of each look after rounds ``first`` .. ``last`` (one per round) such
    that the chance of any look deciding "faster" or "slower" between identical configs is
    ``1 - confidence``, spent as ``(n / last) ** rho`` of it by round ``n``.  One look (or
    ``last <= first``) -> ``(confidence,)``.

    ``end``: the looks stop there, before ``last`` (the time budget ended the workload
    sooner than its pace had promised); the looks before it keep their levels, and the one
    at ``end`` spends what is left of the error, so that the whole of it is spent."""
    first = max(2, int(first))
    last = int(last)
    alpha = 1.0 - confidence
    if last <= first:
        return (confidence,)
    if end is not None and first <= int(end) < last:
        stop = int(end)
    else:
        stop = last
    x = np.random.default_rng(SEED).standard_normal((SIMULATIONS, last))
    csum = np.cumsum(x, axis=1)
    csq = np.cumsum(x * x, axis=1)
    alive = np.ones(SIMULATIONS, dtype=bool)
    spent = 0.0
    levels = []
    for n in range(first, stop + 1):
        mean = csum[:, n - 1] / n
        var = (csq[:, n - 1] - n * mean * mean) / (n - 1)
        t = np.abs(mean) / np.sqrt(np.maximum(var, 1e-300) / n)
        p = 2 * _st.t.sf(t, n - 1)
        # this look's part of the error: all that is left at the last
        share = alpha * (min(n / last, 1.0) if n < stop else 1.0) ** rho - spent
        k = int(round(share * SIMULATIONS))
        if k < MIN_EVENTS:
            thr = max(share, 0.0)
        else:
            thr = float(np.sort(p[alive])[min(k, int(alive.sum())) - 1])
        rejected = alive & (p <= thr)
        spent += rejected.sum() / SIMULATIONS
        alive &= ~rejected
        levels.append(1.0 - thr)
    return tuple(levels)


def look_level(confidence: float, first: int, last: int, n: int, rho: float = RHO,
               end: int | None = None) -> float:
    """The confidence of the look after ``n`` rounds (the first look's before ``first``, the
    last one's after ``last``, or after ``end`` when the looks ended there)."""
    levels = look_levels(confidence, first, last, rho, end)
    if len(levels) == 1:
        return levels[0]
    lo = max(2, int(first))
    return levels[min(max(int(n), lo), lo + len(levels) - 1) - lo]


def simulate_looks(rng: np.random.Generator, level, effect: float = 1.0, first: int = 3,
                   last: int = 10, drift: float = 0.10, noise: float = 0.05) -> str:
    """One simulated experiment judged as `run` judges it: each round's two trials share the
    host's state (``drift``, log-normal, between rounds) and have ``noise`` of their own; the
    other config is ``effect`` times the base; looks after rounds ``first``..``last`` at
    ``level(rounds)`` stop at the first decisive verdict, which is returned.  (The check of
    these levels in tests/test_sequential.py and benchmarks/look_rules.py.)"""
    from .effect import NOT_ENOUGH, compare
    b, o, r = [], [], []
    verdict = NOT_ENOUGH
    for k in range(last):
        host = float(np.exp(rng.normal(0, drift)))
        b.append(100 * host * float(np.exp(rng.normal(0, noise))))
        o.append(100 * effect * host * float(np.exp(rng.normal(0, noise))))
        r.append(k)
        if k + 1 >= first:
            verdict = compare(b, o, base_rounds=r, other_rounds=r,
                              confidence=level(k + 1)).verdict
            if verdict != NOT_ENOUGH:
                break
    return verdict
