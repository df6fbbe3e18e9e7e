"""pgaccel capture on a real server (session/capture.py, cli/capture.py): a known mix run in
the window comes out with its exact calls and shares; the server is left as it was (settings,
databases, extensions); the bundle is its owner's only and holds no password or literal of a
utility statement; a server without pg_stat_statements gets a paragraph and exit code 2."""

from __future__ import annotations

import json
import os
import stat

import pytest

from helpers import pgaccel
from pgaccel.server.cluster import Cluster

POINT = "SELECT sum(v) FROM items WHERE g = %s"
REPORT = "SELECT g, count(*), avg(v) FROM items GROUP BY g ORDER BY g"
SECRET = "sekrit-pw-4711"


@pytest.fixture(scope="module")
def pgss(inst):
    with Cluster.create_throwaway(inst) as c:
        c.start({"shared_preload_libraries": "pg_stat_statements"})
        with c.connect() as conn:
            conn.execute("CREATE DATABASE shop")
        with c.connect("shop") as conn:
            conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, g int, v numeric)")
            conn.execute("CREATE INDEX ON items (g)")
            conn.execute("INSERT INTO items SELECT i, i % 50, i * 1.5 "
                         "FROM generate_series(1, 20000) i")
            conn.execute("ANALYZE items")
        with c.connect() as conn:           # the view in another database than the captured
            conn.execute("CREATE EXTENSION pg_stat_statements")
        yield c


def _state(c: Cluster) -> tuple:
    with c.connect() as conn:
        settings = conn.execute("SELECT name, setting FROM pg_settings ORDER BY 1").fetchall()
        dbs = conn.execute("SELECT datname FROM pg_database ORDER BY 1").fetchall()
    with c.connect("shop") as conn:
        ext = conn.execute("SELECT extname FROM pg_extension ORDER BY 1").fetchall()
        rels = conn.execute("SELECT count(*) FROM pg_class").fetchone()
    return settings, dbs, ext, rels


def _mix(c: Cluster) -> None:
    with c.connect("shop") as conn:
        for i in range(200):
            conn.execute(POINT, (i % 50,))
        for _ in range(20):
            conn.execute(REPORT)
        conn.execute(f"ALTER ROLE CURRENT_USER PASSWORD '{SECRET}'")


def test_a_known_mix_is_captured_exactly_and_the_server_is_left_as_it_was(pgss, tmp_path):
    from pgaccel.session.capture import CaptureRequest, capture
    before = _state(pgss)
    dsn = pgss.conninfo("shop") + f" password={SECRET}"
    ran = []

    def tick(elapsed, total):                 # inside the window, once
        if not ran:
            _mix(pgss)
            ran.append(elapsed)
    path, m = capture(CaptureRequest(dsn=dsn, duration_s=2.0, out=str(tmp_path / "b")),
                      tick)
    assert ran and _state(pgss) == before     # settings, databases, extensions, relations
    stmts = {s.query: s for s in m["statements"]}
    point = next(s for q, s in stmts.items() if "WHERE g = $1" in q)
    report = next(s for q, s in stmts.items() if "GROUP BY g" in q)
    assert (point.calls, report.calls) == (200, 20)
    assert stmts["(utility statements)"].calls >= 1
    calls = m["totals"]["calls"]
    assert point.share_calls == pytest.approx(200 / calls)
    assert sum(s.share_time for s in m["statements"]) == pytest.approx(1.0)
    # the report scans 20,000 rows each time: it takes most of the time
    assert report.share_time > point.share_time
    # the bundle: its owner's only, what a replay needs, no password, no utility literal
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    names = sorted(os.listdir(path))
    assert names == ["manifest.json", "relations.json", "schema.sql", "settings.json",
                     "statements.json"]
    for n in names:
        assert stat.S_IMODE(os.stat(os.path.join(path, n)).st_mode) == 0o600
        text = open(os.path.join(path, n)).read()
        assert SECRET not in text, n
    man = json.load(open(os.path.join(path, "manifest.json")))
    assert man["schema"] == 1 and man["kind"] == "pgaccel-capture"
    assert man["database"] == "shop" and man["parameter_values"].startswith("not captured")
    assert "CREATE TABLE public.items" in open(os.path.join(path, "schema.sql")).read()
    rels = {r["name"]: r for r in json.load(open(os.path.join(path, "relations.json")))}
    assert rels["items"]["reltuples"] == 20000 and rels["items"]["kind"] == "r"


