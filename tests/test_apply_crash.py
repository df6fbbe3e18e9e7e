"""`pgaccel tune --apply` killed with SIGKILL anywhere: `pgaccel rollback` gets the files back
byte for byte and the server back to its previous values, and the next command says what it
found.

The apply kills itself at a named point (``PGACCEL_TEST_KILL_AT``, ``apply.state.
crash_point``) so every test is deterministic: after the manifest, after the backups, after
postgresql.conf got its include line, after pgaccel.conf was written, after the reload,
after the restart, after verification (just before the state is marked applied), and, for a
stopped cluster, after pgaccel started it to verify."""

from __future__ import annotations

import json
import os
import signal

import pytest

from pgaccel.errors import UsageError

import helpers
from helpers import pg_ctl, pgaccel


@pytest.fixture
def user_cluster(inst):
    yield from helpers.user_cluster(inst, listen="")


def conf_files(pgdata: str) -> dict[str, bytes | None]:
    """Every file in the data directory's top level that is not PostgreSQL's own state."""
    out = {}
    for name in sorted(os.listdir(pgdata)):
        p = os.path.join(pgdata, name)
        if os.path.isfile(p) and not name.startswith("postmaster."):
            out[name] = open(p, "rb").read()
    return out


def shown(c, *names: str) -> dict[str, str]:
    with c.connect() as conn:
        return dict(conn.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
                                 (list(names),)).fetchall())


def apply_killed_at(c, point: str, env: dict) -> None:
    r = pgaccel("tune", "--pgdata", c.pgdata, "--apply", "--set", "work_mem=24MB",
                env={**env, "PGACCEL_TEST_KILL_AT": point}, timeout=300)
    assert r.returncode == -signal.SIGKILL, (point, r.returncode, r.stderr[-2000:])


@pytest.mark.parametrize("point", ["manifest", "backups", "include", "owned", "reloaded",
                                   "restarted", "verified"])
def test_kill_during_apply_of_a_running_cluster_then_rollback(user_cluster, tmp_path, point):
    c = user_cluster
    pg_ctl(c, "start")
    names = ("shared_buffers", "work_mem", "random_page_cost", "max_wal_size")
    before_files, before_values = conf_files(c.pgdata), shown(c, *names)
    env = {"PGACCEL_STATE_DIR": str(tmp_path / "states")}
    apply_killed_at(c, point, env)

    # every file is either as it was or whole as pgaccel meant it: none half-written
    now = conf_files(c.pgdata)
    conf, before_conf = now["postgresql.conf"], before_files["postgresql.conf"]
    assert conf == before_conf or (conf.startswith(before_conf)
                                    and conf.endswith(b"include_if_exists = 'pgaccel.conf'\n"))
    owned = now.get("pgaccel.conf")
    assert owned is None or (owned.startswith(b"# pgaccel.conf") and owned.endswith(b"'\n"))
    states = json.loads(pgaccel("rollback", "--list", "--json", env=env).stdout)["states"]
    assert [s["status"] for s in states] == ["interrupted"]

    if point == "owned":               # the next command that touches the cluster says so
        r = pgaccel("tune", "--pgdata", c.pgdata, "--format", "conf", env=env, timeout=120)
        assert r.returncode == 0 and "was interrupted before it finished" in r.stderr
        assert "pgaccel rollback" in r.stderr
        r = pgaccel("tune", "--pgdata", c.pgdata, "--apply", env=env, timeout=120)
        assert r.returncode == UsageError.exit_code and "Traceback" not in r.stderr
        assert "was interrupted" in r.stderr and "pgaccel rollback" in r.stderr

    r = pgaccel("rollback", env=env, timeout=300)
    assert r.returncode == 0, (point, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "interrupted" in r.stdout
    assert conf_files(c.pgdata) == before_files          # byte-identical, no temp file left
    assert c.is_running() and shown(c, *names) == before_values
    states = json.loads(pgaccel("rollback", "--list", "--json", env=env).stdout)["states"]
    assert [s["status"] for s in states] == ["rolled-back"]


def test_kill_after_starting_a_stopped_cluster_then_rollback(user_cluster, tmp_path):
    c = user_cluster                       # never started: pgaccel starts it to verify
    before = conf_files(c.pgdata)
    env = {"PGACCEL_STATE_DIR": str(tmp_path / "states")}
    apply_killed_at(c, "started", env)
    assert c.is_running()                  # left running by the killed apply
    r = pgaccel("rollback", env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "stopped again" in r.stdout
    assert not c.is_running() and conf_files(c.pgdata) == before


def test_a_file_edited_after_the_kill_is_not_overwritten_without_force(user_cluster,
                                                                       tmp_path):
    c = user_cluster
    pg_ctl(c, "start")
    env = {"PGACCEL_STATE_DIR": str(tmp_path / "states")}
    apply_killed_at(c, "include", env)
    with open(os.path.join(c.pgdata, "postgresql.conf"), "ab") as f:
        f.write(b"# the user's own edit after the kill\n")
    r = pgaccel("rollback", env=env, timeout=120)
    assert r.returncode != 0 and "changed after pgaccel's apply" in r.stderr
    assert "Traceback" not in r.stderr
    r = pgaccel("rollback", "--force", env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert b"own edit" not in open(os.path.join(c.pgdata, "postgresql.conf"), "rb").read()


def test_put_bytes_replaces_atomically_keeping_mode_and_owner(tmp_path):
    from pgaccel.apply.state import put_bytes
    p = tmp_path / "postgresql.conf"
    p.write_bytes(b"old\n")
    os.chmod(p, 0o640)
    os.chown(p, 1234, 2345)
    inode = os.stat(p).st_ino
    put_bytes(str(p), b"new contents\n")
    st = os.stat(p)
    assert p.read_bytes() == b"new contents\n" and st.st_ino != inode    # renamed into place
    assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o640, 1234, 2345)
    assert sorted(os.listdir(tmp_path)) == ["postgresql.conf"]           # no temp file left
    put_bytes(str(tmp_path / "pgaccel.conf"), b"x = 1\n",
              {"mode": 0o600, "uid": 1234, "gid": 2345})
    st = os.stat(tmp_path / "pgaccel.conf")
    assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o600, 1234, 2345)
