"""The verdict rule and the comparison at their edges (pure, known values): an interval that
touches a bound, an effect exactly at the margin, identical pairs, invalid values, and the
words of the explanation.  Written after the mutation run (tools/mutation.sh) showed which
edges no test stood on."""

from __future__ import annotations

import math

import pytest

from pgaccel.decide.effect import (EQUIVALENT, FASTER, NOT_ENOUGH, SLOWER, compare, decide,
                                paired_interval, welch_interval)

import numpy as np


@pytest.mark.parametrize("ratio, lo, hi, min_effect, verdict, why", [
    # the interval exactly on the band's ends is inside it
    (1.0, 1 / 1.05, 1.05, 0.05, EQUIVALENT, "within ±5%"),
    # an interval starting exactly at 1 includes no change
    (1.1, 1.0, 1.2, 0.05, NOT_ENOUGH, "includes no change"),
    (0.9, 0.8, 1.0, 0.05, NOT_ENOUGH, "includes no change"),
    (1.1, 0.95, 1.3, 0.05, NOT_ENOUGH, "includes no change"),
    # an effect exactly at the margin decides (1.25 - 1 is exact in binary)
    (1.25, 1.1, 1.4, 0.25, FASTER, ""),
    (1 / 1.25, 1 / 1.4, 1 / 1.1, 0.25, SLOWER, ""),
    # a real slowdown smaller than the margin, the interval reaching past it
    (0.99, 0.9, 0.995, 0.05, NOT_ENOUGH, "a real change of -1.0%"),
    (1.01, 1.005, 1.1, 0.05, NOT_ENOUGH, "a real change of +1.0%"),
])
def test_decide_at_the_edges(ratio, lo, hi, min_effect, verdict, why):
    got, text = decide(ratio, lo, hi, True, min_effect)
    assert got == verdict and why in text
    if verdict in (FASTER, SLOWER):        # lower is better: the same interval, other word
        flipped = decide(ratio, lo, hi, False, min_effect)[0]
        assert flipped == (SLOWER if verdict == FASTER else FASTER)


@pytest.mark.parametrize("diffs, p", [([0.5, 0.5, 0.5], 0.0), ([0.0, 0.0, 0.0], 1.0)])
def test_identical_pairs_give_a_zero_width_interval(diffs, p):
    iv = paired_interval(diffs, 0.95)
    assert (iv.d, iv.h, iv.p, iv.sd, iv.n, iv.paired) == (pytest.approx(diffs[0]), 0.0, p,
                                                         0.0, 3, True)
    w = welch_interval(np.array([100.0, 100.0]), np.array([100.0, 100.0]) * math.exp(diffs[0]),
                       0.95)
    assert (w.h, w.p, w.paired) == (0.0, p, False)


@pytest.mark.parametrize("base, other, ratio, problem", [
    ([100.0], [110.0], 1.1, "base has 1 value(s)"),
    ([0.5], [2.0], 4.0, "base has 1 value(s)"),             # values below 1 are fine
    ([2.0, 2.0], [0.5], 0.25, "other has 1 value(s)"),
    ([100.0, 0.0], [100.0, 110.0], None, "base has 1 value(s) <= 0"),
    ([0.0], [1.0], None, "base has 1 value(s)"),
    ([math.inf, 1.0], [1.0, 2.0], None, "base contains an infinite value"),
    ([1.0, 2.0], [math.nan, 1.0], None, "other contains NaN"),
    ([], [1.0, 2.0], None, "base has 0 value(s)"),
])
def test_invalid_input_never_raises_and_says_why(base, other, ratio, problem):
    c = compare(base, other, higher_is_better=False, min_effect=0.07, confidence=0.9)
    assert (c.method, c.verdict) == ("none", NOT_ENOUGH)
    assert math.isnan(c.ci_low) and math.isnan(c.ci_high) and math.isnan(c.p_value)
    assert c.explain == f"not enough evidence: {problem}" + c.explain[
        len(f"not enough evidence: {problem}"):]
    assert (c.n_base, c.n_other, c.higher_is_better, c.min_effect, c.confidence) == \
        (len(base), len(other), False, 0.07, 0.9)
    if ratio is None:
        assert math.isnan(c.ratio)
    else:
        assert c.ratio == pytest.approx(ratio)


def test_rounds_of_one_side_only_is_not_a_pairing():
    c = compare([100.0, 101.0, 99.0], [105.0, 104.0, 106.0], base_rounds=[0, 1, 2])
    assert c.method == "welch-log-t" and c.n_pairs == 0 and "n=3 vs 3" in c.explain


def test_undecided_explains_and_counts_the_rounds_to_go():
    # three paired rounds, +7.4% (-0.8 .. +16.2): one more round would probably decide
    b, o = [106.4, 92.5, 92.4], [113.3, 102.9, 96.6]
    c = compare(b, o, base_rounds=[0, 1, 2], other_rounds=[0, 1, 2])
    assert c.verdict == NOT_ENOUGH and c.more_rounds == 1 and c.n_pairs == 3
    assert c.explain.startswith("not enough evidence: +7.4% (95% CI -0.8% .. +16.2%; "
                                "paired-log-t, 3 paired rounds, p=0.0607)")
    assert c.explain.endswith("; the interval includes no change and reaches past ±2%; "
                              "about 1 more round would probably decide")
    # +1.3% with rounds 4% apart: hundreds more rounds would be needed, which is "would
    # probably not decide", with the number kept for who wants it
    far = compare([100.0] * 4, [107.0, 95.0, 104.5, 99.3], base_rounds=[0, 1, 2, 3],
                  other_rounds=[0, 1, 2, 3])
    assert far.verdict == NOT_ENOUGH and far.more_rounds == 533
    assert far.explain.endswith("; more rounds would probably not decide (it would take about "
                                "533: the difference is small against the noise)")
    lower = compare(b, o, base_rounds=[0, 1, 2], other_rounds=[0, 1, 2],
                    higher_is_better=False)
    assert lower.explain.startswith("not enough evidence: +7.4% (lower is better) (95% CI")


def test_the_explanation_names_the_level_as_the_table_does():
    b, o = [106.4, 92.5, 92.4], [113.3, 102.9, 96.6]
    c = compare(b, o, base_rounds=[0, 1, 2], other_rounds=[0, 1, 2], confidence=0.9876)
    assert "(98.8% CI " in c.explain
