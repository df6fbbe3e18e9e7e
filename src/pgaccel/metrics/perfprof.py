"""Where a running server spends its CPU: ``perf stat`` counters and a ``perf record``
call-graph sample of every server process, while a workload runs.

Both attach to the postmaster with inheritance, so every backend and worker it forks during
the window is counted, and a backend's counts are added when it exits (the window ends after
the load generator has disconnected).  Events:

* software events, which every Linux has: task-clock (CPU time), context switches, CPU
  migrations, page faults;
* hardware events where the machine has a PMU: cycles, instructions (so IPC), branch misses,
  iTLB and dTLB load misses, L1 instruction cache misses.  A VM without a virtual PMU reports
  them as ``<not supported>``: they are recorded as unavailable, never estimated;
* ``perf record -e cpu-clock -g``: timer-driven samples with call stacks (frame pointers),
  folded into ``frame;frame;leaf count`` lines for a flame graph.

Parsing and folding are pure (:func:`parse_stat_csv`, :func:`fold_script`,
:func:`top_functions`); :class:`PerfWindow` runs the two perf processes.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..errors import NotFound, ServerError

SOFTWARE_EVENTS = ("task-clock", "context-switches", "cpu-migrations", "page-faults")
HARDWARE_EVENTS = ("cycles", "instructions", "branch-misses", "iTLB-load-misses",
                   "dTLB-load-misses", "L1-icache-load-misses")
SAMPLE_HZ = 499        # prime, so sampling does not lock onto a periodic activity


def perf_binary() -> str:
    path = shutil.which("perf")
    if path is None:
        raise NotFound("perf is not installed; the live profile counts and samples the server "
                       "with it.", "Run `apt-get install linux-perf` (or ./install.sh), or "
                       "leave the live profile out with --live-seconds 0.")
    return path


def parse_stat_csv(text: str) -> dict[str, float | None]:
    """``perf stat -x,`` output: event -> count (task-clock in ms), None when the machine
    cannot count it (``<not supported>``, ``<not counted>``)."""
    out: dict[str, float | None] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(",")
        if len(parts) < 3:
            continue
        value, event = parts[0].strip(), parts[2].strip()
        event = re.sub(r":[ukhHG]+$", "", event)      # "cycles:u" -> "cycles"
        if not event:
            continue
        try:
            out[event] = float(value)
        except ValueError:
            out[event] = None
    return out


_FRAME = re.compile(r"^\s*[0-9a-f]+\s+(.+?)\s+\((.*)\)\s*$")


def _is_kernel(dso: str) -> bool:
    return "kernel.kallsyms" in dso or dso.startswith("[kernel") or dso.endswith(".ko")


def _frame_name(sym: str, dso: str) -> str:
    """A frame's name; kernel frames end in ``_[k]`` (as FlameGraph's folding marks them)."""
    sym = re.sub(r"\+0x[0-9a-f]+$", "", sym.strip())
    if sym in ("[unknown]", ""):
        base = os.path.basename(dso) if dso and dso != "unknown" else "?"
        return f"[{base}]"
    return f"{sym}_[k]" if _is_kernel(dso) else sym


def _object(dso: str) -> str:
    if _is_kernel(dso):
        return "kernel"
    return os.path.basename(dso) or "?"


def fold_script(text: str) -> dict[str, int]:
    """``perf script`` output (samples with call stacks, leaf first) folded into
    ``comm;root;...;leaf -> samples``.  Consecutive unknown frames of the same object are
    merged (static functions of a stripped binary have no names)."""
    folded: Counter[str] = Counter()
    comm: str | None = None
    frames: list[str] = []

    def flush() -> None:
        if comm is not None:
            stack = list(reversed(frames))
            merged: list[str] = []
            for f in stack:
                if not (merged and f.startswith("[") and merged[-1] == f):
                    merged.append(f)
            folded[";".join([comm, *merged])] += 1

    for line in text.splitlines():
        if not line.strip():
            flush()
            comm, frames = None, []
            continue
        if not line[0].isspace():
            flush()
            comm, frames = line.split()[0], []
            continue
        m = _FRAME.match(line)
        if m and comm is not None:
            frames.append(_frame_name(m.group(1), m.group(2)))
    flush()
    return dict(folded)


def leaf_objects(text: str) -> dict[str, int]:
    """Samples by the object the CPU was executing in (the leaf frame's binary or library;
    ``kernel`` for the kernel): how much of the server's CPU time is its own code."""
    out: Counter[str] = Counter()
    leaf_next = False
    for line in text.splitlines():
        if line.strip() and not line[0].isspace():
            leaf_next = True
            continue
        m = _FRAME.match(line) if leaf_next else None
        if m:
            out[_object(m.group(2))] += 1
            leaf_next = False
    return dict(out)


