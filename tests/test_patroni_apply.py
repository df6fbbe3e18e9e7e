"""`pgaccel tune --apply --patroni URL` and its rollback on a real Patroni cluster: etcd and
two Patroni members (the distribution's packages, installed by install.sh) on loopback,
running PostgreSQL as the unprivileged server user.

The plan goes into Patroni's dynamic configuration, both members pick it up, the
restart-level parameters are restarted through Patroni (replica first), every member shows
the planned values, and `pgaccel rollback` brings the configuration and the values back."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import psycopg
import pytest

from pgaccel.server.discovery import choose_server
from pgaccel.server.osuser import server_user

PGACCEL = os.path.join(os.path.dirname(sys.executable), "pgaccel")
# the distribution's (the virtualenv's Patroni, from PyPI for the format checks, runs on an
# interpreter the server user may not be able to read)
ETCD, PATRONI = "/usr/bin/etcd", "/usr/bin/patroni"

MEMBER = """scope: pgaccel-test
name: {name}
restapi:
  listen: 127.0.0.1:{api}
  connect_address: 127.0.0.1:{api}
etcd3:
  hosts: 127.0.0.1:{etcd}
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 2
    retry_timeout: 10
    postgresql:
      use_pg_rewind: false
      parameters:
        max_connections: 50
        work_mem: 2MB
  initdb:
  - encoding: UTF8
  - auth: trust
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:{pg}
  connect_address: 127.0.0.1:{pg}
  data_dir: {dir}/data
  bin_dir: {bindir}
  pgpass: {dir}/pgpass
  authentication:
    superuser: {{username: postgres, password: unused}}
    replication: {{username: replicator, password: unused}}
  parameters:
    unix_socket_directories: {dir}
"""


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


class PatroniCluster:
    def __init__(self, base: str):
        self.base = base
        self.etcd, self.peer, *rest = _free_ports(6)
        self.api, self.pg = rest[:2], rest[2:]
        self.procs: list[subprocess.Popen] = []
        self.user = server_user()

    def _spawn(self, cmd: list[str], log: str, as_server_user: bool = True) -> None:
        drop = ({"user": self.user.uid, "group": self.user.gid, "extra_groups": []}
                if os.geteuid() == 0 and as_server_user else {})
        out = open(os.path.join(self.base, log), "wb")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "PYTHON"))}
        if drop:
            env["HOME"] = self.base
        self.procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, cwd=self.base, env=env,
                                           start_new_session=True, **drop))

    def start(self) -> None:
        e = f"http://127.0.0.1:{self.etcd}"
        p = f"http://127.0.0.1:{self.peer}"
        self._spawn([ETCD, "--name", "e1", "--data-dir", f"{self.base}/etcd",
                     "--listen-client-urls", e, "--advertise-client-urls", e,
                     "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
                     "--initial-cluster", f"e1={p}"], "etcd.log", as_server_user=False)
        self._until(lambda: _get(f"{e}/version"), "etcd")
        bindir = choose_server().bindir
        for i, name in enumerate(("m1", "m2")):
            d = os.path.join(self.base, name)
            os.makedirs(d)
            with open(f"{d}/patroni.yml", "w") as f:
                f.write(MEMBER.format(name=name, api=self.api[i], etcd=self.etcd, pg=self.pg[i],
                                      dir=d, bindir=bindir))
            if os.geteuid() == 0:          # whatever the umask: the member's user reads it
                for path in (d, f"{d}/patroni.yml"):
                    shutil.chown(path, self.user.name)
            os.chmod(d, 0o700)
            os.chmod(f"{d}/patroni.yml", 0o600)
            self._spawn([PATRONI, f"{d}/patroni.yml"], f"{name}.log")
            self._until(lambda: len([m for m in self.members() if m["state"] in
                                     ("running", "streaming")]) == i + 1, f"member {name}")

    def _until(self, check, what: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and all(p.poll() is None for p in self.procs):
            try:
                if check():
                    return
            except OSError:
                pass
            time.sleep(0.5)
        logs = "".join(open(os.path.join(self.base, f)).read()[-1500:]
                       for f in os.listdir(self.base) if f.endswith(".log"))
        raise AssertionError(f"{what} did not start:\n{logs}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api[0]}"

    def members(self) -> list[dict]:
        return _get(f"{self.url}/cluster")["members"]

    def config(self) -> dict:
        return _get(f"{self.url}/config")

    def values(self, names: list[str]) -> dict[int, dict[str, tuple[str, bool]]]:
        out = {}
        for port in self.pg:
            with psycopg.connect(host="127.0.0.1", port=port, user="postgres",
                                 dbname="postgres") as c:
                out[port] = {n: (v, p) for n, v, p in c.execute(
                    "SELECT name, current_setting(name), pending_restart FROM pg_settings "
                    "WHERE name = ANY(%s)", [names])}
        return out

    def stop(self) -> None:
        """Members first (Patroni stops its PostgreSQL), etcd last; whatever is left of the
        cluster's processes (anything running from its directory) is killed."""
        import signal
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(60)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        subprocess.run(["pkill", "-9", "-f", self.base + "/"], check=False)


