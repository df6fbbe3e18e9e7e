"""Does where the scheduler puts pgbench and its backends explain trial-to-trial spread?

A question from issue 10: on a 2-core VM, whole 5-second select-only trials of one config
differed by 10-30%, with the server *and* pgbench both needing more CPU per transaction in
the slow ones while a pure-CPU loop ran at its usual speed.  The guess tested here is
placement: a backend on another CPU than the pgbench thread that talks to it is woken by a
reschedule interrupt (an inter-processor interrupt), which a VM pays for with an exit to the
hypervisor.  This script runs ``pgbench -S`` the way pgaccel runs a trial (restart, pg_prewarm,
a 1-second warm-up, then the measured run, new connections each time) in interleaved (ABBA)
order, three ways:

* ``shared``: ``-c 4 -j 2`` (threads = CPUs, pgaccel's default before November 24): each
  pgbench thread serves two connections, whose backends the kernel may put on either CPU;
* ``per-conn``: ``-c 4 -j 4``, one pgbench thread per connection (pgaccel's default now,
  workloads/base.load_threads): the kernel keeps each thread beside its backend;
* ``pinned``: two pgbench processes of ``-c 2 -j 1``, each pinned to one CPU with
  ``taskset``, and each one's backends pinned to the same CPU (found by application_name).

Per run it prints the throughput and the machine's reschedule interrupts per transaction
(/proc/interrupts); at the end, each mode's median, CV, and the spread of successive runs
(what pairing by round sees).  Measured here (November 24, ``--runs 12``): shared CV 14.7%
with 0.13-0.27 interrupts per transaction in its slow runs and none in its fast ones;
per-conn 3.3%, pinned 3.1%.

Usage:  python benchmarks/cpu_placement.py [--runs 12] [--seconds 5] [--scale 20]
                                           [--json out.json]
Needs 2 or more CPUs and ``taskset``; about 25 s per run of the three modes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

from pgaccel.metrics.system import resched_now
from pgaccel.server.discovery import find_client
from pgaccel.server.target import open_target
from pgaccel.workloads.pgbench import libpq_env

MODES = ("shared", "per-conn", "pinned")
SETTINGS = {"shared_buffers": "1GB"}
PREWARM = ("CREATE EXTENSION IF NOT EXISTS pg_prewarm; SELECT pg_prewarm(oid::regclass) "
           "FROM pg_class WHERE relkind IN ('r', 'i') AND relname LIKE 'pgbench%'")


def _tps(out: str) -> float:
    m = re.findall(r"tps = ([0-9.]+)", out)
    if not m:
        raise SystemExit(f"pgbench printed no tps:\n{out[-2000:]}")
    return float(m[0])


def _pinned(tg, base: list[str], env: dict) -> float:
    procs = [subprocess.Popen(["taskset", "-c", str(cpu)] + base + ["-c", "2", "-j", "1"],
                              env={**env, "PGAPPNAME": f"placement{cpu}"},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for cpu in (0, 1)]
    try:
        deadline = time.monotonic() + 2
        pinned: set[int] = set()
        with tg.connect() as conn:
            while len(pinned) < 4 and time.monotonic() < deadline:
                for pid, app in conn.execute(
                        "SELECT pid, application_name FROM pg_stat_activity "
                        "WHERE application_name LIKE 'placement_'").fetchall():
                    if pid not in pinned:
                        os.sched_setaffinity(pid, {int(app[-1])})
                        pinned.add(pid)
                time.sleep(0.05)
        return sum(_tps(p.communicate()[0]) for p in procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def one(mode: str, tg, pgbench: str, seconds: int) -> tuple[float, float | None]:
    """One trial: restart, prewarm, 1 s warm-up, then ``seconds`` measured; (tps,
    reschedule interrupts per transaction)."""
    env = libpq_env(tg.bench_conninfo())
    tg.apply(SETTINGS)
    subprocess.run(["psql", "-qAt", "-c", PREWARM], env=env, capture_output=True, check=True)
    base = [pgbench, "-n", "-S", "-M", "prepared"]
    subprocess.run(base + ["-T", "1", "-c", "4", "-j", "4"], env=env, capture_output=True,
                   check=True)
    base += ["-T", str(seconds)]
    r0 = resched_now()
    if mode == "pinned":
        tps = _pinned(tg, base, env)
    else:
        j = {"shared": 2, "per-conn": 4}[mode]
        r = subprocess.run(base + ["-c", "4", "-j", str(j)], env=env, capture_output=True,
                           text=True, check=True)
        tps = _tps(r.stdout)
    r1 = resched_now()
    return tps, ((r1 - r0) / (tps * seconds) if r0 is not None and r1 is not None else None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=12, help="runs of each mode")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--scale", type=int, default=20)
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args(argv)
    if (os.cpu_count() or 1) < 2:
        print("needs at least 2 CPUs", file=sys.stderr)
        return 2
    res: dict[str, list[tuple[float, float | None]]] = {m: [] for m in MODES}
    with open_target() as tg:
        tg.apply(SETTINGS)
        tg.ensure_bench_db()
        pgbench = find_client("pgbench", tg.inst)
        subprocess.run([pgbench, "-i", "-q", "-s", str(a.scale)],
                       env=libpq_env(tg.bench_conninfo()), capture_output=True, check=True)
        for i in range(a.runs):
            for m in (MODES if i % 2 == 0 else MODES[::-1]):
                res[m].append(one(m, tg, pgbench, a.seconds))
            print(f"run {i + 1}/{a.runs}: " + ", ".join(
                f"{m} {v[-1][0]:,.0f} ({v[-1][1] or 0:.3f} RES/tx)" for m, v in res.items()),
                file=sys.stderr, flush=True)
    print(f"pgbench -S, restart + prewarm + 1 s warm-up + {a.seconds} s, {a.runs} runs of "
          "each mode, interleaved")
    print(f"{'mode':9s} {'median tps':>11s} {'CV':>6s} {'succ.':>6s}  reschedule interrupts "
          "per transaction (min..max)")
    for m, v in res.items():
        logs = [math.log(t) for t, _ in v]
        cv = statistics.stdev(logs) if len(logs) > 1 else 0.0
        succ = ([b - a_ for a_, b in zip(logs, logs[1:])])
        sd_succ = statistics.stdev(succ) / math.sqrt(2) if len(succ) > 1 else 0.0
        irq = [x for _, x in v if x is not None]
        span = f"{min(irq):.3f}..{max(irq):.3f}" if irq else "unknown"
        print(f"{m:9s} {statistics.median(t for t, _ in v):11,.0f} {cv:6.1%} {sd_succ:6.1%}  "
              f"{span}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "runs": res}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
