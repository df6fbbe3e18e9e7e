"""Every per-operation figure a user reads, checked for its value on constructed inputs.

The counters come from a constructed /proc (``psutil.PROCFS_PATH``, psutil's own setting
for reading a /proc mounted elsewhere, pointed at a temporary directory): /proc/stat,
/proc/interrupts, /proc/diskstats and /proc/PID/{stat,status,io} written by the test, read
by the same psutil and pgaccel code as on a live machine (``system_snapshot``,
``TreeWatcher``).  The server host's and a client host's counters come as the text their
shell scripts print (``serverhost.parse_snapshot``, ``remote.parse_output``).  Every
expected value is worked out by hand in the comment or the literal beside it.

The inputs are chosen so that a plausible slip gives a different number: 250 operations
(neither 1 nor 1000, so a µs/ms slip shows), server CPU != client CPU and the share not
1/2, disk bytes read != written, and every /proc/stat column's change a different size,
so that using the wrong column or counting iowait or guest time as busy shows.

"Busy" CPU, as both parsers count it (Documentation/filesystems/proc.rst, /proc/stat):
user + nice + system + irq + softirq + steal.  idle and iowait (the CPU was idle while a
task waited for I/O) are not busy; guest and guest_nice are already inside user and nice
(the kernel's account_guest_time adds guest time to both), so adding them would count it
twice.  Steal is the hypervisor's use of the CPU: busy for this guest's purposes, and
``metrics/noise.py`` takes it out again as its own share.  The total is the first eight
columns.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import time
from collections import namedtuple
from pathlib import Path

import psutil
import pytest

from pgaccel.metrics import system as sysmetrics
from pgaccel.metrics.hostspeed import SpeedProbe
from pgaccel.metrics.measure import Measure, WaitSampler, per_op_costs, with_samples
from pgaccel.metrics.serverhost import (ServerSnapshot, cpu_busy_total, parse_snapshot,
                                        server_snapshot, snapshot_delta)
from pgaccel.metrics.sliced import SlicedMeasure, _add
from pgaccel.metrics.system import (SystemSnapshot, TreeSnapshot, TreeWatcher, rusage_cpu,
                                    system_delta, system_snapshot, tree_delta, tree_snapshot)
from pgaccel.server.ssh import SshHost
from pgaccel.workloads import remote
from pgaccel.workloads.steps import HostCpu

OPS = 250
# USER_HZ, the unit of /proc's tick counts: 100 on every Linux architecture pgaccel runs on
# (x86, arm64); psutil divides by it, and so do the expected values below
assert os.sysconf("SC_CLK_TCK") == 100
# psutil counts the disks that have a /sys/block entry: one of this machine's names
BLOCK = sorted(os.listdir("/sys/block"), key=lambda n: (n.startswith(("loop", "ram")), n))
DISK = BLOCK[0] if BLOCK else None


# -- a constructed /proc --------------------------------------------------------------------

class ProcTree:
    """The /proc files psutil and pgaccel read, written by the test."""

    def __init__(self, root: Path):
        self.root = root

    def _write(self, rel: str, text: str) -> None:
        """Whole files at once (a watcher thread may be reading them)."""
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".new")
        tmp.write_text(text)
        os.replace(tmp, p)

    def host(self, cpu: tuple[int, ...], ctxt: int, res: tuple[int, int],
             sectors: tuple[int, int]) -> None:
        """/proc/stat with the ``cpu`` line's ten columns (ticks), /proc/interrupts with
        two CPUs' reschedule interrupts, /proc/diskstats with (read, written) sectors of
        the disk and a partition of it that must not count."""
        assert len(cpu) == 10
        self._write("stat", "cpu  " + " ".join(map(str, cpu)) + "\n"
                    "cpu0 1 2 3 4 5 6 7 8 9 10\n"
                    "intr 987654 0 0\n"
                    f"ctxt {ctxt}\n"
                    "btime 1700000000\n"
                    "processes 4321\nprocs_running 2\nprocs_blocked 0\n"
                    "softirq 55555 0 0\n")
        self._write("interrupts",
                    "            CPU0       CPU1\n"
                    "   0:         44          0   IO-APIC   2-edge      timer\n"
                    "NMI:          7          9   Non-maskable interrupts\n"
                    f"RES:   {res[0]:8d}   {res[1]:8d}   Rescheduling interrupts\n"
                    "CAL:     777777     888888   Function call interrupts\n")
        rd, wr = sectors
        # major minor name reads merged SECTORS-READ ms writes merged SECTORS-WRITTEN ms ...
        self._write("diskstats",
                    f" 253       0 {DISK} 1500 3 {rd} 700 900 4 {wr} 800 0 1200 1500 "
                    "0 0 0 0 0 0\n"
                    f" 253       1 {DISK}p9 1500 3 {rd * 7} 700 900 4 {wr * 7} 800 0 1200 "
                    "1500 0 0 0 0 0 0\n")

    def process(self, pid: int, ppid: int, *, start: int, ticks: tuple[int, int, int, int],
                ctx: tuple[int, int], io: tuple[int, int], state: str = "S") -> None:
        """/proc/PID/stat with (utime, stime, cutime, cstime) ticks, /proc/PID/status with
        (voluntary, involuntary) context switches, /proc/PID/io with (read_bytes, wchar);
        write_bytes is a bogus large number (page-cache folios, not what was written)."""
        ut, st, cut, cst = ticks
        fields = [state, ppid, pid, pid, 0, -1, 4194560, 11, 12, 13, 14, ut, st, cut, cst,
                  20, 0, 1, 0, start] + [0] * 32
        self._write(f"{pid}/stat", f"{pid} (postgres: b {pid}) " +
                    " ".join(map(str, fields)) + "\n")
        self._write(f"{pid}/status", f"Name:\tpostgres\nState:\t{state} (sleeping)\n"
                    f"Pid:\t{pid}\nPPid:\t{ppid}\n"
                    f"voluntary_ctxt_switches:\t{ctx[0]}\n"
                    f"nonvoluntary_ctxt_switches:\t{ctx[1]}\n")
        self._write(f"{pid}/io", f"rchar: 123456789\nwchar: {io[1]}\nsyscr: 5\nsyscw: 6\n"
                    f"read_bytes: {io[0]}\nwrite_bytes: 999999999\n"
                    "cancelled_write_bytes: 0\n")

    def exit(self, pid: int) -> None:
        shutil.rmtree(self.root / str(pid), ignore_errors=True)


@pytest.fixture
def proc(tmp_path):
    if DISK is None:
        pytest.skip("no /sys/block entry: psutil counts no disk")
    old = psutil.PROCFS_PATH
    psutil.PROCFS_PATH = str(tmp_path)
    psutil.disk_io_counters.cache_clear()        # its wrap-around memory of the real disks
    try:
        yield ProcTree(tmp_path)
    finally:
        psutil.PROCFS_PATH = old
        psutil.disk_io_counters.cache_clear()


# The host over one interval: each /proc/stat column moves by a different amount.
#              user nice system idle iowait irq softirq steal guest guest_nice
HOST_BEFORE = (10000, 2000, 3000, 400000, 5000, 600, 700, 800, 9000, 1000)
HOST_DELTA = (350, 40, 120, 1300, 90, 7, 13, 30, 200, 11)
HOST_AFTER = tuple(a + d for a, d in zip(HOST_BEFORE, HOST_DELTA))
# busy = user + nice + system + irq + softirq + steal = 350 + 40 + 120 + 7 + 13 + 30 = 560
# total = busy + idle + iowait = 560 + 1300 + 90 = 1950 ticks; at 100 ticks/s:
BUSY_S, TOTAL_S, IOWAIT_S, STEAL_S = 5.60, 19.50, 0.90, 0.30
UTIL = 560 / 1950                            # 0.28718; counting iowait busy gives 650 / 1950
# context switches 1,000,000 -> 1,012,345; reschedule IPIs (100 + 250) -> (400 + 1125):
# 1525 - 350 = 1175; sectors read 2000 -> 3000 (1000 x 512 = 512,000 B = 500 KB),
# written 8000 -> 14000 (6000 x 512 = 3,072,000 B = 3000 KB)
CTX, RESCHED, READ_B, WRITE_B = 12345, 1175, 512_000, 3_072_000


def host_before(proc: ProcTree) -> None:
    proc.host(HOST_BEFORE, 1_000_000, (100, 250), (2000, 8000))


def host_after(proc: ProcTree) -> None:
    proc.host(HOST_AFTER, 1_012_345, (400, 1125), (3000, 14000))


# The server's process tree: postmaster 7001 with backends 7002 (alive throughout), 7003
# (exits inside the interval), 7004 (starts inside it) and 7005 (dead, being reaped), and
# 7006, a child of 7002 (a COPY ... TO PROGRAM shell): the tree is more than one level.
PM = 7001


def tree_before(proc: ProcTree) -> None:
    # CPU ticks: postmaster 500 + 300 own + 4000 + 1000 reaped = 5800; backends' own
    # reaped-children ticks (77, 33; 5, 6) are not the server's: 150 and 80
    proc.process(PM, 1, start=1000, ticks=(500, 300, 4000, 1000), ctx=(10, 1),
                 io=(8192, 1000))
    proc.process(7002, PM, start=2000, ticks=(120, 30, 77, 33), ctx=(1000, 50),
                 io=(40960, 200_000))
    proc.process(7003, PM, start=3000, ticks=(60, 20, 5, 6), ctx=(400, 20),
                 io=(4096, 30_000))
    proc.process(7006, 7002, start=6000, ticks=(10, 5, 0, 0), ctx=(20, 2), io=(0, 700))


def tree_middle(proc: ProcTree) -> None:
    """What the watcher's sample in the middle sees: 7003 has worked on."""
    proc.process(7003, PM, start=3000, ticks=(90, 30, 5, 6), ctx=(600, 30),
                 io=(4096, 45_000))


