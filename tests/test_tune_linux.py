"""Linux-layer rules and renderers (sysctl.d, tuned, shell script)."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess

import pytest

from pgaccel.tune.engine import plan_for_target
from pgaccel.tune.hugepages import margin
from pgaccel.probe.host import list_nics
from pgaccel.tune.linux import (MIGRATION_DEBUGFS, THP, is_sysctl, linux_changes,
                                render_script, render_sysctl, render_tuned)

from test_tune_profiles import PROFILES, inputs_for


def plan(profile: str, version: int = 15, huge_pages=None, **ov):
    return plan_for_target(PROFILES[profile], {"pg_version": version, **ov}, None, None,
                           pg_config=None, layers=("linux",), huge_pages=huge_pages)


def names(p) -> set[str]:
    return {c.name for c in p.changes}


def test_only_linux_changes_in_a_linux_plan():
    p = plan("8c-32g")
    assert p.changes and all(c.layer == "linux" for c in p.changes)


def test_huge_pages_from_the_reported_count_plus_margin():
    c = plan("8c-32g", huge_pages=4200).get("vm.nr_hugepages")
    assert int(c.proposed) == 4200 + margin(4200)
    assert c.inputs["shared_memory_size_in_huge_pages"] == 4200
    assert c.current == "0"


def test_huge_pages_keep_a_larger_existing_reservation():
    f = PROFILES["8c-32g"]
    f2 = type(f)(**{**f.__dict__, "sysctls": {**f.sysctls, "vm.nr_hugepages": "9000"}})
    p = plan_for_target(f2, {"pg_version": 15}, layers=("linux",), huge_pages=4200)
    assert p.get("vm.nr_hugepages").proposed == "9000"


def test_container_changes_are_advice_for_the_host():
    p = plan("container-1g")
    assert p.changes and all(c.advice_only for c in p.changes)
    assert "host" in p.get("vm.swappiness").reason


def test_numa_balancing_only_on_multi_node_hosts():
    assert "kernel.numa_balancing" in names(plan("48c-128g"))
    assert "kernel.numa_balancing" not in names(plan("8c-32g"))


def test_thp_always_becomes_madvise_never_stays():
    assert plan("96c-512g").get(THP).proposed == "madvise"
    assert THP not in names(plan("8c-32g"))        # already madvise
    f = PROFILES["8c-32g"]
    never = type(f)(**{**f.__dict__, "thp_enabled": "never"})
    assert THP not in names(plan_for_target(never, {"pg_version": 15}, layers=("linux",)))


def test_tuned_profile_values():
    p = plan("8c-32g")
    got = {n: p.get(n).proposed for n in ("vm.swappiness", "vm.dirty_background_bytes",
                                          "vm.dirty_bytes", "kernel.sched_autogroup_enabled")}
    assert got == {"vm.swappiness": "1", "vm.dirty_background_bytes": str(64 * 2**20),
                   "vm.dirty_bytes": str(512 * 2**20), "kernel.sched_autogroup_enabled": "0"}
    # a small host keeps dirty limits proportional
    small = plan("8c-32g", memory="2GB")
    assert int(small.get("vm.dirty_bytes").proposed) == 2 * 2**30 // 16


def test_migration_cost_location_depends_on_kernel():
    c = plan("8c-32g").get(MIGRATION_DEBUGFS)                # kernel 6.1: debugfs
    assert c.advice_only and "mount -t debugfs" in c.reason   # ... not mounted in the facts
    f = PROFILES["8c-32g"]
    old = type(f)(**{**f.__dict__, "kernel": "4.18.0"})
    assert "kernel.sched_migration_cost_ns" in names(
        plan_for_target(old, {"pg_version": 15}, layers=("linux",)))


def test_block_devices_per_kind():
    nv = plan("48c-128g")
    assert nv.get("sys/block/nvme0n1/queue/scheduler").proposed == "none"
    assert nv.get("sys/block/nvme0n1/queue/read_ahead_kb").proposed == "128"
    vd = plan("2c-24g", workload="analytics")
    assert vd.get("sys/block/vda/queue/scheduler").proposed == "none"   # virtio: virtual
    assert vd.get("sys/block/vda/queue/read_ahead_kb").proposed == "4096"


def test_nic_and_overcommit_are_advice_with_commands():
    inp = inputs_for("48c-128g", nics=["eth0"])
    ch = linux_changes(inp, {}, None)
    nic = next(c for c in ch if c.name == "nic/eth0/irq_affinity")
    assert nic.advice_only and any("/proc/irq/" in cmd for cmd in nic.inputs["commands"])
    assert any("rps_cpus" in cmd and "ffffffffffff" in cmd for cmd in nic.inputs["commands"])
    oc = next(c for c in ch if c.name == "vm.overcommit_memory")
    assert oc.advice_only and "trade-off" in oc.reason


def test_sysctl_file_holds_only_applicable_sysctls():
    p = plan("48c-128g", huge_pages=16500)
    text = render_sysctl(p)
    pairs = dict(re.findall(r"^([a-z][\w.]+) = (\S+)$", text, re.M))
    want = {c.name: c.proposed for c in p.changes if is_sysctl(c.name) and not c.advice_only}
    assert pairs == want and "vm.overcommit_memory" not in pairs
    assert all(ln.startswith("#") or not ln or " = " in ln for ln in text.splitlines())


def test_sysctl_names_exist_on_this_kernel():
    p = plan("2c-24g")
    for c in p.changes:
        if is_sysctl(c.name) and not c.advice_only and not c.name.startswith("kernel.sched_m"):
            assert os.path.exists("/proc/sys/" + c.name.replace(".", "/")), c.name


def test_tuned_profile_parses_and_holds_the_plan():
    f = PROFILES["96c-512g"]
    f = type(f)(**{**f.__dict__, "sysctls": {**f.sysctls,
                                              "kernel.sched_migration_cost_ns": "500000"}})
    p = plan_for_target(f, {"pg_version": 15}, layers=("linux",), huge_pages=70000)
    cp = configparser.ConfigParser()
    cp.read_string(render_tuned(p))
    assert cp["main"]["include"] == "throughput-performance"
    assert cp["vm"]["transparent_hugepages"] == "madvise"
    assert cp["vm"]["dirty_bytes"] == p.get("vm.dirty_bytes").proposed
    assert cp["sysctl"]["vm.nr_hugepages"] == str(70000 + margin(70000))
    assert cp["disk_nvme0n1"]["elevator"] == "none"
    assert cp["scheduler"]["sched_migration_cost_ns"] == "50000000"


def test_script_is_valid_shell_and_prints_old_values_first():
    p = plan("2c-24g", huge_pages=3086)
    text = render_script(p)
    sh = shutil.which("sh")
    r = subprocess.run([sh, "-n"], input=text, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = text.splitlines()
    i_old = next(i for i, ln in enumerate(lines) if "old: vm.nr_hugepages" in ln)
    i_set = next(i for i, ln in enumerate(lines) if "vm.nr_hugepages=" in ln and "sysctl" in ln)
    assert i_old < i_set
    assert "echo none > /sys/block/vda/queue/scheduler" in text
    assert "# Advice, not run" in text


def test_list_nics_reads_sys_class_net(tmp_path):
    base = tmp_path / "sys/class/net"
    (base / "eth0/device").mkdir(parents=True)
    (base / "lo").mkdir()
    assert list_nics(str(tmp_path)) == ["eth0"]
    assert "lo" not in list_nics("/")


@pytest.mark.parametrize("name,ok", [("vm.swappiness", True), ("kernel.numa_balancing", True),
                                     ("sys/block/vda/queue/scheduler", False),
                                     ("nic/eth0/irq_affinity", False)])
def test_is_sysctl(name, ok):
    assert is_sysctl(name) == ok


@pytest.mark.parametrize("overrides, text_why, prefetch", [
    ({"thp": "madvise"}, "pgaccel run --stack os measures it", "measure before changing"),
    ({"thp": "never"}, "THP is never here", "measure before changing"),
    ({"thp": "madvise", "virtualized": True}, "measures it", "leave as is"),
    ({"thp": "always", "arch": "aarch64"}, "measures it", "firmware setting")])
def test_code_on_huge_pages_and_prefetcher_are_advice(overrides, text_why, prefetch):
    import dataclasses
    inp = dataclasses.replace(inputs_for("2c-24g"), **overrides)
    ch = {c.name: c for c in linux_changes(inp, {}, None)}
    text, pf = ch["cpu/text_hugepages"], ch["cpu/prefetcher"]
    assert text.advice_only and pf.advice_only
    assert text_why in text.reason and "hugetext.c" in text.inputs["commands"][0]
    assert pf.proposed == prefetch
    if overrides.get("virtualized"):
        assert "hypervisor" in pf.reason
