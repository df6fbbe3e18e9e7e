"""A/A of a captured workload whose statements last about a second (issue 65): trials take
turns, one config at a time, and the comparison of two identical configs ends equivalent.

The workload is tests/appshapes.py's REPORTS (a dashboard: a reporting join of about 0.85 s
here, written with a typed interval literal that pg_stat_statements normalises away, beside
point reads, a store's latest sales and inserts), driven from two connections on a
throwaway cluster and captured with ``--data dump`` (no --log: the literal comes back from
pg_stat_activity's samples).  Then ``pgaccel lab`` runs a spec of two identical variants on
it.  Printed: the design the replay chose, each trial's CPU accounting (the server's, the
load generator's and the other processes' share of the machine: a config's statement
running in another's measured time would show as "other"), each trial's throughput, and the
verdict with its interval.

Usage:  python benchmarks/replay_turns.py [--rounds 5] [--duration 45] [--min-effect 0.1]
        [--bundle DIR (reuse a capture)] [--run RUN.json (print only)] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import appshapes  # noqa: E402

from pgaccel.server.cluster import Cluster  # noqa: E402
from pgaccel.server.discovery import find_installations  # noqa: E402
from pgaccel.session.capture import CaptureRequest, capture  # noqa: E402


def capture_reports(out: str, seconds: float) -> None:
    inst = find_installations()[0]
    app = appshapes.REPORTS
    with Cluster.create_throwaway(inst) as c:
        c.start({"shared_preload_libraries": "pg_stat_statements"})
        with c.connect() as conn:
            conn.execute("CREATE DATABASE app")
        ci = c.conninfo("app")
        with c.connect("app") as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        appshapes.load(ci, app)
        th: list[threading.Thread] = []

        def tick(_e, _t):
            if not th:
                th.append(threading.Thread(target=appshapes.drive,
                                           args=(ci, app, seconds - 1)))
                th[0].start()
        capture(CaptureRequest(dsn=ci, duration_s=seconds, out=out, data="dump"), tick)
        th[0].join()


SPEC = """name = "replay-turns-aa"
description = "A/A of a replay whose statements last about a second"
base = "A"

[run]
rounds = {rounds}
max_rounds = {rounds}
duration = {duration}
warmup = 5
min_effect = {min_effect}

[[variant]]
name = "A"

[[variant]]
name = "A2"

[[workload]]
name = "captured:{bundle}"
clients = 2
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=45)
    ap.add_argument("--min-effect", type=float, default=0.10)
    ap.add_argument("--capture-s", type=float, default=20)
    ap.add_argument("--bundle")
    ap.add_argument("--json")
    ap.add_argument("--run", help="only print the accounting of this run.json")
    a = ap.parse_args()
    if a.run:
        return report(a.run, a.json)
    work = tempfile.mkdtemp(prefix="replay-turns-")
    bundle = a.bundle or os.path.join(work, "reports")
    if not a.bundle:
        capture_reports(bundle, a.capture_s)
    spec = os.path.join(work, "aa.toml")
    with open(spec, "w") as f:
        f.write(SPEC.format(rounds=a.rounds, duration=a.duration, min_effect=a.min_effect,
                            bundle=bundle))
    exe = os.path.join(os.path.dirname(sys.executable), "pgaccel")
    r = subprocess.run([exe, "lab", spec, "--yes"],
                       capture_output=True, text=True)
    print(r.stdout[-4000:], r.stderr[-2000:], f"pgaccel lab: exit code {r.returncode}",
          sep="\n")
    line = next((x for x in r.stdout.splitlines() if x.startswith("Results: ")), None)
    if not line:
        return r.returncode or 1
    return report(line.split()[1].rstrip(","), a.json)


def report(path: str, out: str | None) -> int:
    """Each trial's CPU accounting and throughput, and the verdict, from run.json."""
    doc = json.load(open(path))
    rows = []
    print(f"{'variant':8} {'round':>5} {'stmt/s':>8} {'server':>7} {'loadgen':>8} "
          f"{'other':>6} {'steal':>6}")
    for t in doc["trials"]:
        m = t.get("metrics") or {}
        total = m.get("host_cpu_total_s") or 0
        other = (max(0.0, (m.get("host_cpu_busy_s") or 0) - (m.get("host_steal_s") or 0)
                     - (m.get("server_cpu_s") or 0) - (m.get("client_cpu_s") or 0))
                 / total if total else None)
        row = {"variant": t["variant"], "round": t["round"], "throughput": t["throughput"],
               "server": (m.get("server_cpu_s") or 0) / total if total else None,
               "loadgen": (m.get("client_cpu_s") or 0) / total if total else None,
               "other": other, "steal": (m.get("host_steal_s") or 0) / total if total else None,
               "design": ((m.get("replay") or {}).get("design"))}
        rows.append(row)
        print(f"{row['variant']:8} {row['round']:>5} {row['throughput']:8.1f} "
              f"{row['server']:7.1%} {row['loadgen']:8.1%} {row['other']:6.1%} "
              f"{row['steal']:6.1%}")
    print("design:", rows[0]["design"] if rows else None)
    for w in (doc.get("summary") or {}).get("workloads") or []:
        for name, c in (w.get("comparisons") or {}).items():
            print(f"{name} vs {w.get('base') or 'A'}: {c.get('verdict')} "
                  f"({(c['ratio'] - 1):+.1%}, 95% CI {(c['ci_low'] - 1):+.1%} … "
                  f"{(c['ci_high'] - 1):+.1%})")
    if out:
        with open(out, "w") as f:
            json.dump({"run": path, "trials": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
