"""Trials of one measure in two states (decide/states.py), as l.i2's were in A/A labs here,
and what a measure says of them."""

from __future__ import annotations

import pytest

from pgaccel.decide.results import WorkloadResult
from pgaccel.decide.states import StateSplit, buffer_accesses_per_op, split_states
from pgaccel.report.terminal import state_warnings, states_line

# l.i2, buffer accesses per insert, run 20261126-230736-be6c (A/A, 3 rounds)
BE6C = {("A", 0): 24.3, ("A2", 0): 21.7, ("A2", 1): 74.3, ("A", 1): 75.6,
        ("A2", 2): 17.1, ("A", 2): 79.2}


@pytest.mark.parametrize("per_trial, want", [
    (BE6C, ((17.1, 24.3, 3), (74.3, 79.2, 3), {2: {"A": "heavy", "A2": "light"}})),
    # l.i1 of the same run: 16-19 in every trial, one state
    ({("A", r): 16.2 + r for r in range(3)} | {("B", r): 18.0 + r / 3 for r in range(3)},
     None),
    # both of every round in one state: a split, and no round mixed
    ({("A", 0): 20, ("B", 0): 22, ("A", 1): 70, ("B", 1): 72}, ((20, 22, 2), (70, 72, 2), {})),
    # each config always in its own group: the configs differ in their work, not a state
    ({("A", r): 20.0 + r for r in range(3)} | {("B", r): 60.0 + r for r in range(3)}, None),
    # a gap of 1.4x is not two states; 1.5x is
    ({("A", 0): 10, ("B", 0): 10, ("A", 1): 14, ("B", 1): 14}, None),
    ({("A", 0): 10, ("B", 0): 10, ("A", 1): 15, ("B", 1): 15}, ((10, 10, 2), (15, 15, 2), {})),
    # too few trials with a value to say anything
    ({("A", 0): 10, ("B", 0): 40, ("A", 1): None}, None),
])
def test_split_states(per_trial, want):
    got = split_states(per_trial)
    if want is None:
        assert got is None
    else:
        assert (got.light, got.heavy, got.mixed) == want


def test_buffer_accesses_per_op_from_a_trials_pg_counters():
    m = {"ops": 40_000, "pg": {"db_blks_hit": 3_000_000, "db_blks_read": 800}}
    assert buffer_accesses_per_op(m) == pytest.approx(75.02)
    assert buffer_accesses_per_op({"ops": 0, "pg": {"db_blks_hit": 5, "db_blks_read": 0}}) \
        is None
    assert buffer_accesses_per_op({"ops": 10, "pg": {}}) is None


def test_a_measure_in_two_states_says_so_and_keeps_it_through_json():
    split = split_states(BE6C)
    assert states_line(split) == (
        "The trials ran in two states: 17–24 buffer accesses per operation in 3 of 6, 74–79 "
        "in 3: the state the data was left in (what autovacuum and autoanalyze had done, say) "
        "can move the rate more than the configs do; round 3 paired trials in different "
        "states (A heavy, A2 light).")
    w = WorkloadResult("insert-benchmark/l.i2", "insert-benchmark", "insert-benchmark",
                       "l.i2", 2, "inserts/s", states=split)
    back = WorkloadResult.from_dict(w.to_dict())
    assert back.states == split
    assert states_line(split) in state_warnings(back)
    same = StateSplit((20, 22, 2), (70, 72, 2))
    assert states_line(same).endswith("every round's trials were in one state, so the pairs "
                                      "compare like with like.")
    assert WorkloadResult.from_dict({**w.to_dict(), "states": None}).states is None
