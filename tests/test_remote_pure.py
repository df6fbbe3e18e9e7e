"""The pure parts of `--client-host` (workloads/remote.py): URLs, the client split, what the
remote command carries (never a password), and the parsing of what comes back.  The real
thing, over SSH between network namespaces, is tests/test_client_host.py."""

from __future__ import annotations

import base64
import io
import subprocess
import tarfile

import pytest

from pgaccel.errors import UsageError
from pgaccel.workloads import remote


@pytest.mark.parametrize("text,host,user,port", [
    ("ssh://bench@10.0.0.7", "10.0.0.7", "bench", None),
    ("ssh://10.0.0.7:2222", "10.0.0.7", None, 2222),
    ("loadgen-1", "loadgen-1", None, None),
    ("ssh://root@[fd00::2]:22", "fd00::2", "root", 22),
])
def test_client_host_urls(text, host, user, port):
    h = remote.ClientHost.parse(text)
    assert (h.host, h.user, h.port) == (host, user, port)
    argv = h.ssh_argv()
    assert "BatchMode=yes" in argv and argv[-1] == (f"{user}@" if user else "") + host
    assert ("-p" in argv) == (port is not None)


@pytest.mark.parametrize("text", ["http://h", "ssh://u:secret@h", "ssh://h/path", "ssh://",
                                  "ssh://h:port"])
def test_bad_client_host_urls_are_refused(text):
    with pytest.raises(UsageError) as e:
        remote.ClientHost.parse(text)
    assert "secret" not in e.value.message


@pytest.mark.parametrize("clients,hosts,want", [
    (2, 1, [2]), (2, 2, [1, 1]), (5, 2, [3, 2]), (1, 3, [1, 0, 0]), (7, 3, [3, 2, 2])])
def test_split_clients(clients, hosts, want):
    got = remote.split_clients(clients, hosts)
    assert got == want and sum(got) == clients


def test_the_password_goes_on_stdin_never_on_the_command_line():
    env = {"PGHOST": "10.0.0.5", "PGPORT": "5432", "PGUSER": "bench", "PGPASSWORD": "s3cr$t",
           "PGDATABASE": "pgaccel_bench", "PGOPTIONS": "-c work_mem=64MB"}
    safe, password = remote.remote_env(env)
    assert password == "s3cr$t" and "PGPASSWORD" not in safe
    script = remote.remote_script(["-n", "-c", "2", "-f", "a.sql"], safe, "abc",
                                  {"a.sql": "SELECT 1;\n"}, logs=True)
    argv = remote.ClientHost("h").command(script)
    assert all("s3cr$t" not in a for a in argv)
    assert "PGOPTIONS='-c work_mem=64MB'" in script and "IFS= read -r PGPASSWORD" in script
    assert base64.b64encode(b"SELECT 1;\n").decode() in script


@pytest.mark.parametrize("host", ["", "/var/run/postgresql", "localhost", "127.0.0.1", "::1"])
def test_a_server_only_this_machine_reaches_is_refused(host):
    with pytest.raises(UsageError, match="client hosts can reach"):
        remote.remote_env({"PGHOST": host} if host else {})


