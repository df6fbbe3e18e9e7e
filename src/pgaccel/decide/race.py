"""Racing candidates against an incumbent, with the whole search's error under control (pure):
the statistics of ``pgaccel tune --search`` (docs/search.md).

Every candidate is measured side by side with the incumbent, paired by round (the log ratio
of each round's two trials, as ``run`` pairs them), in two stages:

1. **Screen** (rounds ``screen_first`` .. ``screen_last``): cheap, and it decides nothing
   about "better".  After each round from ``screen_first`` on, the candidate is *dropped* when
   the upper end of its one-sided ``futility`` interval lies below the minimum effect (it is
   unlikely to be better by enough to matter: a clearly worse candidate stops after
   ``screen_first`` rounds), *promoted* when the lower end of its one-sided ``promote``
   interval lies above no change, and at ``screen_last`` promoted when its estimate is ahead
   by the minimum effect, else dropped.
2. **Confirm** (fresh rounds; the screen's are not reused, so the screen's selection cannot
   bias the test): the ``j``-th confirmation of the search looks after rounds
   ``confirm_first`` .. ``confirm_last`` with ``run``'s alpha-spending looks
   (``sequential.look_levels``) at the two-sided confidence ``1 - 2 * alpha_j``, so its
   chance of a "faster" verdict when the candidate is not better is at most ``alpha_j``.
   It is *better* on a "faster" verdict (``effect.decide``: the interval above no change and
   the effect at least the minimum effect), *not better* when the futility bound says it is
   unlikely to be better by the minimum effect, or at its last look.

**Error control.**  A search confirms at most ``max_confirmations`` candidates (20), each at
``alpha_j = alpha / 20`` (0.25% for the default 5%), so the chance that a whole search ever
makes a candidate that is not better the incumbent is at most ``alpha`` (a union bound; each
confirmation's rounds are fresh, so its error bound holds whatever the optimizer and the
screen did before it).  Only promoted candidates spend error, and a candidate that does
nothing is rarely promoted, so a search over knobs that do nothing spends a small part of
it: simulated, about 1 search in 100 (tests/test_race.py, benchmarks/search_error.py).
Futility stops and the screen only ever remove chances to say "better".  A front-loaded
share (``alpha * 6 / (pi^2 j^2)``, 3% for the first) was tried and spent nearly all of the
5% on the first few null candidates the screen let through.

What a search reports as the effect is never these estimates (the best of many noisy
measurements is biased upward): the final confirmation run measures the found plan afresh.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from .effect import FASTER, decide, paired_interval
from .sequential import look_level

CONTINUE = "continue"
DROP = "dropped"            # screen: unlikely to be better by the minimum effect
PROMOTE = "promoted"        # screen: worth a confirmation
BETTER = "better"           # confirmation: faster than the incumbent, error controlled
NOT_BETTER = "not better"   # confirmation: not shown to be better


@dataclass(frozen=True)
class RaceRules:
    """How candidates are raced; the defaults are the ones docs/search.md describes."""
    alpha: float = 0.05            # the whole search's chance of a false "better"
    min_effect: float = 0.02       # a better candidate must be at least this much faster
    futility: float = 0.80         # one-sided level of the drop / futility bound
    promote: float = 0.90          # one-sided level of the screen's promotion bound
    screen_first: int = 3
    screen_last: int = 6
    confirm_first: int = 3
    confirm_last: int = 10
    max_confirmations: int = 20    # the most candidates a search ever tests for "better"

    def confirm_alpha(self, j: int) -> float:
        """The error the ``j``-th confirmation (1 .. ``max_confirmations``) may spend: an
        equal share of the search's ``alpha``."""
        if not 1 <= j <= self.max_confirmations:
            raise ValueError(f"confirmations are numbered 1 .. {self.max_confirmations}")
        return self.alpha / self.max_confirmations

    def confirm_confidence(self, j: int, rounds: int) -> float:
        """The two-sided confidence of the ``j``-th confirmation's look after ``rounds``."""
        return look_level(1.0 - 2.0 * self.confirm_alpha(j), self.confirm_first,
                          self.confirm_last, rounds)


@dataclass(frozen=True)
class Look:
    """One look at a candidate's rounds: the decision, the ratio and its interval at the
    look's confidence (candidate / incumbent), the rounds and why."""
    decision: str
    ratio: float
    ci_low: float
    ci_high: float
    confidence: float
    rounds: int
    why: str = ""


def log_ratios(incumbent: Sequence[float], candidate: Sequence[float]) -> list[float]:
    """Each round's log(candidate / incumbent), rounds in order (both sides measured in the
    same rounds, side by side)."""
    if len(incumbent) != len(candidate):
        raise ValueError("a race's rounds have one trial of each side")
    return [math.log(c) - math.log(i) for i, c in zip(incumbent, candidate)]


def _bounds(d: Sequence[float], confidence: float) -> tuple[float, float, float]:
    iv = paired_interval(d, confidence)
    return math.exp(iv.d), math.exp(iv.d - iv.h), math.exp(iv.d + iv.h)


