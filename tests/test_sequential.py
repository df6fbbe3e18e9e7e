"""Looking after every round (decide/sequential.py): the per-look level that keeps the overall
false-positive rate where the user asked, checked by simulating whole experiments with
pgaccel's own comparison (drift and trial noise, a paired analysis), and the run's summary
and report saying which level they used and why."""

from __future__ import annotations

import numpy as np
import pytest

from pgaccel.decide.effect import FASTER, SLOWER
from pgaccel.lab.experiment import Experiment
from pgaccel.decide.results import Summary
from pgaccel.decide.sequential import look_level, look_levels, simulate_looks
from pgaccel.report.terminal import looks_note


def two_workloads(rounds: dict[str, int], seed: int):
    """Trials of base and tuned (+6%, 2% noise) over ``rounds[workload]`` rounds each, and
    the two workload specs (4 clients)."""
    from pgaccel.decide.model import Trial, WorkloadSpec
    from pgaccel.workloads.base import RunParams, get_workload
    rng = np.random.default_rng(seed)
    trials = [Trial(v, wl, r, 4, 0.0, 1000 * f * np.exp(rng.normal(0, 0.02)), "tps", {})
              for wl, n in rounds.items() for r in range(n)
              for v, f in (("base", 1.0), ("tuned", 1.06))]
    return trials, [WorkloadSpec(get_workload(n), RunParams(clients=4), n) for n in rounds]


def test_one_look_keeps_the_level_asked_for():
    assert look_levels(0.95, 3, 3) == (0.95,)
    assert look_levels(0.95, 5, 4) == (0.95,)
    assert look_level(0.95, 5, 4, 7) == 0.95


def test_early_looks_are_strict_and_the_last_spends_what_is_left():
    levels = look_levels(0.95, 3, 10)
    assert len(levels) == 8                                    # rounds 3..10
    assert 0.995 < levels[0] < 0.997                           # 99.6% after 3 rounds
    assert 0.973 < levels[-1] < 0.976                          # 97.4% after 10
    assert list(levels[2:]) == sorted(levels[2:], reverse=True)
    # the constant (Pocock) level that rule replaced was 98.8% at every look: now the
    # looks after 8-10 rounds, where a 5-8% difference gets decided, are less strict
    assert all(x < 0.988 for x in levels[-3:])
    assert look_level(0.95, 3, 10, 2) == levels[0] and look_level(0.95, 3, 10, 12) == levels[-1]
    assert look_level(0.95, 3, 10, 7) == levels[4]
    assert look_levels(0.99, 3, 10)[-1] > levels[-1]           # a stricter ask, stricter looks
    assert look_levels(0.95, 3, 20)[7] > levels[-1]            # 10 of 20 rounds: less spent


@pytest.mark.slow      # 1,200 simulated experiments, about a minute
def test_false_positives_of_looking_after_every_round():
    rng = np.random.default_rng(1)
    n = 500
    naive = sum(simulate_looks(rng, lambda k: 0.95) in (FASTER, SLOWER) for _ in range(n)) / n
    spent = sum(simulate_looks(rng, lambda k: look_level(0.95, 3, 10, k)) in (FASTER, SLOWER)
                for _ in range(n)) / n
    assert naive > 0.12                   # 17.7% in 2,000 such experiments
    assert 0.02 <= spent <= 0.08          # 5% within the binomial spread of 500
    found = [simulate_looks(rng, lambda k: look_level(0.95, 3, 10, k), effect=0.9)
             for _ in range(200)]
    assert found.count(SLOWER) >= 0.85 * len(found) and FASTER not in found


