"""Every verdict, ratio and interval a lab run prints, recomputed from the trials in its
run.json with SciPy's own t tests (not pgaccel's code), on a real run at the default
confidence and minimum effect with a planted slowdown of realistic size: every statement
logged (``log_statement = all``) against the defaults, on select-only."""

from __future__ import annotations

import json
import math
from collections import defaultdict

import pytest
from scipy import stats

from helpers import pgaccel

SPEC = """\
name = "planted-slowdown"
[run]
rounds = 4
max_rounds = 10
target_ci_width = 0.25             # more rounds until the interval is this narrow
duration = 4
warmup = 2

[[variant]]
name = "defaults"

[[variant]]
name = "log-everything"
settings = { log_statement = "all", log_min_duration_statement = 0 }

[[workload]]
name = "select-only"
scale = 2
clients = 2
"""


@pytest.fixture(scope="module")
def run_doc(tmp_path_factory):
    d = tmp_path_factory.mktemp("verdict")
    (d / "spec.toml").write_text(SPEC)
    r = pgaccel("lab", str(d / "spec.toml"), "--out", str(d / "out"),
                env={"PGACCEL_STORE": str(d / "store.sqlite")}, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads((d / "out" / "run.json").read_text())


def _by_round(doc, variant, workload, clients):
    out = defaultdict(list)
    for t in doc["trials"]:
        if (t["variant"], t["workload"], t["clients"]) == (variant, workload, clients) \
                and t["throughput"] > 0:
            out[t["round"]].append(t["throughput"])
    # a round with several trials of a config counts as their geometric mean
    return {r: math.exp(sum(map(math.log, v)) / len(v)) for r, v in out.items()}


def test_printed_intervals_are_scipys_t_intervals_on_the_trials(run_doc):
    """The ratio, interval, p-value and verdict printed for each comparison are SciPy's paired t
    test on the logs of the run's trials.  It takes long (about 77 s on a 2-core VM: as the
    module's first test it pays for the module-scoped run_doc fixture, a real lab run of 2
    variants x 4 to 10 rounds of 4-s select-only trials after 2-s warm-ups, rounds added until
    the interval is 0.25 wide, plus the scale-2 data load)."""
    s = run_doc["summary"]
    conf, m = s["confidence"], s["min_effect"]
    assert (conf, m) == (0.95, 0.02)                               # the defaults
    checked = 0
    for w in s["workloads"]:
        base = _by_round(run_doc, s["base"], w["workload"], w["clients"])
        for name, c in w["comparisons"].items():
            other = _by_round(run_doc, name, w["workload"], w["clients"])
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
    assert checked == 1


def test_a_planted_slowdown_is_found_at_the_defaults(run_doc):
    [w] = run_doc["summary"]["workloads"]
    c = w["comparisons"]["log-everything"]
    assert c["verdict"] == "slower", c["explain"]
    assert c["ratio"] < 0.9                  # logging every statement costs more than 10%
