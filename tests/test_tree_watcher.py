"""Server context switches and I/O count the backends that exit inside the interval
(metrics/system.py TreeWatcher), on a real server with real pgbench clients.

Before it, a load generator that disconnected before the interval ended took its backends'
counts with it: the same sysbench workload counted 277 context switches in one trial and
207,023 in the next."""

from __future__ import annotations

import subprocess
import time

from pgaccel.metrics import system as sysmetrics
from pgaccel.server.discovery import find_client
from pgaccel.workloads.pgbench import libpq_env


def _pgbench(cluster, tmp_path, seconds: int, clients: int = 2) -> int:
    script = tmp_path / "one.sql"
    script.write_text("SELECT 1;\n")
    r = subprocess.run([find_client("pgbench"), "-n", "-c", str(clients), "-T", str(seconds),
                        "-f", str(script), "-M", "prepared"], capture_output=True, text=True,
                       env=libpq_env(cluster.conninfo("postgres")), timeout=120)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if "transactions actually processed" in x)
    return int(line.split(":")[1].split("/")[0])


def test_backends_that_exit_before_the_end_are_counted(cluster, tmp_path):
    pid = cluster.postmaster_pid()
    watcher = sysmetrics.TreeWatcher(pid)
    plain_before = sysmetrics.tree_snapshot(pid)
    watcher.start()
    txns = _pgbench(cluster, tmp_path, 3)
    time.sleep(1.0)                        # the clients and their backends are gone
    before, after = watcher.stop()
    plain_after = sysmetrics.tree_snapshot(pid)

    new = sysmetrics.tree_delta(before, after)
    old = sysmetrics.tree_delta(plain_before, plain_after)
    assert txns > 1000
    assert watcher.exited >= 2             # both backends, seen before they exited
    # a backend waits for its client between transactions (about one switch per
    # transaction here), all of which the snapshots alone lose
    assert new["server_ctx_switches"] >= txns / 2
    assert old["server_ctx_switches"] < new["server_ctx_switches"] / 10
    # CPU was right before (the postmaster's reaped-children time) and is not counted twice
    assert abs(new["server_cpu_s"] - old["server_cpu_s"]) <= 0.1 * old["server_cpu_s"] + 0.05


def _queries(cluster, n: int, close: bool) -> list:
    conns = [cluster.connect() for _ in range(2)]
    for c in conns:
        for _ in range(n):
            c.execute("SELECT 1")
    # what a backend does in its last sampling interval before it exits is not counted
    # (docs/workloads.md); idle for longer than that before closing, as a benchmark's
    # clients are not, so the comparison is about the exited processes being kept at all
    time.sleep(0.5)
    if close:
        for c in conns:
            c.close()
        time.sleep(0.5)
    return conns


def test_counts_per_query_agree_whether_backends_outlive_the_interval(cluster):
    """The same 2 x 3,000 queries measured with the backends alive at the end of the
    interval (where the snapshots alone are right) and with them gone: the watcher counts
    about the same switches both ways; the snapshots alone lose nearly all of the second."""
    pid = cluster.postmaster_pid()
    w = sysmetrics.TreeWatcher(pid)
    w.start()
    alive_conns = _queries(cluster, 3000, close=False)
    alive = sysmetrics.tree_delta(*w.stop())["server_ctx_switches"]
    for c in alive_conns:
        c.close()
    time.sleep(0.5)

    w = sysmetrics.TreeWatcher(pid)
    plain_before = sysmetrics.tree_snapshot(pid)
    w.start()
    _queries(cluster, 3000, close=True)
    gone = sysmetrics.tree_delta(*w.stop())["server_ctx_switches"]
    plain = sysmetrics.tree_delta(plain_before, sysmetrics.tree_snapshot(pid))
    assert alive >= 3000
    assert 0.7 < gone / alive < 1.3, (gone, alive)
    assert plain["server_ctx_switches"] < alive / 10


def test_a_measured_interval_counts_them(cluster):
    """Through Measure, as every trial and step measures: server context switches of
    connections that closed before the interval ended."""
    from pgaccel.metrics.measure import Measure
    from pgaccel.server.target import LocalTarget
    from pgaccel.workloads.base import BenchContext
    target = LocalTarget(cluster)
    target.ensure_bench_db()
    ctx = BenchContext(target, find_client("pgbench", cluster.inst))
    with Measure(ctx, sample_waits=False) as meas:
        _queries(cluster, 3000, close=True)
    assert meas.metrics(6000)["server_ctx_switches"] >= 3000