def test_the_run_judges_at_the_look_level_and_says_why():
    e = Experiment(ctx=None, variants=[], workloads=[], rounds=3, max_rounds=10,
                   until_decided=True)
    assert e.looks and e.level_after(4) == look_level(0.95, 3, 10, 4)
    assert e.level_after(10) < e.level_after(4)
    fixed = Experiment(ctx=None, variants=[], workloads=[], rounds=3, max_rounds=10)
    assert not fixed.looks and fixed.looks_policy.judged == 0.95 and fixed.level_after(4) == 0.95
    s = Summary("base", confidence=e.level_after(10), nominal_confidence=0.95, looks=[3, 10])
    again = Summary.from_dict(s.to_dict())
    assert (again.nominal_confidence, again.looks) == (0.95, [3, 10])
    note = looks_note(again)
    assert note.startswith("Intervals are at 97.4%, not 95%: the run looked after every "
                           "round from 3 to 10") and "share the 5% chance" in note
    assert looks_note(Summary("base")) is None
    assert "nominal_confidence" not in Summary("base").to_dict()


def test_each_measure_is_judged_at_its_own_last_look():
    """Two workloads of one run stopped after different rounds: each comparison carries
    the level of its own last look, the note names both, the summary the deeper one."""
    from pgaccel.decide import judge
    trials, specs = two_workloads({"select-only": 4, "tpcb-like": 10}, seed=3)
    e = Experiment(ctx=None, variants=[], workloads=[], rounds=3, max_rounds=10,
                   until_decided=True)
    s = judge.summarize(trials, "base", ["base", "tuned"], specs, confidence=e.level_after)
    lv = {w.workload: w.comparisons["tuned"].confidence for w in s.workloads}
    assert lv == {"select-only": e.level_after(4), "tpcb-like": e.level_after(10)}
    assert s.confidence == e.level_after(10)
    s = Summary(**{**s.__dict__, "nominal_confidence": 0.95, "looks": [3, 10]})
    note = looks_note(s)
    assert "select-only: 99.5% after 4 rounds; tpcb-like: 97.4% after 10 rounds" in note


def test_each_workload_is_judged_by_the_looks_up_to_its_own_last():
    """The last look of each workload is fixed from the time its share of the budget left
    (schedule.last_look): the levels of its looks follow from it, the summary carries
    each, and the note says how far each workload could look."""
    from pgaccel.decide.model import Variant
    trials, specs = two_workloads({"select-only": 4, "tpcb-like": 12}, seed=5)
    e = Experiment(ctx=None, variants=[Variant("base", {}), Variant("tuned", {})],
                   workloads=specs, rounds=3, max_rounds=20, until_decided=True,
                   trials=trials, last_looks={"select-only c=4": 10, "tpcb-like c=4": 15})
    assert e.level_after(12, "tpcb-like c=4") == look_level(0.95, 3, 15, 12)
    assert e.level_after(4, "select-only c=4") == look_level(0.95, 3, 10, 4)
    assert e.level_after(4, "other c=4") == look_level(0.95, 3, 20, 4)    # not fixed yet
    s = Summary.from_dict(e.summary().to_dict())
    lv = {w.workload: w.comparisons["tuned"].confidence for w in s.workloads}
    assert lv == {"select-only": look_level(0.95, 3, 10, 4),
                  "tpcb-like": look_level(0.95, 3, 15, 12)}
    assert s.looks == [3, 15] and s.last_looks == {"select-only c=4": 10, "tpcb-like c=4": 15}
    assert s.confidence == lv["tpcb-like"]
    note = looks_note(s)
    assert "after every round from 3 to the last its share of the budget reached " \
           "(select-only: 10, tpcb-like: 15)" in note


def test_a_last_look_is_fixed_once_and_before_the_first_look():
    from pgaccel.decide.looks import Looks
    lp = Looks(0.95, first=3, cap=20, until_decided=True)
    assert lp.fix("w", left_s=260.0, round_s=17.0, rounds_done=1) == 16
    assert lp.fix("w", left_s=900.0, round_s=17.0, rounds_done=2) is None    # fixed once
    assert lp.last_of("w") == 16 and lp.from_budget("w") and lp.last_of("v") == 20
    assert lp.fix("late", left_s=260.0, round_s=17.0, rounds_done=4) is None  # looked already
    assert lp.fix("big", left_s=9000.0, round_s=17.0, rounds_done=1) == 20
    assert not lp.from_budget("big")                 # the cap, not the budget
    # `bench` and fixed-round labs have no cap: nothing is the budget's (a None cap once
    # made every bench fail with a TypeError before this was a method)
    assert not Looks(0.95, first=3, cap=None).from_budget("w")
    assert Looks(0.95, first=3, cap=None).last_of("w") is None
    off = Looks(0.95, first=3, cap=10, until_decided=False)
    assert off.fix("w", 260.0, 17.0, 1) is None and off.summary_fields(["w"]) == {}
    assert off.level_after(5, "w") == 0.95 and off.level_of("w") == 0.95
    assert lp.summary_fields(["w", "v"]) == {
        "nominal_confidence": 0.95, "looks": [3, 20], "last_looks": {"w": 16, "v": 20},
        "planned_last_looks": {}}


