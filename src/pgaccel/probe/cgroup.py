"""The cgroup limits that apply to this process (v1 or v2), read through ``root`` as the
rest of the probe is (probe/host.py): the smallest memory and CPU limit and the innermost
CPU set on its cgroup path and the path's ancestors."""

from __future__ import annotations

import os

from pgaccel.probe.facts import Cgroup
from pgaccel.probe.rootfs import read_text

UNLIMITED = 2**60          # cgroup values at or above this mean "no limit"


def parse_cpuset(text: str) -> set[int]:
    """'0-3,8' -> {0, 1, 2, 3, 8}; '' -> set(). Raises ValueError on junk."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def limit_value(text: str | None) -> int | None:
    """A cgroup byte/quota value -> int, or None for 'max', -1, huge or unreadable."""
    try:
        v = int((text or "").strip())
    except ValueError:
        return None
    return None if v < 0 or v >= UNLIMITED else v


def parse_cpu_max(text: str | None) -> float | None:
    """cgroup v2 cpu.max '150000 100000' -> 1.5; 'max 100000' -> None."""
    parts = (text or "").split()
    if not parts:
        return None
    quota = limit_value(parts[0])
    period = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 100000
    return quota / period if quota is not None and period > 0 else None


def parse_proc_cgroup(text: str) -> dict[str, tuple[str, str]]:
    """/proc/self/cgroup -> {controller: (hierarchy name, path)}.  The v2 line is under key
    ''; a v1 hierarchy holding several controllers is named by all of them ('cpu,cpuacct')."""
    out: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for c in controllers.split(",") if controllers else [""]:
            out[c] = (controllers, path)
    return out


def cgroup_ancestors(path: str) -> list[str]:
    """'/a/b' -> ['a/b', 'a', '']: the process's cgroup first, the root last.  A path that
    leaves the cgroup namespace ('/../..') is treated as the root."""
    parts = [] if ".." in path.split("/") else [p for p in path.split("/") if p]
    return ["/".join(parts[:i]) for i in range(len(parts), -1, -1)]


def _cgroup_values(root: str, base: str, path: str, fname: str) -> list[str]:
    """Contents of ``fname`` in the cgroup ``path`` and each ancestor that has it."""
    texts = (read_text(root, os.path.join(base, p, fname)) for p in cgroup_ancestors(path))
    return [t for t in texts if t is not None]


def _min_or_none(vals: list) -> float | int | None:
    vals = [v for v in vals if v is not None]
    return min(vals) if vals else None


def read_cgroup(root: str) -> Cgroup:
    """Limits that apply to this process: the smallest found on its cgroup path and its
    ancestors up to the cgroup root (inside containers the host path is often absent from
    the mounted fs, so the root of the mount is what remains)."""
    fs = "sys/fs/cgroup"
    membership = parse_proc_cgroup(read_text(root, "proc/self/cgroup") or "")

    def path_of(controller: str) -> str:
        return membership.get(controller, ("", "/"))[1]

    def values(base: str | None, controller: str, fname: str) -> list[str]:
        return _cgroup_values(root, base, path_of(controller), fname) if base else []

    cg = Cgroup()
    if os.path.exists(os.path.join(root, fs, "cgroup.controllers")):
        cg.version = 2
        cg.memory_limit_bytes = _min_or_none([limit_value(v) for v in values(fs, "", "memory.max")])
        cg.cpu_limit = _min_or_none([parse_cpu_max(v) for v in values(fs, "", "cpu.max")])
        cpuset = values(fs, "", "cpuset.cpus.effective")
    else:
        def mount(c: str) -> str | None:     # sys/fs/cgroup/cpu or sys/fs/cgroup/cpu,cpuacct
            for name in (c, membership.get(c, (c, ""))[0]):
                if name and os.path.isdir(os.path.join(root, fs, name)):
                    return os.path.join(fs, name)
            return None

        mem, cpu, cset = mount("memory"), mount("cpu"), mount("cpuset")
        if not (mem or cpu or cset):
            return cg
        cg.version = 1
        cg.memory_limit_bytes = _min_or_none(
            [limit_value(v) for v in values(mem, "memory", "memory.limit_in_bytes")])
        quotas = values(cpu, "cpu", "cpu.cfs_quota_us")
        periods = values(cpu, "cpu", "cpu.cfs_period_us")
        cg.cpu_limit = _min_or_none(
            [parse_cpu_max(f"{q.strip()} {p.strip()}") for q, p in zip(quotas, periods)])
        cpuset = values(cset, "cpuset", "cpuset.cpus")
    for text in cpuset:                  # the innermost non-empty set is the effective one
        try:
            cpus = parse_cpuset(text)
        except ValueError:
            continue
        if cpus:
            cg.cpuset_cpus = len(cpus)
            break
    return cg