def tree_after(proc: ProcTree) -> None:
    # 7003 exited and was reaped: its 90 + 30 ticks moved into the postmaster's reaped
    # total (4090, 1030), its bytes into the postmaster's io (8192 + 4096, 1000 + 45,000);
    # its context switches are gone from /proc
    proc.exit(7003)
    proc.process(PM, 1, start=1000, ticks=(520, 310, 4090, 1030), ctx=(12, 1),
                 io=(12288, 46_000))
    proc.process(7002, PM, start=2000, ticks=(280, 80, 77, 33), ctx=(2467, 120),
                 io=(61440, 499_000))
    proc.process(7006, 7002, start=6000, ticks=(25, 10, 0, 0), ctx=(50, 5), io=(0, 1700))
    proc.process(7004, PM, start=4000, ticks=(40, 10, 0, 0), ctx=(300, 9),
                 io=(8192, 5_000))
    proc.process(7005, PM, start=5000, ticks=(999, 999, 0, 0), ctx=(99999, 9999),
                 io=(10**9, 10**9), state="X")


# By hand, over the interval:
# CPU: postmaster own (520 - 500) + (310 - 300) = 30, 7003's whole life 120 less the 80
# counted before = 40, 7002 (280 + 80) - (120 + 30) = 210, 7006 35 - 15 = 20, 7004 50:
# 350 ticks = 3.50 s (7005 is dead: its ticks are about to move into the postmaster's)
SERVER_CPU_S = 3.50
# switches: postmaster 2, 7002 (2467 - 1000) + (120 - 50) = 1537, 7006 (50 - 20) + (5 - 2)
# = 33, 7003 at its last sample (600 - 400) + (30 - 20) = 210, 7004 309: 2091
SERVER_CTX = 2091
# read bytes: 7002 +20480, 7004 +8192 (7003's moved into the postmaster's): 28672
# write() bytes: 7002 +299,000, 7006 +1,000, 7003 +15,000 (moved), 7004 +5,000: 320,000
SERVER_READ, SERVER_WCHAR = 28672, 320_000

