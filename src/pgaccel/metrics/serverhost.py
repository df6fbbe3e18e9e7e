"""The server host's costs over an interval, read over SSH (``--server-host``).

Before and after every measured interval: the postmaster's CPU (its own, its reaped
children's, and its live children's, from /proc/PID/stat; the postmaster is found by
``probe/remote.py``), the host's CPU (/proc/stat) and disk bytes (/proc/diskstats).
``Measure`` (``measure.py``) reports them under the keys it uses for a server on this
machine.  Parsing is pure (:func:`parse_snapshot`, :func:`snapshot_delta`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import BenchError

_DISK = re.compile(r"^(sd[a-z]+|vd[a-z]+|xvd[a-z]+|hd[a-z]+|nvme\d+n\d+|mmcblk\d+)$")


@dataclass(frozen=True)
class ServerSnapshot:
    clk_tck: int
    cpu: tuple[float, ...]           # the /proc/stat "cpu" line's fields (ticks)
    tree_ticks: float                # postmaster + reaped children + live children
    disk_read: int
    disk_write: int
    processes: int


def snapshot_script(pm: int) -> str:
    pm = int(pm)
    return (f"getconf CLK_TCK; head -n1 /proc/stat; cat /proc/diskstats; echo @@tree; "
            f"for c in {pm} $(cat /proc/{pm}/task/{pm}/children 2>/dev/null); do "
            f"cat /proc/$c/stat 2>/dev/null; done; true")


def parse_snapshot(text: str, pm: int) -> ServerSnapshot:
    lines = text.splitlines()
    clk = int(lines[0].strip() or 100)
    cpu = tuple(float(x) for x in lines[1].split()[1:])
    rd = wr = 0
    i = 2
    while i < len(lines) and lines[i] != "@@tree":
        f = lines[i].split()
        if len(f) >= 10 and _DISK.match(f[2]):
            rd += int(f[5]) * 512
            wr += int(f[9]) * 512
        i += 1
    ticks, n = 0.0, 0
    for line in lines[i + 1:]:
        if ")" not in line:
            continue
        pid = int(line.split(" ", 1)[0])
        rest = line.rsplit(")", 1)[1].split()      # state ppid ... (field 3 onward)
        utime, stime, cutime, cstime = (float(x) for x in rest[11:15])
        ticks += utime + stime + ((cutime + cstime) if pid == pm else 0.0)
        n += 1
    return ServerSnapshot(clk, cpu, ticks, rd, wr, n)


def server_snapshot(host, pm: int) -> ServerSnapshot | None:
    try:
        r = host.run(snapshot_script(pm), timeout=60)
        return parse_snapshot(r.stdout, pm) if r.returncode == 0 else None
    except (BenchError, ValueError, IndexError):
        return None


def cpu_busy_total(fields) -> tuple[float, float]:
    """(busy, total) of a /proc/stat ``cpu`` line's fields (user nice system idle iowait irq
    softirq steal, guest ones left out): busy is all but idle and iowait, as this machine's
    ``system_delta`` counts it."""
    f = [float(x) for x in list(fields)[:8]]
    f += [0.0] * (8 - len(f))
    total = sum(f)
    return total - f[3] - f[4], total


def snapshot_delta(before: ServerSnapshot | None, after: ServerSnapshot | None,
                   elapsed_s: float) -> dict[str, Any]:
    """The keys ``Measure.metrics`` reports for a server on this machine, from the server
    host's counters: server CPU, the host's CPU split, disk bytes."""
    if before is None or after is None or before.processes == 0:
        return {}
    t = float(after.clk_tck or 100)
    diff = [b - a for a, b in zip(before.cpu, after.cpu)] + [0.0] * 8
    busy, total = (x / t for x in cpu_busy_total(diff))
    iowait, steal = diff[4] / t, diff[7] / t
    return {"server_cpu_s": max(0.0, (after.tree_ticks - before.tree_ticks) / t),
            "server_host_cpu": True,
            "host_cpu_busy_s": busy, "host_cpu_total_s": total,
            "host_cpu_util": busy / total if total else 0.0, "host_iowait_s": iowait,
            "host_steal_s": steal,
            "disk_read_bytes": max(0, after.disk_read - before.disk_read),
            "disk_write_bytes": max(0, after.disk_write - before.disk_write),
            "elapsed_s": elapsed_s}
