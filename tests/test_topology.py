"""Many CPUs without a many-CPU machine: SMT topologies as constructed /sys trees (this VM
has 2 CPUs and no SMT) read through probe.topology, the same code that reads /sys here,
and the placement of side-by-side rounds' pgbench shares over them (workloads/pinning.py);
a cpuset that excludes CPUs for real with taskset."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pgaccel.workloads.pinning import split_load

def _smt_tree(root, n_cpus: int, style: str):
    """``n_cpus`` logical CPUs, two threads a core: ``far`` numbers siblings i and
    i + n/2 (Intel servers), ``near`` 2k and 2k+1 (many AMD machines and cloud VMs)."""
    half = n_cpus // 2
    for c in range(n_cpus):
        core = c % half if style == "far" else c // 2
        sib = (core, core + half) if style == "far" else (2 * core, 2 * core + 1)
        d = root / "sys/devices/system/cpu" / f"cpu{c}" / "topology"
        d.mkdir(parents=True)
        (d / "thread_siblings_list").write_text(
            f"{sib[0]},{sib[1]}\n" if style == "far" else f"{sib[0]}-{sib[1]}\n")
    (root / "sys/devices/system/cpu/online").write_text(f"0-{n_cpus - 1}\n")
    return str(root)


@pytest.mark.parametrize("style, cpus, clients, want_cpus", [
    # 16 of 64 CPUs' clients on 16 different cores, whichever way siblings are numbered
    ("far", range(64), 16, list(range(16))),
    ("near", range(64), 16, list(range(0, 32, 2))),
    # a cpuset of 8 CPUs = 4 whole cores: 4 clients one per core, the 5th on a sibling
    ("near", [8, 9, 10, 11, 12, 13, 14, 15], 5, [8, 9, 10, 12, 14]),
    ("far", [0, 1, 2, 3, 32, 33, 34, 35], 4, [0, 1, 2, 3]),
    # a cpuset holding one thread of some cores and both of others
    ("near", [0, 1, 3, 5, 6], 3, [0, 3, 5]),
])
def test_shares_spread_over_cores_before_siblings(tmp_path, style, cpus, clients, want_cpus):
    from pgaccel.probe.topology import cores, read_siblings, threads_per_core
    sib = read_siblings(_smt_tree(tmp_path, 64, style))
    assert len(sib) == 64 and threads_per_core(range(64), sib) == 2
    assert len(cores(range(64), sib)) == 32
    got = split_load(clients, clients, list(cpus), cores(cpus, sib))
    assert sorted(s.cpu for s in got) == sorted(want_cpus)
    assert all(s.clients == 1 for s in got)


def test_more_clients_than_cpus_not_a_multiple(tmp_path):
    """33 clients on 16 CPUs of 8 SMT cores: every CPU gets 2, one gets 3, threads as
    asked in total."""
    from pgaccel.probe.topology import cores, read_siblings
    sib = read_siblings(_smt_tree(tmp_path, 16, "far"))
    got = split_load(33, 33, list(range(16)), cores(range(16), sib))
    assert sorted(s.clients for s in got) == [2] * 15 + [3]
    assert sum(s.threads for s in got) == 33 and len({s.cpu for s in got}) == 16
    # the share with the extra client is on the first core's first thread
    assert [s.cpu for s in got if s.clients == 3] == [0]


def test_a_cpu_without_topology_is_a_core_of_its_own(tmp_path):
    from pgaccel.probe.topology import cores, read_siblings
    assert read_siblings(str(tmp_path)) == {}
    assert cores([3, 1, 2], {}) == [(1,), (2,), (3,)]
    assert split_load(2, 2, [3, 1, 2], cores([3, 1, 2], {}))[0].cpu == 1


def test_a_cpuset_that_excludes_cpus_is_honoured_for_real():
    """`taskset -c 1` (what a cpuset does to a process): usable_cpus sees only CPU 1, and
    every share lands there."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    code = ("from pgaccel.workloads.pinning import split_load, usable_cpus; "
            "print(usable_cpus(), [(s.cpu, s.clients) for s in split_load(4, 4, "
            "usable_cpus())])")
    r = subprocess.run(["taskset", "-c", "1", sys.executable, "-c", code],
                       capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[1] [(1, 4)]"


@pytest.mark.parametrize("style, affinity, want_cores", [
    ("far", None, 32), ("near", None, 32),
    ("far", set(range(16)), 16),          # cpus 0-15: one thread of 16 cores
    ("near", set(range(16)), 8),          # cpus 0-15: both threads of 8 cores
])
def test_probe_counts_the_cores_under_the_usable_cpus(tmp_path, style, affinity, want_cores):
    from pgaccel.probe.host import probe_host
    root = _smt_tree(tmp_path, 64, style)
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text("".join(
        f"processor\t: {c}\nmodel name\t: Constructed 64-thread CPU\nflags\t: sse2\n\n"
        for c in range(64)))
    h = probe_host(root, arch="x86_64", affinity=affinity)
    assert (h.logical_cpus, h.physical_cores) == (len(affinity or range(64)), want_cores)


def test_this_machine_has_a_core_per_cpu():
    """This VM: 2 logical CPUs, thread_siblings_list 0 and 1 (no SMT)."""
    from pgaccel.probe.host import probe_host
    h = probe_host()
    assert h.physical_cores is not None and h.physical_cores <= h.logical_cpus
