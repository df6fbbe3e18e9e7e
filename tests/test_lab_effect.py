"""The effect estimator, its interval and the verdicts: known samples, hand-computed values
(t quantiles from tables), and simulated experiments for the error rates."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from pgaccel.decide.effect import (EQUIVALENT, FASTER, MIN_PAIRS, NOT_ENOUGH, SLOWER, Comparison,
                                LogInterval, compare, decide, geometric_mean_ratio,
                                pair_by_round, rounds_needed)


def noisy(center: float, cv: float, n: int, seed: int) -> np.ndarray:
    return center * (1 + cv * np.random.default_rng(seed).standard_normal(n))


# -- the verdict rule ------------------------------------------------------------------------
@pytest.mark.parametrize("ratio, lo, hi, hib, verdict", [
    (1.10, 1.05, 1.15, True, FASTER),
    (1.10, 1.05, 1.15, False, SLOWER),           # latency up 10%
    (0.80, 0.75, 0.86, True, SLOWER),
    (0.80, 0.75, 0.86, False, FASTER),           # latency down 20%
    (1.00, 0.99, 1.01, True, EQUIVALENT),        # inside ±2%
    (1.01, 1.005, 1.015, True, EQUIVALENT),      # real but within ±2%: equivalent
    (1.00, 0.981, 1.0195, True, EQUIVALENT),     # the band is [1/1.02, 1.02]
    (1.00, 0.979, 1.0195, True, NOT_ENOUGH),     # 0.979 < 1/1.02 = 0.98039
    # between the two plausible bands' lower ends, 1 - 0.02 = 0.98 and 1/1.02 = 0.98039:
    # outside [1/1.02, 1.02], inside [0.98, 1.02]
    (1.00, 0.9802, 1.0195, True, NOT_ENOUGH),
    # between 1.02 and 1/(1 - 0.02) = 1.020408: outside the band, inside [0.98, 1/0.98]
    (1.00, 0.985, 1.0202, True, NOT_ENOUGH),
    # a slowdown measured as base/other - 1: 1/0.9802 - 1 = 2.02% >= 2% decides "slower";
    # measured as 1 - other/base it would be 1.98% < 2% (not enough)
    (0.9802, 0.97, 0.99, True, SLOWER),
    (0.9802, 0.97, 0.99, False, FASTER),         # CPU per operation down 2.02%
    (0.9806, 0.97, 0.99, True, NOT_ENOUGH),      # 1/0.9806 - 1 = 1.98%
    (1.015, 1.001, 1.04, True, NOT_ENOUGH),      # real, below 2% so far, reaches past it
    (1.00, 0.90, 1.12, True, NOT_ENOUGH),        # wide
    (1.03, 0.99, 1.07, False, NOT_ENOUGH),
])
def test_decide_table(ratio, lo, hi, hib, verdict):
    assert decide(ratio, lo, hi, hib, 0.02)[0] == verdict


def test_the_margin_moves_the_line():
    assert decide(1.04, 1.02, 1.06, True, 0.07)[0] == EQUIVALENT     # within ±7%
    assert decide(1.04, 1.02, 1.06, True, 0.03)[0] == FASTER
    assert decide(1.04, 1.02, 1.06, True, 0.05)[0] == NOT_ENOUGH     # 4% < 5%, 6% > 5%


# -- unpaired: Welch's t on logs -----------------------------------------------------------
def test_welch_by_hand_and_the_effect_is_the_centre():
    base, other = [100.0, 104.0, 98.0], [110.0, 116.0, 107.0, 112.0]
    lb, lo = np.log(base), np.log(other)
    vb, vo = lb.var(ddof=1) / 3, lo.var(ddof=1) / 4
    df = (vb + vo) ** 2 / (vb ** 2 / 2 + vo ** 2 / 3)
    d, se = lo.mean() - lb.mean(), math.sqrt(vb + vo)
    t = st.t.ppf(0.975, df)
    c = compare(base, other)
    assert c.method == "welch-log-t" and c.n_pairs == 0
    assert c.ratio == pytest.approx(math.exp(d), rel=1e-12)      # ratio of geometric means
    assert c.ci_low == pytest.approx(math.exp(d - t * se), rel=1e-12)
    assert c.ci_high == pytest.approx(math.exp(d + t * se), rel=1e-12)
    assert math.log(c.ratio) - math.log(c.ci_low) == pytest.approx(
        math.log(c.ci_high) - math.log(c.ratio))                # the centre, on the log scale
    assert c.p_value == pytest.approx(st.ttest_ind(lo, lb, equal_var=False).pvalue)
    assert c.verdict == FASTER


# -- paired by round -----------------------------------------------------------------------
def test_pair_by_round_averages_logs_within_a_round():
    d = pair_by_round([100, 121, 200], [0, 0, 1], [110, 220, 9], [0, 1, 2])
    assert d == pytest.approx([math.log(110) - math.log(110), math.log(220) - math.log(200)])


def test_paired_by_hand_cancels_drift_that_sinks_the_unpaired_test():
    # the host drifts 30% over four rounds; within each round other is ~5% faster
    base = [100.0, 110.0, 120.0, 130.0]
    other = [105.0, 116.0, 125.0, 137.0]
    rounds = [0, 1, 2, 3]
    diffs = np.log(other) - np.log(base)
    m, s = diffs.mean(), diffs.std(ddof=1)
    t3 = 3.182446305284263                 # t(0.975, 3), from a table
    c = compare(base, other, base_rounds=rounds, other_rounds=rounds)
    assert c.method == "paired-log-t" and c.n_pairs == 4
    assert c.ratio == pytest.approx(math.exp(m))
    assert c.ci_low == pytest.approx(math.exp(m - t3 * s / 2))
    assert c.ci_high == pytest.approx(math.exp(m + t3 * s / 2))
    assert c.p_value == pytest.approx(st.ttest_rel(np.log(other), np.log(base)).pvalue)
    assert c.verdict == FASTER
    unpaired = compare(base, other)
    assert unpaired.verdict == NOT_ENOUGH and unpaired.ci_width > 5 * c.ci_width


@pytest.mark.parametrize("base, br, other, orr, pairs", [
    ([100, 101], [0, 1], [104, 105], [0, 1], 2),           # the budget ended after 2 rounds
    ([100, 101, 99], [0, 1, 2], [104, 105, 103], [3, 4, 5], 0),   # no round in common
    ([100, 101, 99], [0, 1, 2], [104, 105, 103], [0, 1, 7], 2),   # 2 of 3 in common
    ([100.0], [0], [104.0], [0], 1),                       # one round: the rounds are short
])
def test_an_experiments_rounds_below_the_minimum_are_never_judged_unpaired(base, br, other,
                                                                          orr, pairs):
    """Trials of one experiment's rounds (both sides' rounds given) with fewer than 3 rounds
    in common: "not enough evidence", saying how many ran, with the effect so far and no
    interval; Welch's test would have judged 2 against 2 trials (issue 41 item 2)."""
    c = compare(base, other, base_rounds=br, other_rounds=orr)
    assert MIN_PAIRS == 3
    assert (c.method, c.verdict, c.n_pairs) == ("none", NOT_ENOUGH, pairs)
    assert math.isnan(c.ci_low) and math.isnan(c.ci_high) and math.isnan(c.p_value)
    assert c.more_rounds is None and c.ci_width == math.inf
    gm = math.exp(np.mean(np.log(other)) - np.mean(np.log(base)))
    assert c.ratio == pytest.approx(gm)
    assert c.explain.startswith(f"not enough evidence: only {pairs} of the minimum 3 paired "
                                f"rounds ran ({(gm - 1) * 100:+.1f}% so far")
    # why they were so few, when the caller knows
    c = compare(base, other, base_rounds=br, other_rounds=orr,
                short_note="before the budget ended")
    assert c.explain.startswith(f"not enough evidence: only {pairs} of the minimum 3 paired "
                                "rounds ran before the budget ended (")
    # without rounds (two runs compared, `pgaccel compare`) the same trials are unpaired
    if len(base) >= 2:
        assert compare(base, other).method == "welch-log-t"


