"""`pgaccel run --dsn` end to end against a server pgaccel did not start, reached over TCP
with SCRAM password authentication: it runs, the tuned variant's session settings are
verified the way pgbench's sessions see them, and the password appears nowhere it wrote.
The load generator keeps the user's libpq environment, with the DSN's keys on top."""

from __future__ import annotations

import os
import re
import secrets
import threading
import time

import psycopg
import pytest

from helpers import pgaccel
from pgaccel.server.cluster import Cluster
from pgaccel.server.target import DsnTarget
from pgaccel.workloads.pgbench import run_pgbench

ROLE = "benchrole"


@pytest.fixture(scope="module")
def server(inst):
    """A server of its own (as an outsider would have), with a password login role."""
    password = "pw-" + secrets.token_hex(12)
    with Cluster.create_throwaway(inst) as c:
        c.start({})
        with c.connect() as conn:
            conn.autocommit = True
            # superuser: CHECKPOINT and pg_prewarm (CREATE EXTENSION) need it
            conn.execute(f"CREATE ROLE {ROLE} LOGIN SUPERUSER PASSWORD '{password}'")
        yield c, password, f"postgresql://{ROLE}:{password}@127.0.0.1:{c.port}/postgres"


def _all_files(root: str) -> list[str]:
    out = []
    for d, _, files in os.walk(root):
        out += [os.path.join(d, f) for f in files]
    return out


def test_run_dsn_end_to_end_password_nowhere(server, tmp_path):
    """`run --dsn` with a password in the DSN runs end to end, verifies tuned's session
    settings, and writes the password nowhere.  It takes long (about 23 s on a 2-core VM: as the
    module's first test it pays for the module-scoped `server` fixture's initdb and start; then
    a real `run` of baseline and tuned x 2 rounds of 3-s trials on that server with scale-1
    data)."""
    c, password, dsn = server
    out, store = tmp_path / "out", tmp_path / "store.sqlite"
    r = pgaccel("run", "--quick", "--dsn", dsn, "--workloads", "select-only", "--rounds", "2",
                "--duration", "3", "--warmup", "0", "--scale", "1", "--out", str(out),
                "--store", str(store), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    text = r.stdout + r.stderr
    assert re.search(r"verdict|faster|slower|equivalent|not enough evidence", r.stdout), text
    assert f"{ROLE}" in r.stderr and "127.0.0.1" in r.stderr     # the DSN, shown safely
    assert password not in text
    files = _all_files(str(out))
    names = {os.path.basename(f) for f in files}
    assert {"run.json", "summary.json"} <= names, names
    import json
    doc = json.loads(next(open(f).read() for f in files if f.endswith("run.json")))
    assert doc["status"] == "finished" and len(doc["trials"]) == 4
    # the session-level settings once refused ("effective_cache_size is '524288 x 8kB'")
    # were applied through PGOPTIONS, verified, and measured
    tuned = [v for v in doc["variants"] if v["name"] == "tuned"][0]["settings"]
    assert "effective_cache_size" in tuned and "shared_buffers" not in tuned, tuned
    for f in files + [str(store)] + [str(store) + s for s in ("-wal", "-journal")
                                     if os.path.exists(str(store) + s)]:
        with open(f, "rb") as fh:
            assert password.encode() not in fh.read(), f
    # what pgaccel wrote next to the server (log, pg_ctl output): no password either
    for f in _all_files(c.pgdata):
        if "log" in f and os.path.isfile(f):
            with open(f, "rb") as fh:
                assert password.encode() not in fh.read(), f


def test_session_settings_are_verified_as_sessions_see_them(server):
    _, _, dsn = server
    t = DsnTarget(dsn)
    not_applied = t.apply({"work_mem": "7MB", "effective_cache_size": "3GB",
                           "shared_buffers": "256MB"})
    assert "shared_buffers" in not_applied and "work_mem" not in not_applied
    from pgaccel.lab.settings import verify_settings
    assert verify_settings(t, {"work_mem": "7MB", "effective_cache_size": "3GB"}) == []
    with t.connect() as conn:                 # a plain session does not see them
        assert conn.execute("SHOW work_mem").fetchone()[0] != "7MB"


def _appnames_during(dsn: str, conninfo: str, env: dict[str, str]) -> set[str]:
    """application_name of pgbench's sessions while it runs for 3 s."""
    seen: set[str] = set()
    stop = threading.Event()

    def watch():
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not stop.is_set():
                rows = conn.execute("SELECT application_name FROM pg_stat_activity "
                                    "WHERE backend_type = 'client backend' "
                                    "AND pid <> pg_backend_pid()").fetchall()
                seen.update(r[0] for r in rows if r[0])
                time.sleep(0.1)

    th = threading.Thread(target=watch, daemon=True)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        th.start()
        run_pgbench(_pgbench(), conninfo, builtin="select-only", duration=3, log=False)
    finally:
        stop.set()
        th.join(5)
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return seen


def _pgbench() -> str:
    from pgaccel.server.discovery import choose_server
    return os.path.join(choose_server().bindir, "pgbench")


def test_pgbench_inherits_libpq_env_and_dsn_wins(server):
    c, password, dsn = server
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS appname_db")
        conn.execute("CREATE DATABASE appname_db")
    db_dsn = dsn.rsplit("/", 1)[0] + "/appname_db"
    import subprocess
    subprocess.run([_pgbench(), "-i", "-s", "1", "-q"],
                   check=True, capture_output=True,
                   env={**os.environ, "PGHOST": "127.0.0.1", "PGPORT": str(c.port),
                        "PGUSER": ROLE, "PGPASSWORD": password, "PGDATABASE": "appname_db"})
    seen = _appnames_during(dsn, db_dsn, {"PGAPPNAME": "from-the-env"})
    assert "from-the-env" in seen, seen
    seen = _appnames_during(dsn, db_dsn + "?application_name=from-the-dsn",
                            {"PGAPPNAME": "from-the-env"})
    assert "from-the-dsn" in seen and "from-the-env" not in seen, seen
