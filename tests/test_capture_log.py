"""capture --log on a real server (session/capturelog.py): the statement logging is on for
the window only, the values come back through SQL, and the server's settings and
postgresql.auto.conf are as they were afterwards, also when pgaccel is killed mid-window
(the next start puts them back); a server without logging_collector is told what to do."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from helpers import PGACCEL, pgaccel
from pgaccel.server.cluster import Cluster

SETTINGS = ("log_min_duration_statement", "log_parameter_max_length", "log_destination")
POINT = "SELECT sum(v) FROM items WHERE g = %s"


@pytest.fixture(scope="module")
def server(inst):
    with Cluster.create_throwaway(inst) as c:
        c.start({"shared_preload_libraries": "pg_stat_statements", "logging_collector": "on"})
        with c.connect() as conn:
            conn.execute("CREATE DATABASE shop")
            # a setting of the three already in postgresql.auto.conf: put back as it was
            conn.execute("ALTER SYSTEM SET log_parameter_max_length = 64")
            conn.execute("SELECT pg_reload_conf()")
        with c.connect("shop") as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
            conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, g int, v numeric)")
            conn.execute("INSERT INTO items SELECT i, i % 50, i FROM generate_series(1, 5000) i")
        yield c


def _state(c: Cluster) -> tuple:
    with c.connect() as conn:
        rows = conn.execute("SELECT name, setting, source FROM pg_settings WHERE name = "
                            "ANY(%s) ORDER BY 1", (list(SETTINGS),)).fetchall()
    with open(os.path.join(c.pgdata, "postgresql.auto.conf"), "rb") as f:
        return rows, f.read()


def _setting(c: Cluster, name: str) -> str:
    with c.connect() as conn:
        return conn.execute("SELECT setting FROM pg_settings WHERE name = %s",
                            (name,)).fetchone()[0]


def test_the_window_is_logged_with_its_values_and_the_logging_put_back(server, tmp_path,
                                                                       monkeypatch):
    from pgaccel.session.capture import CaptureRequest, capture
    monkeypatch.setenv("PGACCEL_CAPTURE_JOURNAL_DIR", str(tmp_path / "j"))
    before = _state(server)
    seen = []

    def tick(elapsed, total):
        if not seen:
            seen.append(_setting(server, "log_min_duration_statement"))
            with server.connect("shop") as conn:
                for i in range(300):
                    conn.execute(POINT, (i % 50,))
    path, m = capture(CaptureRequest(dsn=server.conninfo("shop"), duration_s=1.0,
                                     out=str(tmp_path / "b"), log=True, with_values=True),
                      tick)
    assert seen == ["0"]                               # on during the window
    assert _state(server) == before                    # settings and auto.conf as they were
    assert os.listdir(tmp_path / "j") == []
    values = json.load(open(os.path.join(path, "values.json")))
    (st,) = [s for s in m["statements"] if s.query == "SELECT sum(v) FROM items WHERE g = $1"]
    point = values[str(st.queryid)]                    # keyed by pg_stat_statements' queryid
    assert len(point) == 300 and {int(t["1"]) for t in point} == set(range(50))


def test_a_capture_killed_mid_window_has_its_logging_put_back_at_the_next_start(server,
                                                                              tmp_path):
    env = {**os.environ, "PGACCEL_CAPTURE_JOURNAL_DIR": str(tmp_path / "j")}
    before = _state(server)
    p = subprocess.Popen([*PGACCEL, "capture", "--dsn", server.conninfo("shop"), "--log",
                          "--duration", "5m", "--out", str(tmp_path / "b")], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and _setting(server, "log_min_duration_statement") != "0":
            time.sleep(0.2)
        assert _setting(server, "log_min_duration_statement") == "0"
        assert len(os.listdir(tmp_path / "j")) == 1
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert _state(server) != before                    # left on by the killed capture
    r = pgaccel("workloads", env={"PGACCEL_CAPTURE_JOURNAL_DIR": str(tmp_path / "j")})
    assert r.returncode == 0
    assert "Put back the statement logging" in " ".join(r.stderr.split())
    assert _state(server) == before
    assert os.listdir(tmp_path / "j") == [] and not (tmp_path / "b").exists()


def test_without_logging_collector_log_mode_says_what_to_do(inst, tmp_path):
    with Cluster.create_throwaway(inst) as c:
        c.start({"shared_preload_libraries": "pg_stat_statements"})
        with c.connect() as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        before = _state(c)
        r = pgaccel("capture", "--dsn", c.conninfo(), "--log", "--duration", "1s", "--out",
                    str(tmp_path / "b"),
                    env={"PGACCEL_CAPTURE_JOURNAL_DIR": str(tmp_path / "j")})
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert "logging_collector = on" in " ".join(r.stderr.split())
        assert "--from-log" in r.stderr
        assert _state(c) == before
