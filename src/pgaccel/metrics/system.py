"""OS-side costs: the server's process tree, the load generator, the whole machine.

Server CPU is counted over the postmaster's tree: the postmaster's own time plus the time
of its children that already exited (the kernel adds a child's time to its parent when the
parent reaps it, which the postmaster does for every backend) plus the time of children
still alive.  The difference of two such snapshots is the CPU the server used in between,
including backends that started or ended inside the interval.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import psutil


@dataclass
class TreeSnapshot:
    cpu_s: float = 0.0
    ctx_voluntary: int = 0
    ctx_involuntary: int = 0
    read_bytes: int = 0
    write_bytes: int = 0
    processes: int = 0


def tree_snapshot(pid: int) -> TreeSnapshot | None:
    """CPU, context switches and I/O of a process and all its descendants."""
    try:
        root = psutil.Process(pid)
        procs = [root] + root.children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    snap = TreeSnapshot()
    for i, p in enumerate(procs):
        try:
            with p.oneshot():
                t = p.cpu_times()
                snap.cpu_s += t.user + t.system
                if i == 0:  # children that exited were reaped by the postmaster
                    snap.cpu_s += t.children_user + t.children_system
                c = p.num_ctx_switches()
                snap.ctx_voluntary += c.voluntary
                snap.ctx_involuntary += c.involuntary
                try:
                    io = p.io_counters()
                    snap.read_bytes += io.read_bytes
                    snap.write_bytes += io.write_bytes
                except (psutil.AccessDenied, AttributeError):
                    pass
                snap.processes += 1
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        except psutil.AccessDenied:
            continue
    return snap


def tree_delta(before: TreeSnapshot | None, after: TreeSnapshot | None) -> dict[str, Any]:
    if before is None or after is None:
        return {}
    return {
        "server_cpu_s": max(0.0, after.cpu_s - before.cpu_s),
        "server_ctx_switches": max(0, (after.ctx_voluntary + after.ctx_involuntary)
                                   - (before.ctx_voluntary + before.ctx_involuntary)),
        "server_read_bytes": max(0, after.read_bytes - before.read_bytes),
        "server_write_bytes": max(0, after.write_bytes - before.write_bytes),
    }


@dataclass
class SystemSnapshot:
    t: float = field(default_factory=time.monotonic)
    cpu: Any = None
    ctx: int = 0
    disk_read: int = 0
    disk_write: int = 0


def system_snapshot() -> SystemSnapshot:
    s = SystemSnapshot()
    s.cpu = psutil.cpu_times()
    s.ctx = psutil.cpu_stats().ctx_switches
    d = psutil.disk_io_counters(perdisk=False)
    if d is not None:
        s.disk_read, s.disk_write = d.read_bytes, d.write_bytes
    return s


def system_delta(before: SystemSnapshot, after: SystemSnapshot) -> dict[str, Any]:
    fields = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    diff = {f: getattr(after.cpu, f, 0.0) - getattr(before.cpu, f, 0.0) for f in fields}
    busy = sum(v for k, v in diff.items() if k not in ("idle", "iowait"))
    total = sum(diff.values()) or 1.0
    return {
        "host_cpu_busy_s": busy,
        "host_cpu_total_s": total,
        "host_cpu_util": busy / total,
        "host_iowait_s": diff["iowait"],
        "host_steal_s": diff["steal"],
        "host_ctx_switches": after.ctx - before.ctx,
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
