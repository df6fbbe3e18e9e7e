"""How steadily this host's CPUs run: the work each CPU delivers per tenth of a second.

Pairing cancels what two configs share; it cannot cancel a CPU whose speed moves between
one config's slice and the next's.  On the VM of November 30 (2 vCPUs) a loop pinned to
one CPU did 0.4 to 2 times its median work in a tenth of a second (CV 36-50% over 20 s),
each CPU on its own (the two CPUs' windows correlated -0.02), in stretches of about half a
second, while /proc/stat counted no steal time: the Insert Benchmark's q-step slices there
varied 13-17% where a steadier VM's varied 6-7% (docs/measurements.md, "CPUs that change
speed").  ``SpeedProbe`` (hostspeed.py) does not see it: it keeps the fastest of several
runs in thread CPU time, which is how fast a CPU *can* run.  This counts what it delivers
in wall-clock windows, as a benchmark's slices do: its speed and its share of the time
together.

:func:`measure` starts one process per CPU this process may use (no more than a cgroup's
CPU quota allows, which would otherwise throttle the loops themselves), each pinned to its
CPU, all busy at once (as a benchmark keeps them), counting the turns of a fixed
pure-Python loop in consecutive windows from a common start; :func:`summarize` (pure) turns
the counts into each CPU's spread.  It costs about :data:`START_AFTER_S` + :data:`SECONDS`
of every CPU, once before a run's first round and in ``pgaccel probe``.
"""

from __future__ import annotations

import json
import math
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
MIN_WINDOWS = 3        # a CPU with fewer counted windows is left out

# The child: dies with its parent (PR_SET_PDEATHSIG), pinned to its CPU, waits for the
# common start and counts turns of a fixed piece of work per window.  Windows that began
# before it was ready are null; from the first it entered in time, every window counts,
# however late a stall lets it look at the clock (a stall is what it measures).
_CHILD = r"""
import ctypes, json, os, signal, sys, time
try:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)
except (OSError, AttributeError):
    pass
cpu, start, n, w = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
os.sched_setaffinity(0, {cpu})
mono = time.monotonic
time.sleep(max(0.0, start - mono()))
late = mono() - start
first = 0 if late <= w / 20 else int(late // w) + 1
out = [None] * min(first, n)
for i in range(first, n):
    b = start + (i + 1) * w
    k = 0
    while mono() < b:
        s = 0
        for j in range(50):
            s += j
        k += 1
    out.append(k)
print(json.dumps(out))
"""


def summarize(counts: Mapping[int, Sequence[int | None]], window_s: float = WINDOW_S
              ) -> dict[str, Any]:
    """Per CPU, its windows' loop counts as a spread: the coefficient of variation (``cv``)
    and the 5th and 95th percentiles over the median (``low``, ``high``); ``worst_cv`` the
    largest CV, ``unsteady`` whether it reaches :data:`UNSTEADY_CV`.  A CPU with fewer than
    :data:`MIN_WINDOWS` counted windows is left out (``cpus`` kept of ``measured``)."""
    per: dict[str, dict[str, Any]] = {}
    for cpu, xs in sorted(counts.items()):
        a = np.array([x for x in xs if x is not None], dtype=float)
        if a.size < MIN_WINDOWS or not np.median(a) > 0:
            continue
        rel = a / np.median(a)
        per[str(cpu)] = {"cv": round(float(a.std() / a.mean()), 4),
                         "low": round(float(np.percentile(rel, 5)), 3),
                         "high": round(float(np.percentile(rel, 95)), 3),
                         "windows": int(a.size)}
    worst = max((p["cv"] for p in per.values()), default=None)
    n = max((len(xs) for xs in counts.values()), default=0)
    return {"window_s": window_s, "seconds": round(n * window_s, 3), "per_cpu": per,
            "cpus": len(per), "measured": len(counts), "worst_cv": worst,
            "unsteady": worst is not None and worst >= UNSTEADY_CV}


