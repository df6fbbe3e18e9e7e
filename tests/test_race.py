"""decide/race.py: racing candidates against an incumbent with the whole search's error
controlled.  The decisions at their edges with intervals worked out here with SciPy, and
simulated searches: knobs that do nothing must almost never make a "better" incumbent, a
planted +10% must be found."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pgaccel.decide import race
from pgaccel.decide.race import (BETTER, CONTINUE, DROP, NOT_BETTER, PROMOTE, RaceRules,
                                 confirm, log_ratios, screen, simulate_search)

R = RaceRules()


def one_sided(d, level):
    """(lower, upper) one-sided bounds of the mean log ratio at ``level``, as ratios."""
    d = np.asarray(d, dtype=float)
    se = d.std(ddof=1) / math.sqrt(d.size)
    t = stats.t.ppf(level, d.size - 1)
    return math.exp(d.mean() - t * se), math.exp(d.mean() + t * se)


# -- the error each confirmation may spend ---------------------------------------------------
def test_confirmations_share_the_search_error_equally():
    shares = [R.confirm_alpha(j) for j in range(1, 21)]
    assert shares == [pytest.approx(0.0025)] * 20                     # 5% / 20
    assert sum(shares) == pytest.approx(0.05)
    for j in (0, 21):
        with pytest.raises(ValueError):
            R.confirm_alpha(j)


def test_a_confirmation_look_is_stricter_than_its_share_alone():
    # two-sided confidence 1 - 2 alpha_j, spent over the looks: no look is looser
    for j in (1, 3):
        plain = 1 - 2 * R.confirm_alpha(j)
        levels = [R.confirm_confidence(j, n) for n in range(3, 11)]
        assert all(c >= plain - 1e-12 for c in levels)
        assert levels[0] > levels[-1]                    # early looks need a clearer result


def test_log_ratios_are_candidate_over_incumbent_round_by_round():
    assert log_ratios([100, 200], [110, 180]) == pytest.approx([math.log(1.1), math.log(0.9)])
    with pytest.raises(ValueError):
        log_ratios([1, 2], [1])


# -- the screen -------------------------------------------------------------------------------
def test_screen_waits_for_its_first_rounds():
    assert screen([0.5, 0.5]).decision == CONTINUE


def test_a_clearly_worse_candidate_is_dropped_after_three_rounds():
    d = [-0.10, -0.08, -0.12]
    _, hi = one_sided(d, 0.80)
    assert hi < 1.02
    look = screen(d)
    assert look.decision == DROP and look.rounds == 3


def test_a_candidate_whose_promotion_bound_clears_no_change_is_promoted():
    d = [0.06, 0.08, 0.07]
    lo, _ = one_sided(d, 0.90)
    assert lo > 1
    assert screen(d).decision == PROMOTE


@pytest.mark.parametrize("d,decision", [
    # 80% upper bound above +2% and 90% lower bound below no change: another round
    ([0.05, -0.03, 0.02], CONTINUE),
    # at the screen's last round: ahead by more than the minimum effect -> promoted
    ([0.12, -0.05, 0.07, -0.04, 0.06, 0.02], PROMOTE),
    # ahead, but by less than the minimum effect -> dropped
    ([0.06, -0.05, 0.03, -0.04, 0.04, 0.0], DROP),
])
def test_screen_edges(d, decision):
    lo_p, _ = one_sided(d, 0.90)
    _, hi_f = one_sided(d, 0.80)
    assert not lo_p > 1 and not hi_f < 1.02            # neither bound decides these
    mean = math.exp(float(np.mean(d)))
    if len(d) == 6:
        assert (mean > 1.02) == (decision == PROMOTE)
    assert screen(d).decision == decision


# -- the confirmation -------------------------------------------------------------------------
def test_confirmation_says_better_only_at_its_own_strict_level():
    d = [0.060, 0.064, 0.061, 0.063]
    j1 = confirm(d, 1)
    conf = R.confirm_confidence(1, 4)
    lo, _ = one_sided(d, 0.5 + conf / 2)
    assert conf > 0.995
    assert j1.confidence == pytest.approx(conf) and j1.ci_low == pytest.approx(lo)
    assert lo > 1 and j1.decision == BETTER
    # under a search allowed only one confirmation (all 5% on it) the level is looser
    one = RaceRules(max_confirmations=1)
    lo1, _ = one_sided(d, 0.5 + one.confirm_confidence(1, 4) / 2)
    assert one.confirm_confidence(1, 4) < conf and lo1 > lo


def test_confirmation_of_a_real_but_small_change_is_not_better():
    d = [0.010, 0.011, 0.009, 0.0105, 0.0095]          # +1%, tight: below the 2% minimum
    look = confirm(d, 1)
    assert look.ci_low > 1 and look.decision == NOT_BETTER


def test_confirmation_ends_not_better_at_its_last_look():
    rng = np.random.default_rng(3)
    d = list(0.02 + rng.normal(0, 0.05, 10))
    look = confirm(d, 1)
    assert look.rounds == 10 and look.decision in (NOT_BETTER, BETTER)
    assert confirm(d[:9], 1).decision == CONTINUE or look.decision == NOT_BETTER


# -- whole searches, simulated -------------------------------------------------------------------
def test_searches_over_knobs_that_do_nothing_almost_never_change_the_incumbent():
    """20 searches of 30 candidates that cannot change throughput: at most one may end with a
    "better" incumbent (the design allows 5% of searches)."""
    rng = np.random.default_rng(20261126)
    runs = [simulate_search(rng, lambda k: 0.0, 30) for _ in range(20)]
    assert sum(1 for s in runs if s.false_better) <= 1
    # the screen drops most candidates early: far fewer rounds than a fixed 10 per candidate
    assert np.mean([s.rounds for s in runs]) < 30 * 7


def test_heavy_tailed_noise_and_drift_keep_the_error_in_bounds():
    rng = np.random.default_rng(7)
    def noise(g):
        return float(0.02 * g.standard_t(3))
    runs = [simulate_search(rng, lambda k: 0.0, 30, noise=noise, drift=0.10)
            for _ in range(20)]
    assert sum(1 for s in runs if s.false_better) <= 1


def test_a_planted_ten_percent_at_one_value_of_one_knob_is_found():
    """One value of eight of one knob is +10%: found (the final incumbent) in at least 9 of
    10 searches of 30 candidates proposed at random."""
    planted = math.log(1.10)
    found = 0
    for seed in range(10):
        rng = np.random.default_rng(1000 + seed)
        s = simulate_search(rng, lambda k: planted if rng.integers(8) == 0 else 0.0, 30)
        found += s.incumbent == planted
        assert s.false_better == 0
    assert found >= 9


def test_no_confirmation_after_the_search_error_is_spent():
    rng = np.random.default_rng(5)
    rules = RaceRules(max_confirmations=2)
    s = simulate_search(rng, lambda k: math.log(1.3), 6, rules)
    # the first candidate is confirmed; the rest are no better than it (same truth) and the
    # screen may promote at most one more before the error is spent
    assert s.changes[0] == (0.0, math.log(1.3))
    assert sum(1 for _, e in s.ends if e in (BETTER, NOT_BETTER)) <= 2


def test_a_worse_candidate_never_replaces_the_incumbent():
    rng = np.random.default_rng(11)
    s = simulate_search(rng, lambda k: math.log(0.9), 20)
    assert s.changes == [] and all(end == DROP for _, end in s.ends)
    assert s.rounds == 20 * 3                       # each dropped after the first look


def test_stages_are_named_for_the_report():
    assert {race.CONTINUE, race.DROP, race.PROMOTE, race.BETTER, race.NOT_BETTER} == {
        "continue", "dropped", "promoted", "better", "not better"}
