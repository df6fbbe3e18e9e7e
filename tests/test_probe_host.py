"""probe/host.py and probe/cgroup.py: pure parsers table-tested, the real machine checked
against independent reads (and, in forked children, under a narrower CPU affinity and under a
seccomp filter refusing io_uring), and constructed /proc + /sys trees for what this machine
cannot show: aarch64, cgroup limits, NVMe.  The committed trees (tests/fixtures/hosts, written
by build_fixtures.py there) are built afresh in a temporary directory where a test needs their
symlinks (mutmut's copy of tests/ does not keep them); the others are built here, with values
chosen so that a plausible defect (kB taken as bytes, an off-by-one in "0-3,8-11", max for
min, the outermost cgroup for the innermost) changes the result."""

from __future__ import annotations

import ctypes
import errno
import filecmp
import importlib.util
import json
import os
import platform
import re

import pytest

from pgaccel.probe.facts import BlockDevice, HostFacts
from pgaccel.probe.cgroup import (cgroup_ancestors, limit_value, parse_cpu_max, parse_cpuset,
                                  parse_proc_cgroup)
from pgaccel.osknobs.procfs import parse_bracketed, parse_meminfo
from pgaccel.probe.host import (
    arm_cpu_model, data_device_for, device_kind, guess_arch, io_uring_syscall, list_nics,
    parse_cpuinfo, probe_host, read_io_uring, whole_disk,
)

HOSTS = os.path.join(os.path.dirname(__file__), "fixtures", "hosts")
GB = 1024**3


def fixture(name: str) -> HostFacts:
    return probe_host(os.path.join(HOSTS, name))


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


# -- pure parsers ---------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("0-3,8", {0, 1, 2, 3, 8}), ("0", {0}), ("0-1\n", {0, 1}), ("", set()),
    ("2,4-5,7", {2, 4, 5, 7}), (" 10-12 ", {10, 11, 12}),
    ("0-3,8-11", {0, 1, 2, 3, 8, 9, 10, 11}), ("0-1,,4", {0, 1, 4}),
])
def test_parse_cpuset(text, expected):
    assert parse_cpuset(text) == expected


def test_parse_cpuset_rejects_junk():
    with pytest.raises(ValueError):
        parse_cpuset("zero-three")


@pytest.mark.parametrize("text,active,options", [
    ("always [madvise] never\n", "madvise", ["always", "madvise", "never"]),
    ("[none] mq-deadline kyber", "none", ["none", "mq-deadline", "kyber"]),
    ("mq-deadline kyber [bfq] none", "bfq", ["mq-deadline", "kyber", "bfq", "none"]),
    ("none", "none", ["none"]),            # a lone option is the active one
    ("noop deadline", None, ["noop", "deadline"]),
    ("always] [madvise] never", "madvise", ["always", "madvise", "never"]),   # both brackets
    ("", None, []),
])
def test_parse_bracketed(text, active, options):
    assert parse_bracketed(text) == (active, options)


def test_parse_meminfo_converts_kb_and_keeps_counts():
    m = parse_meminfo("MemTotal:       1000 kB\nHugePages_Total:      7\n"
                      "Hugepagesize:       2048 kB\nnonsense line\n")
    assert m == {"MemTotal": 1024000, "HugePages_Total": 7, "Hugepagesize": 2097152}


def test_parse_cpuinfo_blocks():
    blocks = parse_cpuinfo("processor\t: 0\nCPU architecture: 8\n\nprocessor\t: 1\n"
                           "flags\t\t: a b\nmodel name\t: Virt CPU rev: 2\n\n\n")
    assert blocks == [{"processor": "0", "CPU architecture": "8"},
                      {"processor": "1", "flags": "a b", "model name": "Virt CPU rev: 2"}]


@pytest.mark.parametrize("imp,part,expected", [
    ("0x41", "0xd0c", "ARM Neoverse-N1"), ("0x41", "0xd40", "ARM Neoverse-V1"),
    ("0x41", "0xd4f", "ARM Neoverse-V2"), ("0x41", "0xd49", "ARM Neoverse-N2"),
    ("0x48", "0xd01", "HiSilicon Kunpeng-920"), ("0xc0", "0xac3", "Ampere AmpereOne"),
    ("0x41", "0xfff", "ARM part 0xfff"), ("0x99", "0x001", "implementer 0x99 part 0x1"),
    ("0xc0", None, "Ampere"), (None, "0xd0c", ""),
])
def test_arm_cpu_model(imp, part, expected):
    assert arm_cpu_model(imp, part) == expected


