"""Server layer on real PostgreSQL: discovery, throwaway cluster lifecycle, cleanup after
SIGINT, SIGTERM and kill -9, and the unprivileged server user."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from pgaccel.errors import NotFound, ServerError
from pgaccel.server.cluster import Cluster, explain_start_failure
from pgaccel.pg.versions import parse_version
from pgaccel.server.discovery import choose_server, find_installations

from helpers import postgres_processes_for


@pytest.mark.parametrize("text,expected", [
    ("postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)", ("15.18", 15)),
    ("pgbench (PostgreSQL) 18.1", ("18.1", 18)),
    ("psql (PostgreSQL) 17beta1", ("17", 17)),
    ("something else", None),
])
def test_parse_version(text, expected):
    assert parse_version(text) == expected


def test_discovery_finds_the_real_installation(inst):
    out = subprocess.run([os.path.join(inst.bindir, "postgres"), "--version"],
                         capture_output=True, text=True).stdout
    assert parse_version(out) == (inst.version, inst.major)
    assert inst.is_server and "pgbench" in inst.programs
    found = find_installations()
    assert any(i.bindir == inst.bindir for i in found)


def test_discovery_honours_pg_bin_and_env(inst, tmp_path, monkeypatch):
    assert find_installations(inst.bindir)[0].found_by == "--pg-bin"
    monkeypatch.setenv("PGACCEL_PG_BIN", inst.bindir)
    assert find_installations()[0].found_by == "PGACCEL_PG_BIN"
    monkeypatch.delenv("PGACCEL_PG_BIN")
    with pytest.raises(NotFound, match="no PostgreSQL programs"):
        choose_server(str(tmp_path))
    # a directory with only a client program is not a server installation
    client_only = tmp_path / "bin"
    client_only.mkdir()
    os.symlink(os.path.join(inst.bindir, "pgbench"), client_only / "pgbench")
    with pytest.raises(NotFound, match="not a PostgreSQL server"):
        choose_server(str(client_only))


def test_throwaway_lifecycle(inst):
    with Cluster.create_throwaway(inst) as c:
        base = c.base
        assert os.path.isdir(c.pgdata)
        assert stat.S_IMODE(os.stat(c.sockdir).st_mode) == 0o700
        c.start({"work_mem": "12MB"})
        with c.connect() as conn:
            rows = dict(conn.execute(
                "SELECT name, setting || coalesce(unit, '') || ' ' || source FROM pg_settings "
                "WHERE name IN ('work_mem', 'listen_addresses', 'unix_socket_directories', "
                "'port')").fetchall())
        assert rows["work_mem"] == "12288kB command line"
        assert rows["listen_addresses"] == "127.0.0.1 command line"
        assert rows["unix_socket_directories"] == f"{c.sockdir} command line"
        assert rows["port"].startswith(str(c.port))
        pid = c.postmaster_pid()
        owner = psutil.Process(pid).uids().real
        if os.geteuid() == 0:
            assert owner != 0, "the server must not run as root"
        else:
            assert owner == os.geteuid()
        c.restart({"work_mem": "20MB"})
        with c.connect() as conn:
            assert conn.execute("SHOW work_mem").fetchone()[0] == "20MB"
        assert c.postmaster_pid() != pid
    assert not os.path.exists(base)
    assert postgres_processes_for(base) == []


def test_keep_leaves_directory_but_stops_server(inst):
    c = Cluster.create_throwaway(inst)
    c.keep = True
    c.start({})
    c.cleanup()
    try:
        assert os.path.isdir(c.pgdata)
        assert postgres_processes_for(c.base) == []
    finally:
        import shutil
        shutil.rmtree(c.base, ignore_errors=True)


def test_rejected_setting_and_port_in_use(inst):
    with Cluster.create_throwaway(inst) as c:
        with pytest.raises(ServerError) as e:
            c.start({"shared_buffers": "1kB"})
        assert "shared_buffers" in e.value.message and "rejected a setting" in e.value.hint
        assert postgres_processes_for(c.base) == []
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        with pytest.raises(ServerError, match="already in use"):
            Cluster.create_throwaway(inst, port=busy)


def test_huge_pages_on_without_reserved_pages_is_explained(inst):
    with open("/proc/sys/vm/nr_hugepages") as f:
        if int(f.read()) > 0:
            pytest.skip("huge pages are reserved on this host")
    with Cluster.create_throwaway(inst) as c:
        with pytest.raises(ServerError) as e:
            c.start({"huge_pages": "on", "shared_buffers": "64MB"})
        assert "huge pages" in (e.value.message + e.value.hint).lower()


@pytest.mark.parametrize("log,cls_name,word", [
    ("FATAL:  could not create shared memory segment: No space left on device", "ServerError",
     "shared memory"),
    ("LOG:  could not bind IPv4 address \"127.0.0.1\": Address already in use", "ServerError",
     "port"),
    ("FATAL:  could not write to file \"x\": No space left on device", "DiskFull", "disk"),
    ("FATAL:  unrecognized configuration parameter \"shared_bufers\"", "ServerError", "setting"),
    # bench --pgdata / tune --apply on a cluster owned by root said "own the server process"
    # or "more information on how to properly start the server" (issue 41)
    ("\"root\" execution of the PostgreSQL server is not permitted.\nThe server must be "
     "started under an unprivileged user ID to prevent\npossible system security compromise."
     "  See the documentation for\nmore information on how to properly start the server.",
     "ServerError", "belongs to root"),
    ("pg_ctl: cannot be run as root\nPlease log in (using, e.g., \"su\") as the (unprivileged) "
     "user that will\nown the server process.", "ServerError", "belongs to root"),
])
def test_explain_start_failure(log, cls_name, word):
    cls, line, advice = explain_start_failure("LOG: starting\n" + log)
    assert cls.__name__ == cls_name and line in log and word in advice.lower()


CHILD = textwrap.dedent("""
    import sys, time
    from pgaccel.server.discovery import choose_server
    from pgaccel.server.cluster import Cluster
    c = Cluster.create_throwaway(choose_server())
    c.start({})
    print(c.base, flush=True)
    try:
        time.sleep(120)
    finally:
        c.cleanup()
""")


def _child_with_cluster() -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    base = p.stdout.readline().strip()
    assert base and os.path.isdir(base)
    assert postgres_processes_for(base)
    return p, base


def _wait_cleaned(base: str, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not os.path.exists(base) and not postgres_processes_for(base):
            return
        time.sleep(0.2)
    raise AssertionError(f"{base} still present or postgres still running")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_cluster_removed_when_owner_is_interrupted_or_killed(sig):
    p, base = _child_with_cluster()
    p.send_signal(sig)
    p.wait(timeout=60)
    _wait_cleaned(base)
