"""Would a CPU-speed covariate narrow the Insert Benchmark's round pairs?  Labs with a speed
probe on every CPU, analysed raw and adjusted.

On the slow 2-vCPU VM of November 30 each vCPU changed speed on its own, by up to four
times, in stretches of about half a second (docs/measurements.md, "CPUs that change
speed"), and pairing by round left each slice's own share of it.  This measures that share
as it happens: a small C program per CPU (pinned, SCHED_FIFO where allowed) times a fixed
loop of about 20 µs every millisecond and logs (wall clock, seconds).  A slice's speed is the
mean over the CPUs of 1 / seconds of the loops that ended inside it, over the run's median.
Then, per step, ``beta`` is the slope of a slice's log rate on its log speed within each
trial (variant and round demeaned: what speed does to a slice, not what a variant does), and
a trial's adjusted rate is its slices' rates divided by speed ** beta, weighted by their
seconds.  For each step it prints beta, the share of the slices' variance speed explains
within trials, how far the rounds' pairs are apart raw and adjusted (sd of the log ratios),
both effects with 95% intervals, and the speed the other variant's slices saw over the
base's (near 1 when speed is the host's, not the variant's).

The default lab is two servers of one configuration (benchmarks/specs/aa-insert-benchmark
.toml with l.i0, l.x and the four q steps, 4 rounds, the load steps sized to the host): an
A/A, whose true ratio is 1.  ``--spec`` runs any two-variant lab instead (a real difference:
does the adjusted effect agree with the raw one?).  Needs gcc; run as root for SCHED_FIFO.

Measured here on November 30 (docs/measurements.md, "A CPU-speed covariate"): in three A/As
the adjusted pairs were a third closer (2.51% -> 1.65%, RMS over the steps); in three labs of
15.20 against 18.6 the probe read the CPUs faster in 18's q-step slices in 12 of 12
step-labs (+1.3 ... +16.5%), so the covariate carries the variant and pgaccel does not use it.

Usage:  python benchmarks/speed_covariate.py [--labs 3] [--spec F] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from scipy import stats

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_REALTIME,&t);
  return t.tv_sec+t.tv_nsec*1e-9;}
int main(int c,char**v){double secs=atof(v[1]),t0=now();volatile unsigned long x=0;
  struct timespec gap={0,1000000};
  while(now()-t0<secs){double s=now();for(int j=0;j<20000;j++)x+=j;double e=now();
    printf("%.6f %.9f\n",e,e-s);nanosleep(&gap,NULL);}
  return 0;}
"""


def spec_text(rounds: int) -> str:
    """aa-insert-benchmark.toml at --size small with l.i0, l.x and the q steps, ``rounds``
    rounds, nothing decided early."""
    with open(os.path.join(HERE, "specs", "aa-insert-benchmark.toml")) as f:
        text = f.read()
    text = re.sub(r"(?m)^small = \{ rounds.*$",
                  f'small = {{ rounds = {rounds}, max_rounds = {rounds}, budget = "30m" }}\n'
                  "until_decided = false", text)
    return re.sub(r'steps = "[^"]*"', 'steps = "l.i0,l.x,qr100,qp100,qr500,qp500", '
                  'load_seconds = 5, index_passes = 2', text)


