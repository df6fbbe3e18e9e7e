"""Read host facts from /proc and /sys into :class:`HostFacts`.

Every read goes through ``root``: ``probe_host("/")`` looks at this machine, and
``probe_host("tests/fixtures/hosts/arm-lse")`` looks at a constructed tree with the same
layout (``proc/cpuinfo``, ``sys/block/...``), through exactly the same code.  A missing or
unreadable file means "unknown"; the probe never raises for one.

Conventions for a recorded or constructed tree (``root != "/"``):

* ``<root>/arch`` holds the machine name (``x86_64``, ``aarch64``); without it the arch is
  guessed from ``proc/cpuinfo`` (``Features``/``CPU implementer`` -> aarch64, ``flags`` ->
  x86_64).
* ``proc/self/cgroup`` is the cgroup membership of the probed process.
* Nothing is taken from the running machine: no CPU affinity (unless passed as
  ``affinity``), no io_uring syscall, no data-directory lookup (``data_device`` stays None).
"""

from __future__ import annotations

import ctypes
import errno
import glob
import os
import platform
import re

from pgaccel.osknobs.procfs import parse_bracketed, parse_meminfo
from pgaccel.probe.cgroup import read_cgroup
from pgaccel.probe.facts import BlockDevice, HostFacts, HugePageSize
from pgaccel.probe.rootfs import read_int as _read_int
from pgaccel.probe.rootfs import read_text as _read
from pgaccel.probe.topology import cores, read_siblings


SYSCTLS = (
    "vm.swappiness", "vm.dirty_ratio", "vm.dirty_background_ratio", "vm.dirty_bytes",
    "vm.dirty_background_bytes", "vm.overcommit_memory", "vm.overcommit_ratio",
    "vm.nr_hugepages", "kernel.sched_autogroup_enabled", "kernel.numa_balancing",
    "kernel.sched_migration_cost_ns", "kernel.shmmax", "kernel.shmall",
)
# Where a sysctl moved out of /proc/sys on newer kernels (5.13+: debugfs).
_SYSCTL_ALT = {"kernel.sched_migration_cost_ns": "sys/kernel/debug/sched/migration_cost_ns"}

ARM_IMPLEMENTERS = {0x41: "ARM", 0x42: "Broadcom", 0x46: "Fujitsu", 0x48: "HiSilicon",
                    0x4E: "NVIDIA", 0x51: "Qualcomm", 0x61: "Apple", 0xC0: "Ampere"}
ARM_PARTS = {
    (0x41, 0xD03): "Cortex-A53", (0x41, 0xD05): "Cortex-A55", (0x41, 0xD07): "Cortex-A57",
    (0x41, 0xD08): "Cortex-A72", (0x41, 0xD0B): "Cortex-A76", (0x41, 0xD0C): "Neoverse-N1",
    (0x41, 0xD40): "Neoverse-V1", (0x41, 0xD49): "Neoverse-N2", (0x41, 0xD4F): "Neoverse-V2",
    (0x41, 0xD84): "Neoverse-V3", (0x41, 0xD8E): "Neoverse-N3",
    (0x48, 0xD01): "Kunpeng-920", (0xC0, 0xAC3): "AmpereOne",
}
_SKIP_BLOCK = ("loop", "ram", "zram", "sr", "fd")   # not database storage
_IO_URING_SETUP = {"x86_64": 425, "aarch64": 425}
_IO_URING_SYSCTL = {"0": "available", "1": "restricted", "2": "disabled"}


# -- pure parsing helpers -------------------------------------------------------------------

def parse_cpuinfo(text: str) -> list[dict[str, str]]:
    """/proc/cpuinfo -> one dict per processor block (keys as written, values stripped)."""
    blocks = []
    for chunk in re.split(r"\n\s*\n", text):
        pairs = (line.partition(":") for line in chunk.splitlines())
        block = {k.strip(): v.strip() for k, sep, v in pairs if sep}
        if block:
            blocks.append(block)
    return blocks


def arm_cpu_model(implementer: str | None, part: str | None) -> str:
    """'0x41', '0xd0c' -> 'ARM Neoverse-N1'; unknown ids come out in hex."""
    try:
        imp = int(implementer or "", 16)
    except ValueError:
        return ""
    vendor = ARM_IMPLEMENTERS.get(imp, f"implementer {imp:#x}")
    try:
        p = int(part or "", 16)
    except ValueError:
        return vendor
    return f"{vendor} {ARM_PARTS.get((imp, p), f'part {p:#x}')}"