@pytest.mark.parametrize("block,arch", [
    ({"Features": "fp asimd", "CPU implementer": "0x41"}, "aarch64"),
    ({"flags": "fpu sse", "vendor_id": "GenuineIntel"}, "x86_64"),
    ({"Features": "fp asimd"}, "aarch64"), ({"CPU implementer": "0x41"}, "aarch64"),
    ({"flags": "fpu sse"}, "x86_64"), ({"vendor_id": "AuthenticAMD"}, "x86_64"),
    ({"cpu": "POWER9"}, "unknown"),
])
def test_guess_arch(block, arch):
    assert guess_arch([block]) == arch
    assert guess_arch([]) == "unknown"


@pytest.mark.parametrize("text,expected", [
    ("1073741824\n", 1073741824), ("max\n", None), ("-1", None), ("0", 0),
    ("9223372036854771712", None), (str(2**60), None), (str(2**60 - 1), 2**60 - 1),
    ("", None), (None, None), ("garbage", None),
])
def test_limit_value(text, expected):
    assert limit_value(text) == expected


@pytest.mark.parametrize("text,expected", [
    ("150000 100000\n", 1.5), ("max 100000", None), ("200000 100000", 2.0),
    ("50000", 0.5), ("-1 100000", None), ("100000 0", None), ("", None), ("5 1", 5.0),
])
def test_parse_cpu_max(text, expected):
    assert parse_cpu_max(text) == expected


def test_parse_proc_cgroup_v1_and_v2_lines():
    m = parse_proc_cgroup("11:cpu,cpuacct:/docker/x\n4:memory:/m\n0::/user.slice\nbad\n")
    assert m["cpu"] == ("cpu,cpuacct", "/docker/x")
    assert m["cpuacct"] == ("cpu,cpuacct", "/docker/x")
    assert m["memory"] == ("memory", "/m")
    assert m[""] == ("", "/user.slice")
    # a malformed line is skipped, not the end; a path may hold ':'
    m = parse_proc_cgroup("junk\n1:name=systemd:/a:b\n0::/c\n")
    assert m == {"name=systemd": ("name=systemd", "/a:b"), "": ("", "/c")}


@pytest.mark.parametrize("path,expected", [
    ("/a/b", ["a/b", "a", ""]), ("/", [""]), ("", [""]), ("/../..", [""]),
])
def test_cgroup_ancestors(path, expected):
    assert cgroup_ancestors(path) == expected


@pytest.mark.parametrize("name,rot,kind", [
    ("nvme0n1", False, "nvme"), ("nvme1n1", None, "nvme"), ("sda", True, "hdd"),
    ("sdb", False, "ssd"), ("vda", False, "virtual"), ("xvdf", False, "virtual"),
    ("vda", True, "virtual"), ("mmcblk0", None, "unknown"),
])
def test_device_kind(name, rot, kind):
    assert device_kind(name, rot) == kind


# -- this machine ---------------------------------------------------------------------------

@pytest.fixture
def real() -> HostFacts:
    # probed per test, not per module: mutmut runs only the tests that called a function, and
    # it counts a module-scoped fixture's calls for the first test alone
    return probe_host(data_dir="/")           # root "/" by default


def test_real_cpu_and_kernel(real):
    assert real.arch == platform.machine()
    assert real.kernel == platform.release()
    with open("/proc/cpuinfo") as fh:
        listed = len(re.findall(r"^processor\s*:", fh.read(), re.M))
    # the kernel's affinity mask holds only online CPUs, the ones cpuinfo lists: so it is the
    # count here (the rule where the two differ: constructed trees, a pinned child below)
    assert real.logical_cpus == len(os.sched_getaffinity(0)) <= listed
    assert real.numa_nodes >= 1
    assert real.cpu_flags, "cpuinfo flags/Features should be read"
    assert (real.lse_atomics is None) == (real.arch != "aarch64")


def test_real_memory(real):
    assert 100 * 1024**2 < real.memory_total_bytes < 100 * 1024**4
    assert 0 < real.memory_available_bytes <= real.memory_total_bytes
    assert real.effective_memory_bytes <= real.memory_total_bytes


def test_real_hugepages_and_thp(real):
    assert real.hugepages, "at least one hugepage size should be listed"
    for h in real.hugepages:
        assert h.size_bytes > 0 and h.size_bytes & (h.size_bytes - 1) == 0
        assert _read(f"/sys/kernel/mm/hugepages/hugepages-{h.size_bytes // 1024}kB"
                     "/nr_hugepages") == str(h.total)
    assert real.default_hugepage_bytes in {h.size_bytes for h in real.hugepages}
    assert real.thp_enabled in {"always", "madvise", "never"}


