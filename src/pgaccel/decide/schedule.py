"""The order in which trials run, when to stop adding rounds, and how long trials take (pure).

On a VM whose page cache, CPU boost and neighbours drift over minutes, a fixed order
(A then B, every round) lets the drift -- or one variant warming the cache for the next --
masquerade as a difference between variants.  Orders here spread every variant evenly over
the positions within a round, so slow drift cancels in the comparison.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .effect import NOT_ENOUGH, Comparison
from .model import WorkloadSpec

ORDERS = ("abba", "random", "roundrobin")


def round_order(variants: Sequence[str], round_no: int, method: str = "abba",
                seed: int = 0) -> list[str]:
    """The variants in the order they run in round ``round_no`` (0-based).

    * ``roundrobin``: the same order every round (A B C, A B C, ...).
    * ``abba``: counterbalanced.  Rounds come in pairs; the second of a pair is the first
      reversed, so a linear drift hits every variant equally within each pair.  For k > 2
      variants each pair starts two places further back in the list, so the round's first
      place moves one variant back every round and every variant is first once in the first
      k rounds (ABC CBA BCA; ABCD DCBA CDAB BADC, where every variant is also last once, as
      only an even number can be); over 2k rounds every variant runs equally often in every
      position.  Until November 29 each pair started one place further along: with four
      variants one was never first (nor last) in 5 rounds and two were twice, and a step's
      first turn is the one that runs slow (docs/measurements.md, "l.x's first turn").  For
      two variants: AB BA BA AB, AB BA BA AB ... (ABBA-BAAB, which also cancels a quadratic
      drift over four rounds).
    * ``random``: randomized blocks: each round an independent random permutation drawn
      from ``seed`` and the round number, so a resumed run gets the same orders.
    """
    vs = list(variants)
    if len(set(vs)) != len(vs):
        raise ValueError(f"variant names must be unique: {vs}")
    if round_no < 0:
        raise ValueError("round_no must be >= 0")
    if method == "roundrobin" or len(vs) < 2:
        return vs
    if method == "abba":
        pair = round_no // 2
        k = (pair if len(vs) == 2 else -2 * pair) % len(vs)
        fwd = vs[k:] + vs[:k]
        return fwd if round_no % 2 == 0 else fwd[::-1]
    if method == "random":
        rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, round_no])
        return [vs[i] for i in rng.permutation(len(vs))]
    raise ValueError(f"unknown order {method!r}; choose one of {', '.join(ORDERS)}")


def trial_order(variants: Sequence[str], rounds: int, method: str = "abba", seed: int = 0,
                *, start_round: int = 0) -> list[tuple[int, str]]:
    """``(round, variant)`` pairs in run order for rounds ``start_round .. rounds - 1``.

    ``rounds`` is the total; pass ``start_round`` to continue an interrupted run with the
    same orders it would have had."""
    if rounds < 0:
        raise ValueError("rounds must be >= 0")
    return [(r, v) for r in range(start_round, rounds)
            for v in round_order(variants, r, method, seed)]


def _named(comparisons: Mapping[str, Comparison] | Iterable[Comparison]
           ) -> list[tuple[str, Comparison]]:
    if isinstance(comparisons, Mapping):
        return [(str(k), c) for k, c in comparisons.items()]
    return [(f"#{i + 1}", c) for i, c in enumerate(comparisons)]


# how a stop reason (``should_continue``) begins when the budget stopped the workload
BUDGET_STOP = "time budget"


def ended_by_budget(reason: str | None) -> bool:
    """Whether a workload's stop reason says the budget stopped it."""
    return bool(reason) and reason.startswith(BUDGET_STOP)


def no_room(elapsed_s: float, budget_s: float | None, round_s: float | None,
            rounds_done: int = 0) -> bool:
    """Whether another round (``round_s``; without it, the mean round so far) would end
    after ``budget_s``: the one budget test, for stopping and for ending looks early."""
    return budget_s is not None and elapsed_s + _pace(elapsed_s, round_s, rounds_done) > budget_s


def _pace(elapsed_s: float, round_s: float | None, rounds_done: int) -> float:
    if round_s and round_s > 0:
        return round_s
    return elapsed_s / rounds_done if rounds_done else 0.0


