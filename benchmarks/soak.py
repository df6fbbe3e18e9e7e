"""Does pgaccel stay flat over a long run?  Its own memory, its children's, its open files and
threads, and the time each round takes, sampled while a long `pgaccel lab` runs.

The lab is benchmarks/specs/soak.toml: three variants on two workloads side by side, round
after round until ``--minutes`` end (nothing decided early, so every round adds trials,
store rows and report data).  Every ``--interval`` seconds the `pgaccel` process is read with
psutil: RSS and USS, open files, threads; and its descendants (pgbench, pg_ctl, psql; the
servers themselves are daemons, not descendants): their count and summed RSS.  After the
run, the rounds' wall times come from run.json (each trial's start).

The lab runs inside benchmarks/soak_sampler.py, which records from within the process what
only it can read: CPython's live small-object blocks and glibc's main heap in use and free.

Printed: RSS and USS at the start (after the first round), the end and the highest; the
slope of USS over the run after the first round (Theil-Sen, MiB per hour, with its 95%
interval), and beside it the slopes of the live Python blocks (per hour and per trial) and of
glibc's heap in use and free, which tell more live objects from memory the allocators keep;
open files and threads at the start and end; the seconds per round in the first and last
quarter of the rounds.  ``--json`` keeps every sample; ``--png`` draws them.

Usage:  python benchmarks/soak.py [--minutes 60] [--interval 5] [--size small]
        [--json soak.json] [--png soak.png] [--spec benchmarks/specs/soak.toml]
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

import psutil
from scipy import stats

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1024 * 1024


def sample(p: psutil.Process, t0: float) -> dict | None:
    try:
        with p.oneshot():
            full = p.memory_full_info()
            row = {"t": round(time.monotonic() - t0, 2), "rss": full.rss, "uss": full.uss,
                   "fds": p.num_fds(), "threads": p.num_threads()}
        kids = p.children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    rss, names = 0, {}
    for k in kids:
        try:
            rss += k.memory_info().rss
            n = k.name()
            names[n] = names.get(n, 0) + 1
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    row.update(children=len(kids), children_rss=rss, children_names=names)
    return row


def round_walls(run_json: str) -> dict[str, list[float]]:
    """Per workload, the seconds from each round's first trial start to the next round's
    (a lab runs one workload's rounds, then the next workload's)."""
    with open(run_json) as f:
        doc = json.load(f)
    starts: dict[str, dict[int, float]] = {}
    for t in doc.get("trials", []):
        if t.get("started_at"):
            w = starts.setdefault(t["workload"], {})
            w[t["round"]] = min(w.get(t["round"], t["started_at"]), t["started_at"])
    out = {}
    for wl, by_round in starts.items():
        ordered = [by_round[k] for k in sorted(by_round)]
        out[wl] = [b - a for a, b in zip(ordered, ordered[1:])]
    return out


def slope_mib_per_hour(rows: list[dict], key: str, unit: float = MIB
                       ) -> tuple[float, float, float] | None:
    rows = [r for r in rows if r.get(key) is not None]
    if len(rows) < 5:
        return None
    x = [r["t"] / 3600 for r in rows]
    y = [r[key] / unit for r in rows]
    # Theil-Sen (the median of the pairwise slopes), not least squares: a sample read while
    # a forked child still shares the parent's pages has a USS near 0 (seen a few times an
    # hour), and a handful of those decide a least-squares slope
    fit = stats.theilslopes(y, x, alpha=0.95)
    return fit.slope, fit.low_slope, fit.high_slope


def summarize(rows: list[dict], walls: dict[str, list[float]], first_round_s: float,
              tail_s: float = 20.0, inner: list[dict] | None = None, trials: int = 0) -> dict:
    """``first_round_s``: samples before it are the start-up; the last ``tail_s`` seconds are
    the run's ending (report, closing), also left out of start/end and the slope.
    ``inner``: soak_sampler.py's rows; ``trials``: how many the run measured."""
    end = rows[-1]["t"] - tail_s if rows else 0
    steady = [r for r in rows if first_round_s <= r["t"] <= end] or rows
    inside = [r for r in inner or [] if first_round_s <= r["t"] <= end]
    out = {
        "samples": len(rows), "seconds": rows[-1]["t"] if rows else 0,
        "rss_start_mib": steady[0]["rss"] / MIB, "rss_end_mib": steady[-1]["rss"] / MIB,
        "rss_max_mib": max(r["rss"] for r in rows) / MIB,
        "uss_start_mib": steady[0]["uss"] / MIB, "uss_end_mib": steady[-1]["uss"] / MIB,
        "uss_slope_mib_per_hour": slope_mib_per_hour(steady, "uss"),
        "py_blocks_slope_per_hour": slope_mib_per_hour(inside, "py_blocks", 1.0),
        "heap_in_use_slope_mib_per_hour": slope_mib_per_hour(inside, "heap_in_use"),
        "heap_free_slope_mib_per_hour": slope_mib_per_hour(inside, "heap_free"),
        "trials": trials,
        "children_rss_max_mib": max(r["children_rss"] for r in rows) / MIB,
        "children_max": max(r["children"] for r in rows),
        "fds": (steady[0]["fds"], steady[-1]["fds"], max(r["fds"] for r in rows)),
        "threads": (steady[0]["threads"], steady[-1]["threads"],
                    max(r["threads"] for r in rows)),
    }
    hours = (steady[-1]["t"] - steady[0]["t"]) / 3600 if len(steady) > 1 else 0
    per_hour = trials / (rows[-1]["t"] / 3600) if rows and rows[-1]["t"] > 0 else 0
    if per_hour and out["uss_slope_mib_per_hour"] and out["py_blocks_slope_per_hour"]:
        out["uss_kib_per_trial"] = out["uss_slope_mib_per_hour"][0] * 1024 / per_hour
        out["py_blocks_per_trial"] = out["py_blocks_slope_per_hour"][0] / per_hour
    out["steady_hours"] = hours
    for wl, ws in walls.items():
        q = max(1, len(ws) // 4)
        out[f"{wl}: rounds"] = len(ws) + 1
        out[f"{wl}: round_s first, last quarter"] = (
            (statistics.median(ws[:q]), statistics.median(ws[-q:])) if ws else None)
    return out


def draw(rows: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t = [r["t"] / 60 for r in rows]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.plot(t, [r["rss"] / MIB for r in rows], label="pgaccel RSS")
    ax.plot(t, [r["uss"] / MIB for r in rows], label="pgaccel USS")
    ax.plot(t, [r["children_rss"] / MIB for r in rows], label="its children's RSS", alpha=0.6)
    ax.set_xlabel("minutes")
    ax.set_ylabel("MiB")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--interval", type=float, default=5)
    ap.add_argument("--size", default="small")
    ap.add_argument("--spec", default=os.path.join(HERE, "specs", "soak.toml"))
    ap.add_argument("--json")
    ap.add_argument("--png")
    a = ap.parse_args()
    out = tempfile.mkdtemp(prefix="pgaccel-soak-")
    run_dir = os.path.join(out, "run")
    inner_path = os.path.join(out, "inner.jsonl")
    cmd = [sys.executable, os.path.join(HERE, "soak_sampler.py"), inner_path, str(a.interval),
           "lab", a.spec, "--size", a.size, "--yes", "--budget",
           f"{max(1, round(a.minutes))}m", "--out", run_dir]
    t0 = time.monotonic()
    log = open(os.path.join(out, "lab.log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    p = psutil.Process(proc.pid)
    rows: list[dict] = []
    try:
        while proc.poll() is None:
            r = sample(p, t0)
            if r:
                rows.append(r)
            time.sleep(a.interval)
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait()
    log.close()
    rc = proc.returncode
    run_json = os.path.join(run_dir, "run.json")
    walls = round_walls(run_json) if os.path.exists(run_json) else {}
    trials = 0
    if os.path.exists(run_json):
        with open(run_json) as f:
            trials = len(json.load(f).get("trials", []))
    inner = []
    if os.path.exists(inner_path):
        with open(inner_path) as f:
            inner = [json.loads(x) for x in f if x.strip()]
    first_walls = next(iter(walls.values()), [])
    first = (first_walls[0] if first_walls else 60) + 60     # prepare and the first round
    s = summarize(rows, walls, first, inner=inner, trials=trials)
    s.update(rc=rc, command=" ".join(cmd), log=os.path.join(out, "lab.log"))
    print(json.dumps(s, indent=2, default=str))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": s, "samples": rows, "inner": inner, "round_walls": walls}, f,
                      indent=1)
    if a.png and rows:
        draw(rows, a.png)
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
