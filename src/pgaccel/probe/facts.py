"""Host facts as plain data.  ``probe/host.py`` fills them from /proc and /sys (or from a
recorded tree with the same layout); the tuner reads them.  Sizes are bytes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class HugePageSize:
    size_bytes: int
    total: int = 0          # nr_hugepages
    free: int = 0
    reserved: int = 0
    surplus: int = 0


@dataclass
class BlockDevice:
    name: str               # vda, nvme0n1, sda
    rotational: bool | None = None
    scheduler: str | None = None          # the active one, e.g. "mq-deadline", "none"
    schedulers: list[str] = field(default_factory=list)
    read_ahead_kb: int | None = None
    size_bytes: int | None = None
    model: str | None = None
    kind: str = "unknown"   # nvme | ssd | hdd | virtual | unknown


@dataclass
class Cgroup:
    version: int | None = None            # 1, 2 or None (none found)
    memory_limit_bytes: int | None = None  # None = unlimited
    cpu_limit: float | None = None         # CPUs (quota/period); None = unlimited
    cpuset_cpus: int | None = None         # CPUs in the cpuset, when restricted


@dataclass
class HostFacts:
    arch: str                               # x86_64, aarch64, ...
    kernel: str = ""
    cpu_model: str = ""
    cpu_flags: list[str] = field(default_factory=list)
    lse_atomics: bool | None = None         # aarch64 only: "atomics" in Features
    logical_cpus: int = 1
    physical_cores: int | None = None       # of the logical CPUs usable (None: unknown)
    numa_nodes: int = 1
    memory_total_bytes: int = 0
    memory_available_bytes: int = 0
    cgroup: Cgroup = field(default_factory=Cgroup)
    hugepages: list[HugePageSize] = field(default_factory=list)
    default_hugepage_bytes: int | None = None
    thp_enabled: str | None = None          # always | madvise | never
    thp_defrag: str | None = None
    block_devices: list[BlockDevice] = field(default_factory=list)
    io_uring: str = "unknown"               # available | disabled | restricted | unsupported
    sysctls: dict[str, str] = field(default_factory=dict)  # vm.swappiness -> "60", ...
    data_device: str | None = None          # block device holding the data directory

    # -- what the tuner plans for: the smaller of host and container limits ------------
    @property
    def effective_memory_bytes(self) -> int:
        lim = self.cgroup.memory_limit_bytes
        return min(self.memory_total_bytes, lim) if lim else self.memory_total_bytes

    @property
    def effective_cpus(self) -> float:
        n: float = self.logical_cpus
        if self.cgroup.cpuset_cpus:
            n = min(n, self.cgroup.cpuset_cpus)
        if self.cgroup.cpu_limit:
            n = min(n, self.cgroup.cpu_limit)
        return n

    def storage_kind(self) -> str:
        dev = next((d for d in self.block_devices if d.name == self.data_device), None)
        if dev is None and self.block_devices:
            dev = self.block_devices[0]
        return dev.kind if dev else "unknown"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["effective_memory_bytes"] = self.effective_memory_bytes
        d["effective_cpus"] = self.effective_cpus
        d["storage_kind"] = self.storage_kind()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "HostFacts":
        d = dict(d)
        for k in ("effective_memory_bytes", "effective_cpus", "storage_kind"):
            d.pop(k, None)
        d["cgroup"] = Cgroup(**d.get("cgroup") or {})
        d["hugepages"] = [HugePageSize(**h) for h in d.get("hugepages") or []]
        d["block_devices"] = [BlockDevice(**b) for b in d.get("block_devices") or []]
        return cls(**d)
