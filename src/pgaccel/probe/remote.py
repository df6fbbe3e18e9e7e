"""The server's own host over SSH (``--server-host ssh://[user@]host[:port]``).

When pgaccel (and the load generator) run on another machine than the server, the DSN
gives the server's PostgreSQL counters but not its machine.  With ``--server-host``:

* **facts**: the files ``probe/host.py`` reads (cpuinfo, meminfo, huge pages, THP, block
  devices, sysctls, the postmaster's cgroup limits) are copied into a local tree with the
  same layout and probed by the same code as this machine's (:func:`probe_server_host`);
* **costs per trial**: the postmaster's CPU (its own, its reaped children's, and its live
  children's, from /proc/PID/stat), the host's CPU (/proc/stat) and disk bytes
  (/proc/diskstats), read before and after every measured interval
  (:func:`server_snapshot`, used by ``metrics/measure.py``).

The postmaster is found from the server side: the backend of pgaccel's own connection
(``pg_backend_pid()``) is a child of it.  Parsing is pure (:func:`parse_snapshot`,
:func:`snapshot_delta`); the SSH is ``server/ssh.py``'s.
"""

from __future__ import annotations

import base64
import os
import re
import shlex
import tempfile
from dataclasses import dataclass
from typing import Any

from ..errors import BenchError
from .facts import HostFacts
from .host import SYSCTLS, cgroup_ancestors, parse_proc_cgroup, probe_host

_FILES = ["/proc/cpuinfo", "/proc/meminfo", "/proc/sys/kernel/osrelease",
          "/proc/sys/kernel/io_uring_disabled",
          "/sys/kernel/mm/transparent_hugepage/enabled",
          "/sys/kernel/mm/transparent_hugepage/defrag",
          "/sys/kernel/mm/hugepages/hugepages-*/*_hugepages",
          "/sys/block/*/queue/rotational", "/sys/block/*/queue/scheduler",
          "/sys/block/*/queue/read_ahead_kb", "/sys/block/*/size",
          "/sys/block/*/device/model", "/sys/devices/system/node/node[0-9]*/cpulist",
          "/sys/fs/cgroup/cgroup.controllers",
          *("/proc/sys/" + s.replace(".", "/") for s in SYSCTLS)]
_CGROUP_FILES = ("memory.max", "cpu.max", "cpuset.cpus.effective", "memory.limit_in_bytes",
                 "cpu.cfs_quota_us", "cpu.cfs_period_us", "cpuset.cpus")
_DISK = re.compile(r"^(sd[a-z]+|vd[a-z]+|xvd[a-z]+|hd[a-z]+|nvme\d+n\d+|mmcblk\d+)$")


def _dump_script(paths: list[str]) -> str:
    """sh that prints ``@@file PATH BASE64`` for every readable file the globs match."""
    globs = " ".join(paths)
    return (f"for f in {globs}; do [ -f \"$f\" ] && [ -r \"$f\" ] && "
            "printf '@@file %s %s\\n' \"$f\" \"$(base64 -w0 < \"$f\" 2>/dev/null)\"; done; "
            "printf '@@file /arch %s\\n' \"$(uname -m | base64 -w0)\"")


def parse_dump(text: str) -> dict[str, bytes]:
    out = {}
    for line in text.splitlines():
        if line.startswith("@@file "):
            parts = line.split(" ", 2)
            if len(parts) == 3:
                try:
                    out[parts[1]] = base64.b64decode(parts[2])
                except ValueError:
                    continue
    return out


def write_tree(files: dict[str, bytes], root: str) -> None:
    for path, data in files.items():
        dest = os.path.join(root, path.lstrip("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
            f.write(data)


def postmaster_pid(host, backend_pid: int) -> int:
    """The postmaster of ``backend_pid`` on ``host`` (its parent)."""
    r = host.run(f"sed 's/.*) //' /proc/{int(backend_pid)}/stat | cut -d' ' -f2")
    try:
        return int(r.stdout.strip())
    except ValueError:
        raise BenchError(f"Could not find the server's processes on {host.label}: "
                         f"{(r.stderr.strip() or r.stdout.strip() or 'no answer')[:200]}",
                         "Check that --server-host names the machine the DSN's server runs "
                         "on.") from None


def probe_server_host(host, pm: int) -> HostFacts:
    """The server host's facts, through ``probe_host`` on a local copy of its files."""
    first = parse_dump(host.run(_dump_script(_FILES + [f"/proc/{pm}/cgroup"])).stdout)
    membership = parse_proc_cgroup((first.get(f"/proc/{pm}/cgroup") or b"").decode())
    dirs = ["/sys/fs/cgroup"] + [f"/sys/fs/cgroup/{c}" for c in (
        "memory", "cpu", "cpu,cpuacct", "cpuset") + tuple(ctl for ctl, _ in membership.values())
        if c]
    wanted = sorted({os.path.join(d, a.lstrip("/"), f) for d in dirs
                     for _ctl, path in membership.values() for a in cgroup_ancestors(path)
                     for f in _CGROUP_FILES})
    second = parse_dump(host.run(_dump_script([shlex.quote(w) for w in wanted])).stdout) \
        if wanted else {}
    files = {**first, **second}
    if f"/proc/{pm}/cgroup" in files:
        files["/proc/self/cgroup"] = files.pop(f"/proc/{pm}/cgroup")
    arch = (files.pop("/arch", b"") or b"").decode().strip() or None
    with tempfile.TemporaryDirectory(prefix="pgaccel-serverhost-") as root:
        write_tree(files, root)
        return probe_host(root=root, arch=arch)


# -- costs of an interval ------------------------------------------------------------------

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
            f"cat /proc/$c/stat 2>/dev/null; done")


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


def snapshot_delta(before: ServerSnapshot | None, after: ServerSnapshot | None,
                   elapsed_s: float) -> dict[str, Any]:
    """The keys ``Measure.metrics`` reports for a server on this machine, from the server
    host's counters: server CPU, the host's CPU split, disk bytes."""
    if before is None or after is None or before.processes == 0:
        return {}
    t = float(after.clk_tck or 100)
    diff = [b - a for a, b in zip(before.cpu, after.cpu)]
    diff += [0.0] * (8 - len(diff))
    total = sum(diff[:8]) / t or 1.0
    idle, iowait, steal = diff[3] / t, diff[4] / t, diff[7] / t
    busy = total - idle - iowait
    return {"server_cpu_s": max(0.0, (after.tree_ticks - before.tree_ticks) / t),
            "server_host_cpu": True,
            "host_cpu_busy_s": busy, "host_cpu_total_s": total,
            "host_cpu_util": busy / total, "host_iowait_s": iowait, "host_steal_s": steal,
            "disk_read_bytes": max(0, after.disk_read - before.disk_read),
            "disk_write_bytes": max(0, after.disk_write - before.disk_write),
            "elapsed_s": elapsed_s}