def top_functions(folded: dict[str, int], n: int = 15) -> list[tuple[str, int, int]]:
    """The ``n`` functions with the most samples: (name, self samples, total samples).
    Self = the function was the leaf; total = it was anywhere on the stack (counted once
    per sample)."""
    self_c: Counter[str] = Counter()
    total_c: Counter[str] = Counter()
    for stack, count in folded.items():
        frames = stack.split(";")[1:] or stack.split(";")
        self_c[frames[-1]] += count
        for f in set(frames):
            total_c[f] += count
    names = sorted(self_c, key=lambda f: (-self_c[f], f))[:n]
    return [(f, self_c[f], total_c[f]) for f in names]


@dataclass(frozen=True)
class LiveProfile:
    """What the server did during one window: counts, per-operation figures, samples."""
    seconds: float
    ops: int
    counts: dict[str, float | None]
    folded: dict[str, int] = field(default_factory=dict)
    objects: dict[str, int] = field(default_factory=dict)

    @property
    def hardware(self) -> bool:
        return any(self.counts.get(e) is not None for e in HARDWARE_EVENTS)

    @property
    def unavailable(self) -> list[str]:
        return [e for e in (*SOFTWARE_EVENTS, *HARDWARE_EVENTS) if self.counts.get(e) is None]

    def per_op(self) -> dict[str, float | None]:
        """Each count per operation (task-clock as server CPU µs per op), and IPC."""
        out: dict[str, float | None] = {}
        for e, v in self.counts.items():
            if v is None or not self.ops:
                out[e] = None
            elif e == "task-clock":
                out["cpu_us"] = v * 1000.0 / self.ops
            else:
                out[e] = v / self.ops
        cyc, ins = self.counts.get("cycles"), self.counts.get("instructions")
        out["ipc"] = ins / cyc if cyc and ins is not None else None
        return out

    @property
    def samples(self) -> int:
        return sum(self.folded.values())

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "ops": self.ops, "counts": self.counts,
                "per_op": self.per_op(), "hardware_counters": self.hardware,
                "unavailable": self.unavailable, "samples": self.samples,
                "top_functions": [{"function": f, "self": s, "total": t}
                                  for f, s, t in top_functions(self.folded)],
                "objects": self.objects, "folded": self.folded}


class PerfWindow:
    """``with PerfWindow(postmaster_pid) as w: <run the load>``; then ``w.result(ops)``.

    Starts ``perf stat`` and ``perf record`` attached to the postmaster (children
    inherited), stops both with SIGINT on exit and reads what they wrote.  Temp files are
    removed in every case."""

    def __init__(self, pid: int, *, record: bool = True, hz: int = SAMPLE_HZ) -> None:
        self.pid, self.record, self.hz = pid, record, hz
        self.perf = perf_binary()
        self._procs: list[subprocess.Popen] = []
        self._dir = ""
        self._t0 = self._t1 = 0.0

    def __enter__(self) -> "PerfWindow":
        self._dir = tempfile.mkdtemp(prefix="pgaccel-perf-")
        events = ",".join((*SOFTWARE_EVENTS, *HARDWARE_EVENTS))
        self._procs.append(subprocess.Popen(
            [self.perf, "stat", "-x,", "-e", events, "-p", str(self.pid), "-o",
             os.path.join(self._dir, "stat.csv")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        if self.record:
            self._procs.append(subprocess.Popen(
                [self.perf, "record", "-q", "-F", str(self.hz), "-e", "cpu-clock", "-g",
                 "-p", str(self.pid), "-o", os.path.join(self._dir, "perf.data")],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        time.sleep(0.3)                 # perf attaches before the load starts
        for p in self._procs:
            if p.poll() is not None:
                err = (p.stderr.read() if p.stderr else "").strip()
                self._stop()
                raise ServerError(f"perf could not attach to the server (pid {self.pid}): "
                                  f"{err[:300]}",
                                  "Run pgaccel as root, or lower "
                                  "/proc/sys/kernel/perf_event_paranoid to 1 or less.")
        self._t0 = time.monotonic()
        return self

    def _stop(self) -> None:
        for p in self._procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in self._procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def __exit__(self, *exc: Any) -> None:
        self._t1 = time.monotonic()
        try:
            self._stop()
            if exc[0] is None:
                self._read()
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)

    def _read(self) -> None:
        with open(os.path.join(self._dir, "stat.csv")) as f:
            self._counts = parse_stat_csv(f.read())
        self._folded: dict[str, int] = {}
        self._objects: dict[str, int] = {}
        data = os.path.join(self._dir, "perf.data")
        if self.record and os.path.exists(data):
            r = subprocess.run([self.perf, "script", "-i", data, "-F", "comm,ip,sym,dso"],
                               capture_output=True, text=True, timeout=600)
            self._folded = fold_script(r.stdout)
            self._objects = leaf_objects(r.stdout)

    def result(self, ops: int) -> LiveProfile:
        return LiveProfile(round(self._t1 - self._t0, 3), ops, self._counts, self._folded,
                           self._objects)
