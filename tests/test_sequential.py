"""Looking after every round (lab/sequential.py): the per-look level that keeps the overall
false-positive rate where the user asked, checked by simulating whole experiments with
pgaccel's own comparison (drift and trial noise, a paired analysis), and the run's summary
and report saying which level they used and why."""

from __future__ import annotations

import numpy as np
import pytest

from pgaccel.lab.effect import FASTER, NOT_ENOUGH, SLOWER, compare
from pgaccel.lab.experiment import Experiment
from pgaccel.lab.results import Summary
from pgaccel.lab.sequential import look_confidence
from pgaccel.report.terminal import looks_note


def test_one_look_keeps_the_level_asked_for():
    assert look_confidence(0.95, 3, 3) == 0.95
    assert look_confidence(0.95, 5, 4) == 0.95


def test_more_looks_need_a_stricter_level():
    levels = [look_confidence(0.95, 3, last) for last in (4, 6, 10, 20)]
    assert levels == sorted(levels) and levels[0] > 0.95
    assert 0.985 < look_confidence(0.95, 3, 10) < 0.990       # 98.8% for run --quick
    assert look_confidence(0.99, 3, 10) > look_confidence(0.95, 3, 10)
    assert look_confidence(0.95, 5, 12) < look_confidence(0.95, 3, 12)   # fewer looks


def _sequential(rng, confidence, effect=1.0, first=3, last=10):
    """One experiment: a round's two trials share the host's state (10% drift between
    rounds), each has 5% noise of its own; stop at the first decisive look."""
    b, o, r = [], [], []
    for k in range(last):
        level = np.exp(rng.normal(0, 0.10))
        b.append(100 * level * np.exp(rng.normal(0, 0.05)))
        o.append(100 * effect * level * np.exp(rng.normal(0, 0.05)))
        r.append(k)
        if k + 1 >= first:
            c = compare(b, o, base_rounds=r, other_rounds=r, confidence=confidence)
            if c.verdict != NOT_ENOUGH:
                break
    return c.verdict


@pytest.mark.slow      # 1,200 simulated experiments, about a minute
def test_false_positives_of_looking_after_every_round():
    rng = np.random.default_rng(1)
    n = 500
    naive = sum(_sequential(rng, 0.95) in (FASTER, SLOWER) for _ in range(n)) / n
    level = look_confidence(0.95, 3, 10)
    fixed = sum(_sequential(rng, level) in (FASTER, SLOWER) for _ in range(n)) / n
    assert naive > 0.12                   # 17.7% in 2,000 such experiments
    assert 0.02 <= fixed <= 0.08          # 5% within the binomial spread of 500
    found = [_sequential(rng, level, effect=0.9) for _ in range(200)]
    assert found.count(SLOWER) >= 0.85 * len(found) and FASTER not in found


def test_the_run_judges_at_the_look_level_and_says_why():
    e = Experiment(ctx=None, variants=[], workloads=[], rounds=3, max_rounds=10,
                   until_decided=True)
    assert e.judged_confidence == look_confidence(0.95, 3, 10)
    fixed = Experiment(ctx=None, variants=[], workloads=[], rounds=3, max_rounds=10)
    assert fixed.judged_confidence == 0.95
    s = Summary("base", confidence=e.judged_confidence, nominal_confidence=0.95,
                looks=[3, 10])
    again = Summary.from_dict(s.to_dict())
    assert (again.nominal_confidence, again.looks) == (0.95, [3, 10])
    note = looks_note(again)
    assert note.startswith("Intervals are at 98.8%, not 95%: the run looked after every "
                           "round from 3 to 10") and note.endswith("at 5%.")
    assert looks_note(Summary("base")) is None
    assert "nominal_confidence" not in Summary("base").to_dict()