def _futile(d: Sequence[float], rules: RaceRules) -> tuple[bool, float, float]:
    """Is the one-sided ``futility`` upper bound below the minimum effect? (and the bounds)"""
    _, lo, hi = _bounds(d, 2 * rules.futility - 1)
    return hi < 1 + rules.min_effect, lo, hi


def screen(d: Sequence[float], rules: RaceRules = RaceRules()) -> Look:
    """The screen's decision after the rounds ``d`` (log ratios, :func:`log_ratios`)."""
    n = len(d)
    conf = 2 * rules.futility - 1
    if n < max(2, rules.screen_first):
        return Look(CONTINUE, math.nan, math.nan, math.nan, conf, n, "too few rounds")
    ratio, lo, hi = _bounds(d, conf)
    if hi < 1 + rules.min_effect:
        return Look(DROP, ratio, lo, hi, conf, n,
                    f"its {rules.futility:.0%} upper bound is below +{rules.min_effect:.0%}")
    _, lo_p, _ = _bounds(d, 2 * rules.promote - 1)
    if lo_p > 1:
        return Look(PROMOTE, ratio, lo, hi, conf, n,
                    f"its {rules.promote:.0%} lower bound is above no change")
    if n >= rules.screen_last:
        if ratio > 1 + rules.min_effect:
            return Look(PROMOTE, ratio, lo, hi, conf, n, "ahead after the screen's rounds")
        return Look(DROP, ratio, lo, hi, conf, n, "not ahead after the screen's rounds")
    return Look(CONTINUE, ratio, lo, hi, conf, n)


def confirm(d: Sequence[float], j: int, rules: RaceRules = RaceRules()) -> Look:
    """The ``j``-th confirmation's decision after its fresh rounds ``d``."""
    n = len(d)
    if n < max(2, rules.confirm_first):
        return Look(CONTINUE, math.nan, math.nan, math.nan, math.nan, n, "too few rounds")
    conf = rules.confirm_confidence(j, n)
    ratio, lo, hi = _bounds(d, conf)
    verdict, _why = decide(ratio, lo, hi, True, rules.min_effect)
    if verdict == FASTER:
        return Look(BETTER, ratio, lo, hi, conf, n,
                    f"faster at {conf:.2%} (this confirmation's share of the search's "
                    f"{rules.alpha:.0%}: {rules.confirm_alpha(j):.3%})")
    futile, _, _ = _futile(d, rules)
    if futile:
        return Look(NOT_BETTER, ratio, lo, hi, conf, n,
                    f"its {rules.futility:.0%} upper bound is below +{rules.min_effect:.0%}")
    if n >= rules.confirm_last:
        return Look(NOT_BETTER, ratio, lo, hi, conf, n, "not faster at its last look")
    return Look(CONTINUE, ratio, lo, hi, conf, n)


# -- a search, simulated (tests/test_race.py and benchmarks/search_error.py) ------------------

@dataclass
class SimulatedSearch:
    """What a simulated search did: each candidate's true log effect over the baseline, the
    stage it ended in, and the incumbent's true log effect at the end."""
    ends: list[tuple[float, str]] = field(default_factory=list)
    changes: list[tuple[float, float]] = field(default_factory=list)   # (from, to) truths
    rounds: int = 0
    incumbent: float = 0.0

    @property
    def false_better(self) -> int:
        """Incumbent changes to a candidate that was not truly better."""
        return sum(1 for old, new in self.changes if new <= old)


def simulate_search(rng: np.random.Generator, propose: Callable[[int], float],
                    candidates: int, rules: RaceRules = RaceRules(), *,
                    noise: Callable[[np.random.Generator], float] | None = None,
                    drift: float = 0.05) -> SimulatedSearch:
    """A search of ``candidates`` proposals: ``propose(k)`` gives candidate ``k``'s true log
    effect over the baseline.  A round's two trials share the host's state (log-normal
    ``drift``, which pairing cancels) and each has its own ``noise`` (a draw of a log
    deviation; default normal with sd 0.03)."""
    draw = noise or (lambda g: float(g.normal(0.0, 0.03)))
    out = SimulatedSearch()
    confirmations = 0

    def rounds(effect: float, decide_: Callable[[list[float]], Look], last: int) -> Look:
        d: list[float] = []
        look = Look(CONTINUE, math.nan, math.nan, math.nan, math.nan, 0)
        while look.decision == CONTINUE and len(d) < last:
            host = float(rng.normal(0.0, drift))
            inc = host + draw(rng)
            cand = host + effect + draw(rng)
            d.append(cand - inc)
            out.rounds += 1
            look = decide_(d)
        return look

    for k in range(candidates):
        truth = propose(k)
        rel = truth - out.incumbent
        look = rounds(rel, lambda d: screen(d, rules), rules.screen_last)
        if look.decision != PROMOTE:
            out.ends.append((truth, DROP))
            continue
        if confirmations >= rules.max_confirmations:
            out.ends.append((truth, DROP))          # the search's error is spent
            continue
        confirmations += 1
        j = confirmations
        look = rounds(rel, lambda d: confirm(d, j, rules), rules.confirm_last)
        out.ends.append((truth, look.decision))
        if look.decision == BETTER:
            out.changes.append((out.incumbent, truth))
            out.incumbent = truth
    return out