def test_real_sysctls_and_io_uring(real):
    assert int(real.sysctls["vm.swappiness"]) == int(_read("/proc/sys/vm/swappiness"))
    assert real.io_uring in {"available", "disabled", "restricted", "unsupported", "unknown"}
    flag = _read("/proc/sys/kernel/io_uring_disabled")
    seccomp = re.search(r"^Seccomp:\s*(\d+)", _read("/proc/self/status") or "", re.M)
    if (flag == "0" and seccomp and seccomp.group(1) == "0"
            and platform.machine() in ("x86_64", "aarch64")):
        assert real.io_uring == "available"        # the sysctl allows it, the syscall agrees
    elif flag == "2":
        assert real.io_uring == "disabled"
    elif flag == "1":
        assert real.io_uring == "restricted"


def test_real_cgroup_version(real):
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        assert real.cgroup.version == 2
    elif os.path.isdir("/sys/fs/cgroup/memory"):
        assert real.cgroup.version == 1
    if real.cgroup.cpuset_cpus is not None:
        assert real.cgroup.cpuset_cpus < real.logical_cpus
    assert 0 < real.effective_cpus <= real.logical_cpus


def test_real_block_devices_and_data_device(real):
    names = set(os.listdir("/sys/block"))
    for d in real.block_devices:
        assert d.name in names and not d.name.startswith(("loop", "zram", "ram"))
        assert d.kind in {"nvme", "ssd", "hdd", "virtual", "unknown"}
    dev = os.stat("/").st_dev
    if os.major(dev) == 0:            # overlay, tmpfs, btrfs: no block device behind it
        assert real.data_device is None
    else:
        assert real.data_device in names
        assert whole_disk(os.major(dev), os.minor(dev)) == real.data_device   # root "/"
        assert real.storage_kind() == next(d.kind for d in real.block_devices
                                           if d.name == real.data_device)
    assert data_device_for("/nonexistent/dir") is None
    assert probe_host("/").data_device is None          # only with a data_dir


def test_real_io_uring_syscall():
    assert io_uring_syscall("riscv64") == "unknown"
    flag = _read("/proc/sys/kernel/io_uring_disabled")
    seccomp = re.search(r"^Seccomp:\s*(\d+)", _read("/proc/self/status") or "", re.M)
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("io_uring_setup number only known for x86_64 and aarch64")
    if flag == "0" and seccomp and seccomp.group(1) == "0":
        assert io_uring_syscall(platform.machine()) == "available"
    elif flag == "2":
        assert io_uring_syscall(platform.machine()) == "disabled"
    else:
        pytest.skip(f"io_uring_disabled={flag}, seccomp={seccomp and seccomp.group(1)}")


def _in_child(fn) -> str:
    """``fn()``'s text, computed in a forked child (which may restrict itself for good)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                  # the child
        try:
            os.close(r)
            os.write(w, str(fn()).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        out = fh.read()
    os.waitpid(pid, 0)
    return out


def test_cpus_of_this_machine_under_a_narrower_affinity():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: no narrower affinity")
    assert probe_host().logical_cpus == len(os.sched_getaffinity(0))

    def pinned() -> int:                          # as under taskset -c <cpu>
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        return probe_host().logical_cpus

    assert _in_child(pinned) == "1"


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _refuse_io_uring_setup(err: int) -> bool:
    """Install a seccomp filter on this process that answers io_uring_setup (425 on x86_64 and
    aarch64) with ``err``, as a container runtime's default profile does; False if it cannot."""
    insns = (_SockFilter * 4)(
        _SockFilter(0x20, 0, 0, 0),                     # load seccomp_data.nr
        _SockFilter(0x15, 0, 1, 425),                   # == io_uring_setup ?
        _SockFilter(0x06, 0, 0, 0x00050000 | err),      # SECCOMP_RET_ERRNO | err
        _SockFilter(0x06, 0, 0, 0x7FFF0000))            # SECCOMP_RET_ALLOW
    prog = _SockFprog(4, insns)
    libc = ctypes.CDLL(None, use_errno=True)
    # PR_SET_NO_NEW_PRIVS, then PR_SET_SECCOMP with SECCOMP_MODE_FILTER
    return libc.prctl(38, 1, 0, 0, 0) == 0 and libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0


@pytest.mark.parametrize("err,expected", [
    (errno.EPERM, "disabled"), (errno.ENOSYS, "unsupported"), (errno.EINVAL, "unknown"),
])
def test_io_uring_refused_by_seccomp(tmp_path, err, expected):
    """The syscall probe on this machine, in a child whose seccomp filter refuses io_uring:
    the errno decides, and the probe of "/" believes the syscall over the sysctl."""
    arch = platform.machine()
    if arch not in ("x86_64", "aarch64"):
        pytest.skip("io_uring_setup number only known for x86_64 and aarch64")
    # (called here too, not only in the child, for mutmut, which runs a test against a
    # function's mutants only if the test called the function in its own process)
    assert read_io_uring(str(tmp_path), arch) == "unknown"      # a tree: no syscall
    assert io_uring_syscall("riscv64") == "unknown"             # no syscall number known
    flag = _read("/proc/sys/kernel/io_uring_disabled")

    def refused() -> str:
        if not _refuse_io_uring_setup(err):
            return "no seccomp"
        return f"{io_uring_syscall(arch)} {read_io_uring('/', arch)}"

    out = _in_child(refused)
    if out == "no seccomp":
        pytest.skip("seccomp filters not available here")
    # io_uring_disabled 1 or 2 is believed without a syscall
    assert out == f"{expected} " + {"1": "restricted", "2": "disabled"}.get(flag, expected)


