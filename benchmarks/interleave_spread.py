"""Would two servers side by side, measured in alternating 1-second slices, pair better?

A question from issue 10: `run --quick` decides tpcb-like in about half its runs here
because a pair of trials (one per config, ~8 s apart) differs by ~8%: the host's speed
changes over a few seconds (both the server and pgbench need more CPU per transaction in
the slow trials, and splitting a 5 s trial into five 1 s pgbench runs does not narrow it).
This script measures how far pairs are apart in two designs, in the same minutes, on one
workload (tpcb-like at scale 20, 4 clients), with a server per config, both running:

* ``blocks`` (pgaccel today): per config in turn, the data restored from its template,
  CHECKPOINT, pg_prewarm, a 2 s warm-up, then 5 s measured;
* ``slices``: both servers restored, checkpointed and prewarmed, a 2 s warm-up each, then
  five 1 s runs of each config in alternation (ABBA...), a config's value the mean of its;
* ``paused``: the same alternation without new connections every second: one pgbench per
  server for the whole round, the idle one stopped with SIGSTOP, a slice's transactions
  counted from pgbench's per-transaction log (``-l``);
* ``gapped``: paused's timing one server at a time (1 s slices with 1 s stopped between
  them, the other server idle), to tell the pauses from the other server's presence.

Rounds of the two designs alternate.  ``--aa`` gives both servers the same (default)
settings: then any mean difference is what one server's activity leaves to the other
(carry-over) and the spread is the noise floor.  Otherwise the second server gets the tuned
settings of a stored run (``--from-run``).  Per design it prints the pairs' mean ratio, how
far pairs are apart (sd of the log ratio), seconds per round and the time one round's worth
of information costs (variance x seconds).

``--restart`` restarts both servers before every round, in alternating order, and swaps
which cluster runs which config, so neither a cluster nor its start order stays with one
config.

Measured here (November 25, ``--rounds 12``; docs/measurements.md has every run): slices put
pairs 1.9-2.9% apart, blocks 4.6-9.6% in the same minutes, at 16 s a round in both, but
found a smaller tuned effect (+2.3% and +3.2% against +5.7% and +6.8%): new connections
every second cost the tuned config more.  Paused slices put tuned-against-default pairs
1.7-3.3% apart (blocks 6.5-7.5%) at 20 s a round, found +3.8% pooled over four runs
(blocks +5.1%, 1.3 standard errors apart), and two A/A runs gave B/A 0.999 and 1.005.

Usage:  python benchmarks/interleave_spread.py [--rounds 12] [--aa | --from-run RUN_JSON]
                                               [--restart] [--designs blocks,paused]
                                               [--json out.json]
About 16 s per round of blocks or slices, 20 of paused, 30 of gapped.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from pgaccel.lab.trial import restore_from_template, snapshot_template
from pgaccel.metrics.measure import checkpoint, prewarm
from pgaccel.server.discovery import find_client
from pgaccel.server.target import open_target
from pgaccel.workloads.base import BenchContext
from pgaccel.workloads.pgbench import libpq_env

DESIGNS = ("blocks", "slices", "paused", "gapped")


def _tps(out: str) -> float:
    m = re.search(r"tps = ([0-9.]+)", out)
    if not m:
        raise SystemExit(f"pgbench printed no tps:\n{out[-2000:]}")
    return float(m.group(1))


class Server:
    def __init__(self, tg, settings: dict[str, object], scale: int) -> None:
        self.tg, self.ctx = tg, BenchContext(tg, find_client("pgbench", tg.inst))
        tg.apply(settings)
        tg.ensure_bench_db()
        self.env = libpq_env(tg.bench_conninfo())
        subprocess.run([self.ctx.pgbench, "-i", "-q", "-s", str(scale)], env=self.env,
                       capture_output=True, check=True)
        snapshot_template(tg)

    def restart(self, settings: dict[str, object]) -> None:
        self.tg.apply(settings)
        self.env = libpq_env(self.tg.bench_conninfo())

    def reset(self) -> None:
        """What every trial starts from: the data restored, a checkpoint, caches warm."""
        restore_from_template(self.tg)
        checkpoint(self.ctx)
        prewarm(self.ctx)

    def run(self, seconds: int) -> float:
        r = subprocess.run([self.ctx.pgbench, "-n", "-M", "prepared", "-c", "4", "-j", "4",
                            "-T", str(seconds)], env=self.env, capture_output=True, text=True,
                           check=True)
        return _tps(r.stdout)


def blocks(order: list[str], srv: dict[str, Server]) -> dict[str, float]:
    out = {}
    for name in order:
        srv[name].reset()
        srv[name].run(2)
        out[name] = srv[name].run(5)
    return out


def slices(order: list[str], srv: dict[str, Server], k: int = 5) -> dict[str, float]:
    for name in order:
        srv[name].reset()
    for name in order:
        srv[name].run(2)
    got: dict[str, list[float]] = {n: [] for n in order}
    for i in range(k):
        for name in (order if i % 2 == 0 else order[::-1]):
            got[name].append(srv[name].run(1))
    return {n: statistics.mean(v) for n, v in got.items()}


def _run_plan(names: list[str], srv: dict[str, Server],
              plan: list[tuple[str | None, float, bool]]) -> dict[str, float]:
    """One pgbench per server in ``names`` for the whole plan, each stopped (SIGSTOP) but
    while its own steps run (a step without a name: all stopped); a counted step's
    throughput is the transactions pgbench's per-transaction log shows ending inside it."""
    total = math.ceil(sum(p[1] for p in plan)) + 2
    with tempfile.TemporaryDirectory() as d:
        procs = {}
        for n in names:
            s = srv[n]
            procs[n] = subprocess.Popen(
                [s.ctx.pgbench, "-n", "-M", "prepared", "-c", "4", "-j", "4", "-T", str(total),
                 "-l", f"--log-prefix={d}/{n}"], env=s.env, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)
            os.kill(procs[n].pid, signal.SIGSTOP)
        windows: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
        try:
            for n, secs, counted in plan:
                if n is None:
                    time.sleep(secs)
                    continue
                os.kill(procs[n].pid, signal.SIGCONT)
                t0 = time.time()
                time.sleep(secs)
                t1 = time.time()
                os.kill(procs[n].pid, signal.SIGSTOP)
                if counted:
                    windows[n].append((t0, t1))
        finally:
            for p in procs.values():
                os.kill(p.pid, signal.SIGCONT)
            for p in procs.values():
                p.communicate()
        out = {}
        for n in names:
            ends = []
            for f in glob.glob(f"{d}/{n}.*"):
                with open(f) as fh:
                    ends += [int(c[4]) + int(c[5]) / 1e6 for c in map(str.split, fh)]
            rates = [sum(t0 <= e < t1 for e in ends) / (t1 - t0) for t0, t1 in windows[n]]
            out[n] = statistics.mean(rates)
    return out


