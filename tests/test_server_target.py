"""The one door to a server (server/target.py): "is the server on this machine?" in one
place, and open_target's planning mode (bench=False), which leaves a --pgdata cluster
exactly as it found it and never creates or drops pgaccel_bench."""

from __future__ import annotations

import os

import pytest

from pgaccel.errors import UsageError
from pgaccel.server.cluster import BENCH_DB, Cluster
from pgaccel.server.target import DsnTarget, LocalTarget, host_is_local, open_target

import helpers
from helpers import pg_ctl


@pytest.mark.parametrize("host, local", [
    ("/var/run/postgresql", True), ("/tmp/pgaccel-x/sock", True),
    ("localhost", True), ("127.0.0.1", True), ("::1", True),
    ("db.example.com", False), ("10.0.0.5", False), ("192.168.1.10", False),
    ("", False), (None, False),
])
def test_host_is_local(host, local):
    assert host_is_local(host) is local


def test_restart_cmd_goes_with_pgdata_only():
    with pytest.raises(UsageError, match="--restart-cmd goes with --pgdata"):
        with open_target(restart_cmd="true", bench=False):
            pass


@pytest.fixture
def user_cluster(inst):
    yield from helpers.user_cluster(inst, listen="127.0.0.1")


def databases(c: Cluster) -> set[str]:
    with c.connect() as conn:
        return {r[0] for r in conn.execute("SELECT datname FROM pg_database")}


def test_planning_mode_leaves_a_stopped_cluster_stopped(user_cluster):
    c = user_cluster
    with open_target(pgdata=c.pgdata, bench=False) as t:
        assert isinstance(t, LocalTarget) and t.kind == "pgdata" and t.is_local
        assert t.raw_values(["port", "no_such_setting"]) == {"port": str(c.port)}
        assert t.check_files() is None
        assert t.config_file() == os.path.realpath(os.path.join(c.pgdata, "postgresql.conf"))
        assert not t.running()
    assert not c.is_running()
    # nothing was written into the data directory (pg_ctl's log is made on a first start)
    assert not os.path.exists(os.path.join(c.pgdata, "log"))
    assert not os.path.exists(os.path.join(c.pgdata, "postmaster.pid"))


def test_planning_mode_leaves_a_running_cluster_running_without_a_restart(user_cluster):
    c = user_cluster
    pg_ctl(c, "start")
    pid, dbs = c.postmaster_pid(), databases(c)
    assert BENCH_DB not in dbs
    with open_target(pgdata=c.pgdata, bench=False) as t:
        assert t.running() and t.postmaster_pid() == pid
        assert t.pg_settings(["port"])["port"]["setting"] == str(c.port)
        assert t.file_errors() == []
        t.reload()
    assert c.is_running() and c.postmaster_pid() == pid
    assert databases(c) == dbs
    # a DSN to the same server through planning mode: pgaccel_bench is neither made nor
    # dropped (a user's own pgaccel_bench, kept from an earlier run, survives)
    with c.connect() as conn:
        conn.execute(f'CREATE DATABASE "{BENCH_DB}"')
    dsn = f"host={c.sockdir} port={c.port} user=pgaccel dbname=postgres"
    with open_target(dsn=dsn, bench=False) as t:
        assert isinstance(t, DsnTarget) and t.is_local and t.host == c.sockdir
        assert t.postmaster_pid() == pid
    assert BENCH_DB in databases(c)
    # benchmarks (bench=True) drop it on the way out, as before
    with open_target(dsn=dsn):
        pass
    assert databases(c) == dbs and c.postmaster_pid() == pid


def test_a_dsn_over_tcp_to_this_machine_is_local(inst):
    with Cluster.create_throwaway(inst) as c:
        c.start({})
        t = DsnTarget(f"host=127.0.0.1 port={c.port} user=pgaccel dbname=postgres "
                      f"password={c.password}")
        assert t.host == "127.0.0.1" and t.is_local
        assert t.postmaster_pid() == c.postmaster_pid()
        assert c.password not in t.describe() and "password" not in t.display_dsn


def test_probe_reads_a_pgdata_cluster_without_restarting_it(user_cluster):
    """`pgaccel probe --pgdata` reads a running cluster as it runs (same postmaster), and a
    stopped one is started for the reading and stopped again."""
    from helpers import pgaccel
    c = user_cluster
    r = pgaccel("probe", "--json", "--pgdata", c.pgdata, check=True)
    assert '"server"' in r.stdout and not c.is_running()
    pg_ctl(c, "start")
    pid = c.postmaster_pid()
    pgaccel("probe", "--json", "--pgdata", c.pgdata, check=True)
    assert c.is_running() and c.postmaster_pid() == pid
