"""capture/statements.py: a statement's window from two pg_stat_statements snapshots, worked
by hand from the times themselves; the shares, the merged rows, utility statements without
their text; the bundle written whole and refused over another (capture/bundle.py)."""

from __future__ import annotations

import json
import math
import os
import statistics

import pytest

from pgaccel.capture.bundle import read_manifest, write_bundle
from pgaccel.capture.statements import UTILITY, Snapshot, Statement, is_plannable, \
    window, window_of
from pgaccel.errors import UsageError


def snap(times, query="SELECT 1", queryid=7, rows=None):
    """pg_stat_statements' row after ``times`` (ms): mean and population sd."""
    n = len(times)
    mean = sum(times) / n if n else 0.0
    sd = statistics.pstdev(times) if n else 0.0
    return Snapshot(1, 10, queryid, query, n, sum(times), mean, sd,
                    rows if rows is not None else n)


def test_the_window_is_the_times_between_the_snapshots():
    w = window_of(snap([1.0, 2.0, 3.0]), snap([1.0, 2.0, 3.0, 4.0, 5.0, 9.0]))
    assert w.calls == 3
    assert w.total_ms == pytest.approx(18.0)
    assert w.mean_ms == pytest.approx(6.0)
    assert w.stddev_ms == pytest.approx(statistics.pstdev([4.0, 5.0, 9.0]))
    assert w.rows == 3


def test_a_new_or_evicted_entry_is_its_later_snapshot_alone():
    assert window_of(None, snap([2.0, 4.0])).mean_ms == pytest.approx(3.0)
    # the entry was evicted and made again: fewer calls than before
    w = window_of(snap([1.0] * 10), snap([5.0, 7.0]))
    assert (w.calls, w.mean_ms, w.stddev_ms) == (2, pytest.approx(6.0), pytest.approx(1.0))
    assert window_of(snap([1.0, 2.0]), snap([1.0, 2.0])) is None


@pytest.mark.parametrize("query, plannable", [
    ("SELECT 1", True), ("  with x as (select 1) select * from x", True),
    ("(SELECT 1) UNION (SELECT 2)", True), ("insert into t values ($1)", True),
    ("ALTER ROLE bob PASSWORD 'x'", False), ("SET work_mem = '64MB'", False),
    ("VACUUM t", False), ("COPY t FROM STDIN", False), ("", False),
])
def test_what_a_replay_can_run(query, plannable):
    assert is_plannable(query) is plannable


def test_shares_top_statements_and_the_rest_merged():
    before = [snap([1.0], "SELECT a", 1), snap([], "SELECT b", 2)]
    after = [snap([1.0, 10.0, 10.0], "SELECT a", 1),       # +2 calls, 20 ms
             snap([1.0] * 4, "SELECT b", 2),               # +4 calls, 4 ms
             snap([2.0] * 3, "SELECT c", 3),               # +3 calls, 6 ms
             snap([5.0], "ALTER ROLE x PASSWORD 'pw'", 4)]  # utility: 1 call, 5 ms
    stmts, totals = window(before, after, top=2)
    assert totals == {"calls": 10, "time_ms": pytest.approx(35.0)}
    assert [s.query for s in stmts] == ["SELECT a", "SELECT c", "(other statements)",
                                        UTILITY]
    assert [s.calls for s in stmts] == [2, 3, 4, 1]
    assert [round(s.share_time, 4) for s in stmts] == [round(20 / 35, 4), round(6 / 35, 4),
                                                       round(4 / 35, 4), round(5 / 35, 4)]
    assert stmts[0].share_calls == pytest.approx(0.2)
    assert not any("pw" in s.query for s in stmts)
    d = stmts[-1].to_dict()
    assert d["stddev_ms"] is None                       # JSON-ready, not NaN
    assert math.isnan(Statement.from_dict(d).stddev_ms)


def test_a_bundle_is_written_whole_for_its_owner_and_never_over_another(tmp_path):
    p = write_bundle(str(tmp_path / "b"), {"database": "shop"}, {"a.json": "{}\n"})
    assert sorted(os.listdir(p)) == ["a.json", "manifest.json"]
    assert oct(os.stat(p).st_mode & 0o777) == "0o700"
    assert oct(os.stat(os.path.join(p, "a.json")).st_mode & 0o777) == "0o600"
    m = read_manifest(p)
    assert (m["schema"], m["kind"], m["files"], m["database"]) == \
        (1, "pgaccel-capture", ["a.json"], "shop")
    with pytest.raises(UsageError, match="exists"):
        write_bundle(p, {}, {})
    assert [n for n in os.listdir(tmp_path) if n.startswith(".capture-")] == []
    (tmp_path / "x").mkdir()
    with pytest.raises(UsageError, match="not a capture"):
        read_manifest(str(tmp_path / "x"))


def test_the_logging_is_put_back_as_the_file_had_it():
    from pgaccel.session.capturelog import restore_sql
    assert restore_sql({"log_min_duration_statement": {"auto": None},
                        "log_parameter_max_length": {"auto": "64"},
                        "log_destination": {"auto": "stderr,it's"}}) == [
        "ALTER SYSTEM RESET log_min_duration_statement",
        "ALTER SYSTEM SET log_parameter_max_length = '64'",
        "ALTER SYSTEM SET log_destination = 'stderr,it''s'",
        "SELECT pg_reload_conf()"]


@pytest.mark.parametrize("query", ["/* app=web */ SELECT 1", "-- note\nSELECT 1",
                                   "/* a */ /* b */\n  WITH x AS (SELECT 1) SELECT * FROM x"])
