"""Does restarting the server before every trial add to the spread between trials?

A question from issue 10: pgaccel restarts the server before each trial (a config's
settings, ``shared_buffers`` among them, only change with a restart), and tpcb-like trials
of one config differ by 5-8% on this VM class.  This script runs tpcb-like trials of one
config exactly as a run does (``lab.trial.run_trial``: data restored from the template,
CHECKPOINT, pg_prewarm, warm-up, measured run), alternately with a restart before the trial
(``restart``) and without (``keep``, the server left running from the trial before), in
ABBA order, and prints each trial and, per kind, the spread of successive trials (what
pairing by round sees) and of all of them.  The config is the tuned one of a stored run
(``--from-run``), or the server's defaults.

Measured here (November 25, ``--rounds 14``, the tuned config of run
20261125-071550-0095): successive trials 4.9% apart restarted, 4.3% not.

Usage:  python benchmarks/restart_spread.py [--rounds 14] [--from-run RUN_JSON]
                                            [--json out.json]
About 17 s per round.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys

from pgaccel.decide.model import TrialSpec
from pgaccel.lab.trial import run_trial, snapshot_template
from pgaccel.server.discovery import find_client
from pgaccel.server.target import open_target
from pgaccel.workloads.base import BenchContext, RunParams, get_workload
import pgaccel.workloads.pgbench  # noqa: F401  (registers tpcb-like)

KINDS = ("restart", "keep")


def spread(logs: list[float]) -> tuple[float, float]:
    """(sd of successive differences / sqrt 2, sd of all), in log units."""
    succ = [b - a for a, b in zip(logs, logs[1:])]
    return (statistics.stdev(succ) / math.sqrt(2) if len(succ) > 1 else float("nan"),
            statistics.stdev(logs) if len(logs) > 1 else float("nan"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=14)
    ap.add_argument("--from-run", help="run.json whose 'tuned' variant's settings to use")
    ap.add_argument("--scale", type=int, default=20)
    ap.add_argument("--json", help="also write the trials here")
    a = ap.parse_args(argv)
    settings: dict[str, object] = {}
    if a.from_run:
        with open(a.from_run) as f:
            variants = json.load(f)["variants"]
        settings = next(v["settings"] for v in variants if v["name"] == "tuned")
    wl = get_workload("tpcb-like")
    params = RunParams(clients=4, duration=5.0, warmup=2.0, scale=a.scale)
    res: dict[str, list[dict[str, float]]] = {k: [] for k in KINDS}
    with open_target() as tg:
        ctx = BenchContext(tg, find_client("pgbench", tg.inst))
        tg.apply(settings)
        tg.ensure_bench_db()
        wl.prepare(ctx, params)
        snapshot_template(tg)
        run_trial(ctx, TrialSpec("burn-in", settings, wl, params, -1))
        for i in range(a.rounds):
            for kind in (KINDS if i % 2 == 0 else KINDS[::-1]):
                t = run_trial(ctx, TrialSpec(kind, settings, wl, params, i),
                              restart=kind == "restart")
                res[kind].append({"tps": t.throughput,
                                  "server_us_per_op": t.metrics.get("server_cpu_us_per_op")})
                print(f"round {i + 1}/{a.rounds} {kind:7s} {t.throughput:8,.0f} tps",
                      file=sys.stderr, flush=True)
    print(f"tpcb-like, scale {a.scale}, 4 clients, 2 s warm-up + 5 s, {a.rounds} trials of "
          "each kind, interleaved")
    print(f"{'kind':8s} {'median tps':>11s} {'successive':>11s} {'all':>6s}")
    for kind, v in res.items():
        succ, whole = spread([math.log(x["tps"]) for x in v])
        pct = [("n/a" if math.isnan(x) else f"{x:.1%}") for x in (succ, whole)]
        print(f"{kind:8s} {statistics.median(x['tps'] for x in v):11,.0f} {pct[0]:>11s} "
              f"{pct[1]:>6s}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "trials": res}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