def test_three_common_rounds_are_paired():
    c = compare([100, 101, 99], [104, 105, 103], base_rounds=[0, 1, 2],
                other_rounds=[0, 1, 2])
    assert (c.method, c.n_pairs) == ("paired-log-t", 3)


def test_equivalent_when_the_interval_fits_the_margin():
    base = [1000.0, 1001.0, 999.0, 1000.0, 1000.5]
    other = [1000.5, 1000.0, 1001.0, 999.5, 1000.0]
    r = list(range(5))
    c = compare(base, other, base_rounds=r, other_rounds=r)
    assert c.verdict == EQUIVALENT and "within ±2%" in c.explain
    assert c.more_rounds is None


# -- how many more rounds --------------------------------------------------------------------
def test_rounds_needed_by_hand():
    # paired, sd of a round's log ratio 0.04, effect 0.05: n = 8, since
    # (t.975,7 + t.8,7) * 0.04 / sqrt(8) = (2.365 + 0.896) * 0.01414 = 0.0461 <= 0.05 while
    # (t.975,6 + t.8,6) * 0.04 / sqrt(7) = (2.447 + 0.906) * 0.01512 = 0.0507 > 0.05
    assert rounds_needed(LogInterval(0.05, 0.1, 0.2, 0.04, 3, True), 0.02, 0.95) == 8
    # unpaired needs twice the variance: 12 per side
    assert rounds_needed(LogInterval(0.05, 0.1, 0.2, 0.04, 3, False), 0.02, 0.95) == 12
    # an effect smaller than the margin: equivalence needs the half-width within
    # log(1.02) - 0.005 = 0.0148
    assert rounds_needed(LogInterval(0.005, 0.1, 0.7, 0.04, 3, True), 0.02, 0.95) == 60
    assert rounds_needed(LogInterval(0.0198, 0.1, 0.7, 0.04, 3, True), 0.02, 0.95) is None


