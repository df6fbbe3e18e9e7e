"""How fast this machine's CPUs ran during a trial: a fixed piece of work, timed in CPU time.

On a virtual machine the CPUs can run slower for a minute or so (a neighbour on the same
cores or caches): every process then needs more CPU time for the same work, and neither
steal time nor other processes show it (metrics/noise.py; once seen here as pgbench and the
server both needing about 20% more CPU per operation in both configs at once).  The load
generator's CPU per operation shows it too, but that also moves with the server's settings
(pgbench spends more CPU per transaction when the server answers more slowly), so it is not
a measure of the machine alone.

:class:`SpeedProbe` is: a thread that every ``interval`` seconds runs the same small
pure-Python loop ``reps`` times and keeps the fastest run's *thread CPU time* in
microseconds.  CPU time leaves out the time the thread waits for a CPU, so a busy machine
does not slow the probe, while slower instructions do; the fastest of ``reps`` leaves out
a run that an interrupt or a cold cache cut into.  It costs about 0.5% of one CPU.

Measured here: about 155-160 µs per sample while a benchmark keeps both CPUs busy; over 254
trials of 25 runs, a trial's median was within 1% of its config's median in 91% of trials
and within 3% in 96%.  About 200 µs when the machine is idle (why is not known; probably
caches that other tenants' work displaced meanwhile), so compare probes of trials that load
the machine alike, as the trials of one config on one workload do (``noise.slow_probe``).

The probe's thread runs on one CPU, the same for every probe of a process
(:func:`probe_cpu`): on a 16-CPU VM (issue 41) an unpinned probe took about 180 µs on some
vCPUs and 260 µs on others while the trials' throughput was equal, so a trial's probe said
which vCPU its thread had landed on; that is how one trial in three there was flagged "47-54%
slower" on an idle machine.  Pinned, the probes of a run compare one CPU with itself.
"""

from __future__ import annotations

import os
import statistics
import threading
import time

WORK = 3000           # loop iterations per run: about 160 µs on this machine class


def _work(n: int = WORK) -> int:
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def sample_us(reps: int = 7) -> float:
    """The fastest of ``reps`` runs of the fixed loop, in thread CPU microseconds."""
    best = None
    for _ in range(max(1, reps)):
        a = time.thread_time_ns()
        _work()
        d = time.thread_time_ns() - a
        best = d if best is None or d < best else best
    return best / 1e3


def probe_cpu(allowed: set[int] | frozenset[int] | None = None) -> int | None:
    """The CPU every speed probe of this process runs on: the highest-numbered one it may use
    (``allowed``, default this process's affinity; CPU 0 takes more of the interrupts).
    None where affinity is not available."""
    if allowed is None:
        try:
            allowed = os.sched_getaffinity(0)
        except (AttributeError, OSError):
            return None
    return max(allowed) if allowed else None


class SpeedProbe:
    """Samples :func:`sample_us` every ``interval`` seconds in a thread, between
    ``__enter__`` and ``__exit__`` while not paused; :meth:`median_us` is what the samples
    showed.  ``paused=True`` starts it paused: a server measured in slices
    (metrics/sliced.py) resumes it for its own slices only, so each config's probe times the
    CPUs while that config's load runs, and two configs' probes of one round can differ.
    The thread runs on ``cpu`` (default :func:`probe_cpu`; None: wherever the kernel puts it);
    :attr:`cpu` is where it ran, None if pinning failed."""

    def __init__(self, interval: float = 0.25, reps: int = 7, paused: bool = False,
                 cpu: int | None = -1):
        self.interval, self.reps = interval, reps
        self.cpu = probe_cpu() if cpu == -1 else cpu
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._active = threading.Event()
        if not paused:
            self._active.set()
        self._thread: threading.Thread | None = None

    def pause(self) -> None:
        self._active.clear()

    def resume(self) -> None:
        self._active.set()

    def __enter__(self) -> "SpeedProbe":
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name="pgaccel-speed-probe")
        self._thread.start()
        return self

    def _loop(self) -> None:
        if self.cpu is not None:
            try:        # Linux: pid 0 is the calling thread alone, not the process
                os.sched_setaffinity(0, {self.cpu})
            except (AttributeError, OSError):
                self.cpu = None
        while not self._stop.wait(self.interval):
            if self._active.is_set():
                self.samples.append(sample_us(self.reps))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def median_us(self) -> float | None:
        return round(statistics.median(self.samples), 2) if self.samples else None
