"""What the progress line says about a trial (cli/progress.py), table-tested."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pgaccel.cli.progress import trial_label


def exp(until_decided=True, max_rounds=10):
    # trial_label reads only these attributes of an Experiment
    return SimpleNamespace(workloads=["select-only", "tpcb-like"], variants=["a", "b"],
                           rounds=3, max_rounds=max_rounds, until_decided=until_decided,
                           # as a run fixes it: tpcb-like's budget reached round 15; none
                           # is fixed without a cap
                           last_look_of=lambda label: ({"tpcb-like": 15} if max_rounds else {}
                                                       ).get(label, max_rounds))


@pytest.mark.parametrize("e,n,rnd,expected", [
    (exp(), 1, 0, "trial 1/12 tpcb-like tuned"),
    (exp(), 12, 2, "trial 12/12 tpcb-like tuned"),
    (exp(), 15, 7, "trial 15 tpcb-like tuned (round 8, added until decided, at most 15)"),
    (exp(until_decided=False, max_rounds=None), 13, 3,
     "trial 13 tpcb-like tuned (round 4, added for a narrower interval)"),
])
def test_rounds_past_the_minimum_are_named_as_added(e, n, rnd, expected):
    assert trial_label(e, n, "tpcb-like", "tuned", rnd) == expected