@pytest.fixture(scope="module")
def patroni(tmp_path_factory):
    for tool in (ETCD, PATRONI):
        if not os.access(tool, os.X_OK):
            if os.environ.get("CI"):
                raise AssertionError(f"{tool} is not installed: install.sh installs it")
            pytest.skip(f"{tool} is not installed (./install.sh installs it)")
    import tempfile
    base = tempfile.mkdtemp(prefix="pgaccel-patroni-")     # the server user must reach it
    os.chmod(base, 0o755)
    c = PatroniCluster(base)
    if os.geteuid() == 0:
        shutil.chown(base, c.user.name)
    try:
        c.start()
        yield c
    finally:
        c.stop()
        shutil.rmtree(base, ignore_errors=True)


def pgaccel(*args: str, state_dir: str) -> subprocess.CompletedProcess:
    return subprocess.run([PGACCEL, *args], capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL,
                          env={**os.environ, "PGACCEL_STATE_DIR": state_dir})


def test_apply_through_patroni_reaches_every_member_and_rolls_back(patroni, tmp_path):
    """`tune --apply --patroni` puts the plan into Patroni's configuration and reaches both
    members, and `rollback` brings the configuration and the values back.  It takes long
    (about 22 s on a 2-core VM: as the module's first test it pays for the module-scoped
    `patroni` fixture, etcd and two Patroni members started, the replica cloned from the
    primary; then both members restarted through Patroni twice, for the apply and for the
    rollback)."""
    states = str(tmp_path / "states")
    dsn = f"host=127.0.0.1 port={patroni.pg[0]} user=postgres dbname=postgres"
    before = patroni.config()
    names = ["shared_buffers", "jit", "work_mem", "max_wal_size", "max_connections",
             "listen_addresses"]
    values_before = patroni.values(names)

    r = pgaccel("tune", "--apply", "--patroni", patroni.url, "--dsn", dsn, "--memory", "1GB",
                "--cpus", "2", "--set", "listen_addresses=*", "--format", "json",
                state_dir=states)
    try:
        assert r.returncode == 0, r.stderr
        rep = json.loads(r.stdout)["apply"]
        applied = {a["name"]: a for a in rep["applied"]}
        assert {"shared_buffers", "jit", "max_wal_size"} <= set(applied)
        assert applied["shared_buffers"]["restart"] and not applied["jit"]["restart"]
        assert ["listen_addresses", "set by Patroni per member (each member's own "
                "postgresql.listen)"] in rep["skipped"]
        assert rep["restarted"] and rep["state_id"]

        params = patroni.config()["postgresql"]["parameters"]
        assert params["shared_buffers"] == applied["shared_buffers"]["value"]
        assert "listen_addresses" not in params
        assert params["max_connections"] == before["postgresql"]["parameters"]["max_connections"]
        now = patroni.values(names)
        for port in patroni.pg:                       # both members, nothing pending
            assert now[port]["shared_buffers"] == (applied["shared_buffers"]["value"], False)
            assert now[port]["jit"] == ("off", False)
            assert now[port]["listen_addresses"] == values_before[port]["listen_addresses"]
        assert not any(m.get("pending_restart") for m in patroni.members())
    except AssertionError:        # leave the cluster as found for the next tests
        pgaccel("rollback", "--dsn", dsn, state_dir=states)
        raise

    r = pgaccel("rollback", "--dsn", dsn, "--json", state_dir=states)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["restarted"]
    assert patroni.config() == before
    assert patroni.values(names) == values_before


def test_an_unreachable_patroni_is_a_clear_error_and_changes_nothing(patroni, tmp_path):
    dead = _free_ports(1)[0]
    before = patroni.config()
    r = pgaccel("tune", "--apply", "--patroni", f"127.0.0.1:{dead}", "--memory", "1GB",
                "--cpus", "2", state_dir=str(tmp_path / "states"))
    assert r.returncode == 5, r.stderr
    assert "Could not reach Patroni's REST API at http://127.0.0.1:" in r.stderr
    assert "Traceback" not in r.stderr
    assert patroni.config() == before
    assert not os.path.exists(tmp_path / "states") or not os.listdir(tmp_path / "states")


def test_dry_run_shows_the_patch_and_changes_nothing(patroni, tmp_path):
    before = patroni.config()
    r = pgaccel("tune", "--apply", "--dry-run", "--patroni", patroni.url, "--memory", "1GB",
                "--cpus", "2", "--format", "json", state_dir=str(tmp_path / "states"))
    assert r.returncode == 0, r.stderr
    diff = json.loads(json.loads(r.stdout)["apply"]["diff"])
    assert "shared_buffers" in diff["postgresql"]["parameters"]
    assert patroni.config() == before


def test_patroni_without_apply_is_refused(tmp_path):
    r = pgaccel("tune", "--patroni", "http://127.0.0.1:1", state_dir=str(tmp_path))
    assert r.returncode == 2 and "--patroni goes with --apply" in r.stderr
