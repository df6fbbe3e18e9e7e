"""How long a sliced step's pgbench log takes to judge, by the step's length.

A step taken in slices (the lab's q steps and load steps, `run`'s side-by-side trials) ends
with pgbench's per-transaction logs read (`workloads.pgbench.read_transactions`) and cut
into its 0.1-second windows (`workloads.slices.window_stats`).  At `--size small` a q step
is 4 s a variant; at medium 5 minutes and at large 30, with as many windows and about as
many transactions a window.  This writes logs shaped like such a step (two pgbench
processes, 3,500 transactions a window, one in a thousand failed, windows 0.1 s long and
0.11 s apart) and times both parts, with ``--against REV`` also the `window_stats` of that
git revision (and its log reader), alternately in the same run, each size ``--repeat`` times (medians printed).

Usage:  python benchmarks/slice_logs.py [--seconds 4,60,300] [--against REV]
        [--repeat 3] [--json out.json]
Sizes the old code would take long on: pass smaller ones with --against.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from pgaccel.workloads import slices  # noqa: E402
from pgaccel.workloads.pgbench import read_transactions  # noqa: E402

SLICE_S, GAP_S, PER_WINDOW, FILES = 0.1, 0.11, 3500, 2


def write_logs(d: str, seconds: float, seed: int = 1) -> list[tuple[float, float]]:
    """pgbench -l files under ``d`` for a step of ``seconds`` in slices; its windows."""
    rng = np.random.default_rng(seed)
    t0 = 1.8e9
    windows = [(t0 + i * GAP_S, t0 + i * GAP_S + SLICE_S)
               for i in range(int(round(seconds / SLICE_S)))]
    per_file = PER_WINDOW // FILES
    for f in range(FILES):
        ends = np.concatenate([np.sort(rng.integers(int(a * 1e6), int(b * 1e6), per_file))
                               for a, b in windows])
        lat = rng.integers(200, 2000, ends.size)
        bad = rng.random(ends.size) < 0.001
        client = rng.integers(0, 2, ends.size)
        with open(os.path.join(d, f"tx{f}-.{1000 + f}"), "w") as fh:
            for c, e, la, b in zip(client, ends, lat, bad):
                fh.write(f"{c} 1 {'failed' if b else la} 0 {e // 1_000_000} {e % 1_000_000}\n")
    return windows


def load_revision(rev: str, name: str) -> types.ModuleType:
    """``workloads/NAME.py`` as it was at git revision ``rev``, as a module."""
    src = subprocess.run(["git", "show", f"{rev}:src/pgaccel/workloads/{name}.py"],
                         cwd=HERE, capture_output=True, text=True, check=True).stdout
    mod = types.ModuleType(f"{name}_at_{rev}", None)
    mod.__package__ = "pgaccel.workloads"
    sys.modules[mod.__name__] = mod          # dataclasses look their module up
    exec(compile(src, f"{rev}:slices.py", "exec"), mod.__dict__)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", default="4,60,300")
    ap.add_argument("--against", help="a git revision whose window_stats to time too")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    old = load_revision(a.against, "slices") if a.against else None
    old_read = load_revision(a.against, "pgbench").read_transactions if a.against else None
    rows = []
    for secs in [float(x) for x in a.seconds.split(",")]:
        with tempfile.TemporaryDirectory() as d:
            windows = write_logs(d, secs)
            paths = sorted(os.path.join(d, p) for p in os.listdir(d))
            size = sum(os.path.getsize(p) for p in paths)
            t = {"read": [], "windows": [], "read_old": [], "windows_old": []}
            for _ in range(a.repeat):
                s = time.perf_counter()
                log = read_transactions(paths)
                t["read"].append(time.perf_counter() - s)
                s = time.perf_counter()
                ws = slices.window_stats(*log, windows)
                t["windows"].append(time.perf_counter() - s)
                if old is not None:
                    s = time.perf_counter()
                    lo = old_read(paths)
                    t["read_old"].append(time.perf_counter() - s)
                    if any(x.tolist() != y.tolist() for x, y in zip(lo, log)):
                        raise SystemExit(f"{secs:g} s: the two revisions read differently")
                    s = time.perf_counter()
                    wo = old.window_stats(*log, windows)
                    t["windows_old"].append(time.perf_counter() - s)
                    if (wo.ops, wo.rates, wo.latency_ms) != (ws.ops, ws.rates, ws.latency_ms):
                        raise SystemExit(f"{secs:g} s: the two revisions disagree")
            med = {k: statistics.median(v) for k, v in t.items() if v}
            row = {"step_s": secs, "windows": len(windows), "transactions": int(ws.ops + ws.failed),
                   "log_mb": round(size / 1e6, 1), **{k + "_s": round(v, 3) for k, v in med.items()}}
            rows.append(row)
            line = (f"{secs:6g} s step: {len(windows):6d} windows, {row['transactions']:10,d} "
                    f"transactions, logs {row['log_mb']:8.1f} MB; read {med['read']:7.2f} s, "
                    f"windows {med['windows']:7.2f} s")
            if "windows_old" in med:
                line += (f"; at {a.against}: read {med['read_old']:7.2f} s "
                         f"({med['read_old'] / med['read']:.1f}x), windows "
                         f"{med['windows_old']:7.2f} s ({med['windows_old'] / med['windows']:.1f}x)")
            print(line, flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