def test_looks_the_budget_ends_early_spend_what_is_left_at_the_end():
    """The rounds ran slower than the pace the last look (16) was fixed from, and the
    budget has no room after round 15: the looks before keep their levels, round 15's
    spends the rest of the 5% (a looser level than planned for it), and nothing else
    changes."""
    from pgaccel.decide.looks import Looks
    planned, ended = look_levels(0.95, 3, 16), look_levels(0.95, 3, 16, end=15)
    assert len(ended) == 13 and ended[:-1] == planned[:12]
    assert ended[-1] < planned[12]                   # looser than the planned round 15
    assert ended[-1] < planned[-1]                   # it spends the shares of 15 and 16
    assert look_levels(0.95, 3, 16, end=16) == planned == look_levels(0.95, 3, 16, end=20)
    assert look_level(0.95, 3, 16, 15, end=15) == ended[-1]
    assert look_level(0.95, 3, 16, 20, end=15) == ended[-1]
    lp = Looks(0.95, first=3, cap=20, until_decided=True, last={"w": 16})
    assert not lp.end("w", 2)                        # before the first look: no verdict yet
    assert not lp.end("w", 16) and not lp.end("v", 20)   # at the last look already
    assert lp.end("w", 15) and not lp.end("w", 15)   # once
    assert lp.level_after(15, "w") == ended[-1] and lp.level_after(9, "w") == planned[6]
    fields = lp.summary_fields(["w", "v"])
    assert fields["last_looks"] == {"w": 15, "v": 20}
    assert fields["planned_last_looks"] == {"w": 16}
    assert not Looks(0.95, first=3, cap=20, until_decided=False).end("w", 5)
    # a resumed run gets back the planned last look and the ended one, so its looks are
    # judged at the same levels (read back through the Summary's JSON, as run.json is)
    from pgaccel.decide.results import Summary
    stored = Summary(base="b", **fields).to_dict()
    last, ended_back = Looks.restore(stored)
    assert last == {"w": 16, "v": 20} and ended_back == {"w": 15}
    again = Looks(0.95, first=3, cap=20, until_decided=True, last=last, ended=ended_back)
    assert again.level_after(15, "w") == ended[-1] and again.level_after(9, "w") == planned[6]
    # runs stored before planned_last_looks existed: their last looks as they were
    assert Looks.restore({"last_looks": {"w": 12}}) == ({"w": 12}, {})
    assert Looks.restore(None) == ({}, {})


@pytest.mark.slow      # 2,000 simulated experiments, about a minute
def test_looks_ended_by_the_budget_keep_the_error_asked_for():
    """A/A experiments planned to look up to round 16 and stopped by the budget after 12:
    with the last look spending what is left, 'faster' or 'slower' comes out about as often
    as asked (5%); judged at the planned levels, less often (the error left unspent)."""
    rng = np.random.default_rng(7)
    n = 1000
    ended = sum(simulate_looks(rng, lambda k: look_level(0.95, 3, 16, k, end=12), last=12)
                in (FASTER, SLOWER) for _ in range(n)) / n
    planned = sum(simulate_looks(rng, lambda k: look_level(0.95, 3, 16, k), last=12)
                  in (FASTER, SLOWER) for _ in range(n)) / n
    assert 0.032 <= ended <= 0.07                    # 5% within the spread of 1,000
    assert planned < ended
