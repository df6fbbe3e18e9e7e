"""Which logical CPUs share a core (SMT siblings), read through ``root`` like every probe
(``/``, or a recorded or constructed tree: ``sys/devices/system/cpu/cpuN/topology/``).

Two hardware threads of one core share its execution units: a CPU-bound process runs up to
about half as fast while its sibling is busy.  Linux numbers siblings either far apart
(Intel servers: ``0,32``) or side by side (many AMD and cloud VMs: ``0-1``), so the first
N CPUs are not N cores on every machine.
"""

from __future__ import annotations

import glob
import os
import re

from .cgroup import parse_cpuset
from .rootfs import read_text


def read_siblings(root: str = "/") -> dict[int, tuple[int, ...]]:
    """CPU -> the CPUs of its core (itself included), for every CPU with a topology
    directory; ``core_cpus_list`` (Linux 5.7+) or else ``thread_siblings_list``.  Empty when
    nothing can be read (then every CPU counts as a core of its own)."""
    out: dict[int, tuple[int, ...]] = {}
    for d in glob.glob(os.path.join(root, "sys/devices/system/cpu/cpu[0-9]*")):
        m = re.search(r"cpu(\d+)$", d)
        if not m:
            continue
        rel = os.path.relpath(d, root)
        text = (read_text(root, f"{rel}/topology/core_cpus_list")
                or read_text(root, f"{rel}/topology/thread_siblings_list"))
        if text and text.strip():
            try:
                out[int(m.group(1))] = tuple(sorted(parse_cpuset(text)))
            except ValueError:
                continue
    return out


def cores(cpus, siblings: dict[int, tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The cores ``cpus`` run on, each as the tuple of its CPUs among ``cpus``, in the order
    of their first CPU (a CPU without topology is a core of its own)."""
    mine = sorted(set(cpus))
    seen: dict[tuple[int, ...], list[int]] = {}
    for c in mine:
        key = siblings.get(c, (c,))
        seen.setdefault(key, []).append(c)
    return sorted((tuple(v) for v in seen.values()), key=lambda t: t[0])


def threads_per_core(cpus, siblings: dict[int, tuple[int, ...]]) -> int:
    """The most hardware threads one core has among ``cpus`` (1 without SMT)."""
    return max((len(c) for c in cores(cpus, siblings)), default=1)