def run_lab(spec: str, probe: str, seconds: int) -> tuple[str, list[str]]:
    """The lab with a probe per CPU; returns its run.json and the probes' log files."""
    cpus = sorted(os.sched_getaffinity(0))
    logs, procs = [], []
    rt = ["chrt", "-f", "1"] if os.geteuid() == 0 else []
    for c in cpus:
        log = tempfile.NamedTemporaryFile("w", suffix=f".cpu{c}", delete=False)
        logs.append(log.name)
        procs.append(subprocess.Popen(["taskset", "-c", str(c), *rt, probe, str(seconds)],
                                      stdout=log))
    try:
        out = subprocess.run([sys.executable, "-c", "from pgaccel.cli import main; main()",
                              "lab", spec, "--size", "small", "--yes"],
                             capture_output=True, text=True)
    finally:
        for p in procs:
            p.terminate()
            p.wait()
    m = re.search(r"Results: (\S+/run\.json)", out.stdout + out.stderr)
    if out.returncode != 0 or not m:
        sys.exit(f"the lab failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
    return m.group(1), logs


def analyse(doc: dict, logs: list[str]) -> dict[str, dict[str, float]]:
    """Per step: beta, r2, pair sd raw and adjusted, effects and the speed ratio."""
    probes = []
    for f in logs:
        with open(f) as fh:       # the last line may be cut short by the probe's stop
            p = np.array([[float(x) for x in ln.split()] for ln in fh
                          if len(ln.split()) == 2 and ln.endswith("\n")])
        p = p[p[:, 1] > 0]
        probes.append(np.column_stack([p[:, 0], 1.0 / p[:, 1]]))
    ref = float(np.median(np.concatenate([p[:, 1] for p in probes])))

    def speed(s: float, e: float) -> float:
        v = []
        for p in probes:
            i, j = np.searchsorted(p[:, 0], [s, e])
            if j > i:
                v.append(p[i:j, 1].mean())
        return float(np.mean(v)) / ref if len(v) == len(probes) else math.nan

    names = [v["name"] for v in doc["variants"]]
    base, other = names[0], names[1]
    by: dict[str, dict[int, dict[str, dict]]] = {}
    for t in doc["trials"]:
        step = t["metrics"].get("step") or t["workload"]
        by.setdefault(step, {}).setdefault(t["round"], {})[t["variant"]] = t
    out = {}
    for step, rounds in by.items():
        rows = []        # (log rate, log speed, seconds, trial key)
        for r, ts in rounds.items():
            for v, t in ts.items():
                w, ser = t["metrics"].get("slice_windows") or [], t["series"] or []
                if len(w) != len(ser):
                    continue
                for (s, e), x in zip(w, ser):
                    sp = speed(s, e)
                    if x > 0 and sp == sp:
                        rows.append((math.log(x), math.log(sp), e - s, (v, r)))
        if not rows:
            continue
        keys = sorted({k for *_, k in rows})
        mean = {k: np.mean([(a, b) for a, b, _, kk in rows if kk == k], axis=0) for k in keys}
        dm = np.array([(a - mean[k][0], b - mean[k][1]) for a, b, _, k in rows])
        beta = float((dm[:, 0] * dm[:, 1]).sum() / (dm[:, 1] ** 2).sum())
        r2 = 1 - float(((dm[:, 0] - beta * dm[:, 1]) ** 2).sum() / (dm[:, 0] ** 2).sum())

        def level(k, adjust: bool, of_speed: bool = False) -> float:
            sel = [(a, b, d) for a, b, d, kk in rows if kk == k]
            d = np.array([x[2] for x in sel])
            y = np.array([x[1] if of_speed else x[0] - (beta * x[1] if adjust else 0)
                          for x in sel])
            return math.log((np.exp(y) * d).sum() / d.sum())
        pairs = [r for r, ts in rounds.items() if {base, other} <= set(ts)
                 and (base, r) in mean and (other, r) in mean]
        res = {"beta": beta, "r2": r2, "rounds": len(pairs)}
        for name, adj, sp in (("raw", False, False), ("adjusted", True, False),
                              ("speed", False, True)):
            d = np.array([level((other, r), adj, sp) - level((base, r), adj, sp)
                          for r in pairs])
            half = (stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
                    if len(d) > 2 else math.nan)
            res[name] = {"sd": float(d.std(ddof=1)) if len(d) > 1 else math.nan,
                         "effect": math.expm1(d.mean()), "low": math.expm1(d.mean() - half),
                         "high": math.expm1(d.mean() + half)}
        out[step] = res
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--labs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--spec", help="a two-variant lab spec (default: the A/A above)")
    ap.add_argument("--json")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="speedcov-")
    probe = os.path.join(work, "probe")
    with open(probe + ".c", "w") as f:
        f.write(PROBE_C)
    subprocess.run(["gcc", "-O1", "-o", probe, probe + ".c"], check=True)
    spec = a.spec
    if spec is None:
        spec = os.path.join(work, "aa.toml")
        with open(spec, "w") as f:
            f.write(spec_text(a.rounds))
    results = {}
    for _ in range(a.labs):
        path, logs = run_lab(spec, probe, 3600)
        with open(path) as f:
            doc = json.load(f)
        run_id = doc["run_id"]
        results[run_id] = analyse(doc, logs)
        for f in logs:
            os.unlink(f)
        print(f"--- {run_id}")
        for step, r in results[run_id].items():
            e = lambda x: f"{x['effect']:+.2%} ({x['low']:+.2%} … {x['high']:+.2%})"
            print(f"{step:6s} beta {r['beta']:.2f} r2 {r['r2']:.2f} | pairs' sd raw "
                  f"{r['raw']['sd']:.2%} adjusted {r['adjusted']['sd']:.2%} | effect raw "
                  f"{e(r['raw'])} adjusted {e(r['adjusted'])} | speed {e(r['speed'])}",
                  flush=True)
    shutil.rmtree(work, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
