"""How steadily this host's CPUs run: each CPU's speed in tenth-of-a-second windows.

Pairing cancels what two configs share; it cannot cancel a CPU whose speed moves between
one config's slice and the next's.  On the VM of November 30 (2 vCPUs) a loop pinned to
one CPU did 0.4 to 2 times its median work in a tenth of a second (CV 36-50% over 20 s),
each CPU on its own (the two CPUs' windows correlated -0.02), in stretches of about half a
second, while /proc/stat counted no steal time: the Insert Benchmark's q-step slices there
varied 13-17% where a steadier VM's varied 6-7% (docs/measurements.md, "CPUs that change
speed").  ``SpeedProbe`` (hostspeed.py) does not see it: it keeps the fastest of several
runs, which is how fast a CPU *can* run, not how much it delivers.

:func:`measure` starts one process per CPU this process may use, each pinned to its CPU, all
busy at once (as a benchmark keeps them), counting the turns of a fixed pure-Python loop in
consecutive windows from a common start; :func:`summarize` (pure) turns the counts into
each CPU's spread.  It costs :data:`SECONDS` of every CPU once, before a run's first round.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Mapping, Sequence

import numpy as np

SECONDS = 2.0          # measured once per run, every CPU busy
WINDOW_S = 0.1         # the lab's step slices (lab/paired.STEP_SLICE_S)
UNSTEADY_CV = 0.15     # a CPU whose windows vary this much (CV) makes the run say so
START_AFTER_S = 0.5    # the children start this long after they are launched

# The child: pinned to its CPU, it waits for the common start and counts loop turns per
# window; a window that began before it was ready is null.
_CHILD = r"""
import json, os, sys, time
cpu, start, n, w = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
os.sched_setaffinity(0, {cpu})
mono = time.monotonic
time.sleep(max(0.0, start - mono()))
out = []
for i in range(n):
    a, b = start + i * w, start + (i + 1) * w
    if mono() > a + w / 20:
        while mono() < b:
            pass
        out.append(None)
        continue
    k = 0
    while mono() < b:
        k += 1
    out.append(k)
print(json.dumps(out))
"""


def summarize(counts: Mapping[int, Sequence[int | None]], window_s: float = WINDOW_S
              ) -> dict[str, Any]:
    """Per CPU, its windows' loop counts as a spread: the coefficient of variation (``cv``)
    and the 5th and 95th percentiles over the median (``low``, ``high``); ``worst_cv`` the
    largest CV, ``unsteady`` whether it reaches :data:`UNSTEADY_CV`.  A CPU with fewer than
    three counted windows is left out (``cpus`` says how many were kept)."""
    per: dict[str, dict[str, Any]] = {}
    for cpu, xs in sorted(counts.items()):
        a = np.array([x for x in xs if x is not None], dtype=float)
        if a.size < 3 or not np.median(a) > 0:
            continue
        rel = a / np.median(a)
        per[str(cpu)] = {"cv": round(float(a.std() / a.mean()), 4),
                         "low": round(float(np.percentile(rel, 5)), 3),
                         "high": round(float(np.percentile(rel, 95)), 3),
                         "windows": int(a.size)}
    worst = max((p["cv"] for p in per.values()), default=None)
    return {"window_s": window_s, "per_cpu": per, "cpus": len(per), "worst_cv": worst,
            "unsteady": worst is not None and worst >= UNSTEADY_CV}


def text(s: Mapping[str, Any] | None) -> str:
    """One sentence for a fact sheet or the terminal; "" when not measured."""
    if not s or not s.get("per_cpu"):
        return ("not measured: " + s["error"]) if s and s.get("error") else ""
    per = s["per_cpu"]
    worst = max(per, key=lambda c: per[c]["cv"])
    w = per[worst]
    ms = f"{1000 * float(s.get('window_s') or WINDOW_S):.0f} ms"
    cvs = sorted(100 * p["cv"] for p in per.values())
    spread = (f"{cvs[0]:.0f}%" if len(cvs) == 1 or round(cvs[0]) == round(cvs[-1])
              else f"{cvs[0]:.0f}-{cvs[-1]:.0f}%")
    head = (f"every CPU busy for {_seconds(s)}, the work a CPU did per {ms} varied {spread} "
            f"(CV, {len(per)} CPU{'' if len(per) == 1 else 's'}); CPU {worst} did "
            f"{w['low']:.2f}-{w['high']:.2f} times its median (5th-95th percentile)")
    if s.get("unsteady"):
        head += (": an unsteady host. Configs that take turns see different CPU speeds, so "
                 "intervals come out wider and need more rounds; a host with dedicated "
                 "cores decides sooner")
    return head


def _seconds(s: Mapping[str, Any]) -> str:
    n = max((p["windows"] for p in s["per_cpu"].values()), default=0)
    return f"{n * float(s.get('window_s') or WINDOW_S):.3g} s"


def measure(seconds: float = SECONDS, window_s: float = WINDOW_S,
            cpus: Sequence[int] | None = None) -> dict[str, Any]:
    """:func:`summarize` of ``seconds`` of every CPU in ``cpus`` (default: this process's
    affinity) busy at once; ``{"error": why}`` where that cannot be measured (no CPU
    affinity, a child that failed).  Never raises for the host: a run goes on without it."""
    if cpus is None:
        try:
            cpus = sorted(os.sched_getaffinity(0))
        except (AttributeError, OSError) as e:
            return {"error": f"no CPU affinity here ({e})"}
    n = max(3, int(round(seconds / window_s)))
    start = time.monotonic() + START_AFTER_S
    procs: list[tuple[int, subprocess.Popen]] = []
    try:
        for cpu in cpus:
            procs.append((cpu, subprocess.Popen(
                [sys.executable, "-c", _CHILD, str(cpu), repr(start), str(n), str(window_s)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
        counts: dict[int, list[int | None]] = {}
        deadline = start + n * window_s + 10.0
        for cpu, p in procs:
            got, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            if p.returncode != 0:
                why = (err.strip().splitlines() or ["no output"])[-1]
                return {"error": f"the loop on CPU {cpu} failed: {why}"}
            counts[cpu] = json.loads(got)
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        return {"error": f"the loops did not finish ({type(e).__name__}: {e})"}
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return summarize(counts, window_s)
