"""Every verdict, ratio and interval a lab run prints, recomputed from the trials in its
run.json with SciPy's own t tests (not pgaccel's code), on a real run at the default
confidence and minimum effect with a planted slowdown of realistic size: every statement
logged (``log_statement = all``) against the defaults, on select-only.  The run was recorded
by pgaccel (tests/fixtures/verdict/record.py: 78 s of a live lab run, which the test paid
every time before); today's code judges its trials again, so a change to the judging is
checked without a server."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pytest
from scipy import stats

from pgaccel.decide.model import Trial, Variant
from pgaccel.lab.experiment import Experiment
from pgaccel.session.labservers import lab_request
from pgaccel.session.request import ServerRequest
from pgaccel.specs.parse import load_spec

RECORDED = Path(__file__).resolve().parent / "fixtures" / "verdict"


@pytest.fixture(scope="module")
def run_doc():
    """The lab run tests/fixtures/verdict/record.py recorded with ``pgaccel lab`` (its
    spec.toml beside it), as pgaccel wrote it."""
    return json.loads((RECORDED / "run.json").read_text())


def rejudged(doc) -> dict:
    """The recorded trials judged again by today's code, as the lab judges them at its end:
    the runner's Experiment, built from the spec's protocol, variants and workloads
    (session.labservers.lab_request), summarising the trials it would have measured."""
    spec = load_spec(str(RECORDED / "spec.toml"))
    req = lab_request(spec, ServerRequest())
    p = req.protocol
    exp = Experiment(None, [Variant(v.name, dict(v.settings)) for v in spec.variants],
                     list(req.workloads), rounds=p.rounds, order=p.order, seed=p.seed,
                     min_effect=p.min_effect, confidence=p.confidence,
                     max_rounds=p.max_rounds, budget_s=p.budget_s,
                     target_ci_width=p.target_ci_width, until_decided=p.until_decided,
                     trials=[Trial.from_dict(t) for t in doc["trials"]])
    return exp.summary().to_dict()


def _by_round(doc, variant, workload, clients):
    out = defaultdict(list)
    for t in doc["trials"]:
        if (t["variant"], t["workload"], t["clients"]) == (variant, workload, clients) \
                and t["throughput"] > 0:
            out[t["round"]].append(t["throughput"])
    # a round with several trials of a config counts as their geometric mean
    return {r: math.exp(sum(map(math.log, v)) / len(v)) for r, v in out.items()}


def _check_against_scipy(doc, s) -> int:
    """Each comparison of summary ``s`` against SciPy's paired t test on the logs of the
    trials of ``doc``; returns how many were checked."""
    conf, m = s["confidence"], s["min_effect"]
    checked = 0
    for w in s["workloads"]:
        base = _by_round(doc, s["base"], w["workload"], w["clients"])
        for name, c in w["comparisons"].items():
            other = _by_round(doc, name, w["workload"], w["clients"])
            rounds = sorted(set(base) & set(other))
            assert c["method"] == "paired-log-t" and c["n_pairs"] == len(rounds)
            lo_b = [math.log(base[r]) for r in rounds]
            lo_o = [math.log(other[r]) for r in rounds]
            res = stats.ttest_rel(lo_o, lo_b)
            ci = res.confidence_interval(conf)
            diff = sum(o - b for o, b in zip(lo_o, lo_b)) / len(rounds)
            assert c["ratio"] == pytest.approx(math.exp(diff), rel=1e-9)
            assert c["ci_low"] == pytest.approx(math.exp(ci.low), rel=1e-9)
            assert c["ci_high"] == pytest.approx(math.exp(ci.high), rel=1e-9)
            assert c["p_value"] == pytest.approx(res.pvalue, rel=1e-6)
            # the verdict follows from the interval and the margin
            if c["verdict"] == "slower":
                assert c["ci_high"] < 1 and c["ratio"] <= 1 - m
            if c["verdict"] == "faster":
                assert c["ci_low"] > 1 and c["ratio"] >= 1 + m
            if c["ci_low"] <= 1 <= c["ci_high"]:
                assert c["verdict"] in ("not enough evidence", "equivalent")
            checked += 1
    return checked


def test_printed_intervals_are_scipys_t_intervals_on_the_trials(run_doc):
    """The ratio, interval, p-value and verdict the recorded run printed for each comparison
    are SciPy's paired t test on the logs of its trials; so are today's, when the lab's own
    code judges those trials again."""
    s = run_doc["summary"]
    assert (s["confidence"], s["min_effect"]) == (0.95, 0.02)       # the defaults
    assert _check_against_scipy(run_doc, s) == 1
    again = rejudged(run_doc)
    assert (again["confidence"], again["min_effect"]) == (0.95, 0.02)
    assert _check_against_scipy(run_doc, again) == 1
    # the same trials, the same verdict and numbers as the run printed
    [w0], [w1] = s["workloads"], again["workloads"]
    c0, c1 = w0["comparisons"]["log-everything"], w1["comparisons"]["log-everything"]
    assert c1["verdict"] == c0["verdict"] and c1["explain"] == c0["explain"]


def test_a_recorded_run_is_a_real_lab_run_of_its_spec(run_doc):
    """What the recorded run holds is what its spec asks for, so the recomputation above is
    of a real run: 2 variants paired by round, 4 to 10 rounds, the select-only trials
    4 s long after 2-s warm-ups at 2 clients, each round's pair measured in the order the
    lab's counterbalancing gives."""
    ts = run_doc["trials"]
    rounds = {t["round"] for t in ts}
    assert 4 <= len(rounds) <= 10 and len(ts) == 2 * len(rounds)
    assert {(t["variant"], t["workload"], t["clients"]) for t in ts} == {
        ("defaults", "select-only", 2), ("log-everything", "select-only", 2)}
    # 2-s warm-ups, then 4 s measured in quarter-second slices
    assert all(abs(t["warmup_s"] - 2) < 0.2 and 14 <= len(t["series"]) <= 18 for t in ts)
    assert run_doc["order"] == "abba"


def test_a_planted_slowdown_is_found_at_the_defaults(run_doc):
    """Logging every statement costs more than 10% on select-only: the recorded run, and
    today's code judging its trials, both say slower at the default confidence and margin.
    (A live planted slowdown is tests/test_lab_experiment.py's test_aa_pair_and_planted_slowdown.)"""
    for s in (run_doc["summary"], rejudged(run_doc)):
        [w] = s["workloads"]
        c = w["comparisons"]["log-everything"]
        assert c["verdict"] == "slower", c["explain"]
        assert c["ratio"] < 0.9