def guess_arch(cpus: list[dict[str, str]]) -> str:
    first = cpus[0] if cpus else {}
    if "CPU implementer" in first or "Features" in first:
        return "aarch64"
    if "flags" in first or "vendor_id" in first:
        return "x86_64"
    return "unknown"


def device_kind(name: str, rotational: bool | None) -> str:
    """nvme | virtual | hdd | ssd | unknown.

    virtio/xen disks (vd*, xvd*) are "virtual" whatever their rotational flag says: the
    hypervisor usually reports 1 even when the backing store is flash, so the flag tells
    nothing about seek cost there."""
    if name.startswith("nvme"):
        return "nvme"
    if re.match(r"x?vd[a-z]", name):
        return "virtual"
    if rotational:
        return "hdd"
    if rotational is False:
        return "ssd"
    return "unknown"


# -- sections -------------------------------------------------------------------------------

def read_hugepages(root: str) -> list[HugePageSize]:
    sizes = []
    for d in glob.glob(os.path.join(root, "sys/kernel/mm/hugepages/hugepages-*kB")):
        m = re.search(r"hugepages-(\d+)kB$", d)
        if not m:
            continue
        counts = {f: _read_int(d, f"{f}_hugepages") or 0 for f in ("nr", "free", "resv", "surplus")}
        sizes.append(HugePageSize(int(m.group(1)) * 1024, total=counts["nr"], free=counts["free"],
                                  reserved=counts["resv"], surplus=counts["surplus"]))
    return sorted(sizes, key=lambda h: h.size_bytes)


def read_block_devices(root: str) -> list[BlockDevice]:
    devs = []
    base = os.path.join(root, "sys/block")
    names = sorted(os.listdir(base)) if os.path.isdir(base) else []
    for name in names:
        if name.startswith(_SKIP_BLOCK):
            continue
        q = f"sys/block/{name}/queue"
        rot = _read_int(root, f"{q}/rotational")
        active, options = parse_bracketed(_read(root, f"{q}/scheduler") or "")
        size = _read_int(root, f"sys/block/{name}/size")
        model = (_read(root, f"sys/block/{name}/device/model") or "").strip() or None
        rotational = None if rot is None else bool(rot)
        devs.append(BlockDevice(
            name=name, rotational=rotational, scheduler=active, schedulers=options,
            read_ahead_kb=_read_int(root, f"{q}/read_ahead_kb"),
            size_bytes=size * 512 if size is not None else None, model=model,
            kind=device_kind(name, rotational)))
    return devs


def whole_disk(major: int, minor: int, root: str = "/") -> str | None:
    """major:minor -> the whole disk's name in sys/block (a partition vda1 -> vda)."""
    link = os.path.join(root, f"sys/dev/block/{major}:{minor}")
    if not os.path.exists(link):
        return None
    real = os.path.realpath(link)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    return os.path.basename(real)


def data_device_for(path: str, root: str = "/") -> str | None:
    """The block device holding ``path`` on this machine, or None (tmpfs, overlay, ...)."""
    try:
        dev = os.stat(path).st_dev
    except OSError:
        return None
    return whole_disk(os.major(dev), os.minor(dev), root)


def io_uring_syscall(arch: str) -> str:
    """Try io_uring_setup(1, &params) on this machine: available | disabled | unsupported."""
    nr = _IO_URING_SETUP.get(arch)
    if nr is None:
        return "unknown"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return "unknown"
    libc.syscall.restype = ctypes.c_long
    params = ctypes.create_string_buffer(120)          # struct io_uring_params, zeroed
    fd = libc.syscall(ctypes.c_long(nr), ctypes.c_uint(1), params)
    if fd >= 0:
        os.close(fd)
        return "available"
    # ENOSYS: kernel without io_uring (or a seccomp filter answering as if so)
    return {errno.ENOSYS: "unsupported", errno.EPERM: "disabled"}.get(ctypes.get_errno(),
                                                                      "unknown")


