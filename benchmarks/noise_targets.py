"""What pair spread a lab target needs: issue 40's two noise targets, through the real judge.

A step's interval is made of its pairs' log ratios, one a round (lab/paired_steps.py); their
spread over rounds ("pair sd") is what a host's noise costs.  For each pair sd asked for,
this draws ``--sims`` runs of ``--rounds`` rounds of normal log ratios around each step's
true difference and judges every step with ``decide.effect.compare`` (paired by round, as
the lab does), then prints:

* **decided**: how often at least ``--need`` of the steps end faster, slower or equivalent
  (issue 40: two of every three of pg18-sync's 8 steps, so 6), and how many on average;
* **A/A**: with every true difference 0, how often all ``--aa-steps`` intervals lie inside
  ``±--aa-within`` (issue 40: 24, ±5%).

About 2 minutes at the default 500 runs a pair sd.  ``--from-run RUN`` reads a lab run's trials instead of guessing: its pair sd and mean
difference per step for ``--variant`` against the base, so the line "this host" says where
the run stands.  The true differences default to what run 20261201-145005-232b measured for
pg18-sync (docs/measurements.md, "What the two noise targets need").

Usage:  python benchmarks/noise_targets.py [--sd 0.8,1.0,1.5,2.3] [--rounds 5] [--sims 500]
        [--from-run PATH/run.json --variant pg18-sync]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import numpy as np

from pgaccel.decide.effect import EQUIVALENT, FASTER, SLOWER, compare, pair_by_round
from pgaccel.decide.judge import samples
from pgaccel.decide.model import Trial

# pg18-sync against the 15.20 base per step, in %: run 20261201-145005-232b's rQPS
STEPS_232B = {"l.i0": 0.5, "l.x": 10.3, "l.i1": 0.3, "l.i2": -0.85, "qr100": 1.4,
              "qp100": 0.9, "qr500": 1.1, "qp500": -0.5}


def judged(diffs_pct: np.ndarray, min_effect: float, within: float | None = None) -> list:
    """Each step's verdict (``within``: whether its interval lies inside ±within instead)
    for one simulated run: ``diffs_pct`` holds a row of per-round log ratios (%) a step."""
    out = []
    for row in diffs_pct:
        other = np.exp(row / 100.0)
        rounds = list(range(len(row)))
        c = compare([1.0] * len(row), other, min_effect=min_effect,
                    base_rounds=rounds, other_rounds=rounds)
        if within is None:
            out.append(c.verdict in (FASTER, SLOWER, EQUIVALENT))
        else:
            out.append(1 - within <= c.ci_low and c.ci_high <= 1 + within)
    return out


def from_run(path: str, variant: str) -> tuple[dict[str, float], dict[str, float]]:
    """Per step of ``path``'s lab run: the mean and sd (%) over rounds of ``variant``'s log
    ratio to the base, from the trials the judge itself would use (``judge.samples``: valid
    ones only, paired by ``effect.pair_by_round``)."""
    d = json.load(open(path))
    base = d["spec"]["base"]
    base = base[0] if isinstance(base, list) else base
    trials = [Trial.from_dict(t) for t in d["trials"]]
    means, sds = {}, {}
    for workload in dict.fromkeys(t.workload for t in trials):
        diffs = [100 * x for x in pair_by_round(*samples(trials, workload, base),
                                                 *samples(trials, workload, variant))]
        if len(diffs) >= 2:
            step = workload.split("/")[-1]
            means[step], sds[step] = statistics.mean(diffs), statistics.stdev(diffs)
    return means, sds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sd", default="0.6,0.8,1.0,1.5,2.0,2.3,2.7",
                    help="pair sds to simulate, in %% (comma-separated)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sims", type=int, default=500)
    ap.add_argument("--need", type=int, default=6, help="steps that must be decided")
    ap.add_argument("--min-effect", type=float, default=0.02)
    ap.add_argument("--aa-steps", type=int, default=24)
    ap.add_argument("--aa-within", type=float, default=0.05)
    ap.add_argument("--from-run", help="a lab run's run.json: its steps' differences and sds")
    ap.add_argument("--variant", default="pg18-sync")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    truth = dict(STEPS_232B)
    if a.from_run:
        means, sds = from_run(a.from_run, a.variant)
        if not means:
            sys.exit(f"{a.from_run}: no rounds of {a.variant!r} paired with the base")
        truth = means
        print(f"this host ({a.from_run}, {a.variant}): pair sd per step "
              + ", ".join(f"{s} {sds[s]:.1f}%" for s in means)
              + f"; median {statistics.median(sds.values()):.1f}%")
    mu = np.array(list(truth.values()))
    print(f"{len(mu)} steps, true differences " + ", ".join(f"{s} {v:+.1f}%" for s, v in
                                                            truth.items())
          + f"; {a.rounds} rounds, {a.sims} runs a pair sd; min effect {a.min_effect:.0%}")
    for sd in (float(x) for x in a.sd.split(",")):
        n_dec = [sum(judged(mu[:, None] + rng.normal(0, sd, (len(mu), a.rounds)),
                            a.min_effect)) for _ in range(a.sims)]
        aa = [all(judged(rng.normal(0, sd, (a.aa_steps, a.rounds)), a.min_effect,
                         within=a.aa_within)) for _ in range(a.sims // 4)]
        print(f"pair sd {sd:.1f}%: at least {a.need} of {len(mu)} decided in "
              f"{100 * np.mean([n >= a.need for n in n_dec]):.0f}% of runs "
              f"(mean {np.mean(n_dec):.1f}); A/A: all {a.aa_steps} inside "
              f"±{a.aa_within:.0%} in {100 * np.mean(aa):.0f}%")


if __name__ == "__main__":
    main()