def test_a_statement_after_comments_is_still_one_a_replay_can_run(query):
    assert is_plannable(query)


def test_a_statement_round_trips_with_its_unknown_counts_kept_unknown():
    from pgaccel.capture.statements import Statement
    s = Statement(7, "SELECT 1", 3, 6.0, 2.0, math.nan, 3, 0.5, 0.25, blocks=10, blks_read=4,
                  temp_blks=0, wal_bytes=None, jit_ms=None, par_workers=None)
    back = Statement.from_dict(json.loads(json.dumps(s.to_dict())))
    assert math.isnan(back.stddev_ms)
    assert (back.blks_read, back.temp_blks, back.wal_bytes, back.jit_ms, back.par_workers) \
        == (4, 0, None, None, None)


def test_the_windows_counts_subtract_and_merge_unknown_where_a_version_lacks_them():
    before = Snapshot(1, 10, 5, "SELECT a FROM t ORDER BY a", 10, 100.0, 10.0, 1.0, 10,
                      500, 20, 1000, 0, 30.0, None)
    after = Snapshot(1, 10, 5, "SELECT a FROM t ORDER BY a", 14, 180.0, 180 / 14, 1.0, 14,
                     700, 28, 1512, 0, 41.5, None)
    w = window_of(before, after)
    # 4 calls; blocks (700 + 28) - (500 + 20); 512 temp blocks; 11.5 ms of JIT
    assert (w.calls, w.blocks, w.blks_read, w.temp_blks, w.wal_bytes, w.jit_ms,
            w.par_workers) == (4, 208, 8, 512, 0, pytest.approx(11.5), None)
    # a statement new in the window: its counts alone
    assert window_of(None, after).temp_blks == 1512
    other = Snapshot(1, 10, 6, "SELECT b FROM u", 3, 3.0, 1.0, 0.0, 3, 9, 0, 0, 64, None,
                     None)
    rows, _ = window([], [after, other], top=1)
    merged = rows[-1]
    assert merged.query == "(other statements)"
    # the merged row's JIT is unknown because one member's is; its WAL is the sum
    assert (merged.wal_bytes, merged.jit_ms, merged.temp_blks) == (64, None, 0)


def test_the_destination_is_checked_before_the_window(tmp_path, monkeypatch):
    """check_destination, which capture calls before it connects: an existing --out, a
    parent that is a file or cannot be created, and the default (the current directory)
    that cannot be written are refused with what to do; a new path passes and leaves
    nothing behind (its parent made, no trace of the trial directory)."""
    from pgaccel.capture.bundle import check_destination
    (tmp_path / "old").mkdir()
    with pytest.raises(UsageError) as e:
        check_destination(str(tmp_path / "old"))
    assert str(e.value).startswith(f"--out {tmp_path / 'old'} exists. Give --out a new")
    assert "nothing was captured" in str(e.value)
    (tmp_path / "file").write_text("")
    for bad in (tmp_path / "file" / "b", "/proc/pgaccel-no-such/b"):
        with pytest.raises(UsageError) as e:
            check_destination(str(bad))
        assert str(e.value).startswith("The bundle cannot be written: --out is under "
                                       f"{os.path.dirname(str(bad))}, where a directory "
                                       "cannot be created (")
        assert "the server was not touched" in str(e.value)
    check_destination(str(tmp_path / "new" / "deeper" / "b"))
    assert os.listdir(tmp_path / "new" / "deeper") == []
    monkeypatch.chdir("/proc")
    with pytest.raises(UsageError) as e:
        check_destination(None)
    assert "the current directory (the default --out) is under /proc" in str(e.value)


def test_capture_refuses_bad_options_before_it_connects(tmp_path):
    """The command line: an empty or malformed --duration names --duration (it said
    --budget), and an existing --out is refused before the server is reached (this DSN
    names no server, so reaching for one would be another error)."""
    import subprocess
    import sys
    exe = os.path.join(os.path.dirname(sys.executable), "pgaccel")
    dsn = "host=/nonexistent dbname=x connect_timeout=1"
    (tmp_path / "old").mkdir()
    for args, want in (
            (["--duration", "0"], "--duration 0: a capture watches the server for a while"),
            (["--duration", "-5s"], "--duration: '-5s' is not a duration"),
            (["--out", str(tmp_path / "old")], f"--out {tmp_path / 'old'} exists.")):
        r = subprocess.run([exe, "capture", "--dsn", dsn, *args], capture_output=True,
                           text=True, timeout=60, cwd=tmp_path)
        text = " ".join(r.stderr.split())
        assert r.returncode == 2 and want in text and "Traceback" not in text, text


def test_a_user_with_a_bundle_finds_how_to_replay_it():
    """`pgaccel workloads` and the help of run, bench and tune name captured:DIR (they did
    not mention captured workloads at all)."""
    import subprocess
    import sys
    exe = os.path.join(os.path.dirname(sys.executable), "pgaccel")
    env = {**os.environ, "COLUMNS": "160"}
    listed = subprocess.run([exe, "workloads"], capture_output=True, text=True, env=env,
                            timeout=60)
    rows = [ln for ln in listed.stdout.splitlines() if "captured:DIR" in ln]
    assert len(rows) == 1 and "stmt/s" in rows[0], listed.stdout[-2000:]
    assert "pgaccel capture --dsn DSN" in " ".join(listed.stdout.replace("│", " ").split())
    for cmd in (["run"], ["bench"], ["tune"]):
        h = subprocess.run([exe, *cmd, "--help"], capture_output=True, text=True, env=env,
                           timeout=60)
        assert "captured:DIR replays a bundle of `pgaccel capture`" in " ".join(
            h.stdout.split()), cmd