def paused(order: list[str], srv: dict[str, Server], k: int = 5) -> dict[str, float]:
    """Slices without new connections: both servers' pgbench running for the whole round,
    the idle one stopped while the other runs (ABBA), after a 2 s warm-up each."""
    for name in order:
        srv[name].reset()
    plan: list[tuple[str | None, float, bool]] = [(n, 2.0, False) for n in order]
    plan += [(n, 1.0, True) for i in range(k) for n in (order if i % 2 == 0 else order[::-1])]
    return _run_plan(order, srv, plan)


def gapped(order: list[str], srv: dict[str, Server], k: int = 5) -> dict[str, float]:
    """Paused's timing, one server at a time: a config's 1 s slices with 1 s stopped
    between them and the other server idle (how much of paused's result is the pauses)."""
    out = {}
    for name in order:
        srv[name].reset()
        plan: list[tuple[str | None, float, bool]] = [(name, 2.0, False)]
        for _ in range(k):
            plan += [(None, 1.0, False), (name, 1.0, True)]
        out.update(_run_plan([name], srv, plan))
    return out


DESIGN = {"blocks": blocks, "slices": slices, "paused": paused, "gapped": gapped}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--aa", action="store_true", help="the same settings on both servers")
    ap.add_argument("--from-run", help="run.json whose 'tuned' variant the second server gets")
    ap.add_argument("--restart", action="store_true",
                    help="before each round, restart both servers and swap which cluster "
                         "runs which config")
    ap.add_argument("--scale", type=int, default=20)
    ap.add_argument("--designs", default="blocks,slices",
                    help="comma-separated, of " + ", ".join(DESIGNS))
    ap.add_argument("--json", help="also write the pairs here")
    a = ap.parse_args(argv)
    if not set(a.designs.split(",")) <= set(DESIGNS):
        ap.error(f"--designs: choose from {', '.join(DESIGNS)}")
    tuned: dict[str, object] = {}
    if not a.aa:
        if not a.from_run:
            ap.error("give --from-run RUN_JSON (the tuned settings), or --aa")
        with open(a.from_run) as f:
            tuned = next(v["settings"] for v in json.load(f)["variants"]
                         if v["name"] == "tuned")
    designs = tuple(a.designs.split(","))
    names = ("A", "B")
    res: dict[str, list[dict[str, float]]] = {d: [] for d in designs}
    walls: dict[str, list[float]] = {d: [] for d in designs}
    settings = {"A": {}, "B": tuned}
    with contextlib.ExitStack() as stack:
        pool = [Server(stack.enter_context(open_target()), settings[n], a.scale)
                for n in names]
        srv = dict(zip(names, pool))
        blocks(list(names), srv)                      # burn both in
        for i in range(a.rounds):
            order = list(names) if i % 2 == 0 else list(names[::-1])
            if a.restart:     # each config on the other cluster, both freshly started
                srv = dict(zip(names, pool if i % 2 == 0 else pool[::-1]))
                for n in order:
                    srv[n].restart(settings[n])
            for d in (designs if i % 2 == 0 else designs[::-1]):
                t0 = time.monotonic()
                res[d].append(DESIGN[d](order, srv))
                walls[d].append(time.monotonic() - t0)
                print(f"round {i + 1}/{a.rounds} {d:6s} A {res[d][-1]['A']:7,.0f}  "
                      f"B {res[d][-1]['B']:7,.0f}", file=sys.stderr, flush=True)
    what = "A/A (both default settings)" if a.aa else "A default, B tuned"
    if a.restart:
        what += ", both restarted and swapped every round"
    print(f"tpcb-like, scale {a.scale}, 4 clients, {what}, {a.rounds} rounds of each design, "
          "interleaved")
    print(f"{'design':7s} {'B/A':>7s} {'pairs apart':>12s} {'s/round':>8s} "
          f"{'var x s':>8s}")
    for d, v in res.items():
        logs = [math.log(x["B"] / x["A"]) for x in v]
        sd = statistics.stdev(logs) if len(logs) > 1 else float("nan")
        wall = statistics.mean(walls[d])
        print(f"{d:7s} {math.exp(statistics.mean(logs)):7.3f} {sd:12.1%} {wall:8.1f} "
              f"{sd * sd * wall * 1e4:8.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "pairs": res, "walls": walls}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