def _minutes_more(rounds: int, round_s: float, left_s: float) -> int:
    """Whole minutes that ``rounds`` more rounds of ``round_s`` need beyond the ``left_s``
    the budget still had (at least one)."""
    return math.ceil(max(1.0, rounds * round_s - left_s) / 60)


def should_continue(comparisons: Mapping[str, Comparison] | Iterable[Comparison],
                    target_ci_width: float | None, elapsed_s: float, budget_s: float | None,
                    est_round_s: float | None, rounds_done: int, min_rounds: int = 5,
                    max_rounds: int | None = None, until_decided: bool = False,
                    max_from_budget: bool = False) -> tuple[bool, str]:
    """Whether to run another round, and why.  Checked in this order:

    0. ``until_decided``, at least ``min_rounds`` done and every comparison decided -> stop
       (first, so that a verdict reached in the last round allowed is named as decided).
    1. ``rounds_done >= max_rounds`` -> stop (``max_from_budget``: that maximum is the last
       look the budget reaches, :func:`last_look`, and the reason says so).
    2. the budget: stop when another round (``est_round_s``; default the mean round so far)
       would end after ``budget_s``.  The budget is a promise to the user, so it wins even
       below ``min_rounds`` (the verdicts then say "not enough evidence").  The reason says
       how many more minutes the minimum (or, reached, ``max_rounds``) would need at this
       pace.
    3. ``rounds_done < min_rounds`` -> continue.
    4. ``until_decided``: continue, naming a comparison that is not decided yet (faster,
       slower and equivalent are decided; all decided stopped at 0).
    5. every comparison's CI width (``ci_high - ci_low``, in ratio units: 0.04 = 4 points)
       is at most ``target_ci_width`` -> stop; otherwise continue, naming the widest.
       No target -> stop after ``min_rounds``.

    ``comparisons`` may be a mapping name -> Comparison (names appear in the reason).
    """
    named = _named(comparisons)
    if (until_decided and named and rounds_done >= min_rounds
            and all(c.verdict != NOT_ENOUGH for _, c in named)):
        # decided by the round just run: say so, even where the cap or the budget would
        # have stopped here too (the reason a run prints beside its verdicts)
        return False, f"every comparison is decided after {rounds_done} rounds"
    if max_rounds is not None and rounds_done >= max_rounds:
        if max_from_budget:
            return False, f"reached round {max_rounds}, the last the time budget reaches"
        return False, f"reached the maximum of {max_rounds} rounds"
    if budget_s is not None and no_room(elapsed_s, budget_s, est_round_s, rounds_done):
        left = max(0.0, budget_s - elapsed_s)
        per = _pace(elapsed_s, est_round_s, rounds_done)
        msg = (f"{BUDGET_STOP}: {left:.0f}s left, "
               + (f"a round takes about {per:.0f}s" if per > 0 else "before a first round"))
        if rounds_done < min_rounds:
            msg += f" (only {rounds_done} of the minimum {min_rounds} rounds ran"
            if per > 0:            # no pace before a first round: nothing to reckon from
                msg += (f"; {min_rounds} need about "
                        f"{_minutes_more(min_rounds - rounds_done, per, left)} min more")
            msg += ")"
        elif (max_rounds is not None and rounds_done < max_rounds and not max_from_budget
              and per > 0):
            msg += (f" ({max_rounds} rounds, the most allowed, need about "
                    f"{_minutes_more(max_rounds - rounds_done, per, left)} min more)")
        return False, msg
    if rounds_done < min_rounds:
        return True, f"round {rounds_done + 1}: at least {min_rounds} rounds are needed"
    if until_decided:
        open_ = [(n, c) for n, c in named if c.verdict == NOT_ENOUGH]
        if not named:
            return False, "nothing to compare"
        n, c = open_[0]          # all decided returned above
        more = f" (about {c.more_rounds} more rounds)" if c.more_rounds else ""
        return True, f"{n} is not decided yet{more}"
    if target_ci_width is None:
        return False, f"{rounds_done} rounds done; no target interval width was set"
    if not named:
        return False, "nothing to compare"
    name, widest = max(named, key=lambda nc: nc[1].ci_width)
    w = widest.ci_width
    if w <= target_ci_width:
        return False, (f"every interval is at most {target_ci_width:.1%} wide "
                       f"(widest {w:.1%}, {name})")
    ws = "unknown" if math.isinf(w) else f"{w:.1%}"
    return True, f"interval for {name} is {ws} wide, target {target_ci_width:.1%}"


