"""How long should a side-by-side slice be?  A/A labs at several slice lengths, interleaved.

Side by side (lab/paired.py) two servers take turns in slices; the shorter the slices, the
more of the host's second-to-second speed two configs share, and the more of each round's
time falls between slices.  This runs ``--labs`` A/A labs (benchmarks/specs/aa-select-only
.toml with tpcb-like added, nothing decided early, ``--rounds`` rounds each at --size small)
whose slice length (``paired.SLICE_S``) takes the ``--lengths`` in turn, mirrored (1.0 0.5
0.25 0.25 0.5 1.0), so each length sees the same hour.  Per workload and length it prints:
how far the rounds' A2/A pairs are apart (RMS of their log ratios: an A/A's true ratio is 1),
the sd of one slice pair's log ratio, and what that predicts for a round (sd / sqrt(slices
per config)) if the pairs were independent; and each lab's wall time.

Measured here on November 27 (docs/measurements.md, "How long a slice"): 2.2% apart at 0.25 s
against 4.4% at 1 s (select-only), 2.3% against 3.9% (tpcb-like), 4% more wall time.

With ``--steps`` the labs are benchmarks/specs/aa-insert-benchmark.toml's instead (its small
size, ``--rounds`` rounds), and the length varied is the Insert Benchmark's steps' slice
(``paired.STEP_SLICE_S``): per step the same figures (l.x, one CREATE INDEX, is not sliced).

Usage:  python benchmarks/slice_length.py [--steps] [--lengths 1.0,0.5,0.25] [--rounds 6]
        [--out DIR] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH = ("import sys, pgaccel.lab.paired as p; setattr(p, sys.argv[1], float(sys.argv[2])); "
          "sys.argv = ['pgaccel'] + sys.argv[3:]; from pgaccel.cli import main; main()")


def _small_run(spec: str, small: str, extra: list[str] = ()) -> str:
    """benchmarks/specs/``spec`` with its [run] table's small size replaced by ``small``,
    nothing decided early, and ``extra`` lines appended."""
    with open(os.path.join(HERE, "specs", spec)) as f:
        lines = f.read().splitlines()
    out, in_run = [], False
    for line in lines:
        if line.startswith("["):
            in_run = line.strip() == "[run]"
        if in_run and line.startswith("until_decided"):
            line = "until_decided = false"
        if in_run and line.startswith("small ="):
            line = small
        out.append(line)
    return "\n".join([*out, *extra]) + "\n"


def steps_spec_text(rounds: int) -> str:
    """aa-insert-benchmark.toml with ``rounds`` rounds at --size small and room for them."""
    return _small_run("aa-insert-benchmark.toml", f'small = {{ rounds = {rounds}, '
                      f'max_rounds = {rounds}, budget = "60m" }}')


def spec_text(rounds: int) -> str:
    """aa-select-only.toml with ``rounds`` rounds at --size small, and tpcb-like added."""
    return _small_run("aa-select-only.toml",
                      f'small = {{ rounds = {rounds}, max_rounds = {rounds}, duration = 8, '
                      f'warmup = 4, budget = "30m" }}',
                      ["", "[[workload]]", 'name = "tpcb-like"', "clients = 4", "scale = 20",
                       "small = { scale = 10 }"])


def pairs(doc: dict) -> dict[str, dict]:
    """Per workload: the rounds' log ratios A2/A, the slice pairs' log ratios, slices."""
    by: dict[tuple[str, int], dict] = {}
    for t in doc["trials"]:
        by.setdefault((t["workload"], t["round"]), {})[t["variant"]] = t
    out: dict[str, dict] = {}
    for (wl, _), ts in sorted(by.items()):
        if set(ts) != {"A", "A2"}:
            continue
        a, b = ts["A"], ts["A2"]
        o = out.setdefault(wl, {"rounds": [], "slices": [], "k": []})
        o["rounds"].append(math.log(b["throughput"] / a["throughput"]))
        o["slices"] += [math.log(y / x) for x, y in zip(a["series"], b["series"])
                        if x > 0 and y > 0]
        o["k"].append(len(a["series"]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", action="store_true",
                    help="the Insert Benchmark's steps (STEP_SLICE_S) instead of pgbench's")
    ap.add_argument("--lengths", default="1.0,0.5,0.25")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    lengths = [float(x) for x in a.lengths.split(",")]
    order = lengths + lengths[::-1]
    out = a.out or tempfile.mkdtemp(prefix="slice-length-")
    spec = os.path.join(out, "aa.toml")
    with open(spec, "w") as f:
        f.write(steps_spec_text(a.rounds) if a.steps else spec_text(a.rounds))
    knob = "STEP_SLICE_S" if a.steps else "SLICE_S"
    acc: dict[tuple[str, float], dict] = {}
    walls: dict[float, list[float]] = {}
    for i, s in enumerate(order):
        run_dir = os.path.join(out, f"lab{i + 1}-{s}")
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-c", LAUNCH, knob, str(s), "lab", spec, "--size",
                            "small", "--yes", "--out", run_dir, "--store",
                            os.path.join(out, "store.db")], capture_output=True, text=True)
        walls.setdefault(s, []).append(time.monotonic() - t0)
        if r.returncode != 0:
            print(f"lab {i + 1} (slice {s} s) failed:\n{r.stderr[-2000:]}", file=sys.stderr)
            return 1
        with open(os.path.join(run_dir, "run.json")) as f:
            for wl, o in pairs(json.load(f)).items():
                t = acc.setdefault((wl, s), {"rounds": [], "slices": [], "k": []})
                for key in t:
                    t[key] += o[key]
        print(f"lab {i + 1}: slice {s} s, {walls[s][-1]:.0f} s", flush=True)
    rows = []
    for (wl, s), o in sorted(acc.items()):
        rms = math.sqrt(statistics.fmean(x * x for x in o["rounds"]))
        sd = statistics.stdev(o["slices"])
        k = statistics.fmean(o["k"])
        rows.append({"workload": wl, "slice_s": s, "rounds": len(o["rounds"]),
                     "round_rms": rms, "slice_pair_sd": sd, "slices_per_config": k,
                     "predicted": sd / math.sqrt(k),
                     "lab_wall_s": statistics.fmean(walls[s])})
        print(f"{wl:12} slice {s:5} s: {len(o['rounds']):3} rounds, pairs {100 * rms:4.1f}% "
              f"apart; a slice pair {100 * sd:4.1f}% x {k:.0f} slices -> predicted "
              f"{100 * sd / math.sqrt(k):4.1f}%; a lab {statistics.fmean(walls[s]):.0f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