# -- constructed trees ----------------------------------------------------------------------

def _generator():
    spec = importlib.util.spec_from_file_location("build_fixtures",
                                                  os.path.join(HOSTS, "build_fixtures.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> str:
    """The constructed trees written afresh by build_fixtures.py, symlinks included: mutmut's
    copy of tests/ turns the committed trees' symlinks into plain directories."""
    dest = tmp_path_factory.mktemp("hosts")
    _generator().build(str(dest))
    return str(dest)


def test_fixtures_match_their_generator(generated):
    for name in _generator().TREES:
        for dirpath, _, files in os.walk(os.path.join(generated, name)):
            rel = os.path.relpath(dirpath, generated)
            for f in files:
                committed = os.path.join(HOSTS, rel, f)
                assert os.path.exists(committed), f"{rel}/{f}: rerun build_fixtures.py"
                assert filecmp.cmp(os.path.join(dirpath, f), committed, shallow=False), \
                    f"{rel}/{f} differs from build_fixtures.py"


def test_arm_lse():
    f = fixture("arm-lse")
    assert (f.arch, f.kernel, f.cpu_model) == ("aarch64", "6.1.0-18-arm64", "ARM Neoverse-N1")
    assert f.lse_atomics is True and "atomics" in f.cpu_flags and "asimd" in f.cpu_flags
    assert (f.logical_cpus, f.numa_nodes) == (8, 2)
    assert (f.memory_total_bytes, f.memory_available_bytes) == (32 * GB, 30 * GB)
    assert f.cgroup.version == 2 and f.cgroup.memory_limit_bytes is None
    assert f.cgroup.cpu_limit is None and f.cgroup.cpuset_cpus is None   # 0-7: all CPUs
    assert [(h.size_bytes, h.total, h.free, h.reserved) for h in f.hugepages] == [
        (64 * 1024, 0, 0, 0), (2 * 1024**2, 512, 500, 10), (GB, 0, 0, 0)]
    assert f.default_hugepage_bytes == 2 * 1024**2
    assert (f.thp_enabled, f.thp_defrag) == ("always", "madvise")
    [d] = f.block_devices
    assert (d.name, d.kind, d.rotational, d.scheduler) == ("nvme0n1", "nvme", False, "none")
    assert d.schedulers == ["none", "mq-deadline", "kyber"]
    assert (d.size_bytes, d.read_ahead_kb) == (7501476528 * 512, 128)
    assert d.model == "SAMSUNG MZQL27T6HBLA-00A07"
    assert f.io_uring == "unknown"                 # no io_uring_disabled, no syscall on a tree
    assert f.sysctls == {"vm.swappiness": "60", "vm.overcommit_memory": "0",
                         "kernel.sched_migration_cost_ns": "500000"}    # from debugfs
    assert f.effective_memory_bytes == 32 * GB and f.effective_cpus == 8
    assert f.storage_kind() == "nvme"


def test_arm_lse_partition_resolves_to_whole_disk(generated):
    root = os.path.join(generated, "arm-lse")
    assert whole_disk(259, 1, root) == "nvme0n1"
    assert whole_disk(259, 0, root) == "nvme0n1"
    assert whole_disk(8, 0, root) is None


def test_arm_nolse_guesses_arch_without_arch_file():
    assert not os.path.exists(os.path.join(HOSTS, "arm-nolse", "arch"))
    f = fixture("arm-nolse")
    assert (f.arch, f.cpu_model, f.lse_atomics) == ("aarch64", "ARM Cortex-A72", False)
    assert "crc32" in f.cpu_flags and "atomics" not in f.cpu_flags
    assert (f.logical_cpus, f.numa_nodes, f.memory_total_bytes) == (4, 1, 4 * GB)
    assert f.cgroup.version is None and f.hugepages == []
    assert f.io_uring == "disabled"
    assert f.sysctls == {"kernel.sched_migration_cost_ns": "250000"}   # /proc/sys location
    assert f.storage_kind() == "virtual" and f.block_devices[0].scheduler == "mq-deadline"
    as_x86 = probe_host(os.path.join(HOSTS, "arm-nolse"), arch="x86_64")
    assert (as_x86.lse_atomics, as_x86.cpu_model) == (None, "")    # no "model name" line
    # x86 reads "flags", and "Features" when there is none
    assert as_x86.cpu_flags == "fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid".split()


def test_container_1g_v2():
    f = fixture("container-1g-v2")
    assert (f.arch, f.cpu_model) == ("x86_64", "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz")
    assert f.lse_atomics is None and "avx2" in f.cpu_flags
    assert (f.logical_cpus, f.memory_total_bytes) == (16, 64 * GB)
    # the process's cgroup dir is absent from the tree: limits come from the mount root
    assert f.cgroup.version == 2
    assert (f.cgroup.memory_limit_bytes, f.cgroup.cpu_limit) == (GB, 1.5)
    assert f.cgroup.cpuset_cpus is None
    assert f.effective_memory_bytes == GB and f.effective_cpus == 1.5
    assert [d.name for d in f.block_devices] == ["sda"]          # loop0 skipped
    sda = f.block_devices[0]
    assert (sda.kind, sda.rotational, sda.scheduler, sda.model) == (
        "hdd", True, "bfq", "ST4000NM0035-1V4")
    assert f.storage_kind() == "hdd"
    assert (f.thp_enabled, f.thp_defrag) == ("never", "never")
    assert f.io_uring == "restricted"
    assert f.sysctls == {"vm.swappiness": "30", "vm.dirty_ratio": "20",
                         "kernel.numa_balancing": "1"}


def test_cgroup_v1_limits():
    f = fixture("cgroup-v1-limits")
    assert f.cgroup.version == 1
    assert f.cgroup.memory_limit_bytes == 2 * GB     # set on the parent /docker only
    assert f.cgroup.cpu_limit == 2.0                 # found under the "cpu,cpuacct" mount
    assert f.cgroup.cpuset_cpus == 4                 # 0-3 at the leaf, not 0-7 at the root
    assert (f.logical_cpus, f.memory_total_bytes) == (8, 16 * GB)
    assert f.effective_memory_bytes == 2 * GB and f.effective_cpus == 2.0
    assert f.io_uring == "available"
    assert (f.thp_enabled, f.default_hugepage_bytes) == (None, 2 * 1024**2)
    assert f.storage_kind() == "virtual" and f.block_devices[0].read_ahead_kb == 4096
    assert f.block_devices[0].model is None          # no device/model file


def test_empty_tree_is_all_unknown(tmp_path):
    f = probe_host(str(tmp_path))
    assert (f.arch, f.kernel, f.cpu_model, f.logical_cpus, f.numa_nodes) == (
        "unknown", "", "", 1, 1)
    assert f.memory_total_bytes == 0 and f.cgroup.version is None
    assert (f.hugepages, f.block_devices, f.sysctls) == ([], [], {})
    assert (f.io_uring, f.thp_enabled, f.storage_kind()) == ("unknown", None, "unknown")
    assert (f.cpu_flags, f.thp_defrag, f.default_hugepage_bytes) == ([], None, None)
    assert f.memory_available_bytes == 0 and f.lse_atomics is None
    # no cpuinfo to list CPUs: the affinity alone counts them
    assert probe_host(str(tmp_path), affinity={0, 1, 2, 3, 4, 5}).logical_cpus == 6


@pytest.mark.parametrize("name", ["arm-lse", "container-1g-v2", "cgroup-v1-limits"])
def test_facts_round_trip_through_json(name):
    f = fixture(name)
    assert HostFacts.from_dict(json.loads(json.dumps(f.to_dict()))) == f


# -- trees built here, with values that tell a defect apart ---------------------------------

def make_tree(root, files: dict) -> str:
    """Write ``files`` ({relative path: text, or ("->", target) for a relative symlink as sysfs
    has, or None for an empty directory}) under ``root``."""
    for rel, content in files.items():
        path = os.path.join(root, rel)
        if content is None:
            os.makedirs(path, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(content, tuple):
            os.symlink(content[1], path)
        else:
            with open(path, "w") as fh:
                fh.write(content)
    return str(root)


def _x86_block(i: int) -> str:
    return (f"processor\t: {i}\nvendor_id\t: AuthenticAMD\n"
            "model name\t: AMD EPYC 9454P 48-Core Processor\n"
            "flags\t\t: fpu sse2 avx2 avx512f\npower management:\n\n")


# An x86 host whose CPUs are numbered 0-3,8-11 (8 of them), in a Kubernetes container whose
# limits sit on three levels of its cgroup v2 path, with hugepages of two sizes, three NUMA
# nodes (node2 absent), and disks of every kind the probe tells apart.
HAND = {
    "arch": "x86_64\n",
    "proc/cpuinfo": "".join(_x86_block(i) for i in (0, 1, 2, 3, 8, 9, 10, 11)),
    "proc/meminfo": ("MemTotal:       16318252 kB\nMemFree:          812340 kB\n"
                     "MemAvailable:   12004568 kB\nHugePages_Total:      64\n"
                     "HugePages_Free:       60\nHugepagesize:    1048576 kB\n"),
    "proc/sys/kernel/osrelease": "6.8.0-1015-aws\n",
    "proc/sys/kernel/io_uring_disabled": "0\n",
    "proc/sys/vm/swappiness": "10\n",
    "proc/sys/vm/dirty_bytes": "268435456\n",
    "proc/sys/vm/nr_hugepages": "300\n",
    "proc/sys/vm/min_free_kbytes": "67584\n",                # not one the probe reads
    "proc/sys/kernel/shmmax": " 68719476736 \n",
    "proc/sys/kernel/sched_migration_cost_ns": "500000\n",   # /proc/sys wins over debugfs
    "sys/kernel/debug/sched/migration_cost_ns": "750000\n",
    "proc/self/cgroup": "0::/kubepods/pod1/ctr\n",
    "sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids\n",
    "sys/fs/cgroup/memory.max": "max\n",
    "sys/fs/cgroup/cpu.max": "max 100000\n",
    "sys/fs/cgroup/cpuset.cpus.effective": "0-15\n",
    "sys/fs/cgroup/kubepods/memory.max": "4294967296\n",
    "sys/fs/cgroup/kubepods/cpu.max": "400000 100000\n",
    "sys/fs/cgroup/kubepods/pod1/memory.max": "2147483648\n",
    "sys/fs/cgroup/kubepods/pod1/cpuset.cpus.effective": "0-3,8-11\n",
    "sys/fs/cgroup/kubepods/pod1/ctr/memory.max": "max\n",
    "sys/fs/cgroup/kubepods/pod1/ctr/cpu.max": "150000 50000\n",
    "sys/fs/cgroup/kubepods/pod1/ctr/cpuset.cpus.effective": "0-1,8-10\n",
    "sys/kernel/mm/hugepages/hugepages-1GkB": None,                      # not a size: skipped
    "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages": "300\n",
    "sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages": "200\n",
    "sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages": "7\n",
    "sys/kernel/mm/hugepages/hugepages-2048kB/surplus_hugepages": "3\n",
    "sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages": "64\n",
    "sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages": "60\n",
    "sys/kernel/mm/hugepages/hugepages-1048576kB/resv_hugepages": "1\n",
    "sys/kernel/mm/hugepages/hugepages-1048576kB/surplus_hugepages": "0\n",
    "sys/kernel/mm/hugepages/hugepages-32768kB/nr_hugepages": "5\n",   # the rest unreadable
    "sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n",
    "sys/kernel/mm/transparent_hugepage/defrag": "[always] defer defer+madvise madvise never\n",
    "sys/devices/system/node/node0/cpulist": "0-3\n",
    "sys/devices/system/node/node1/cpulist": "8-9\n",
    "sys/devices/system/node/node3/cpulist": "10-11\n",
    "sys/devices/system/node/online": "0-1,3\n",
    "sys/devices/system/node/has_cpu": "0-1,3\n",
    "sys/block/nvme0n1/queue/rotational": "0\n",
    "sys/block/nvme0n1/queue/scheduler": "[none] mq-deadline\n",
    "sys/block/nvme0n1/queue/read_ahead_kb": "128\n",
    "sys/block/nvme0n1/size": "1000215216\n",
    "sys/block/nvme0n1/device/model": "Micron_7450_MTFDKBG960TFR               \n",
    "sys/block/sdb/queue/rotational": "1\n",
    "sys/block/sdb/queue/scheduler": "mq-deadline [bfq] none\n",
    "sys/block/sdb/queue/read_ahead_kb": "4096\n",
    "sys/block/sdb/size": "100\n",
    "sys/block/mmcblk0/dev": "179:0\n",                 # nothing else known about it
    **{f"sys/block/{n}/size": "8\n" for n in ("loop3", "ram0", "zram0", "sr0", "fd0")},
}


@pytest.fixture(scope="module")
def hand(tmp_path_factory) -> str:
    return make_tree(tmp_path_factory.mktemp("hand"), HAND)


def test_hand_tree_every_section(hand):
    f = probe_host(hand)
    assert (f.arch, f.kernel, f.cpu_model) == (
        "x86_64", "6.8.0-1015-aws", "AMD EPYC 9454P 48-Core Processor")
    assert f.cpu_flags == ["fpu", "sse2", "avx2", "avx512f"] and f.lse_atomics is None
    assert (f.logical_cpus, f.numa_nodes) == (8, 3)
    # kB -> bytes: 16318252 * 1024, 12004568 * 1024; Hugepagesize 1048576 kB = 1 GiB
    assert (f.memory_total_bytes, f.memory_available_bytes) == (16709890048, 12292677632)
    assert f.default_hugepage_bytes == GB
    # (size, nr, free, resv, surplus), smallest size first; missing counters are 0
    assert [(h.size_bytes, h.total, h.free, h.reserved, h.surplus) for h in f.hugepages] == [
        (2 * 1024**2, 300, 200, 7, 3), (32 * 1024**2, 5, 0, 0, 0), (GB, 64, 60, 1, 0)]
    assert (f.thp_enabled, f.thp_defrag) == ("madvise", "always")
    assert f.io_uring == "available"
    assert f.sysctls == {"vm.swappiness": "10", "vm.dirty_bytes": "268435456",
                         "vm.nr_hugepages": "300", "kernel.shmmax": "68719476736",
                         "kernel.sched_migration_cost_ns": "500000"}


def test_hand_tree_block_devices(hand):
    mmc, nvme, sdb = probe_host(hand).block_devices       # loop, ram, zram, sr, fd skipped
    assert mmc == BlockDevice("mmcblk0")                   # every field unknown
    assert nvme == BlockDevice(
        "nvme0n1", rotational=False, scheduler="none", schedulers=["none", "mq-deadline"],
        read_ahead_kb=128, size_bytes=512110190592, model="Micron_7450_MTFDKBG960TFR",
        kind="nvme")                                       # 1000215216 sectors of 512 bytes
    assert sdb == BlockDevice(
        "sdb", rotational=True, scheduler="bfq", schedulers=["mq-deadline", "bfq", "none"],
        read_ahead_kb=4096, size_bytes=51200, model=None, kind="hdd")


def test_hand_tree_cgroup_v2_limits_along_the_path(hand):
    cg = probe_host(hand).cgroup
    assert cg.version == 2
    # memory: max at the root and the leaf, 4 GiB on kubepods, 2 GiB on the pod: the smallest
    assert cg.memory_limit_bytes == 2 * GB
    # cpu: 400000/100000 = 4 on kubepods, 150000/50000 = 3 on the container (its own period)
    assert cg.cpu_limit == 3.0
    # cpuset: the innermost, 0-1,8-10 = 5 CPUs (not 0-3,8-11 = 8 on the pod, nor 0-15)
    assert cg.cpuset_cpus == 5


@pytest.mark.parametrize("affinity,cpus,cpuset,effective", [
    (None, 8, 5, 3.0),               # the 8 listed CPUs; cpu.max allows 3 of them
    (set(), 8, 5, 3.0),              # an empty affinity says nothing
    (set(range(16)), 8, 5, 3.0),     # a wider affinity cannot add CPUs to the listed 8
    ({2, 3, 9}, 3, None, 3),         # a narrower one restricts; the 5-CPU cpuset then does not
    ({0, 1}, 2, None, 2),            # fewer CPUs than cpu.max allows
    ({0, 1, 2, 3, 8}, 5, None, 3.0),  # a cpuset as wide as the CPUs left is no restriction
    ({0, 1, 2, 3, 8, 9}, 6, 5, 3.0),
])
def test_hand_tree_cpus_under_affinity(hand, affinity, cpus, cpuset, effective):
    f = probe_host(hand, affinity=affinity)
    assert (f.logical_cpus, f.cgroup.cpuset_cpus, f.effective_cpus) == (cpus, cpuset, effective)


def test_cgroup_v1_cpu_controller_alone(tmp_path):
    """Only cpu,cpuacct mounted (no memory or cpuset hierarchy): still cgroup v1; each level's
    quota is divided by that level's own period."""
    root = make_tree(tmp_path, {
        "proc/cpuinfo": "".join(_x86_block(i) for i in range(4)),
        "proc/self/cgroup": "4:cpu,cpuacct:/slice/a\n1:name=systemd:/slice/a\n",
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        "sys/fs/cgroup/cpu,cpuacct/slice/cpu.cfs_quota_us": "300000\n",
        "sys/fs/cgroup/cpu,cpuacct/slice/cpu.cfs_period_us": "100000\n",
        "sys/fs/cgroup/cpu,cpuacct/slice/a/cpu.cfs_quota_us": "50000\n",
        "sys/fs/cgroup/cpu,cpuacct/slice/a/cpu.cfs_period_us": "50000\n",
    })
    cg = probe_host(root).cgroup
    assert (cg.version, cg.memory_limit_bytes, cg.cpu_limit, cg.cpuset_cpus) == (
        1, None, 1.0, None)


def test_cgroup_v1_cpuset_skips_junk_and_empty_sets(tmp_path):
    """The innermost cpuset that parses and is not empty counts; memory, absent from
    proc/self/cgroup, is read at the hierarchy's root."""
    root = make_tree(tmp_path, {
        "proc/cpuinfo": "".join(_x86_block(i) for i in range(8)),
        "proc/self/cgroup": "3:cpuset:/ct/x\n",
        "sys/fs/cgroup/cpuset/cpuset.cpus": "2-5\n",
        "sys/fs/cgroup/cpuset/ct/cpuset.cpus": "\n",
        "sys/fs/cgroup/cpuset/ct/x/cpuset.cpus": "x-y\n",
        "sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912\n",
    })
    cg = probe_host(root).cgroup
    assert (cg.version, cg.memory_limit_bytes, cg.cpu_limit, cg.cpuset_cpus) == (
        1, 512 * 1024**2, None, 4)


def test_other_arch_without_cgroup_membership(tmp_path):
    """The arch file wins over the guess; no proc/self/cgroup means the cgroup root; meminfo
    without MemAvailable or MemFree leaves available memory at 0."""
    root = make_tree(tmp_path, {
        "arch": "ppc64le\n",
        "proc/cpuinfo": "processor\t: 0\ncpu\t\t: POWER9\n\nprocessor\t: 1\ncpu\t\t: POWER9\n",
        "proc/meminfo": "MemTotal:        4096 kB\n",
        "proc/sys/kernel/io_uring_disabled": "7\n",          # not a known value
        "sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
        "sys/fs/cgroup/memory.max": "536870912\n",
        "sys/fs/cgroup/cpu.max": "max 100000\n",
    })
    f = probe_host(root)
    assert (f.arch, f.cpu_model, f.cpu_flags, f.lse_atomics) == ("ppc64le", "", [], None)
    assert (f.logical_cpus, f.memory_total_bytes, f.memory_available_bytes) == (2, 4194304, 0)
    assert (f.cgroup.version, f.cgroup.memory_limit_bytes, f.cgroup.cpu_limit) == (
        2, 512 * 1024**2, None)
    assert f.io_uring == "unknown"


def test_aarch64_model_name_and_no_features(tmp_path):
    """An aarch64 cpuinfo with a "model name" line uses it; without "Features" there are no
    flags (and so no LSE); without MemAvailable, MemFree is what is available."""
    root = make_tree(tmp_path, {
        "arch": "aarch64\n",
        "proc/cpuinfo": ("processor\t: 0\nmodel name\t: ARMv8 Processor rev 4 (v8l)\n"
                         "CPU implementer\t: 0x41\nCPU part\t: 0xd03\n\n"),
        "proc/meminfo": "MemTotal:        2048 kB\nMemFree:         1000 kB\n",
    })
    f = probe_host(root)
    assert (f.cpu_model, f.cpu_flags, f.lse_atomics) == ("ARMv8 Processor rev 4 (v8l)", [], False)
    assert (f.memory_total_bytes, f.memory_available_bytes) == (2097152, 1024000)


def test_data_device_through_a_tree(tmp_path):
    """data_device_for looks the directory's device number up in the tree it is given."""
    dev = os.stat(tmp_path).st_dev
    root = make_tree(tmp_path / "root", {
        "sys/block/vdz/vdz2/partition": "2\n",
        f"sys/dev/block/{os.major(dev)}:{os.minor(dev)}": ("->", "../../block/vdz/vdz2"),
    })
    assert data_device_for(str(tmp_path), root) == "vdz"
    assert data_device_for(str(tmp_path), str(tmp_path / "elsewhere")) is None


def test_list_nics_keeps_those_with_a_device(tmp_path):
    pci = "../../devices/pci0000:00/0000:00:03.0"
    root = make_tree(tmp_path, {
        "sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/device": ("->", "../../../virtio2"),
        "sys/devices/pci0000:00/0000:00:05.0/net/ens5/device": ("->", "../../../0000:00:05.0"),
        "sys/devices/virtual/net/lo/mtu": "65536\n",
        "sys/devices/virtual/net/docker0/mtu": "1500\n",
        "sys/class/net/eth0": ("->", f"{pci}/virtio2/net/eth0"),
        "sys/class/net/ens5": ("->", "../../devices/pci0000:00/0000:00:05.0/net/ens5"),
        "sys/class/net/lo": ("->", "../../devices/virtual/net/lo"),
        "sys/class/net/docker0": ("->", "../../devices/virtual/net/docker0"),
    })
    assert list_nics(root) == ["ens5", "eth0"]
    assert list_nics(str(tmp_path / "nothing")) == []


def test_list_nics_of_this_machine():
    assert list_nics() == list_nics("/") and "lo" not in list_nics()