MAX_ROUNDS_CAP = 100


def last_look(left_s: float, round_s: float, rounds_done: int, first: int, cap: int) -> int:
    """The last round a workload that adds rounds until decided looks at, fixed once its
    first round has run and before any look: the rounds done plus as many more as fit the
    time left (``left_s``) at the pace of that round (``round_s``), at least ``first`` and
    at most ``cap``.

    The levels of the looks depend on their last (decide/sequential.py): a last look the
    budget never reaches leaves part of the allowed error unspent, so every look is stricter
    than it needs to be; a last look before the budget ends leaves time unused.  Fixing it
    from the wall time of a round of fixed-length trials, which does not depend on how the
    configs compare, keeps the overall error where it was asked for.  (`run --quick`: the
    second workload gets what the first left, 8 rounds after a first that used all of its
    half, 15 after one decided in 3.)"""
    if round_s <= 0 or not math.isfinite(left_s) or not math.isfinite(round_s):
        return max(int(first), int(cap))
    more = int(max(0.0, left_s) // round_s)
    return max(int(first), min(int(cap), int(rounds_done) + more))


def max_rounds_for(budget_s: float, default_max: int, default_budget_s: float) -> int:
    """The most rounds `pgaccel run` may look at within ``budget_s`` seconds: the default
    maximum scaled with the budget given against the default budget (20 rounds per 6 minutes
    with --quick, 24 per 25 minutes without), never below the default maximum nor above
    :data:`MAX_ROUNDS_CAP`.  It is a cap: each workload's last look is as far as its share
    of the budget reaches (:func:`last_look`), so a longer ``--budget`` buys rounds, which
    is what an undecided verdict's "+N rounds" asks for."""
    scaled = int(default_max * budget_s / default_budget_s) if default_budget_s > 0 else 0
    return max(int(default_max), min(MAX_ROUNDS_CAP, scaled))


# -- how long trials take, and what `pgaccel run` spends ---------------------------------
def estimate_trial_s(spec: WorkloadSpec) -> float:
    """Rough seconds per trial: restart, data restore, prewarm, warm-up, measurement."""
    restore = 0.1 * spec.params.scale if spec.workload.writes else 0.0
    return 4.0 + restore + 0.03 * spec.params.scale + spec.params.warmup + spec.params.duration


def default_params(quick: bool, cpus: int) -> dict[str, Any]:
    """`pgaccel run` defaults: --quick spends about 6 minutes on 2 cores, the default about
    25: at least ``rounds`` rounds, then more (as many as each workload's share of ``budget``
    seconds fits, at most ``max_rounds``) until every comparison is decided."""
    clients = max(2, 2 * cpus)
    if quick:
        # Short trials, many rounds: a trial's per-second rate is flat after its first
        # second (trimmed), while whole trials of one config differ by 4-6% here, mostly
        # from run to run of pgbench (new connections: 4% CV without restarting the server,
        # 2.3% between 4 s blocks of one long run); so rounds, not seconds, narrow the
        # interval.  5 s measured after a 2 s warm-up is a 9.5 s trial against 13 s with 6 s
        # of each: 7-10 rounds fit the budget instead of 5-6.  ``max_rounds`` is a cap: each
        # workload looks up to the round its share of the budget reaches (last_look), about
        # 10 for the first and 8-15 for the second, depending on how soon the first decided.
        return {"scale": 20, "rounds": 3, "max_rounds": 20, "budget": 360.0, "duration": 5.0,
                "warmup": 2.0, "clients": clients}
    return {"scale": 50, "rounds": 5, "max_rounds": 24, "budget": 1500.0, "duration": 25.0,
            "warmup": 12.0, "clients": clients}