def text(s: Mapping[str, Any] | None) -> str:
    """One sentence for a fact sheet or the terminal; "" when not measured."""
    where = f"{s['where']}: " if s and s.get("where") else ""
    if not s or not s.get("per_cpu"):
        return (f"{where}not measured: {s['error']}") if s and s.get("error") else ""
    per = s["per_cpu"]
    worst = max(per, key=lambda c: per[c]["cv"])
    w = per[worst]
    ms = f"{1000 * float(s.get('window_s') or WINDOW_S):.0f} ms"
    cvs = sorted(100 * p["cv"] for p in per.values())
    spread = (f"{cvs[0]:.0f}%" if round(cvs[0]) == round(cvs[-1])
              else f"{cvs[0]:.0f}-{cvs[-1]:.0f}%")
    measured = int(s.get("measured") or len(per))
    cpus = (f"{len(per)} CPU{'' if len(per) == 1 else 's'}" if measured == len(per)
            else f"{len(per)} of {measured} CPUs counted")
    busy = f" for {s['seconds']:g} s" if s.get("seconds") else ""
    head = (f"{where}every CPU measured busy{busy}, the work a CPU did per {ms} varied "
            f"{spread} (CV, {cpus}); CPU {worst} did {w['low']:.2f}-{w['high']:.2f} times "
            "its median (5th-95th percentile)")
    if s.get("limited"):
        head += f"; {s['limited']}"
    if s.get("unsteady"):
        head += (": an unsteady host. Configs that take turns see different CPU speeds, so "
                 "intervals come out wider and need more rounds; a host with dedicated "
                 "cores decides sooner")
    return head


def usable_cpus(allowed: Sequence[int], cpu_limit: float | None) -> tuple[list[int], str]:
    """The CPUs to measure: ``allowed``, or its highest ``floor(cpu_limit)`` (at least one)
    under a cgroup CPU quota smaller than it, which would throttle loops on all of them;
    and a note saying so ("" when all)."""
    cpus = sorted(allowed)
    if cpu_limit and cpu_limit < len(cpus):
        keep = max(1, math.floor(cpu_limit))
        return cpus[-keep:], (f"{keep} of {len(cpus)} CPUs measured: the cgroup allows "
                              f"{cpu_limit:g} CPUs")
    return cpus, ""


def measure(seconds: float = SECONDS, window_s: float = WINDOW_S,
            cpus: Sequence[int] | None = None, *, cpu_limit: float | None = None,
            where: str = "") -> dict[str, Any]:
    """:func:`summarize` of ``seconds`` of every CPU in ``cpus`` (default: this process's
    affinity, within ``cpu_limit``: :func:`usable_cpus`) busy at once, with ``where`` (which
    machine, when the server is not on this one); ``{"error": why}`` where it cannot be
    measured (no CPU affinity, no Python to start, a loop that failed).  Never raises for
    the host: a run goes on without it.  Its loops die with this process."""
    base: dict[str, Any] = {"where": where} if where else {}
    if cpus is None:
        try:
            cpus = sorted(os.sched_getaffinity(0))
        except (AttributeError, OSError) as e:
            return {**base, "error": f"no CPU affinity here ({e})"}
    cpus, limited = usable_cpus(cpus, cpu_limit)
    if not sys.executable:
        return {**base, "error": "no Python interpreter to start the loops with"}
    n = max(MIN_WINDOWS, int(round(seconds / window_s)))
    start = time.monotonic() + START_AFTER_S
    wait_s = START_AFTER_S + n * window_s + 10.0
    procs: list[tuple[int, subprocess.Popen]] = []
    try:
        for cpu in cpus:
            procs.append((cpu, subprocess.Popen(
                [sys.executable, "-I", "-c", _CHILD, str(cpu), repr(start), str(n),
                 str(window_s)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
        counts: dict[int, list[int | None]] = {}
        deadline = time.monotonic() + wait_s
        for cpu, p in procs:
            got, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            if p.returncode != 0:
                why = (err.strip().splitlines() or ["no output"])[-1]
                return {**base, "error": f"the loop on CPU {cpu} failed: {why}"}
            counts[cpu] = json.loads(got)
    except subprocess.TimeoutExpired:
        return {**base, "error": f"the loops did not finish within {wait_s:.0f} s"}
    except (OSError, ValueError) as e:
        return {**base, "error": f"the loops could not run ({type(e).__name__}: {e})"}
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    out = {**base, **summarize(counts, window_s)}
    if limited:
        out["limited"] = limited
    return out
