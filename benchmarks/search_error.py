"""The error control and the power of tune --search's racing (decide/race.py), simulated.

Each simulated search proposes ``--candidates`` candidates and races each against the
incumbent on paired rounds (screen, then a confirmation on fresh rounds), as the real search
does.  Three experiments:

* **null**: knobs that cannot change throughput (every candidate's true effect is 0): the
  share of searches that end with a "better" incumbent (the design keeps it under 5%);
* **planted**: one value of eight of one knob is +10% (each candidate has it with chance
  1/8), the rest do nothing: how often the search ends on it;
* **small**: the same with +3%, just above the 2% minimum effect.

Round noise: each trial's own log deviation, normal with ``--sd`` (0.03: pairs about 4%
apart, tpcb-like side by side on this 2-core VM), or drawn from the paired log ratios of a
recorded run or search (``--noise-from FILE ...``: run.json or search.json files, each
comparison's round log ratios minus their mean, pooled and resampled, so their spread and
tails are the machine's), plus a shared drift per round that
pairing cancels.  Also prints the rounds a search spent (each round is two trials side by
side: about 15-20 s on this VM).

Usage:  python benchmarks/search_error.py [--searches 200] [--candidates 30] [--sd 0.03]
        [--noise-from FILE ...]
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np

from pgaccel.decide.race import RaceRules, simulate_search


def _groups_of(path: str) -> list[list[float]]:
    """The paired round log ratios of one recorded file, one list per comparison: a run's
    ``run.json`` (each config against the first, per workload and client count) or a
    search's ``search.json`` (each stage of each candidate's race)."""
    doc = json.load(open(path))
    if "candidates" in doc:                               # a search's journal
        return [list(look["log_ratios"]) for c in doc["candidates"]
                for look in c.get("looks") or [] if look.get("log_ratios")]
    by: dict[tuple, dict[str, float]] = {}
    for t in doc.get("trials", []):
        if t.get("throughput"):
            by.setdefault((t["workload"], t["clients"], t["round"]), {})[t["variant"]] = \
                float(t["throughput"])
    base = (doc.get("variants") or [{}])[0].get("name", "baseline")
    groups: dict[tuple, list[float]] = {}
    for (w, c, _r), vs in by.items():
        for name, tp in vs.items():
            if name != base and base in vs:
                groups.setdefault((w, c, name), []).append(math.log(tp / vs[base]))
    return list(groups.values())


def recorded_noise(paths: list[str]):
    """A draw of one trial's log deviation from recorded paired rounds: each comparison's
    round log ratios minus their mean (its true effect), scaled by sqrt(n / (n - 1)) to undo
    what centring takes from the spread, pooled over the files and halved in variance (a
    ratio holds two trials' noise)."""
    res: list[float] = []
    for path in paths:
        for g in _groups_of(path):
            if len(g) >= 3:
                m, k = float(np.mean(g)), math.sqrt(len(g) / (len(g) - 1))
                res += [(x - m) * k for x in g]
    if len(res) < 12:
        sys.exit(f"{', '.join(paths)}: fewer than 12 paired rounds to draw noise from")
    r = np.asarray(res)
    q = np.percentile(np.abs(r), [50, 90, 99])
    print(f"noise from {len(paths)} recorded file(s): {len(res)} paired rounds, sd of a "
          f"round's log ratio {np.std(r, ddof=1):.3f}; |deviation| median {q[0]:.3f}, "
          f"90th {q[1]:.3f}, 99th {q[2]:.3f}, largest {np.abs(r).max():.3f}")
    res_a = r / math.sqrt(2)
    return lambda g: float(g.choice(res_a))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--searches", type=int, default=200)
    ap.add_argument("--candidates", type=int, default=30)
    ap.add_argument("--sd", type=float, default=0.03)
    ap.add_argument("--drift", type=float, default=0.05)
    ap.add_argument("--noise-from", metavar="FILE", nargs="+",
                    help="run.json or search.json files whose paired rounds give the noise")
    ap.add_argument("--seed", type=int, default=20261126)
    a = ap.parse_args()
    noise = (recorded_noise(a.noise_from) if a.noise_from
             else (lambda g: float(g.normal(0.0, a.sd))))
    rules = RaceRules()
    rng = np.random.default_rng(a.seed)
    print(f"{a.searches} searches of {a.candidates} candidates each, alpha "
          f"{rules.alpha:.0%}, minimum effect {rules.min_effect:.0%}")
    for label, effect in (("null", 0.0), ("planted +10%", math.log(1.10)),
                          ("small +3%", math.log(1.03))):
        wrong = found = 0
        rounds = []
        for _ in range(a.searches):
            s = simulate_search(
                rng, lambda k: effect if effect and rng.integers(8) == 0 else 0.0,
                a.candidates, rules, noise=noise, drift=a.drift)
            wrong += s.false_better > 0
            found += bool(effect) and s.incumbent == effect
            rounds.append(s.rounds)
        line = (f"{label:>13}: searches with a false 'better' {wrong}/{a.searches} "
                f"({wrong / a.searches:.1%})")
        if effect:
            line += f", found {found}/{a.searches} ({found / a.searches:.0%})"
        print(line + f", rounds per search median {int(np.median(rounds))}")


if __name__ == "__main__":
    main()