# The load generator (os.wait4's rusage): 0.6 s user + 0.15 s system, 700 + 44 switches
CLIENT_RU = resource.struct_rusage((0.6, 0.15) + (0,) * 12 + (700, 44))
CLIENT_CPU_S, CLIENT_CTX = 0.75, 744

# WAL: 1/FFFFE000 -> 2/00013000 is 0x2000 to the 4 GiB boundary + 0x13000 = 0x15000
PG_BEFORE = {"wal_lsn": "1/FFFFE000", "db_xact_commit": 1000}
PG_AFTER = {"wal_lsn": "2/00013000", "db_xact_commit": 1250}
WAL_B = 86016

# Per operation, over 250 operations:
EXPECTED = {
    "server_cpu_us_per_op": 14000.0,           # 3.50 s x 1e6 / 250
    "client_cpu_us_per_op": 3000.0,            # 0.75 s x 1e6 / 250
    "client_cpu_share": 0.75 / 4.25,           # client / (client + server) = 0.17647
    "ctx_switches_per_op": 49.38,              # host 12345 / 250
    "resched_ipis_per_op": 4.7,                # 1175 / 250
    "read_kb_per_op": 2.0,                     # 500 KB / 250
    "write_kb_per_op": 12.0,                   # 3000 KB / 250
    "wal_bytes_per_op": 344.064,               # 86016 / 250
}


def assert_per_op(m: dict, expected: dict = EXPECTED) -> None:
    for k, v in expected.items():
        assert m[k] == pytest.approx(v, rel=1e-9), k


# -- the whole local measurement --------------------------------------------------------------

def measured(proc: ProcTree, **kw) -> Measure:
    """A Measure whose before and after states are read, as ``__enter__`` and ``__exit__``
    read them, from the constructed /proc (a server connection is all they do besides)."""
    meas = Measure(ctx=None, sample_waits=False)
    meas.remote, meas.sampler = None, None
    meas.probe = SpeedProbe()
    meas.probe.samples = [150.0, 170.5, 160.25]
    host_before(proc)
    tree_before(proc)
    meas.tree = TreeWatcher(PM, interval=3600)
    meas.tree_before = meas.tree.start()
    meas.sys_before = system_snapshot()
    meas.pg_before = PG_BEFORE
    tree_middle(proc)
    meas.tree._sample()                     # the watcher thread's sample
    host_after(proc)
    tree_after(proc)
    meas.sys_after = system_snapshot()
    meas.tree_before, meas.tree_after = meas.tree.stop()
    meas.pg_after = PG_AFTER
    for k, v in kw.items():
        setattr(meas, k, v)
    return meas


def test_a_measured_interval_gives_every_figure_by_hand(proc):
    sampler = WaitSampler(target=None)
    sampler.counts.update({"CPU": 3, "IO:WALSync": 1})
    sampler.samples, sampler.checkpoint_s = 4, [2.5]
    meas = measured(proc, sampler=sampler)
    assert meas.tree.exited == 1                        # 7003, kept at its last sample
    m = meas.metrics(OPS, rusage_cpu(CLIENT_RU))
    assert m["server_cpu_s"] == pytest.approx(SERVER_CPU_S)
    assert m["server_ctx_switches"] == SERVER_CTX
    assert m["server_read_bytes"] == SERVER_READ
    assert m["server_write_call_bytes"] == SERVER_WCHAR
    assert m["client_cpu_s"] == pytest.approx(CLIENT_CPU_S)
    assert m["client_ctx_switches"] == CLIENT_CTX
    assert m["host_cpu_busy_s"] == pytest.approx(BUSY_S)
    assert m["host_cpu_total_s"] == pytest.approx(TOTAL_S)
    assert m["host_cpu_util"] == pytest.approx(UTIL)
    assert m["host_iowait_s"] == pytest.approx(IOWAIT_S)
    assert m["host_steal_s"] == pytest.approx(STEAL_S)
    assert m["host_ctx_switches"] == CTX and m["host_resched_ipis"] == RESCHED
    assert (m["disk_read_bytes"], m["disk_write_bytes"]) == (READ_B, WRITE_B)
    assert m["pg"]["wal_bytes"] == WAL_B and m["pg"]["db_xact_commit"] == 250
    assert m["cpu_probe_us"] == 160.25                   # the median of the probe's samples
    assert m["waits"] == [{"event": "CPU", "samples": 3, "share": 0.75},
                          {"event": "IO:WALSync", "samples": 1, "share": 0.25}]
    assert (m["wait_samples"], m["checkpoint_s"]) == (4, [2.5])
    assert_per_op(m)


