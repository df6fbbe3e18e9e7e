"""Statistics of the lab: known samples give known intervals and verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from pgaccel.lab import stats
from pgaccel.lab.stats import (FASTER, NO_DIFFERENCE, NOT_ENOUGH, SLOWER, Comparison,
                               compare, decide, geometric_mean_ratio, is_steady,
                               min_detectable_effect, rqps_table, steady_state, summarize,
                               trials_needed)


def noisy(center: float, cv: float, n: int, seed: int) -> np.ndarray:
    return center * (1 + cv * np.random.default_rng(seed).standard_normal(n))


# -- summarize ---------------------------------------------------------------------------
def test_summarize_known_values():
    s = summarize([5, 1, 4, 2, 3])
    assert (s.n, s.median, s.mean, s.min, s.max, s.q1, s.q3) == (5, 3, 3, 1, 5, 2, 4)
    assert s.stdev == pytest.approx(math.sqrt(2.5))
    assert s.cv == pytest.approx(math.sqrt(2.5) / 3)


def test_summarize_ignores_nan_and_handles_empty_and_single():
    assert summarize([1.0, float("nan"), 3.0]).n == 2
    assert summarize([1.0, float("nan"), 3.0]).median == 2.0
    e = summarize([])
    assert e.n == 0 and math.isnan(e.median)
    one = summarize([7])
    assert (one.n, one.median, one.stdev, one.cv) == (1, 7, 0.0, 0.0)


# -- the verdict rule, as a table --------------------------------------------------------
@pytest.mark.parametrize("ratio, lo, hi, n, hib, verdict", [
    # CI wholly above 1, effect >= min_effect
    (1.10, 1.05, 1.15, 5, True, FASTER),
    (1.10, 1.05, 1.15, 3, True, FASTER),
    (1.10, 1.05, 1.15, 5, False, SLOWER),        # latency went up by 10%
    # CI wholly below 1
    (0.80, 0.75, 0.86, 5, True, SLOWER),
    (0.80, 0.75, 0.86, 5, False, FASTER),        # latency went down by 20%
    # one side of 1 but the effect is below min_effect: too small to matter
    (1.01, 1.005, 1.015, 5, True, NO_DIFFERENCE),
    (0.99, 0.97, 0.995, 5, True, NO_DIFFERENCE),
    # one side of 1, the interval reaches past min_effect but the point estimate does not
    (1.015, 1.001, 1.04, 5, True, NO_DIFFERENCE),
    # CI contains 1
    (1.00, 0.99, 1.01, 3, True, NO_DIFFERENCE),  # inside the ±2% band: equivalent
    (1.00, 0.90, 1.12, 5, True, NO_DIFFERENCE),  # wide, but n >= 5
    (1.00, 0.90, 1.12, 4, True, NOT_ENOUGH),     # wide and n < 5
    (1.03, 0.99, 1.07, 2, False, NOT_ENOUGH),
    (1.00, 0.98, 1.02, 2, True, NO_DIFFERENCE),  # exactly the band
])
def test_decide_table(ratio, lo, hi, n, hib, verdict):
    got, why = decide(ratio, lo, hi, n, hib, 0.02)
    assert got == verdict
    if verdict == NO_DIFFERENCE and (lo > 1 or hi < 1):
        assert "too small to matter" in why


def test_min_effect_moves_the_line():
    assert decide(1.04, 1.02, 1.06, 5, True, 0.05)[0] == NO_DIFFERENCE
    assert decide(1.04, 1.02, 1.06, 5, True, 0.03)[0] == FASTER


# -- compare: Welch's t interval on logs for small n ---------------------------------------
def test_welch_log_interval_matches_hand_computation():
    base, other = [100.0, 104.0, 98.0], [110.0, 116.0, 107.0, 112.0]
    lb, lo = np.log(base), np.log(other)
    vb, vo = lb.var(ddof=1) / 3, lo.var(ddof=1) / 4
    df = (vb + vo) ** 2 / (vb ** 2 / 2 + vo ** 2 / 3)
    d, se = lo.mean() - lb.mean(), math.sqrt(vb + vo)
    t = st.t.ppf(0.975, df)
    c = compare(base, other)
    assert c.method == "welch-log-t"
    assert c.ci_low == pytest.approx(math.exp(d - t * se), rel=1e-12)
    assert c.ci_high == pytest.approx(math.exp(d + t * se), rel=1e-12)
    assert c.ratio == pytest.approx(np.median(other) / np.median(base))
    assert c.p_value == pytest.approx(st.ttest_ind(lo, lb, equal_var=False).pvalue)
    assert (c.n_base, c.n_other) == (3, 4)
    assert c.verdict == FASTER and c.ci_low > 1


def test_welch_confidence_level_widens_interval():
    base, other = [100.0, 104.0, 98.0], [110.0, 116.0, 107.0]
    c95, c99 = compare(base, other), compare(base, other, confidence=0.99)
    assert c99.ci_low < c95.ci_low and c99.ci_high > c95.ci_high


# -- compare: bootstrap for n >= 5 ----------------------------------------------------------
def test_bootstrap_contains_true_ratio_and_excludes_one():
    base = noisy(1000, 0.02, 8, seed=1)
    other = noisy(1300, 0.02, 8, seed=2)
    c = compare(base, other)
    assert c.method.startswith("bootstrap")
    assert c.ci_low < 1.3 < c.ci_high
    assert c.ci_low > 1
    assert c.verdict == FASTER
    assert c.p_value == pytest.approx(st.mannwhitneyu(other, base).pvalue)
    assert "faster" in c.explain and "+" in c.explain


def test_bootstrap_is_reproducible_with_seed():
    base, other = noisy(1000, 0.05, 6, 3), noisy(1050, 0.05, 6, 4)
    a, b = compare(base, other, seed=7), compare(base, other, seed=7)
    assert (a.ci_low, a.ci_high) == (b.ci_low, b.ci_high)
    c = compare(base, other, seed=8)
    assert (c.ci_low, c.ci_high) != (a.ci_low, a.ci_high)
    assert c.ratio == a.ratio


def test_aa_same_distribution_no_difference_at_n5():
    verdicts, covered = [], 0
    for s in range(60):
        c = compare(noisy(1000, 0.05, 5, 2 * s), noisy(1000, 0.05, 5, 2 * s + 1), n_boot=2000)
        verdicts.append(c.verdict)
        covered += c.ci_low <= 1 <= c.ci_high
    assert NOT_ENOUGH not in verdicts
    false_pos = sum(v in (FASTER, SLOWER) for v in verdicts) / len(verdicts)
    assert false_pos <= 0.12, verdicts          # nominal 5%
    assert covered / len(verdicts) >= 0.88


def test_aa_n3_is_not_enough_evidence():
    verdicts = [compare(noisy(1000, 0.05, 3, 2 * s), noisy(1000, 0.05, 3, 2 * s + 1)).verdict
                for s in range(40)]
    assert verdicts.count(NOT_ENOUGH) >= 34, verdicts
    assert NO_DIFFERENCE not in verdicts or verdicts.count(NO_DIFFERENCE) <= 2


@pytest.mark.parametrize("seed", range(5))
def test_planted_20pct_slowdown_is_slower(seed):
    base = noisy(1000, 0.05, 5, 100 + seed)
    other = noisy(800, 0.05, 5, 200 + seed)
    c = compare(base, other)
    assert c.verdict == SLOWER
    assert c.ratio == pytest.approx(0.8, abs=0.06)
    assert c.ci_high < 1


def test_latency_direction():
    base = noisy(10.0, 0.03, 6, 11)          # ms
    other = noisy(8.0, 0.03, 6, 12)
    c = compare(base, other, higher_is_better=False)
    assert c.ratio < 1 and c.verdict == FASTER
    assert "lower is better" in c.explain
    assert compare(other, base, higher_is_better=False).verdict == SLOWER
    assert compare(base, other).verdict == SLOWER    # same numbers read as throughput


def test_tiny_real_effect_is_too_small_to_matter():
    base = noisy(1000, 0.001, 8, 21)
    other = noisy(1010, 0.001, 8, 22)
    c = compare(base, other)
    assert c.ci_low > 1                       # real ...
    assert c.verdict == NO_DIFFERENCE         # ... but below min_effect
    assert "too small to matter" in c.explain


def test_equivalence_with_few_trials():
    c = compare([1000, 1001, 999], [1000.5, 1000, 1001])
    assert c.ci_low <= 1 <= c.ci_high and c.ci_high - c.ci_low < 0.04
    assert c.verdict == NO_DIFFERENCE and "equivalent" in c.explain


def test_identical_values_do_not_crash():
    c = compare([5.0] * 5, [5.0] * 5)
    assert (c.ratio, c.ci_low, c.ci_high, c.verdict) == (1.0, 1.0, 1.0, NO_DIFFERENCE)
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
    assert c.verdict == NOT_ENOUGH
    assert words in c.explain
    assert math.isnan(c.ci_low) and math.isnan(c.ci_high)
    assert c.ci_width == math.inf


# -- geometric mean over workloads -----------------------------------------------------------
def _cmp(ratio, lo, hi, conf=0.95):
    return Comparison(ratio, lo, hi, "test", FASTER, 5, 5, 0.01, "", confidence=conf)


def test_geometric_mean_ratio_by_hand():
    cs = [_cmp(1.10, 1.05, 1.15), _cmp(0.90, 0.80, 1.0), _cmp(float("nan"), 0, 0)]
    g, lo, hi = geometric_mean_ratio(cs)
    assert g == pytest.approx(math.sqrt(1.10 * 0.90))
    z = st.norm.ppf(0.975)
    se1 = (math.log(1.15) - math.log(1.05)) / (2 * z)
    se2 = (math.log(1.0) - math.log(0.80)) / (2 * z)
    se = math.sqrt(se1 ** 2 + se2 ** 2) / 2
    assert lo == pytest.approx(g * math.exp(-z * se))
    assert hi == pytest.approx(g * math.exp(z * se))
    assert all(math.isnan(x) for x in geometric_mean_ratio([]))


def test_geometric_mean_of_one_is_itself_on_log_scale():
    g, lo, hi = geometric_mean_ratio([_cmp(1.2, 1.1, 1.3)])
    assert g == pytest.approx(1.2)
    assert math.log(hi) - math.log(lo) == pytest.approx(math.log(1.3) - math.log(1.1))


# -- detectable effects -------------------------------------------------------------------------
def test_min_detectable_effect_formula():
    sigma = math.sqrt(math.log1p(0.05 ** 2))
    q4 = st.t.ppf(0.975, 6) + st.t.ppf(0.8, 6)
    assert min_detectable_effect(0.05, 4) == pytest.approx(math.expm1(q4 * sigma * math.sqrt(0.5)))
    q10 = st.t.ppf(0.975, 18) + st.t.ppf(0.8, 18)
    expect10 = math.expm1(q10 * sigma * math.sqrt(0.2) * math.sqrt(math.pi / 2))
    assert min_detectable_effect(0.05, 10) == pytest.approx(expect10)
    seq = [min_detectable_effect(0.05, n) for n in range(5, 40)]
    assert all(a > b for a, b in zip(seq, seq[1:]))
    assert min_detectable_effect(0.05, 1) == math.inf
    assert min_detectable_effect(0.0, 5) == 0.0
    assert min_detectable_effect(0.10, 10) > min_detectable_effect(0.05, 10)


def test_trials_needed_is_the_smallest_sufficient_n():
    n = trials_needed(0.05, 0.05)
    assert min_detectable_effect(0.05, n) <= 0.05 < min_detectable_effect(0.05, n - 1)
    assert trials_needed(0.001, 0.5) == 5          # never below a verdict's minimum
    assert trials_needed(0.5, 0.001, maximum=200) == 200
    with pytest.raises(ValueError):
        trials_needed(0.05, 0)


def test_min_detectable_effect_is_detected_about_80pct_of_the_time():
    n, cv = 10, 0.05
    mde = min_detectable_effect(cv, n)
    hits = sum(compare(noisy(1000, cv, n, 500 + s), noisy(1000 * (1 + mde), cv, n, 900 + s),
                       n_boot=2000).verdict == FASTER for s in range(60))
    assert 0.6 <= hits / 60 <= 0.97, hits


# -- steady state -------------------------------------------------------------------------------
def test_steady_state_drops_ramp_and_partial_last_second():
    flat = list(noisy(1000, 0.01, 30, 31))
    series = [100, 300, 600, 850] + flat + [400]
    start, end = steady_state(series)
    assert start == 4 and end == len(series) - 1


def test_steady_state_keeps_noisy_flat_series():
    series = list(noisy(1000, 0.10, 60, 32))
    start, end = steady_state(series)
    assert start <= 2 and end >= 59


def test_steady_state_never_drops_more_than_half():
    ramp = list(np.linspace(100, 1000, 40))
    start, end = steady_state(ramp)
    assert end == 40 and start == 20


def test_steady_state_short_and_bad_input():
    assert steady_state([1.0, 2.0]) == (0, 2)
    assert steady_state([]) == (0, 0)
    assert steady_state([1.0, float("nan"), 3.0, 4.0]) == (0, 4)


def test_is_steady():
    assert is_steady(noisy(1000, 0.01, 10, 41))
    assert not is_steady(np.linspace(800, 1000, 10))            # significant trend
    assert not is_steady(noisy(1000, 0.2, 10, 42), tolerance=0.05)  # too noisy
    assert not is_steady([1000.0] * 5)                          # too short
    assert is_steady([1000.0] * 10)
    assert is_steady(list(np.linspace(800, 1000, 30)) + list(noisy(1000, 0.01, 10, 43)))


# -- rQPS ---------------------------------------------------------------------------------------
def test_rqps_table():
    rows = rqps_table({"pg18-io_uring": {"l.i0": 110.0, "qr100": 97.0},
                       "pg17": {"l.i0": 100.0, "qr100": 100.0, "l.x": 0.0},
                       "pg18-sync": {"l.i0": 104.0, "qp100": 5.0}}, base="pg17")
    assert [r["variant"] for r in rows] == ["pg17", "pg18-io_uring", "pg18-sync"]
    assert list(rows[0]["rqps"]) == ["l.i0", "qr100", "l.x", "qp100"]
    assert rows[0]["rqps"]["l.i0"] == 1.0
    assert rows[1]["rqps"]["l.i0"] == pytest.approx(1.10)
    assert rows[1]["rqps"]["qr100"] == pytest.approx(0.97)
    assert rows[2]["rqps"]["qr100"] is None and rows[2]["qps"]["qp100"] == 5.0
    assert rows[2]["rqps"]["qp100"] is None       # base has no qp100
    assert rows[0]["rqps"]["l.x"] is None          # base QPS 0
    with pytest.raises(KeyError):
        rqps_table({"a": {}}, base="b")


def test_explain_is_one_line_and_names_method():
    c = compare(noisy(1000, 0.05, 5, 51), noisy(1000, 0.05, 5, 52))
    assert "\n" not in c.explain and c.method in c.explain and "CI" in c.explain
    assert stats.MIN_BOOTSTRAP_N == 5
