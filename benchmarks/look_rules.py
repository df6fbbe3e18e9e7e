"""How the per-look levels of `run`'s "look after every round" rule trade errors for speed
(issue 10), simulated with pgaccel's own comparison (decide/effect.compare).

Two rules for the level of the look after ``n`` rounds, both keeping the chance that any
look says "faster" or "slower" between identical configs at 5%:

* ``constant``: the same level at every look (Pocock's boundary; pgaccel's rule until
  November 24: 98.8% for looks after rounds 3..10);
* ``spending``: alpha spending, ``5% * (n / last) ** 2`` spent by round ``n``
  (decide/sequential.py, the rule now).

Three experiments per rule:

* **A/A**: two identical configs, rounds drifting 10% and trials 5% apart, looks after
  rounds 3..10: how often "faster" or "slower" comes out (the target is 5%);
* **planted**: the same with the other config 10% slower: how often "slower" comes out;
* **quick runs**: `run --quick` as this 2-core VM runs it: select-only (+5.5%, pairs 3%
  apart) then tpcb-like (+6%, pairs ``--tpcb-sd`` apart), each round 16.5 s and 17.5 s, a
  6-minute budget shared as `run` shares it: how often both are decided.  With the last
  look at round 10 for both workloads (the rule until November 25) and, for spending, with
  each workload's last look as far as its share of the budget reaches
  (``schedule.last_look``, the rule now: about 10 for select-only, 8-15 for tpcb-like).

Usage:  python benchmarks/look_rules.py [--runs 2000] [--tpcb-sd 0.04,0.065,0.09]
About a minute per 1,000 runs on one core.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from pgaccel.decide.effect import FASTER, NOT_ENOUGH, SLOWER, compare
from pgaccel.decide.schedule import last_look
from pgaccel.decide.sequential import SEED, look_level, simulate_looks


def constant_level(confidence: float, first: int, last: int, sims: int = 40_000) -> float:
    """Pocock's constant level for looks after rounds first..last (the rule before)."""
    from scipy import stats
    x = np.random.default_rng(SEED).standard_normal((sims, last))
    cs, cq = np.cumsum(x, 1), np.cumsum(x * x, 1)
    smallest = np.ones(sims)
    for n in range(first, last + 1):
        m = cs[:, n - 1] / n
        v = (cq[:, n - 1] - n * m * m) / (n - 1)
        t = np.abs(m) / np.sqrt(np.maximum(v, 1e-300) / n)
        smallest = np.minimum(smallest, 2 * stats.t.sf(t, n - 1))
    return 1 - float(np.quantile(smallest, 1 - confidence))


def rules(first: int = 3, last: int = 10) -> dict:
    c = constant_level(0.95, first, last)
    return {"constant": lambda n: c, "spending": lambda n: look_level(0.95, first, last, n)}


def quick_run(rng, level, tpcb_sd: float, budget: float = 360.0, first: int = 3,
              last: int = 10, tpcb_round_s: float = 17.5, fit: bool = False) -> bool:
    """One simulated `run --quick`; ``level(n)`` is the level of the look after n rounds,
    or with ``fit`` ``level(n, last)``, the workload's last look fixed as `run` fixes it
    (up to 2 x ``last``)."""
    workloads = [(math.log(1.055), 0.03, 16.5, 25.0),
                 (math.log(1.06), tpcb_sd, tpcb_round_s, 45.0)]
    left = budget
    decided = []
    for i, (delta, sd, round_s, prep) in enumerate(workloads):
        share = left / (len(workloads) - i)
        spent = prep
        if fit:
            wl_last = last_look(share - prep - round_s, round_s, 1, first, 2 * last)
            lv = (lambda n, L=wl_last: level(n, L))
        else:
            wl_last, lv = last, level
        d = delta + rng.normal(0, sd, wl_last)
        b = [100.0] * wl_last
        o = [100.0 * math.exp(x) for x in d]
        n, verdict = 0, NOT_ENOUGH
        while True:
            if n >= first:
                r = list(range(n))
                verdict = compare(b[:n], o[:n], base_rounds=r, other_rounds=r,
                                  confidence=lv(n)).verdict
                if verdict != NOT_ENOUGH:
                    break
            if n >= wl_last or spent + round_s > share:
                break
            n += 1
            spent += round_s
        left -= spent
        decided.append(verdict != NOT_ENOUGH)
    return all(decided)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--tpcb-sd", default="0.04,0.065,0.09")
    ap.add_argument("--last", type=int, nargs="*", default=[],
                    help="also simulate quick runs with looks up to these rounds "
                         "(spending), e.g. --last 14 20")
    ap.add_argument("--tpcb-round-s", type=float, default=17.5,
                    help="seconds per tpcb-like round in those runs (default 17.5: two "
                         "trials of 5 s after 2 s; about 11.5 for 3 s after 1 s)")
    a = ap.parse_args(argv)
    sds = [float(x) for x in a.tpcb_sd.split(",")]
    print(f"{a.runs} simulated experiments each; looks after rounds 3..10")
    print(f"{'rule':9s} {'A/A faster/slower':>18s} {'planted -10% slower':>20s}  " +
          "  ".join(f"quick both decided (tpcb pairs {sd:.1%})" for sd in sds))
    for name, level in rules().items():
        rng = np.random.default_rng(1)
        aa = sum(simulate_looks(rng, level, 1.0) in (FASTER, SLOWER) for _ in range(a.runs))
        pl = sum(simulate_looks(rng, level, 0.9) == SLOWER for _ in range(a.runs))
        quick = [sum(quick_run(rng, level, sd) for _ in range(a.runs)) for sd in sds]
        print(f"{name:9s} {aa / a.runs:18.1%} {pl / a.runs:20.1%}  " +
              "  ".join(f"{q / a.runs:36.1%}" for q in quick), flush=True)
    rng = np.random.default_rng(1)
    fitted = [sum(quick_run(rng, lambda n, last: look_level(0.95, 3, last, n), sd, fit=True)
                  for _ in range(a.runs)) for sd in sds]
    print(f"{'fitted':9s} {'(as spending)':>18s} {'':>20s}  " +
          "  ".join(f"{q / a.runs:36.1%}" for q in fitted)
          + "   (spending, each workload's last look where its budget share ends)", flush=True)
    for last in a.last:
        level = rules(3, last)["spending"]
        rng = np.random.default_rng(1)
        aa = sum(simulate_looks(rng, level, 1.0, last=last) in (FASTER, SLOWER)
                 for _ in range(a.runs))
        pl = sum(simulate_looks(rng, level, 0.9, last=last) == SLOWER for _ in range(a.runs))
        quick = [sum(quick_run(rng, level, sd, last=last, tpcb_round_s=a.tpcb_round_s)
                     for _ in range(a.runs)) for sd in sds]
        print(f"{'to ' + str(last):9s} {aa / a.runs:18.1%} {pl / a.runs:20.1%}  " +
              "  ".join(f"{q / a.runs:36.1%}" for q in quick)
              + f"   (spending, looks 3..{last}, tpcb rounds of {a.tpcb_round_s:g} s)",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
