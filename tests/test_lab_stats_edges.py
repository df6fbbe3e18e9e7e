"""Descriptive statistics at their edges (pure, values worked out by hand in the comments):
the steady part of short series, the trend test inside a trial, drift across rounds and the
trial-count search.  Written after the mutation run (tools/mutation.sh) showed which edges no
test stood on."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pgaccel.decide.stats import (drift, is_steady, min_detectable_effect, steady_state,
                               summarize, trials_needed)


def test_summary_of_two_values_and_of_a_zero_mean():
    s = summarize([5.0, 7.0])
    assert s.stdev == pytest.approx(math.sqrt(2)) and s.cv == pytest.approx(math.sqrt(2) / 6)
    assert summarize([1.0, 1.0]).cv == 0.0             # mean 1: a CV of 0, not NaN
    assert math.isnan(summarize([-1.0, 1.0]).cv)       # mean 0: no CV


@pytest.mark.parametrize("series, span", [
    ([100, 100, 50], (0, 2)),                 # a partial last second is dropped, even of 3
    ([50, 100, 100], (0, 3)),                 # too short to trim a ramp: whole
    ([100, 100, 100, 95], (0, 4)),            # exactly 5% below the rest: kept
    ([50, 100, 100, 100], (1, 4)),            # 4 values: window 2, the slow first second goes
    ([50, 100, 100, 100, 100], (1, 5)),
    # the ramp ends at index 3, the last start the search tries before giving up at half
    ([10, 20, 30, 100, 100, 100, 100, 100], (3, 8)),
])
def test_steady_part_of_short_series(series, span):
    assert steady_state(series) == span


@pytest.mark.parametrize("series, steady", [
    # a ramp of 0.2889 a second: 0.2889 x 9 / 101.3 = 2.57% over the window >= 2.5%
    (list(100 + 0.2889 * np.arange(10)), False),
    # 0.267 a second: 2.37% < 2.5%, though the slope is certain (a perfect line)
    (list(100 + 0.267 * np.arange(10)), True),
    (list(100 + 0.01 * np.arange(10)), True),  # certain but tiny
    # noise with no trend (slope p = 0.25) whose fitted line moves 3%: not a trend
    ([103.8, 100.2, 100.4, 96.1, 99.3, 100.6, 96.2, 100.9, 101.1, 96.5], True),
    ([0.5] * 10, True),                         # flat, whatever the unit
    ([0.0] * 10, False),                        # nothing ran
])
def test_trend_inside_a_trial(series, steady):
    assert is_steady(series) is steady


def test_is_steady_needs_the_whole_window():
    assert is_steady([100.0, 100.0, 100.0], window=3)
    assert not is_steady([100.0, 100.0], window=3)


def test_drift_edges():
    assert drift([100.0, 100.0, 100.0], [0, 1, 2]) == \
        type(drift([100.0, 100.0, 100.0], [0, 1, 2]))(0.0, 0.0, 1.0, 3, False)
    d = drift([0.5, 0.55, 0.605], [0, 1, 2])            # values below 1 are fine
    assert d.per_round == pytest.approx(0.1) and d.total == pytest.approx(0.21)
    d = drift([100.0, 110.0, 121.0], [1, 2, 3])         # the span is 2 rounds, not 4
    assert d.total == pytest.approx(0.21) and d.rounds == 3


def test_trial_counts_on_their_grid():
    # the search tries 3, 4, ... 50, then steps of n // 20: 52, 54, 56, 58, 60, 63, 66, ...
    grid = list(range(2, 51))
    while grid[-1] < 10000:
        grid.append(grid[-1] + max(1, grid[-1] // 20))
    for cv, effect, power in [(0.1, 0.05, 0.8), (0.1, 0.05, 0.9), (0.2, 0.03, 0.8),
                              (0.3, 0.02, 0.8)]:
        first = next(n for n in range(2, 100000)
                     if min_detectable_effect(cv, n, 0.95, power) <= effect)
        want = next(g for g in grid if g >= max(first, 3))
        assert trials_needed(cv, effect, power=power) == want
    assert trials_needed(0.001, 0.5, minimum=2) == 2
    assert trials_needed(0.5, 0.001, maximum=10) == 10


# -- steady_state: the window of short series and the noise threshold --------------------
def test_steady_state_window_is_a_third_of_a_short_series():
    # 9 values: a window of 3, so the dip in the 4th second keeps the start out of the
    # first three windows (a window of 2 would start at index 1)
    assert steady_state([50, 100, 100, 82, 100, 100, 100, 100, 100]) == (4, 9)
    # 6 values: a window of 2, so one dip in the 3rd second is not a ramp (3 would trim 3)
    assert steady_state([100, 100, 82, 100, 100, 100]) == (0, 6)


CYCLE = [94, 100, 106] * 7          # median 100, robust sd 8.9%


def test_steady_state_first_second_against_twice_the_noise():
    # 2 robust sd = 17.8%: a first second 22% low is trimmed, 15% low is kept
    assert steady_state([78] + CYCLE) == (1, 22)
    assert steady_state([85] + CYCLE) == (0, 22)


def test_steady_state_window_mean_against_twice_the_noise_of_a_mean():
    # 2 sd / sqrt(5) = 8.0%: a first window 10% low is trimmed until its mean is within
    assert steady_state([90] * 5 + CYCLE) == (2, 26)