def test_the_script_runs_and_its_output_parses(tmp_path):
    """The script with a stand-in for pgbench (a shell function printing what pgbench
    prints and writing a log file) run by the local sh: markers, CPU, logs, exit code."""
    script = remote.remote_script(["-n", "-T", "1"], {"PGHOST": "10.0.0.5"},
                                  "t" + tmp_path.name[-6:], {}, logs=True)
    fake = ('pgbench() { echo "tps = 123.5 (without initial connection time)"; '
            'echo "0 1 250 0 1700000000 5" > tx.1; '
            'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; return 0; }\n')
    script = script.replace("env PGHOST=10.0.0.5 pgbench", "pgbench")
    r = subprocess.run(["sh", "-c", fake + script], input="\n", capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = remote.parse_output(r.stdout)
    assert got["rc"] == 0 and "tps = 123.5" in got["stdout"]
    assert "@@pgaccel" not in got["stdout"]
    assert got["logs"] == {"tx.1": b"0 1 250 0 1700000000 5\n"}
    assert got["client_cpu_s"] is not None and got["client_cpu_s"] >= 0
    assert got["host_cpu_util"] is None or 0 <= got["host_cpu_util"] <= 1


def test_parse_output_reads_times_and_proc_stat():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        data = b"1 2 3\n"
        info = tarfile.TarInfo("tx.42")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    out = "\n".join([
        "@@pgaccel-stat0 cpu  100 0 100 800 0 0 0 0 0 0",
        "transaction type: <builtin: select only>", "tps = 10.0",
        "@@pgaccel-stat1 cpu  150 0 150 900 0 0 0 0 0 0",
        "@@pgaccel-times", "0m0.01s 0m0.02s", "1m2.50s 0m0.25s",
        "@@pgaccel-rc 0",
        "@@pgaccel-logs " + base64.b64encode(buf.getvalue()).decode()])
    got = remote.parse_output(out)
    assert got["client_cpu_s"] == pytest.approx(62.75)
    assert got["host_cpu_util"] == pytest.approx(100 / 200)     # busy 100 of 200 jiffies
    assert got["logs"] == {"tx.42": b"1 2 3\n"}
    assert got["stdout"] == "transaction type: <builtin: select only>\ntps = 10.0\n"


# -- --server-host: the server's machine over SSH (probe/remote.py, metrics/serverhost.py) ----

class ThisMachine:
    """A host whose "ssh" is the local sh: the same scripts and parsing as over SSH, read
    from this machine's real /proc and /sys."""
    label = "this machine"

    def run(self, script: str, stdin: str = "", timeout: float = 120):
        return subprocess.run(["sh", "-c", script], input=stdin, capture_output=True,
                              text=True, timeout=timeout)


def test_server_host_facts_equal_this_machines_own_probe():
    import os

    from pgaccel.probe.host import probe_host
    from pgaccel.probe.remote import probe_server_host
    remote = probe_server_host(ThisMachine(), os.getpid())
    local = probe_host()
    for field in ("arch", "kernel", "cpu_model", "logical_cpus", "memory_total_bytes",
                  "thp_enabled", "thp_defrag", "default_hugepage_bytes", "numa_nodes",
                  "sysctls"):
        assert getattr(remote, field) == getattr(local, field), field
    assert [h.size_bytes for h in remote.hugepages] == [h.size_bytes for h in local.hugepages]
    assert {d.name for d in remote.block_devices} == {d.name for d in local.block_devices}
    assert remote.cgroup.version == local.cgroup.version


def test_server_snapshots_count_a_busy_child_of_the_watched_process():
    """The watched pid's own CPU, its live children's, and (once reaped) its dead ones',
    against this process's own count of the same (os.times: its own and its reaped
    children's user and system time); the host's CPU total against the wall time."""
    import os
    import time

    from pgaccel.metrics.serverhost import server_snapshot, snapshot_delta
    me = ThisMachine()
    ncpu = os.cpu_count()
    w0, t0 = time.monotonic(), os.times()
    before = server_snapshot(me, os.getpid())
    ta = time.monotonic()
    child = subprocess.Popen(["sh", "-c", "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done"])
    child.wait()                                   # reaped: its CPU is in our cutime
    t_child = os.times()
    t_spin = time.monotonic()
    while time.monotonic() - t_spin < 0.3:
        pass                                       # and some of our own
    tb = time.monotonic()
    after = server_snapshot(me, os.getpid())
    w1, t1 = time.monotonic(), os.times()
    d = snapshot_delta(before, after, 1.0)
    assert before.processes >= 1 and d["server_host_cpu"] is True

    def cpu(t):
        return t.user + t.system + t.children_user + t.children_system
    child_s = t_child.children_user + t_child.children_system - t0.children_user \
        - t0.children_system
    assert child_s >= 0.1                          # the reaped child's share is worth seeing
    # the snapshot scripts' own shells (a few ms each) are the only difference
    assert d["server_cpu_s"] == pytest.approx(cpu(t1) - cpu(t0), abs=0.05)
    # the host: at least our own CPU busy; its total is every CPU's ticks over the interval
    # between the two reads of /proc/stat, which lies between ta..tb and w0..w1
    assert d["server_cpu_s"] - 0.05 <= d["host_cpu_busy_s"] <= d["host_cpu_total_s"]
    assert (tb - ta) * ncpu - 0.05 <= d["host_cpu_total_s"] <= (w1 - w0) * ncpu + 0.05
    assert d["disk_read_bytes"] >= 0


def test_parse_snapshot_sums_the_tree_and_whole_disks():
    from pgaccel.metrics.serverhost import parse_snapshot, snapshot_delta
    text = "\n".join([
        "100", "cpu  1000 0 500 8000 100 0 0 50 0 0",
        "   8       0 sda 10 0 2000 0 5 0 4000 0 0 0 0",
        "   8       1 sda1 10 0 2000 0 5 0 4000 0 0 0 0",      # a partition: not counted
        " 253       0 vda 1 0 100 0 1 0 300 0 0 0 0",
        "@@tree",
        "42 (postgres) S 1 42 42 0 -1 0 0 0 0 0 300 100 5000 1000 20 0 1 0 0 0 0",
        "43 (postgres: bench x) S 42 42 42 0 -1 0 0 0 0 0 30 10 0 0 20 0 1 0 0 0 0"])
    s = parse_snapshot(text, 42)
    assert s.tree_ticks == 300 + 100 + 5000 + 1000 + 30 + 10     # children's cutime ignored
    assert (s.disk_read, s.disk_write) == ((2000 + 100) * 512, (4000 + 300) * 512)
    later = parse_snapshot(text.replace("cpu  1000 0 500 8000", "cpu  1100 0 600 8100")
                           .replace("300 100 5000", "400 100 5000"), 42)
    d = snapshot_delta(s, later, 3.0)
    assert d["server_cpu_s"] == pytest.approx(1.0)                 # 100 ticks at 100/s
    assert d["host_cpu_busy_s"] == pytest.approx(2.0) and d["host_cpu_total_s"] == \
        pytest.approx(3.0)


def test_a_child_gone_before_its_stat_is_read_keeps_the_snapshot():
    """The script lists the postmaster's children, then reads each one's stat: one that
    exits in between must not fail the whole snapshot (the trial would lose its server
    figures).  A listed pid that does not exist at all is the same case, every time."""
    from pgaccel.metrics.serverhost import parse_snapshot, snapshot_script
    gone = 4_194_304 + 7                       # above any pid_max: never a process
    r = subprocess.run(["sh", "-c", snapshot_script(gone)], capture_output=True, text=True)
    assert r.returncode == 0
    assert parse_snapshot(r.stdout, gone).processes == 0      # and then no server figures


def test_an_interval_without_a_tick_has_no_cpu_and_no_utilisation():
    from pgaccel.metrics.serverhost import parse_snapshot, snapshot_delta
    text = "100\ncpu  1000 0 500 8000 100 0 0 50 0 0\n@@tree\n" \
           "42 (postgres) S 1 42 42 0 -1 0 0 0 0 0 300 100 0 0 20 0 1 0 0 0 0"
    s = parse_snapshot(text, 42)
    d = snapshot_delta(s, s, 0.004)
    assert (d["host_cpu_total_s"], d["host_cpu_busy_s"], d["host_cpu_util"]) == (0.0, 0.0, 0.0)
