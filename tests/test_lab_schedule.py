"""Trial orders and adaptive stopping."""

from __future__ import annotations

from collections import Counter

import pytest

from pgaccel.decide.schedule import (MAX_ROUNDS_CAP, last_look, max_rounds_for, no_room,
                                  round_order, should_continue, trial_order)
from pgaccel.decide.effect import EQUIVALENT, NOT_ENOUGH, Comparison


def positions(order, variants):
    """variant -> Counter of its position within each round."""
    pos: dict[str, Counter] = {v: Counter() for v in variants}
    by_round: dict[int, list[str]] = {}
    for r, v in order:
        by_round.setdefault(r, []).append(v)
    for vs in by_round.values():
        assert sorted(vs) == sorted(variants)          # every variant once per round
        for i, v in enumerate(vs):
            pos[v][i] += 1
    return pos


def test_roundrobin():
    assert trial_order(["A", "B"], 3, "roundrobin") == [
        (0, "A"), (0, "B"), (1, "A"), (1, "B"), (2, "A"), (2, "B")]


def test_abba_two_variants():
    seq = "".join(v for _, v in trial_order(["A", "B"], 4, "abba"))
    assert seq == "ABBABAAB"
    pos = positions(trial_order(["A", "B"], 4, "abba"), "AB")
    assert pos["A"] == pos["B"] == Counter({0: 2, 1: 2})


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_abba_balance_each_position_equally_often(k):
    vs = [chr(ord("A") + i) for i in range(k)]
    order = trial_order(vs, 2 * k, "abba")
    pos = positions(order, vs)
    for v in vs:
        assert pos[v] == Counter({i: 2 for i in range(k)}), (v, pos[v])
    # within every pair of rounds the mean position is the same for all variants, so a
    # linear drift in time affects every variant equally
    for pair in range(k):
        sub = [(r, v) for r, v in order if r // 2 == pair]
        p = positions(sub, vs)
        assert len({sum(i * c for i, c in p[v].items()) for v in vs}) == 1


@pytest.mark.parametrize("k", [3, 4, 5, 6])
def test_abba_puts_every_variant_first_once_in_k_rounds(k):
    # a step's first turn runs slow (l.x), and the lab's steps take the round's order or
    # its reverse: with four variants and 5 rounds one variant was never first, two twice
    vs = [chr(ord("A") + i) for i in range(k)]
    rounds = [round_order(vs, r) for r in range(k)]
    assert sorted(o[0] for o in rounds) == vs
    if k % 2 == 0:      # odd k cannot have both with reversed pairs (three: ABC CBA, then
        assert sorted(o[-1] for o in rounds) == vs    # A or C is last twice)
    # and the first place moves one variant back every round: A, then the last, ...
    assert [o[0] for o in rounds] == [vs[-r % k] for r in range(k)]


def test_abba_four_variants_as_the_example_runs_them():
    assert [''.join(round_order("ABCD", r)) for r in range(5)] == [
        "ABCD", "DCBA", "CDAB", "BADC", "ABCD"]


def test_abba_reverses_within_pairs():
    for r in range(0, 10, 2):
        assert round_order("ABC", r + 1) == round_order("ABC", r)[::-1]


def test_random_is_seeded_and_resumable():
    vs = ["A", "B", "C"]
    a = trial_order(vs, 12, "random", seed=42)
    assert a == trial_order(vs, 12, "random", seed=42)
    assert a != trial_order(vs, 12, "random", seed=43)
    assert trial_order(vs, 12, "random", seed=42, start_round=5) == [x for x in a if x[0] >= 5]
    positions(a, vs)                                    # each round is a permutation
    firsts = Counter(v for r, v in a if (r, v) == next(x for x in a if x[0] == r))
    assert len(firsts) >= 2                             # not the same order every round


def test_resume_continues_the_abba_sequence():
    full = trial_order("AB", 6, "abba")
    assert trial_order("AB", 6, "abba", start_round=3) == full[6:]


def test_bad_arguments():
    with pytest.raises(ValueError):
        trial_order(["A", "A"], 2)
    with pytest.raises(ValueError):
        trial_order(["A", "B"], 2, "zigzag")
    assert trial_order(["A"], 2) == [(0, "A"), (1, "A")]
    assert trial_order(["A", "B"], 0) == []


# -- adaptive stopping ----------------------------------------------------------------------
def cmp(lo, hi):
    return Comparison((lo + hi) / 2, lo, hi, "test", EQUIVALENT, 5, 5, 0.5, "")


def test_should_continue_order_of_rules():
    wide = {"tpcb": cmp(0.9, 1.1)}
    narrow = {"tpcb": cmp(0.99, 1.02), "ro": cmp(1.0, 1.04)}
    # max rounds wins over everything
    go, why = should_continue(wide, 0.05, 10, 1000, 10, 8, 5, 8)
    assert not go and "maximum" in why
    # the budget wins over min_rounds
    go, why = should_continue(wide, 0.05, 95, 100, 10, 2, 5, 20)
    assert not go and "budget" in why and "minimum" in why
    # below min rounds: continue
    go, why = should_continue(narrow, 0.05, 10, 1000, 10, 2, 5, 20)
    assert go and "at least 5" in why
    # wide interval: continue and name it
    go, why = should_continue({**narrow, **wide}, 0.05, 60, 1000, 10, 6, 5, 20)
    assert go and "tpcb" in why and "20.0%" in why
    # all narrow: stop
    go, why = should_continue(narrow, 0.05, 60, 1000, 10, 6, 5, 20)
    assert not go and "ro" in why


def test_should_continue_estimates_round_time_and_handles_unknowns():
    # 4 rounds in 400 s -> ~100 s per round; 450 + 100 > 500
    go, why = should_continue([cmp(0.8, 1.2)], 0.05, 450, 500, None, 4, 3, None)
    assert not go and "budget" in why
    go, _ = should_continue([cmp(0.8, 1.2)], 0.05, 350, 500, None, 4, 3, None)
    assert go
    nan = Comparison(float("nan"), float("nan"), float("nan"), "none", "x", 1, 1, 0, "")
    go, why = should_continue([nan], 0.05, 0, None, None, 5, 5, None)
    assert go and "unknown" in why
    go, why = should_continue([cmp(0.8, 1.2)], None, 0, None, None, 5, 5, None)
    assert not go


def test_should_continue_until_every_verdict_is_decided():
    from dataclasses import replace
    from pgaccel.decide.effect import FASTER, NOT_ENOUGH
    open_ = replace(cmp(0.9, 1.1), verdict=NOT_ENOUGH, more_rounds=4)
    done = {"tpcb": replace(cmp(1.05, 1.1), verdict=FASTER), "ro": cmp(0.99, 1.01)}
    go, why = should_continue({**done, "rw": open_}, None, 100, 1000, 50, 3, min_rounds=3,
                              max_rounds=8, until_decided=True)
    assert go and "rw is not decided yet (about 4 more rounds)" == why
    go, why = should_continue(done, None, 100, 1000, 50, 3, min_rounds=3, max_rounds=8,
                              until_decided=True)
    assert not go and "every comparison is decided after 3 rounds" == why
    go, why = should_continue({"rw": open_}, None, 100, 1000, 50, 8, min_rounds=3,
                              max_rounds=8, until_decided=True)
    assert not go and "maximum of 8" in why                 # the cap still wins
    go, why = should_continue(done, None, 980, 1000, 50, 8, min_rounds=3, max_rounds=8,
                              until_decided=True)
    assert not go and why == "every comparison is decided after 8 rounds"  # not "maximum"
    go, why = should_continue({"rw": open_}, None, 980, 1000, 50, 4, min_rounds=3,
                              max_rounds=8, until_decided=True)
    assert not go and "time budget" in why                  # and the budget
    go, _ = should_continue({"rw": open_}, None, 10, 1000, 50, 1, min_rounds=3,
                            until_decided=True)
    assert go                                               # the minimum comes first


@pytest.mark.parametrize("elapsed, budget, est, done, go, why", [
    (90.0, 100.0, 10.0, 2, True, "round 3: at least 5 rounds are needed"),   # ends at 100
    (0.0, 0.5, None, 0, True, "round 1"),         # nothing measured yet: no estimate
    (9.0, 10.0, 0.5, 3, True, "round 4"),         # a half-second round still fits
    (95.0, 100.0, 5.0, 3, True, "round 4"),       # the estimate, not the mean so far (31.7 s)
    (90.0, 100.0, None, 3, False, "time budget: 10s left, a round takes about 30s (only 3 "
                                  "of the minimum 5 rounds ran; 5 need about 1 min more)"),
    # two rounds of 237 s beyond the 170 s left: 304 s, so 6 minutes (not 8: what was left
    # counts; not 5: rounded up)
    (700.0, 870.0, 237.0, 3, False, "time budget: 170s left, a round takes about 237s (only "
                                    "3 of the minimum 5 rounds ran; 5 need about 6 min more)"),
    (120.0, 100.0, 10.0, 5, False, "time budget: 0s left, a round takes about 10s"),
])
def test_budget_edges(elapsed, budget, est, done, go, why):
    got, text = should_continue({}, None, elapsed, budget, est, done)
    assert got is go and text.startswith(why)
    if done >= 5:
        assert "only" not in text
    # the one budget test: the run stops where it says there is no room (and an
    # experiment ends a workload's looks there), and only there
    assert no_room(elapsed, budget, est, done) is (not go)


def test_no_room_without_a_budget_or_a_pace():
    assert not no_room(1e9, None, 17.0)                  # no budget: always room
    assert not no_room(100.0, 117.0, 17.0)               # ends exactly at the budget
    assert no_room(100.1, 117.0, 17.0)
    assert no_room(100.0, 120.0, None, rounds_done=4)    # no pace: the mean round, 25 s
    assert not no_room(100.0, 125.0, None, rounds_done=4)
    assert not no_room(0.0, 0.5, None)                   # nothing measured yet


def test_nothing_to_compare_and_the_default_minimum():
    assert should_continue({}, None, 0.0, None, None, 5) == \
        (False, "5 rounds done; no target interval width was set")
    assert should_continue({}, None, 0.0, None, None, 4)[0] is True
    assert should_continue({}, None, 0.0, None, None, 5, until_decided=True) == \
        (False, "nothing to compare")
    assert should_continue({}, 0.1, 0.0, None, None, 5) == (False, "nothing to compare")


def test_interval_exactly_the_target_width_stops():
    c = Comparison(1.125, 1.0, 1.25, "test", EQUIVALENT, 5, 5, 0.5, "")
    go, why = should_continue({"a": c}, 0.25, 0.0, None, None, 5)
    assert go is False and why.startswith("every interval is at most 25.0% wide")


def test_undecided_without_an_estimate_names_no_count():
    from pgaccel.decide.effect import NOT_ENOUGH
    c = Comparison(1.0, 0.9, 1.1, "test", NOT_ENOUGH, 5, 5, 0.5, "")
    assert should_continue({"a": c}, None, 0.0, None, None, 5, until_decided=True) == \
        (True, "a is not decided yet")


@pytest.mark.parametrize("budget, default_max, default_budget, want", [
    (360, 10, 360, 10),         # the default budget: the default maximum
    (900, 10, 360, 25),         # --quick --budget 15m: 2.5x the time, 2.5x the rounds
    (200, 10, 360, 10),         # less time never lowers the maximum (the budget stops it)
    (3000, 12, 1500, 24),       # run --budget 50m
    (86400, 10, 360, MAX_ROUNDS_CAP),   # a day: capped
    (400, 10, 360, 11),         # whole rounds only, rounded down
])
def test_max_rounds_grows_with_the_budget_given(budget, default_max, default_budget, want):
    assert max_rounds_for(budget, default_max, default_budget) == want


@pytest.mark.parametrize("left, round_s, done, first, cap, want", [
    (290, 17.3, 1, 3, 20, 17),   # run --quick: select-only decided early, tpcb-like gets more
    (150, 17.3, 1, 3, 20, 9),    # select-only used its half: what is left fits 8 more
    (40, 17.3, 1, 3, 20, 3),     # too little for the first look: still at least ``first``
    (900, 8.0, 1, 3, 20, 20),    # more time than the cap allows: the cap
    (-5, 17.3, 1, 3, 20, 3),     # already over the budget
    (100, 0.0, 1, 3, 20, 20),    # no pace known: the cap
    (100, 10.0, 2, 3, 20, 12),   # fixed after the second round: counts it
])
def test_last_look_is_as_far_as_the_time_left_reaches(left, round_s, done, first, cap, want):
    assert last_look(left, round_s, done, first, cap) == want


def test_a_last_look_the_budget_fixed_is_named_as_such():
    c = Comparison(1.0, 0.9, 1.1, "test", NOT_ENOUGH, 5, 5, 0.5, "")
    assert should_continue({"a": c}, None, 100.0, 360.0, 17.0, 11, min_rounds=3,
                           max_rounds=11, until_decided=True, max_from_budget=True) == \
        (False, "reached round 11, the last the time budget reaches")
    assert should_continue({"a": c}, None, 100.0, 360.0, 17.0, 11, min_rounds=3,
                           max_rounds=11, until_decided=True) == \
        (False, "reached the maximum of 11 rounds")


def test_a_budget_stop_between_the_minimum_and_the_most_says_what_the_most_needs():
    # the example at small on a host half as fast: 3 rounds (its minimum) of 237 s, 170 s
    # left, at most 5: two more rounds need 304 s beyond what was left
    go, why = should_continue({}, None, 700.0, 870.0, 237.0, 3, min_rounds=3, max_rounds=5)
    assert not go and why == ("time budget: 170s left, a round takes about 237s (5 rounds, "
                              "the most allowed, need about 6 min more)")
    # a budget spent before a first round (an earlier workload overran): no pace to reckon
    go, why = should_continue({}, None, 0.0, -5.0, None, 0, min_rounds=3, max_rounds=5)
    assert not go and why == ("time budget: 0s left, before a first round (only 0 of the "
                              "minimum 3 rounds ran)")
    # a most that is itself the budget's last look, or none: nothing to add
    for kw in ({"max_rounds": 5, "max_from_budget": True}, {}):
        go, why = should_continue({}, None, 700.0, 870.0, 237.0, 3, min_rounds=3, **kw)
        assert not go and why == "time budget: 170s left, a round takes about 237s"
