"""What the tuner plans for: :class:`TuneInputs`, built from the probe's facts and overrides.

Container-aware: memory and CPUs are the smaller of the host's and the cgroup's limits
(``HostFacts.effective_memory_bytes`` / ``effective_cpus``).  Overrides (``--memory``,
``--cpus``, ``--pg-version``, ``--storage``, ``--connections``, ``--workload``) plan for
another machine; what they replace is listed in ``TuneInputs.overridden``.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import UsageError
from ..probe.facts import BlockDevice, HostFacts
from ..pg.values import parse_size
from ..pg.versions import check_version
from .workload import WorkloadProfile, classify

WORKLOADS = ("oltp", "web", "analytics", "mixed", "ingest")
STORAGE = ("nvme", "ssd", "hdd", "virtual", "san", "unknown")
DEFAULT_CONNECTIONS = 100


@dataclass
class TuneInputs:
    memory_bytes: int
    cpus: float
    pg_version: int
    storage: str = "unknown"
    connections: int = DEFAULT_CONNECTIONS
    workload: str = "oltp"
    arch: str = "x86_64"
    lse_atomics: bool | None = None
    numa_nodes: int = 1
    hugepage_bytes: int | None = 2 * 1024 * 1024
    thp: str | None = None
    thp_defrag: str | None = None
    build: dict[str, Any] | None = None     # with_lz4/with_zstd/with_liburing/with_llvm ...
    sysctls: dict[str, str] = field(default_factory=dict)
    devices: list[BlockDevice] = field(default_factory=list)
    data_device: str | None = None
    io_uring: str = "unknown"               # available | disabled | restricted | unknown
    kernel: str = ""
    container: bool = False                 # a cgroup limit is lower than the host
    nics: list[str] = field(default_factory=list)
    virtualized: bool = False               # x86 "hypervisor" CPU flag: a VM
    overridden: list[str] = field(default_factory=list)
    profile: dict[str, Any] | None = None   # workload.WorkloadProfile.to_dict(): measured
    workload_from: str = "default"          # default | flag (--workload) | profile
    data_bytes: int | None = None           # the database's size, where known (PGTune's)

    def __post_init__(self) -> None:
        check_version(int(self.pg_version))
        self.pg_version = int(self.pg_version)
        if self.workload not in WORKLOADS:
            raise UsageError(f"Unknown workload {self.workload!r}.",
                             f"Choose one of: {', '.join(WORKLOADS)}.")
        if self.storage not in STORAGE:
            raise UsageError(f"Unknown storage class {self.storage!r}.",
                             f"Choose one of: {', '.join(STORAGE)}.")
        if self.memory_bytes < 256 * 1024**2:
            raise UsageError(f"{self.memory_bytes // 1024**2} MB of memory is too little to plan "
                             "for.", "pgaccel plans for 256 MB or more.")
        if self.cpus <= 0:
            raise UsageError("--cpus must be positive.")
        if self.connections < 1:
            raise UsageError("--connections must be at least 1.")

    @property
    def ncpus(self) -> int:
        """Whole CPUs for counts (a 1.5-CPU quota plans like 1)."""
        return max(1, math.floor(self.cpus + 1e-9))

    def built_with(self, feature: str) -> bool | None:
        """True/False from pg_config, None when the build is unknown."""
        if self.build is None:
            return None
        return bool(self.build.get(f"with_{feature}"))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["devices"] = [asdict(x) for x in self.devices]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TuneInputs":
        """Inverse of to_dict (``Plan.inputs`` -> TuneInputs)."""
        d = dict(d)
        d["devices"] = [BlockDevice(**x) if isinstance(x, dict) else x
                        for x in d.get("devices") or []]
        return cls(**d)


def storage_of(facts: HostFacts) -> str:
    """The storage class of the data directory's device.

    A virtio disk (vd*, xvd*) reports rotational=1 unless the hypervisor says otherwise,
    so its rotational flag says nothing: it is classed "virtual"."""
    name = facts.data_device or (facts.block_devices[0].name if facts.block_devices else None)
    if name and re.match(r"x?vd[a-z]+$", name):
        return "virtual"
    kind = facts.storage_kind()
    return kind if kind in STORAGE else "unknown"


def parse_memory(text: str | int) -> int:
    """``--memory`` -> bytes (``parse_size``), a UsageError naming the flag otherwise."""
    try:
        return parse_size(text)
    except ValueError as e:
        raise UsageError(f"--memory: {e}") from None


def inputs_from_facts(facts: HostFacts, *, memory: str | int | None = None,
                      cpus: float | None = None, pg_version: int | None = None,
                      storage: str | None = None, connections: int | None = None,
                      workload: str | None = None, build: dict[str, Any] | None = None,
                      nics: list[str] | None = None,
                      current: dict[str, str] | None = None,
                      profile: "WorkloadProfile | dict[str, Any] | None" = None,
                      data_bytes: int | None = None) -> TuneInputs:
    """TuneInputs for the probed host, with overrides for planning another machine.

    ``current`` (the server's settings) supplies the default connection count
    (max_connections); ``build`` is ``build.build_features(pg_config)``; ``profile`` (a
    measured :class:`~pgaccel.tune.workload.WorkloadProfile`) chooses the workload class
    unless ``workload`` (``--workload``) overrides it."""
    if pg_version is None:
        raise UsageError("The PostgreSQL version to plan for is unknown.",
                         "Pass --pg-version N or install a PostgreSQL server.")
    overridden = [k for k, v in (("memory", memory), ("cpus", cpus), ("storage", storage),
                                 ("connections", connections), ("workload", workload))
                  if v is not None]
    if isinstance(profile, WorkloadProfile):
        profile = profile.to_dict()
    workload_from = "flag" if workload is not None else "default"
    if workload is None and profile is not None:
        kind, _ = classify(WorkloadProfile.from_dict(profile))
        if kind is not None:
            workload, workload_from = kind, "profile"
    if connections is None:
        try:
            connections = int((current or {}).get("max_connections") or DEFAULT_CONNECTIONS)
        except ValueError:
            connections = DEFAULT_CONNECTIONS
    lim = facts.cgroup.memory_limit_bytes
    container = bool((lim and lim < facts.memory_total_bytes)
                     or (facts.effective_cpus < facts.logical_cpus))
    return TuneInputs(
        memory_bytes=parse_memory(memory) if memory is not None else facts.effective_memory_bytes,
        cpus=float(cpus) if cpus is not None else float(facts.effective_cpus),
        pg_version=int(pg_version),
        storage=storage or storage_of(facts),
        connections=int(connections),
        workload=workload or "oltp",
        arch=facts.arch, lse_atomics=facts.lse_atomics, numa_nodes=facts.numa_nodes,
        hugepage_bytes=facts.default_hugepage_bytes, thp=facts.thp_enabled,
        thp_defrag=facts.thp_defrag, build=build, sysctls=dict(facts.sysctls),
        devices=list(facts.block_devices), data_device=facts.data_device,
        io_uring=facts.io_uring, kernel=facts.kernel, container=container,
        nics=list(nics or []), overridden=overridden,
        virtualized="hypervisor" in (facts.cpu_flags or []),
        profile=profile, workload_from=workload_from, data_bytes=data_bytes)