def test_the_server_host_over_ssh_replaces_the_local_server_keys(proc):
    """With --server-host the server's CPU, the host's CPU split and the disk bytes are the
    server host's (at its own CLK_TCK); what that host does not report stays local."""
    before, after = parse_snapshot(SERVER_HOST[0], 900), parse_snapshot(SERVER_HOST[1], 900)
    meas = measured(proc, remote=object(), remote_before=before, remote_after=after,
                    _remote_s=4.5, tree_before=None, tree_after=None)
    m = meas.metrics(OPS, rusage_cpu(CLIENT_RU))
    assert m["server_host_cpu"] is True and m["elapsed_s"] == 4.5
    assert m["server_cpu_s"] == pytest.approx(1.54)
    assert m["host_cpu_busy_s"] == pytest.approx(2.24)
    assert (m["disk_read_bytes"], m["disk_write_bytes"]) == (524_288, 3_145_728)
    assert "server_ctx_switches" not in m
    assert "waits" not in m and "wait_samples" not in m   # no sampler
    assert m["host_ctx_switches"] == CTX                 # this machine's, as before
    assert_per_op(m, {
        "server_cpu_us_per_op": 6160.0,                  # 1.54 s x 1e6 / 250
        "client_cpu_share": 0.75 / 2.29,                 # 0.75 / (0.75 + 1.54)
        "read_kb_per_op": 2.048,                         # 512 KB / 250
        "write_kb_per_op": 12.288,                       # 3072 KB / 250
        "ctx_switches_per_op": 49.38, "wal_bytes_per_op": 344.064})


# -- the pieces -------------------------------------------------------------------------------

def test_per_op_costs_by_hand():
    m = {"server_cpu_s": 3.5, "client_cpu_s": 0.75, "host_ctx_switches": 12345,
         "host_resched_ipis": 1175, "disk_read_bytes": 512_000, "disk_write_bytes": 3_072_000,
         "pg": {"wal_bytes": 86016}}
    out = per_op_costs(m, OPS)
    assert set(out) == set(EXPECTED)
    assert_per_op(out)
    assert per_op_costs(m, 0) == {} and per_op_costs(m, -5) == {}
    # one operation: the figures are the counters themselves, in their units
    one = per_op_costs(m, 1)
    assert one["server_cpu_us_per_op"] == 3_500_000 and one["read_kb_per_op"] == 500.0
    # a part that was not measured is absent, not zero
    assert per_op_costs({"server_cpu_s": 0.5}, 4) == {"server_cpu_us_per_op": 125_000.0}
    assert per_op_costs({"client_cpu_s": 0.5}, 4) == {"client_cpu_us_per_op": 125_000.0}
    assert per_op_costs({"pg": {"wal_bytes": 0}}, 4) == {"wal_bytes_per_op": 0.0}
    assert per_op_costs({"pg": {}}, 4) == {}
    # no CPU on either side: no share rather than a division by zero
    idle = per_op_costs({"server_cpu_s": 0.0, "client_cpu_s": 0.0}, 4)
    assert idle["client_cpu_share"] is None and idle["server_cpu_us_per_op"] == 0.0


def test_with_samples_adds_waits_probe_and_per_op_costs():
    s = WaitSampler(target=None)
    s.counts.update({"CPU": 30, "IO:DataFileRead": 15, "LWLock:WALWrite": 4,
                     "Lock:transactionid": 1})
    s.samples, s.checkpoint_s = 47, [1.5, 3.0]
    p = SpeedProbe()
    p.samples = [200.0, 150.0, 180.0, 170.0]
    m = with_samples({"server_cpu_s": 0.25, "host_ctx_switches": 500}, s, p, OPS)
    # shares of the 50 event samples
    assert m["waits"] == [{"event": "CPU", "samples": 30, "share": 0.6},
                          {"event": "IO:DataFileRead", "samples": 15, "share": 0.3},
                          {"event": "LWLock:WALWrite", "samples": 4, "share": 0.08},
                          {"event": "Lock:transactionid", "samples": 1, "share": 0.02}]
    assert s.top(1) == [{"event": "CPU", "samples": 30, "share": 0.6}]
    assert m["wait_samples"] == 47
    assert m["checkpoint_s"] == [1.5, 3.0] and m["checkpoint_s"] is not s.checkpoint_s
    assert m["cpu_probe_us"] == 175.0                    # median of 150, 170, 180, 200
    assert m["server_cpu_us_per_op"] == 1000.0 and m["ctx_switches_per_op"] == 2.0
    bare = with_samples({}, None, None, OPS)
    assert bare == {"cpu_probe_us": None}
    assert WaitSampler(target=None).top() == []          # no samples: no shares


