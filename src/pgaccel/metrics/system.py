"""OS-side costs: the server's process tree, the load generator, the whole machine.

Server CPU and I/O bytes are counted over the postmaster's tree: the postmaster's own
counts plus those of its children that already exited (the kernel adds a child's CPU time
and its /proc/PID/io bytes to its parent's when the parent reaps it, which the postmaster
does for every backend) plus those of children still alive.  The difference of two such
snapshots is what the server used in between, including backends that started or ended
inside the interval.

Context switches have no such "children" total in /proc: a backend that exits takes its
counts with it.  A load generator that disconnects before the interval ends
(sysbench, pgbench -C, every step workload's last second) would lose its backends' counts,
and a difference of two snapshots can even come out negative.  So :class:`TreeWatcher`
samples the tree every 0.2 s during the interval and keeps the last counts it saw of every
process that exited (keyed by pid and start time); what a process does in its last 0.2 s
before exiting is the only part not counted.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

import psutil


@dataclass
class TreeSnapshot:
    cpu_s: float = 0.0
    ctx_voluntary: int = 0
    ctx_involuntary: int = 0
    read_bytes: int = 0
    write_call_bytes: int = 0
    processes: int = 0


def _tree(pid: int) -> list[psutil.Process] | None:
    try:
        root = psutil.Process(pid)
        return [root] + root.children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def _counts(p: psutil.Process, root: bool) -> tuple[float, int, int, int, int] | None:
    """(cpu_s, voluntary, involuntary, read_bytes, write_call_bytes) of one process; the
    root's CPU includes its reaped children's.  None when it is gone or unreadable.

    Reads are /proc/PID/io ``read_bytes``: what had to come from storage.  Writes are
    ``wchar``, the bytes passed to write()/pwrite(), not ``write_bytes``: on recent kernels
    (6.18 here) that counts every page-cache folio a write dirties, so a 5 s tpcb-like trial
    showed 4-6 GB "written" while the disk wrote 211-347 MB and the backends wrote about
    55 MB each through write().  What reached the disk is ``disk_write_bytes``."""
    try:
        with p.oneshot():
            if not root and p.status() == psutil.STATUS_DEAD:
                return None   # being reaped: its parent's reaped-children CPU may hold it
            t = p.cpu_times()
            cpu = t.user + t.system
            if root:  # children that exited were reaped by the postmaster
                cpu += t.children_user + t.children_system
            c = p.num_ctx_switches()
            try:
                io = p.io_counters()
                rb, wb = io.read_bytes, io.write_chars
            except (psutil.AccessDenied, AttributeError):
                rb = wb = 0
            return cpu, c.voluntary, c.involuntary, rb, wb
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None


def _reaped_cpu(pid: int) -> float | None:
    try:
        t = psutil.Process(pid).cpu_times()
        return t.children_user + t.children_system
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None


def _tree_counts(pid: int, attempts: int = 5) -> dict[tuple[int, float], tuple] | None:
    """(pid, start time) -> counts of every process of the tree now.

    The root's CPU and I/O include those of the children it has reaped.  A child reaped
    while the tree is being read would be counted in neither or in both (its own counts
    and the root's), by as much CPU as it used in its life: a warm-up's backends exiting
    as a trial's measurement started once added 1.45 s to 5 s of server CPU.  So the pass
    is repeated (up to ``attempts`` times) until the root's reaped-children CPU is the same
    before and after it: then no child was reaped in between.  A child is not read once it
    is dead ('X' in /proc/PID/stat): the kernel adds its CPU to the parent's reaped total
    before its /proc entry goes, and a pass inside that window would count it twice with
    the reaped total the same before and after (CI saw a whole 150 ms child once)."""
    out: dict[tuple[int, float], tuple] = {}
    for _ in range(max(1, attempts)):
        reaped = _reaped_cpu(pid)
        procs = _tree(pid)
        if procs is None:
            return None
        out = {}
        for i, p in enumerate(procs):
            c = _counts(p, i == 0)
            if c is not None:
                try:
                    out[(p.pid, p.create_time())] = c
                except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                    continue
        if reaped is not None and _reaped_cpu(pid) == reaped:
            break
    return out


def _snapshot_of(counts: dict[tuple[int, float], tuple]) -> TreeSnapshot:
    snap = TreeSnapshot()
    for cpu, vol, invol, rb, wb in counts.values():
        snap.cpu_s += cpu
        snap.ctx_voluntary += vol
        snap.ctx_involuntary += invol
        snap.read_bytes += rb
        snap.write_call_bytes += wb
        snap.processes += 1
    return snap


def tree_snapshot(pid: int) -> TreeSnapshot | None:
    """CPU, context switches and I/O of a process and all its descendants now."""
    counts = _tree_counts(pid)
    return None if counts is None else _snapshot_of(counts)


class TreeWatcher:
    """The tree's counts over an interval, including processes that exit inside it.

    ``start()`` takes the first snapshot and starts sampling every ``interval`` seconds in a
    thread; ``stop()`` takes the last one and returns ``(before, after)`` snapshots whose
    difference counts the context switches of processes that exited in between (at their
    last sample).  Their CPU and I/O bytes are not added again: the postmaster's counts
    already hold them once it has reaped them (adding them too counted exited backends'
    bytes twice)."""

    def __init__(self, pid: int, interval: float = 0.2):
        self.pid, self.interval = pid, interval
        self._seen: dict[tuple[int, float], tuple] = {}
        self._gone = TreeSnapshot()
        self.exited = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.before: TreeSnapshot | None = None

    def _sample(self) -> dict[tuple[int, float], tuple] | None:
        now = _tree_counts(self.pid)
        if now is None:
            return None
        with self._lock:
            for key, (_cpu, vol, invol, _rb, _wb) in self._seen.items():
                if key not in now:           # exited since the last sample: keep its counts
                    self._gone.ctx_voluntary += vol
                    self._gone.ctx_involuntary += invol
                    self.exited += 1
            self._seen = now
        return now

    def start(self) -> TreeSnapshot | None:
        first = self._sample()
        self.before = None if first is None else _snapshot_of(first)
        if self.before is not None:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self.before

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def stop(self) -> tuple[TreeSnapshot | None, TreeSnapshot | None]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        last = self._sample()
        if self.before is None or last is None:
            return self.before, None
        now = _snapshot_of(last)
        g = self._gone
        return self.before, replace(
            now, ctx_voluntary=now.ctx_voluntary + g.ctx_voluntary,
            ctx_involuntary=now.ctx_involuntary + g.ctx_involuntary)


def tree_delta(before: TreeSnapshot | None, after: TreeSnapshot | None) -> dict[str, Any]:
    if before is None or after is None:
        return {}
    return {
        "server_cpu_s": max(0.0, after.cpu_s - before.cpu_s),
        "server_ctx_switches": max(0, (after.ctx_voluntary + after.ctx_involuntary)
                                   - (before.ctx_voluntary + before.ctx_involuntary)),
        "server_read_bytes": max(0, after.read_bytes - before.read_bytes),
        "server_write_call_bytes": max(0, after.write_call_bytes - before.write_call_bytes),
    }


@dataclass
class SystemSnapshot:
    t: float = field(default_factory=time.monotonic)
    cpu: Any = None
    ctx: int = 0
    disk_read: int = 0
    disk_write: int = 0
    resched: int | None = None


def resched_interrupts(text: str) -> int | None:
    """All CPUs' reschedule interrupts from /proc/interrupts text: the inter-processor
    interrupt one CPU sends to wake a task on another (``RES:`` on x86, ``IPI0:`` on arm64,
    each described as "Rescheduling interrupts").  None when the line is not there."""
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if "rescheduling interrupts" not in rest.lower() or not name.strip():
            continue
        return sum(int(f) for f in rest.split() if f.isdigit())
    return None


def resched_now(path: str | None = None) -> int | None:
    """All CPUs' reschedule interrupts now, from ``path`` or, by default, the interrupts file
    of the /proc that psutil reads the rest of a :func:`system_snapshot` from
    (``psutil.PROCFS_PATH``)."""
    try:
        with open(path or os.path.join(psutil.PROCFS_PATH, "interrupts")) as f:
            return resched_interrupts(f.read())
    except OSError:
        return None


def system_snapshot() -> SystemSnapshot:
    s = SystemSnapshot()
    s.cpu = psutil.cpu_times()
    s.ctx = psutil.cpu_stats().ctx_switches
    s.resched = resched_now()
    d = psutil.disk_io_counters(perdisk=False)
    if d is not None:
        s.disk_read, s.disk_write = d.read_bytes, d.write_bytes
    return s


def system_delta(before: SystemSnapshot, after: SystemSnapshot) -> dict[str, Any]:
    fields = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    diff = {f: getattr(after.cpu, f, 0.0) - getattr(before.cpu, f, 0.0) for f in fields}
    busy = sum(v for k, v in diff.items() if k not in ("idle", "iowait"))
    # an interval shorter than a tick has no CPU time: 0, not 1 s (slices are added up)
    total = sum(diff.values())
    return {
        "host_cpu_busy_s": busy,
        "host_cpu_total_s": total,
        "host_cpu_util": busy / total if total else 0.0,
        "host_iowait_s": diff["iowait"],
        "host_steal_s": diff["steal"],
        "host_ctx_switches": after.ctx - before.ctx,
        **({"host_resched_ipis": after.resched - before.resched}
           if after.resched is not None and before.resched is not None else {}),
        "disk_read_bytes": after.disk_read - before.disk_read,
        "disk_write_bytes": after.disk_write - before.disk_write,
        "elapsed_s": after.t - before.t,
    }


def rusage_cpu(ru: Any) -> dict[str, Any]:
    """CPU and context switches from a resource.struct_rusage (os.wait4)."""
    return {"client_cpu_s": ru.ru_utime + ru.ru_stime,
            "client_ctx_switches": ru.ru_nvcsw + ru.ru_nivcsw}


def ncpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        return os.cpu_count() or 1
