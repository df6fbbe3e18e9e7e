"""Machine profiles the tuner is table-tested on, and TuneInputs built from them.

Other test_tune_* modules import PROFILES / inputs_for from here.  Facts are constructed
(another architecture, a cgroup limit, an NVMe disk or 512 GB cannot exist on the CI VM);
the tuner reads them exactly as it reads probe_host()'s output.
"""

from __future__ import annotations

import pytest

from pgaccel.errors import UsageError
from pgaccel.probe.facts import BlockDevice, Cgroup, HostFacts, HugePageSize
from pgaccel.tune.inputs import TuneInputs, inputs_from_facts, storage_of

GB = 1024**3
HP2M = 2 * 1024 * 1024


def _facts(arch="x86_64", cpus=2, mem_gb=24, dev=("vda", True), numa=1, lse=None,
           cgroup=None, thp="madvise") -> HostFacts:
    name, rot = dev
    kind = "nvme" if name.startswith("nvme") else ("hdd" if rot else "ssd")
    return HostFacts(
        arch=arch, kernel="6.1.0", logical_cpus=cpus, numa_nodes=numa, lse_atomics=lse,
        memory_total_bytes=mem_gb * GB, memory_available_bytes=mem_gb * GB,
        cgroup=cgroup or Cgroup(version=2), hugepages=[HugePageSize(HP2M)],
        default_hugepage_bytes=HP2M, thp_enabled=thp, thp_defrag="madvise",
        block_devices=[BlockDevice(name, rot, "mq-deadline", ["none", "mq-deadline"], 128,
                                   kind=kind)],
        io_uring="available",
        sysctls={"vm.swappiness": "60", "vm.nr_hugepages": "0", "vm.dirty_bytes": "0",
                 "vm.dirty_background_bytes": "0", "kernel.sched_autogroup_enabled": "1",
                 "kernel.numa_balancing": "1" if numa > 1 else "0",
                 "vm.overcommit_memory": "0"},
        data_device=name)


PROFILES: dict[str, HostFacts] = {
    # a 1 GB / 1 CPU container on a 16 GB, 8-core host
    "container-1g": _facts(cpus=8, mem_gb=16, dev=("sda", False),
                           cgroup=Cgroup(version=2, memory_limit_bytes=1 * GB, cpu_limit=1.0)),
    "2c-24g": _facts(cpus=2, mem_gb=24, dev=("vda", True)),                   # this CI VM
    "8c-32g": _facts(cpus=8, mem_gb=32, dev=("sda", False)),                  # study 000 x86
    "48c-128g": _facts(cpus=48, mem_gb=128, dev=("nvme0n1", False), numa=2),  # study 001
    "96c-512g": _facts(cpus=96, mem_gb=512, dev=("nvme0n1", False), numa=2, thp="always"),
    "arm-lse-8c-32g": _facts(arch="aarch64", cpus=8, mem_gb=32, lse=True),    # study 000 ARM
    "arm-nolse-4c-16g": _facts(arch="aarch64", cpus=4, mem_gb=16, lse=False,
                               dev=("mmcblk0", False)),
}
BUILD_DEBIAN = {"with_lz4": True, "with_zstd": True, "with_liburing": False,
                "with_llvm": True}


def inputs_for(profile: str, version: int = 15, **kw) -> TuneInputs:
    kw.setdefault("build", BUILD_DEBIAN)
    return inputs_from_facts(PROFILES[profile], pg_version=version, **kw)


def test_container_limits_win_over_host():
    i = inputs_for("container-1g")
    assert i.memory_bytes == 1 * GB and i.cpus == 1.0 and i.container
    assert not inputs_for("8c-32g").container


def test_overrides_plan_another_machine():
    i = inputs_for("2c-24g", memory="32GB", cpus=8, storage="nvme", connections=300,
                   workload="analytics")
    assert (i.memory_bytes, i.cpus, i.storage, i.connections, i.workload) == \
        (32 * GB, 8.0, "nvme", 300, "analytics")
    assert set(i.overridden) == {"memory", "cpus", "storage", "connections", "workload"}


def test_connections_default_to_current_max_connections():
    assert inputs_for("2c-24g").connections == 100
    assert inputs_for("2c-24g", current={"max_connections": "250"}).connections == 250


@pytest.mark.parametrize("version", [12, 19, 9])
def test_unsupported_versions_are_refused(version):
    with pytest.raises(UsageError):
        inputs_for("2c-24g", version=version)


def test_bad_workload_and_storage_are_refused():
    with pytest.raises(UsageError):
        inputs_for("2c-24g", workload="desktop")
    with pytest.raises(UsageError):
        inputs_for("2c-24g", storage="floppy")
    with pytest.raises(UsageError):
        inputs_for("2c-24g", memory="lots")


def test_storage_class_of_profiles():
    got = {name: storage_of(f) for name, f in PROFILES.items()}
    # a virtio disk's rotational flag is meaningless: it is "virtual"
    assert got["2c-24g"] == "virtual" and got["arm-lse-8c-32g"] == "virtual"
    assert got["48c-128g"] == "nvme" and got["8c-32g"] == "ssd"


def test_inputs_round_trip_through_plan_dict():
    i = inputs_for("48c-128g")
    assert TuneInputs.from_dict(i.to_dict()) == i


def test_inputs_from_the_real_host():
    from pgaccel.probe.host import probe_host
    facts = probe_host()
    i = inputs_from_facts(facts, pg_version=15)
    assert i.memory_bytes == facts.effective_memory_bytes > 0
    assert i.cpus == facts.effective_cpus >= 1