def test_tree_delta_by_hand_and_never_negative():
    a = TreeSnapshot(cpu_s=10.25, ctx_voluntary=100, ctx_involuntary=7, read_bytes=4096,
                     write_call_bytes=1000, processes=5)
    b = TreeSnapshot(cpu_s=12.0, ctx_voluntary=160, ctx_involuntary=30, read_bytes=12288,
                     write_call_bytes=3500, processes=4)
    assert tree_delta(a, b) == {"server_cpu_s": 1.75, "server_ctx_switches": 83,
                                "server_read_bytes": 8192, "server_write_call_bytes": 2500}
    # a snapshot that went backwards (a process gone unsampled) is zero, not negative
    assert tree_delta(b, a) == {"server_cpu_s": 0.0, "server_ctx_switches": 0,
                                "server_read_bytes": 0, "server_write_call_bytes": 0}
    assert tree_delta(None, b) == {} and tree_delta(a, None) == {}


def test_tree_snapshot_of_a_constructed_tree(proc):
    host_before(proc)                 # psutil dates processes from /proc/stat's btime
    tree_after(proc)
    # live: postmaster 830 own + 5120 reaped, 7002 360, 7006 35, 7004 50 (7005 dead):
    # 6395 ticks
    s = tree_snapshot(PM)
    assert s == TreeSnapshot(cpu_s=pytest.approx(63.95), ctx_voluntary=12 + 2467 + 50 + 300,
                             ctx_involuntary=1 + 120 + 5 + 9,
                             read_bytes=12288 + 61440 + 0 + 8192,
                             write_call_bytes=46_000 + 499_000 + 1700 + 5_000, processes=4)
    assert tree_snapshot(PM + 100) is None                 # no such process
    w = TreeWatcher(PM + 100)
    assert w.start() is None and w.stop() == (None, None)


def test_a_watched_tree_whose_root_is_gone_has_no_after(proc):
    host_before(proc)
    tree_before(proc)
    w = TreeWatcher(PM, interval=3600)
    before = w.start()
    # 5800 + 150 + 80 + 15 ticks
    assert before.processes == 4 and before.cpu_s == pytest.approx(60.45)
    for pid in (7006, 7002, 7003, PM):
        proc.exit(pid)
    assert w.stop() == (before, None)