def test_the_command_prints_the_mix_and_refuses_an_existing_directory(pgss, tmp_path):
    out = tmp_path / "b"
    r = pgaccel("capture", "--dsn", pgss.conninfo("shop"), "--duration", "1s", "--out",
                str(out))
    assert r.returncode == 0, r.stderr
    assert f"Bundle: {out}" in " ".join(r.stdout.split()) + " ".join(r.stderr.split())
    r = pgaccel("capture", "--dsn", pgss.conninfo("shop"), "--duration", "1s", "--out",
                str(out))
    assert r.returncode == 2 and "exists" in r.stderr and "Traceback" not in r.stderr


def test_a_server_without_pg_stat_statements_is_told_what_to_do(cluster, tmp_path):
    r = pgaccel("capture", "--dsn", cluster.conninfo() + f" password={SECRET}",
                "--duration", "1s", "--out", str(tmp_path / "b"))
    assert r.returncode == 2, r.stderr
    text = " ".join(r.stderr.split())
    assert "pg_stat_statements is not loaded" in text
    assert "shared_preload_libraries" in text and "restart" in text
    assert SECRET not in r.stderr + r.stdout and "Traceback" not in r.stderr
    assert not (tmp_path / "b").exists()


def test_without_the_extension_anywhere_capture_creates_nothing_and_says_where(pgss,
                                                                             tmp_path):
    with pgss.connect() as conn:
        conn.execute("DROP EXTENSION pg_stat_statements")
    try:
        before = _state(pgss)
        r = pgaccel("capture", "--dsn", pgss.conninfo("shop"), "--duration", "1s", "--out",
                    str(tmp_path / "b"))
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert "CREATE EXTENSION pg_stat_statements;` in shop" in " ".join(r.stderr.split())
        assert _state(pgss) == before and not (tmp_path / "b").exists()
    finally:
        with pgss.connect() as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")


def test_values_from_the_log_are_kept_only_when_asked(pgss, tmp_path):
    from pgaccel.session.capture import CaptureRequest, capture
    with pgss.connect() as conn:
        conn.execute("ALTER SYSTEM SET log_min_duration_statement = 0")
        conn.execute("ALTER SYSTEM SET log_parameter_max_length = -1")
        conn.execute("SELECT pg_reload_conf()")
    try:
        out = {}
        for keep in (False, True):
            ran = []

            def tick(elapsed, total):
                if not ran:
                    _mix(pgss)
                    ran.append(1)
            path, m = capture(CaptureRequest(dsn=pgss.conninfo("shop"), duration_s=1.0,
                                             out=str(tmp_path / f"b{keep}"),
                                             from_log=pgss.logfile, with_values=keep), tick)
            out[keep] = (path, m)
        path, m = out[False]
        assert not os.path.exists(os.path.join(path, "values.json"))
        assert m["parameter_values"].startswith("read from the log")
        assert "not kept" in m["parameter_values"]
        path, m = out[True]
        values = json.load(open(os.path.join(path, "values.json")))
        (st,) = [s for s in m["statements"]
                 if s.query == "SELECT sum(v) FROM items WHERE g = $1"]
        point = values[str(st.queryid)]
        assert {int(t["1"]) for t in point} <= set(range(50)) and len(point) >= 200
        assert stat.S_IMODE(os.stat(os.path.join(path, "values.json")).st_mode) == 0o600
        assert SECRET not in open(os.path.join(path, "values.json")).read()
    finally:
        with pgss.connect() as conn:
            conn.execute("ALTER SYSTEM RESET log_min_duration_statement")
            conn.execute("ALTER SYSTEM RESET log_parameter_max_length")
            conn.execute("SELECT pg_reload_conf()")


def test_with_values_needs_a_log(pgss, tmp_path):
    r = pgaccel("capture", "--dsn", pgss.conninfo("shop"), "--with-values", "--out",
                str(tmp_path / "b"))
    assert r.returncode == 2 and "--from-log" in r.stderr and "Traceback" not in r.stderr


def test_an_unreadable_log_is_refused_before_the_window(pgss, tmp_path):
    r = pgaccel("capture", "--dsn", pgss.conninfo("shop"), "--duration", "10m",
                "--from-log", str(tmp_path / "nosuch.log"), "--out", str(tmp_path / "b"),
                timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"--from-log {tmp_path / 'nosuch.log'}: No such file or directory" in \
        " ".join(r.stderr.split())
