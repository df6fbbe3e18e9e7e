"""Does putting each pgbench and its backends on one CPU steady side-by-side rounds?

Two throwaway servers with the same settings (A/A), measured as `run --quick` measures
(lab/paired.py: 1-second slices taking turns, run --quick's clients, duration and warm-up),
in experiments of ``--rounds`` rounds that alternate between placed (``pin``, the default,
workloads/pinning.py) and left to the scheduler, ABBA over ``--cycles`` cycles, so both
modes see the same hours of the host.  Per mode and workload it prints:

* the spread of the rounds' log ratios between the two servers (what a paired verdict's
  interval is built from; an A/A's true ratio is 1),
* the median throughput of a trial, and its reschedule interrupts per transaction (a
  transaction that woke the other CPU),
* how many trials had a slice below 85% of the trial's median slice (a placement spell).

Usage:  python benchmarks/pinning.py [--cycles 4] [--rounds 3] [--workloads select-only,tpcb-like]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from contextlib import ExitStack


def summarize(trials: list, workload: str) -> dict:
    by_round: dict[tuple[int, int], dict[str, float]] = {}
    tps, res, spells, placed = [], [], 0, 0
    for exp_i, t in trials:
        if t.workload != workload:
            continue
        by_round.setdefault((exp_i, t.round), {})[t.variant] = t.throughput
        tps.append(t.throughput)
        res.append(t.metrics.get("resched_ipis_per_op") or 0.0)
        med = statistics.median(t.series)
        spells += any(x < 0.85 * med for x in t.series)
        placed += bool((t.metrics.get("pinned") or {}).get("on"))
    lr = [math.log(v["a"] / v["b"]) for v in by_round.values() if len(v) == 2]
    return {"rounds": len(lr), "trials": len(tps),
            "round_sd_pct": round(100 * statistics.stdev(lr), 2) if len(lr) > 1 else None,
            "mean_ratio_pct": round(100 * (math.exp(statistics.fmean(lr)) - 1), 2) if lr else None,
            "median_tps": round(statistics.median(tps)) if tps else None,
            "median_resched_per_op": round(statistics.median(res), 4) if res else None,
            "trials_with_a_spell": spells, "trials_placed": placed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cycles", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workloads", default="select-only,tpcb-like")
    ap.add_argument("--json", dest="json_out")
    a = ap.parse_args()

    from pgaccel.lab.experiment import Experiment
    from pgaccel.decide.model import Variant, WorkloadSpec
    from pgaccel.decide.schedule import default_params
    from pgaccel.probe.host import probe_host
    from pgaccel.server.discovery import find_client
    from pgaccel.server.target import open_target
    from pgaccel.workloads.base import BenchContext, RunParams, get_workload

    d = default_params(True, int(probe_host().effective_cpus) or 1)
    params = RunParams(clients=d["clients"], duration=d["duration"], warmup=d["warmup"],
                       scale=d["scale"])
    names = a.workloads.split(",")
    trials: dict[bool, list] = {True: [], False: []}
    modes = []
    for c in range(a.cycles):
        modes += [True, False] if c % 2 == 0 else [False, True]
    with ExitStack() as stack:
        ctxs = []
        for _ in range(2):
            t = stack.enter_context(open_target())
            ctxs.append(BenchContext(t, find_client("pgbench", t.inst)))
        for i, pin in enumerate(modes):
            exp = Experiment(ctxs[0], [Variant("a", {}), Variant("b", {})],
                             [WorkloadSpec(get_workload(n), params) for n in names],
                             rounds=a.rounds, contexts={"a": ctxs[0], "b": ctxs[1]},
                             side_by_side=True, pin=pin)
            exp.run()
            trials[pin] += [(i, t) for t in exp.trials]
            for n in names:
                print(f"experiment {i + 1}/{len(modes)}, {'placed' if pin else 'free'}, {n}:",
                      json.dumps(summarize([(i, t) for t in exp.trials], n)), flush=True)
    out = {"command": f"benchmarks/pinning.py --cycles {a.cycles} --rounds {a.rounds} "
                      f"--workloads {a.workloads}",
           "placed": {n: summarize(trials[True], n) for n in names},
           "free": {n: summarize(trials[False], n) for n in names}}
    print(json.dumps(out, indent=1))
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