def _until(cond, what: str) -> None:
    deadline = time.monotonic() + 10
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def test_the_watcher_thread_keeps_the_last_counts_of_what_exits(proc):
    """The thread samples every ``interval``: a backend that worked on after the first
    snapshot and exited is counted at its last sample, and exits in different samples
    all add up."""
    host_before(proc)
    proc.process(PM, 1, start=1000, ticks=(100, 50, 0, 0), ctx=(5, 1), io=(0, 0))
    for pid, vol in ((7002, 100), (7003, 200), (7004, 300), (7008, 7), (7009, 8)):
        proc.process(pid, PM, start=pid, ticks=(1, 1, 0, 0), ctx=(vol, vol // 10), io=(0, 0))
    w = TreeWatcher(PM, interval=0.01)
    w.start()
    try:
        proc.process(7002, PM, start=7002, ticks=(1, 1, 0, 0), ctx=(1100, 10), io=(0, 0))
        proc.process(7003, PM, start=7003, ticks=(1, 1, 0, 0), ctx=(250, 25), io=(0, 0))
        # two markers exiting one after the other: the sample that sees the second gone
        # began after the first was seen gone, so after 7003's new counts were written
        proc.exit(7008)
        _until(lambda: w.exited == 1, "the watcher thread never sampled")
        proc.exit(7009)
        _until(lambda: w.exited == 2, "the watcher thread sampled once only")
        proc.exit(7003)
        _until(lambda: w.exited == 3, "7003's exit not seen")
        proc.exit(7004)
        _until(lambda: w.exited == 4, "7004's exit not seen")
    finally:
        before, after = w.stop()
    # 7002 +1000 + (10 - 10), 7003 +50 + (25 - 20) at its last sample, 7004 and the markers
    # unchanged: 1055
    assert tree_delta(before, after)["server_ctx_switches"] == 1055
    assert w.exited == 4


def test_a_kernel_without_steal_counts_it_as_zero():
    """psutil's CPU times have no steal (nor guest) column on kernels older than 2.6.11."""
    Old = namedtuple("scputimes", "user nice system idle iowait irq softirq")
    a = SystemSnapshot(t=10.0, cpu=Old(100.0, 20.0, 30.0, 400.0, 50.0, 6.0, 7.0), ctx=5,
                       disk_read=1, disk_write=2)
    b = SystemSnapshot(t=12.5, cpu=Old(103.5, 20.5, 31.25, 413.0, 51.0, 6.25, 7.5), ctx=9,
                       disk_read=1, disk_write=2)
    d = system_delta(a, b)
    # busy 3.5 + 0.5 + 1.25 + 0.25 + 0.5 = 6.0; total 6.0 + 13 + 1 = 20.0
    assert (d["host_cpu_busy_s"], d["host_cpu_total_s"], d["host_cpu_util"]) == (6.0, 20.0, 0.3)
    assert (d["host_steal_s"], d["host_iowait_s"], d["elapsed_s"]) == (0.0, 1.0, 2.5)
    assert d["host_ctx_switches"] == 4 and "host_resched_ipis" not in d


def test_system_snapshot_and_delta_read_proc_stat_by_column(proc):
    host_before(proc)
    a = system_snapshot()
    assert a.ctx == 1_000_000 and a.resched == 350
    assert (a.disk_read, a.disk_write) == (2000 * 512, 8000 * 512)   # the partition left out
    host_after(proc)
    b = system_snapshot()
    d = system_delta(a, b)
    assert d["host_cpu_busy_s"] == pytest.approx(BUSY_S)
    assert d["host_cpu_total_s"] == pytest.approx(TOTAL_S)
    assert d["host_cpu_util"] == pytest.approx(UTIL)
    assert d["host_iowait_s"] == pytest.approx(IOWAIT_S)
    assert d["host_steal_s"] == pytest.approx(STEAL_S)
    assert (d["host_ctx_switches"], d["host_resched_ipis"]) == (CTX, RESCHED)
    assert (d["disk_read_bytes"], d["disk_write_bytes"]) == (READ_B, WRITE_B)
    assert d["elapsed_s"] == b.t - a.t
    # no reschedule line (or no /proc/interrupts) on one side: no figure rather than a guess
    (proc.root / "interrupts").write_text("  0:   44   0   IO-APIC   timer\n")
    assert "host_resched_ipis" not in system_delta(a, system_snapshot())
    (proc.root / "interrupts").unlink()
    c = system_snapshot()
    assert c.resched is None and "host_resched_ipis" not in system_delta(c, b)
    # nothing moved (an interval shorter than a tick): no CPU time and utilisation 0, not a
    # division by zero, and not 1 s of total time that slices would add up
    z = system_delta(b, b)
    assert (z["host_cpu_util"], z["host_cpu_total_s"]) == (0.0, 0.0)


def test_host_cpu_of_a_step_is_the_busy_columns(proc):
    host_before(proc)
    with HostCpu() as h:
        assert h.busy_s == 0.0
        host_after(proc)
    assert h.busy_s == pytest.approx(BUSY_S)


def test_rusage_of_the_load_generator():
    assert rusage_cpu(CLIENT_RU) == {"client_cpu_s": CLIENT_CPU_S, "client_ctx_switches": 744}


# -- measured in slices (lab/paired.py) ----------------------------------------------------------

def test_sliced_costs_add_up_the_slices_only(proc):
    """Two slices with the same totals as the one interval above; between them the host,
    the server and the load generator work on (the other server's turn, a warm-up), which
    must not count."""
    # the third slice: pgbench's processes ended, so its counts read lower than before
    client = iter([(1.0, 100), (1.5, 160), (2.5, 300), (2.75, 345), (3.0, 400), (1.0, 90)])
    sm = SlicedMeasure(ctx=None, client_cpu=lambda: next(client), speed_probe=False)
    sm.pid = PM
    sm.probe = SpeedProbe()
    sm.probe.samples = [120.0, 130.0]
    sm.sampler = WaitSampler(target=None)          # one that never reached the server
    sm.pg_before, sm.pg_after = PG_BEFORE, PG_AFTER
    sm.end()                                   # no slice begun: nothing counted
    assert sm.slices == 0

    def edge(cpu, ctxt, res, sectors, pm_ticks):
        proc.host(cpu, ctxt, res, sectors)
        proc.process(PM, 1, start=1000, ticks=pm_ticks, ctx=(10, 1), io=(0, 0))

    base = HOST_BEFORE
    s1 = (60, 10, 20, 90, 10, 2, 5, 3, 20, 1)          # busy 100 of 200 ticks: util 0.5
    gap = (5000, 500, 500, 100, 0, 50, 50, 50, 0, 0)   # the other server's turn
    s2 = tuple(d - x for d, x in zip(HOST_DELTA, s1))  # busy 460 of 1750: util 0.263
    after1 = tuple(b + x for b, x in zip(base, s1))
    before2 = tuple(a + g for a, g in zip(after1, gap))
    after2 = tuple(b + x for b, x in zip(before2, s2))
    edge(base, 1_000_000, (100, 250), (2000, 8000), (500, 300, 4000, 1000))
    sm.begin()
    edge(after1, 1_002_345, (150, 375), (2400, 9000), (550, 350, 4000, 1000))
    sm.end()
    edge(before2, 1_102_345, (5150, 5375), (9400, 19000), (5550, 350, 4000, 1000))
    sm.begin()
    edge(after2, 1_112_345, (5450, 6075), (10000, 24000), (5550, 350, 4200, 1050))
    sm.end()
    sm.end()                                   # ended twice: counted once
    sm.begin()                                 # a slice in which nothing moved
    sm.end()
    assert sm.slices == 3
    m = sm.metrics(OPS)
    # server: 100 ticks in the first slice, 250 reaped in the second: 3.50 s
    assert m["server_cpu_s"] == pytest.approx(SERVER_CPU_S)
    # the load generator: 0.5 + 0.25 s, 60 + 45 switches
    assert m["client_cpu_s"] == pytest.approx(CLIENT_CPU_S) and m["client_ctx_switches"] == 105
    assert m["host_cpu_busy_s"] == pytest.approx(BUSY_S)
    assert m["host_cpu_total_s"] == pytest.approx(TOTAL_S)
    assert m["host_cpu_util"] == pytest.approx(UTIL)     # 560 / 1950, not the mean of 0.5, 0.263
    assert m["host_ctx_switches"] == CTX and m["host_resched_ipis"] == RESCHED
    assert (m["disk_read_bytes"], m["disk_write_bytes"]) == (READ_B, WRITE_B)
    assert m["pg"]["wal_bytes"] == WAL_B and m["waits"] == [] and m["wait_samples"] == 0
    assert m["cpu_probe_us"] == 125.0
    assert_per_op(m)
    assert sm.checkpoints_monotonic() == []              # the sampler never started
    sm.sampler._t0, sm.sampler.checkpoint_s = 100.0, [1.5, 4.0]
    assert sm.checkpoints_monotonic() == [101.5, 104.0]
    sm.pg_after = None                                   # ended by an exception
    assert sm.metrics(OPS)["pg"] == {} and "wal_bytes_per_op" not in sm.metrics(OPS)


def test_sliced_without_a_postmaster_pid_has_no_server_figures(proc):
    """A server whose postmaster is not on this machine: no server CPU at all, rather
    than this process's own (psutil.Process(None) is the calling process)."""
    host_before(proc)
    sm = SlicedMeasure(ctx=None, client_cpu=lambda: (0.0, 0), speed_probe=False)
    sm.pid, sm.probe, sm.sampler = None, None, WaitSampler(target=None)
    sm.pg_before = sm.pg_after = {}
    sm.begin()
    host_after(proc)
    sm.end()
    m = sm.metrics(OPS)
    assert "server_cpu_s" not in m and "server_cpu_us_per_op" not in m
    assert m["host_cpu_busy_s"] == pytest.approx(BUSY_S)


def test_adding_slices_adds_numbers_only():
    total = {"a": 1.5}
    _add(total, {"a": 2.25, "b": 3, "flag": True, "name": "x", "none": None})
    _add(total, {"b": 4})
    assert total == {"a": 3.75, "b": 7}


# -- the server host over SSH (metrics/serverhost.py) ----------------------------------------

def _server_host_text(cpu, disks, pm, b901, b902) -> str:
    """What ``snapshot_script`` prints: CLK_TCK 250 here, so that a hard-coded 100 shows."""
    return "\n".join([
        "250",
        "cpu  " + " ".join(map(str, cpu)),
        f"   8       0 sda 100 0 {disks[0]} 0 50 0 {disks[1]} 0 0 0 0 0 0 0 0 0 0",
        f"   8       1 sda1 100 0 {disks[0] * 3} 0 50 0 {disks[1] * 3} 0 0 0 0",
        f" 259       0 nvme0n1 10 0 {disks[2]} 0 5 0 {disks[3]} 0 0 0 0",
        f" 259       1 nvme0n1p2 10 0 {disks[2] * 5} 0 5 0 {disks[3] * 5} 0 0 0 0",
        f"   7       0 loop0 10 0 {disks[0] * 11} 0 0 0 {disks[1] * 11} 0 0 0 0",
        f" 253       0 dm-0 10 0 {disks[0] * 13} 0 0 0 {disks[1] * 13} 0 0 0 0",
        "   8      16 sdb 4 40 6 60",                       # the short (partition) format
        # the fewest columns that still hold the sectors written
        f"   8      32 sdc 1 0 {disks[4]} 0 1 0 {disks[5]}",
        "@@tree",
        # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        # utime stime cutime cstime priority nice ...
        f"900 (postgres) S 1 900 900 0 -1 4194560 11 12 13 14 {pm} 20 0 1 0 100 0",
        "",                                  # a child's stat that could not be read
        f"901 (postgres: bench bench [local) idle) S 900 900 900 0 -1 4194560 11 12 13 14 "
        f"{b901} 20 0 1 0 200 0",
        f"902 (postgres: walwriter) S 900 900 900 0 -1 4194624 11 12 13 14 {b902} 20 0 1 0 "
        "300 0"])


SERVER_HOST = (
    _server_host_text((4000, 300, 1200, 90000, 700, 50, 60, 100, 2000, 30),
                      (1000, 3000, 500, 700, 20, 30), "500 300 4000 1000", "120 30 77 33",
                      "7 3 0 0"),
    # cpu columns moved by HOST_DELTA; sda read +1000 sectors, written +6000, nvme0n1 +16,
    # +128, sdc +8, +16; the postmaster 20 + 10 own and 90 + 30 reaped, 901 +230, 902 +5
    _server_host_text((4350, 340, 1320, 91300, 790, 57, 73, 130, 2200, 41),
                      (2000, 9000, 516, 828, 28, 46), "520 310 4090 1030", "300 80 77 33",
                      "9 6 0 0"))


def test_server_host_snapshot_parsed_by_column():
    s = parse_snapshot(SERVER_HOST[0], 900)
    assert s.clk_tck == 250 and s.processes == 3
    assert s.cpu == (4000, 300, 1200, 90000, 700, 50, 60, 100, 2000, 30)
    # postmaster 500 + 300 + 4000 + 1000, 901 120 + 30 (its reaped 77 + 33 not), 902 7 + 3
    assert s.tree_ticks == 5960
    # whole disks only (sda, nvme0n1, sdc), in 512-byte sectors
    assert (s.disk_read, s.disk_write) == ((1000 + 500 + 20) * 512, (3000 + 700 + 30) * 512)
    assert parse_snapshot("\n" + SERVER_HOST[0].split("\n", 1)[1], 900).clk_tck == 100
    # the output cut short before the tree: no process, not an error
    cut = parse_snapshot(SERVER_HOST[0].split("@@tree")[0], 900)
    assert (cut.processes, cut.tree_ticks, cut.disk_read) == (0, 0.0, s.disk_read)


def test_server_host_delta_by_hand():
    a, b = (parse_snapshot(t, 900) for t in SERVER_HOST)
    d = snapshot_delta(a, b, 4.5)
    # tree 6345 - 5960 = 385 ticks at 250/s; busy 560, total 1950 ticks; iowait 90, steal 30;
    # sectors read 1000 + 16 + 8 = 1024, written 6000 + 128 + 16 = 6144
    assert d == {"server_cpu_s": pytest.approx(1.54), "server_host_cpu": True,
                 "host_cpu_busy_s": pytest.approx(2.24), "host_cpu_total_s": pytest.approx(7.8),
                 "host_cpu_util": pytest.approx(560 / 1950), "host_iowait_s": pytest.approx(0.36),
                 "host_steal_s": pytest.approx(0.12),
                 "disk_read_bytes": 1024 * 512, "disk_write_bytes": 6144 * 512,
                 "elapsed_s": 4.5}
    # backwards (a restarted server, a replaced disk): zero, not negative
    back = snapshot_delta(b, a, 1.0)
    assert (back["server_cpu_s"], back["disk_read_bytes"], back["disk_write_bytes"]) == (0, 0, 0)
    assert snapshot_delta(None, b, 1.0) == {} and snapshot_delta(a, None, 1.0) == {}
    empty = ServerSnapshot(250, a.cpu, 0.0, 0, 0, 0)       # the postmaster was not found
    assert snapshot_delta(empty, b, 1.0) == {}
    # an old kernel's seven cpu columns (no steal): steal 0, the rest as before
    old = [parse_snapshot(t.replace(" 100 2000 30\n", "\n").replace(" 130 2200 41\n", "\n"),
                          900) for t in SERVER_HOST]
    assert len(old[0].cpu) == 7
    o = snapshot_delta(old[0], old[1], 1.0)
    # busy 350 + 40 + 120 + 7 + 13 = 530 ticks, total 530 + 1300 + 90 = 1920, at 250/s
    assert (o["host_cpu_busy_s"], o["host_cpu_total_s"], o["host_steal_s"]) == (
        pytest.approx(2.12), pytest.approx(7.68), 0.0)
    # no CLK_TCK known: 100; no tick moved: no total and no utilisation (not a division by zero)
    z = snapshot_delta(ServerSnapshot(0, (1,) * 10, 100.0, 0, 0, 1),
                       ServerSnapshot(0, (1,) * 10, 350.0, 0, 0, 1), 1.0)
    assert (z["server_cpu_s"], z["host_cpu_total_s"], z["host_cpu_util"]) == (2.5, 0.0, 0.0)


class ThisMachine:
    """A host whose "ssh" is the local sh (as in test_remote_pure.py)."""

    def run(self, script: str, stdin: str = "", timeout: float = 120):
        return subprocess.run(["sh", "-c", script], input=stdin, capture_output=True,
                              text=True, timeout=timeout)


def test_server_snapshot_of_no_postmaster_has_no_server_and_no_host_is_none():
    with open("/proc/sys/kernel/pid_max") as f:
        gone = int(f.read()) + 1                         # no process has this pid
    none = server_snapshot(ThisMachine(), gone)          # the host read, no tree
    assert none is not None and none.processes == 0 and none.tree_ticks == 0
    assert snapshot_delta(none, none, 1.0) == {}         # so no server figures at all
    mine = server_snapshot(ThisMachine(), os.getpid())
    assert mine is not None and mine.processes >= 1
    # an SSH host that does not answer (nothing listens on port 1)
    assert server_snapshot(SshHost.parse("ssh://root@127.0.0.1:1", "--server-host"),
                           os.getpid()) is None


def test_cpu_busy_total_by_column():
    assert cpu_busy_total(HOST_DELTA) == (560.0, 1950.0)
    assert cpu_busy_total(["350", "40", "120", "1300", "90"]) == (510.0, 1900.0)   # old kernel
    assert cpu_busy_total(HOST_DELTA[:8]) == (560.0, 1950.0)


# -- a client host's pgbench over SSH (workloads/remote.py) --------------------------------------

def test_client_host_cpu_and_host_utilisation_by_column():
    m = remote.MARK
    out = "\n".join([
        f"{m}-stat0 cpu  " + " ".join(map(str, HOST_BEFORE)),
        "tps = 10.0",
        f"{m}-stat1 cpu  " + " ".join(map(str, HOST_AFTER)),
        f"{m}-times", "0m0.01s 0m0.02s", "1m2.50s 0m1.25s",      # the shell's, its children's
        f"{m}-rc 0"])
    got = remote.parse_output(out)
    assert got["client_cpu_s"] == pytest.approx(63.75)          # 62.50 user + 1.25 system
    assert got["host_cpu_util"] == pytest.approx(UTIL)          # 560 of 1950 ticks
    same = out.replace(" ".join(map(str, HOST_AFTER)), " ".join(map(str, HOST_BEFORE)))
    assert remote.parse_output(same)["host_cpu_util"] is None    # no tick between the two
    # its per-operation figures: 63.75 s over 250 transactions, against 3.5 s of server CPU
    per = per_op_costs({"client_cpu_s": got["client_cpu_s"], "server_cpu_s": 3.5}, OPS)
    assert per["client_cpu_us_per_op"] == pytest.approx(255_000.0)
    assert per["client_cpu_share"] == pytest.approx(63.75 / 67.25)
