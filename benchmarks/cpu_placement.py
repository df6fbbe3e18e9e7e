"""Does where the scheduler puts pgbench and its backends explain trial-to-trial spread?

A question from issue 10: on a 2-core VM, whole 5-second select-only trials of one config
differ by 10-30%, with the server *and* pgbench both needing more CPU per transaction in the
slow ones while a pure-CPU loop runs at its usual speed.  One guess is placement: a backend
on the other CPU than its pgbench thread is woken by an inter-processor interrupt, which a
VM pays for with an exit to the hypervisor.  This script runs short ``pgbench -S`` runs on a
throwaway cluster in interleaved (ABBA) order, with new connections each run, four ways:

* ``free``: ``-c 4 -j 2``, as pgaccel runs it; the kernel places everything;
* ``j4``: ``-c 4 -j 4``, one pgbench thread per connection (more placements to average);
* ``c8``: ``-c 8 -j 2``, twice the connections;
* ``pinned``: two pgbench processes of ``-c 2 -j 1``, each pinned to one CPU with
  ``taskset``, and each one's backends pinned to the same CPU (found by application_name):
  every wakeup stays on its CPU.

If placement were the cause, ``pinned`` would have a much smaller CV than ``free``.

Usage:  python benchmarks/cpu_placement.py [--runs 8] [--seconds 5] [--json out.json]
Needs 2 or more CPUs and ``taskset``; about 30 s per run of the four modes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

from pgaccel.server.discovery import find_client
from pgaccel.server.target import open_target
from pgaccel.workloads.pgbench import libpq_env

MODES = ("free", "j4", "c8", "pinned")


def _tps(out: str) -> float:
    m = re.findall(r"tps = ([0-9.]+)", out)
    if not m:
        raise SystemExit(f"pgbench printed no tps:\n{out[-2000:]}")
    return float(m[0])


def one(mode: str, tg, pgbench: str, seconds: int) -> float:
    base = [pgbench, "-n", "-S", "-M", "prepared", "-T", str(seconds)]
    env = libpq_env(tg.bench_conninfo())
    if mode != "pinned":
        c, j = {"free": (4, 2), "j4": (4, 4), "c8": (8, 2)}[mode]
        r = subprocess.run(base + ["-c", str(c), "-j", str(j)], env=env, capture_output=True,
                           text=True, check=True)
        return _tps(r.stdout)
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8, help="runs of each mode")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args(argv)
    if (os.cpu_count() or 1) < 2:
        print("needs at least 2 CPUs", file=sys.stderr)
        return 2
    res: dict[str, list[float]] = {m: [] for m in MODES}
    with open_target() as tg:
        tg.apply({"shared_buffers": "1GB"})
        tg.ensure_bench_db()
        pgbench = find_client("pgbench", tg.inst)
        subprocess.run([pgbench, "-i", "-q", "-s", str(a.scale)],
                       env=libpq_env(tg.bench_conninfo()), capture_output=True, check=True)
        for i in range(a.runs):
            for m in (MODES if i % 2 == 0 else MODES[::-1]):
                res[m].append(one(m, tg, pgbench, a.seconds))
            print(f"run {i + 1}/{a.runs}: " +
                  ", ".join(f"{m} {v[-1]:,.0f}" for m, v in res.items()), file=sys.stderr)
    print(f"pgbench -S, {a.seconds} s runs, {a.runs} of each mode, interleaved")
    print(f"{'mode':8s} {'median tps':>11s} {'CV':>6s}   runs")
    for m, v in res.items():
        cv = statistics.stdev(v) / statistics.mean(v) if len(v) > 1 else 0.0
        print(f"{m:8s} {statistics.median(v):11,.0f} {cv:6.1%}   "
              + " ".join(f"{x:,.0f}" for x in v))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "tps": res}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