def read_io_uring(root: str, arch: str) -> str:
    state = _IO_URING_SYSCTL.get((_read(root, "proc/sys/kernel/io_uring_disabled") or "").strip())
    if root != "/":
        return state or "unknown"
    if state in (None, "available"):   # seccomp (e.g. container defaults) can still refuse it
        return io_uring_syscall(arch)
    return state


def read_sysctls(root: str) -> dict[str, str]:
    out = {}
    for name in SYSCTLS:
        for rel in ("proc/sys/" + name.replace(".", "/"), _SYSCTL_ALT.get(name)):
            text = _read(root, rel) if rel else None
            if text is not None:
                out[name] = " ".join(text.split())
                break
    return out


def _cpu_count(cpuinfo: str, affinity: set[int] | None) -> int:
    """The processors /proc/cpuinfo lists, fewer when ``affinity`` (the CPUs this process may
    run on: taskset, cpuset) holds fewer; at least 1."""
    n = len(re.findall(r"^processor\s*:", cpuinfo, re.M))
    if affinity:
        n = min(n, len(affinity)) if n else len(affinity)
    return max(n, 1)


def _core_count(root: str, affinity: set[int] | None) -> int | None:
    """The cores the usable CPUs (``affinity``, else every CPU with a topology) sit on;
    None when /sys has no topology."""
    sib = read_siblings(root)
    if not sib:
        return None
    return len(cores(affinity if affinity else sib.keys(), sib))


def probe_host(root: str = "/", arch: str | None = None, data_dir: str | None = None,
               affinity: set[int] | None = None) -> HostFacts:
    """``affinity``: the CPUs the probed process may run on; by default this process's on
    ``/`` (os.sched_getaffinity), none on a tree."""
    if affinity is None and root == "/" and hasattr(os, "sched_getaffinity"):
        affinity = os.sched_getaffinity(0)
    cpuinfo = _read(root, "proc/cpuinfo") or ""
    cpus = parse_cpuinfo(cpuinfo)
    if arch is None:
        arch = (platform.machine() if root == "/"
                else (_read(root, "arch") or "").strip() or guess_arch(cpus))
    first: dict[str, str] = {}
    for block in reversed(cpus):          # the first processor's values; others fill gaps
        first.update(block)
    if arch == "aarch64":
        features = first.get("Features", "").split()
        model = first.get("model name") or arm_cpu_model(first.get("CPU implementer"),
                                                         first.get("CPU part"))
        lse: bool | None = "atomics" in features
    else:
        features = first.get("flags", first.get("Features", "")).split()
        model, lse = first.get("model name", ""), None
    mem = parse_meminfo(_read(root, "proc/meminfo") or "")
    nodes = glob.glob(os.path.join(root, "sys/devices/system/node/node[0-9]*"))
    facts = HostFacts(
        arch=arch,
        kernel=(_read(root, "proc/sys/kernel/osrelease") or "").strip(),
        cpu_model=model, cpu_flags=features, lse_atomics=lse,
        logical_cpus=_cpu_count(cpuinfo, affinity),
        physical_cores=_core_count(root, affinity), numa_nodes=max(len(nodes), 1),
        memory_total_bytes=mem.get("MemTotal", 0),
        memory_available_bytes=mem.get("MemAvailable", mem.get("MemFree", 0)),
        cgroup=read_cgroup(root), hugepages=read_hugepages(root),
        default_hugepage_bytes=mem.get("Hugepagesize"),
        thp_enabled=parse_bracketed(
            _read(root, "sys/kernel/mm/transparent_hugepage/enabled") or "")[0],
        thp_defrag=parse_bracketed(
            _read(root, "sys/kernel/mm/transparent_hugepage/defrag") or "")[0],
        block_devices=read_block_devices(root), io_uring=read_io_uring(root, arch),
        sysctls=read_sysctls(root),
        data_device=data_device_for(data_dir) if data_dir and root == "/" else None)
    if facts.cgroup.cpuset_cpus is not None and facts.cgroup.cpuset_cpus >= facts.logical_cpus:
        facts.cgroup.cpuset_cpus = None       # the cpuset covers every CPU: not a restriction
    return facts


def list_nics(root: str = "/") -> list[str]:
    """Physical network interfaces (those with a device link) (thin)."""
    base = os.path.join(root, "sys/class/net")
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    return [n for n in names if os.path.exists(os.path.join(base, n, "device"))]