def test_not_enough_evidence_says_how_many_more_rounds():
    base, other = [100.0, 108.0, 95.0], [109.0, 102.0, 112.0]
    r = [0, 1, 2]
    c = compare(base, other, base_rounds=r, other_rounds=r)
    assert c.verdict == NOT_ENOUGH and c.more_rounds is not None and c.more_rounds >= 1
    assert f"about {c.more_rounds} more round" in c.explain


# -- directions, degenerate input ----------------------------------------------------------
def test_latency_direction():
    base = noisy(10.0, 0.03, 6, 11)          # ms
    other = noisy(8.0, 0.03, 6, 12)
    c = compare(base, other, higher_is_better=False)
    assert c.ratio < 1 and c.verdict == FASTER and "lower is better" in c.explain
    assert compare(other, base, higher_is_better=False).verdict == SLOWER
    assert compare(base, other).verdict == SLOWER


def test_identical_values():
    c = compare([5.0] * 5, [5.0] * 5)
    assert (c.ratio, c.ci_low, c.ci_high, c.verdict) == (1.0, 1.0, 1.0, EQUIVALENT)
    c = compare([5.0] * 5, [6.0] * 5)
    assert c.ratio == pytest.approx(1.2) and c.verdict == FASTER


@pytest.mark.parametrize("base, other, words", [
    ([1.0], [1.0, 2.0], "at least 2"),
    ([], [1.0, 2.0], "at least 2"),
    ([1.0, 2.0], [0.0, 2.0], "<= 0"),
    ([1.0, -2.0, 3.0], [1.0, 2.0], "<= 0"),
    ([1.0, float("nan"), 3.0], [1.0, 2.0], "NaN"),
    ([1.0, 2.0], [1.0, float("inf")], "infinite"),
])
def test_degenerate_inputs_are_not_enough_evidence(base, other, words):
    c = compare(base, other)
    assert c.verdict == NOT_ENOUGH and words in c.explain
    assert math.isnan(c.ci_low) and math.isnan(c.ci_high) and c.ci_width == math.inf


def test_explain_is_one_line_and_names_method():
    c = compare(noisy(1000, 0.05, 5, 51), noisy(1000, 0.05, 5, 52))
    assert "\n" not in c.explain and c.method in c.explain and "CI" in c.explain


# -- error rates in simulated experiments (drift shared by a round's trials) -------------------
def _experiment(effect: float, seed: int, rounds: int = 5, cv: float = 0.04,
                drift: float = 0.15) -> Comparison:
    rng = np.random.default_rng(seed)
    host = 1 + drift * rng.standard_normal(rounds)          # each round's state of the host
    base = 1000 * host * (1 + cv * rng.standard_normal(rounds))
    other = 1000 * (1 + effect) * host * (1 + cv * rng.standard_normal(rounds))
    r = list(range(rounds))
    return compare(base, other, base_rounds=r, other_rounds=r)


@pytest.mark.slow  # 2,000 simulated experiments, about 25 s
def test_aa_false_positives_at_most_about_5pct():
    verdicts = [_experiment(0.0, s).verdict for s in range(2000)]
    false = sum(v in (FASTER, SLOWER) for v in verdicts) / len(verdicts)
    assert false <= 0.06, false                 # nominal 5%; 2000 runs: standard error 0.5%


def test_planted_10pct_slowdown_is_found_with_the_right_sign():
    # 8 rounds with 4% trial noise: the paired t test's power for -10% is about 98%
    verdicts = [_experiment(-0.10, 5000 + s, rounds=8).verdict for s in range(400)]
    assert verdicts.count(SLOWER) / 400 >= 0.95
    assert FASTER not in verdicts


# -- geometric mean over workloads -----------------------------------------------------------
def _cmp(ratio, lo, hi, conf=0.95):
    return Comparison(ratio, lo, hi, "test", FASTER, 5, 5, 0.01, "", confidence=conf)


def test_geometric_mean_ratio_by_hand():
    cs = [_cmp(1.10, 1.05, 1.15), _cmp(0.90, 0.80, 1.0), _cmp(float("nan"), 0, 0)]
    g, lo, hi = geometric_mean_ratio(cs)
    assert g == pytest.approx(math.sqrt(1.10 * 0.90))
    z = 1.959963984540054
    se1 = (math.log(1.15) - math.log(1.05)) / (2 * z)
    se2 = (math.log(1.0) - math.log(0.80)) / (2 * z)
    se = math.sqrt(se1 ** 2 + se2 ** 2) / 2
    assert lo == pytest.approx(g * math.exp(-z * se))
    assert hi == pytest.approx(g * math.exp(z * se))
    assert all(math.isnan(x) for x in geometric_mean_ratio([]))
