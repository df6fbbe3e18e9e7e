"""The intervals pgaccel prints, checked against references that do not share its code:
SciPy's own t-test confidence intervals (Welch and paired) on the log values, and coverage
simulations: with a known true ratio, the 95% interval must contain it about 95% of the time,
for each interval at the sample sizes pgaccel uses (3-10 rounds)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from pgaccel.decide.effect import compare, paired_interval, welch_interval

BASE = [52010.0, 49877.0, 53120.0, 50550.0, 51990.0, 48760.0]
OTHER = [55210.0, 53004.0, 56980.0, 52870.0, 55430.0, 53110.0]


@pytest.mark.parametrize("confidence", [0.90, 0.95, 0.99])
def test_welch_interval_is_scipys(confidence):
    c = compare(BASE, OTHER[:5], confidence=confidence)          # unpaired
    ref = st.ttest_ind(np.log(OTHER[:5]), np.log(BASE), equal_var=False)
    lo, hi = ref.confidence_interval(confidence)
    assert c.method == "welch-log-t"
    assert (c.ci_low, c.ci_high) == pytest.approx((math.exp(lo), math.exp(hi)), rel=1e-9)
    assert c.p_value == pytest.approx(ref.pvalue, rel=1e-9)


@pytest.mark.parametrize("confidence", [0.90, 0.95, 0.99])
def test_paired_interval_is_scipys(confidence):
    rounds = list(range(len(BASE)))
    c = compare(BASE, OTHER, confidence=confidence, base_rounds=rounds, other_rounds=rounds)
    ref = st.ttest_rel(np.log(OTHER), np.log(BASE))
    lo, hi = ref.confidence_interval(confidence)
    assert c.method == "paired-log-t" and c.n_pairs == len(BASE)
    assert (c.ci_low, c.ci_high) == pytest.approx((math.exp(lo), math.exp(hi)), rel=1e-9)
    assert c.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    # the printed effect is the centre of the printed interval (on the log scale)
    assert math.log(c.ratio) == pytest.approx((lo + hi) / 2, rel=1e-9)


@pytest.mark.parametrize("paired", [False, True])
@pytest.mark.parametrize("n", [3, 5, 10])
def test_coverage_of_the_95_interval(paired, n):
    """Trials with 8% lognormal noise and a true ratio of 1.05; a round effect (drift shared
    by both configs of a round, 10%) that the paired interval must absorb.  The interval
    functions are the ones `compare` uses (the SciPy tests above pin that)."""
    rng = np.random.default_rng(20261123 + n + 100 * paired)
    true, sims, hits = 1.05, 2000, 0
    for _ in range(sims):
        drift = rng.normal(0, 0.10, n) if paired else np.zeros(n)
        base = np.exp(10 + drift + rng.normal(0, 0.08, n))
        other = np.exp(10 + math.log(true) + drift + rng.normal(0, 0.08, n))
        iv = (paired_interval(np.log(other) - np.log(base), 0.95) if paired
              else welch_interval(base, other, 0.95))
        hits += iv.d - iv.h <= math.log(true) <= iv.d + iv.h
    coverage = hits / sims
    # binomial sd at 2,000 draws is 0.005: 0.93-0.97 is 4 sd either side
    assert 0.93 <= coverage <= 0.97, coverage
