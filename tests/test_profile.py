"""`pgaccel profile` for real: valgrind runs the backend (and, for its command line, input
and failures, small scripts in its place), the same config counted twice agrees within 1%,
and a plan that does more work counts more instructions.  The parsing and arithmetic are
tested without valgrind in tests/test_cpucost_pure.py."""

from __future__ import annotations

import json
import os

import pytest

from pgaccel.errors import ServerError
from pgaccel.metrics.cpucost import COUNTERS, count, run_cachegrind, transactions_sql

from helpers import pgaccel

pytestmark = pytest.mark.slow           # valgrind, perf and servers


def _script(path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_cachegrind_runs_the_backend_with_its_settings_and_input(tmp_path):
    """A script in the backend's place, under the same valgrind command, records the
    arguments and the input it was given."""
    out = tmp_path / "seen"
    backend = _script(tmp_path / "postgres", f'printf "%s\\n" "$@" > {out}.argv\n'
                                            f"cat > {out}.stdin\n"
                                            f'echo "$LC_ALL $MARK" > {out}.env\n')
    sql = transactions_sql("select-only", 3, 1)
    # the keyword arguments that run it as the server's OS user (here: its environment)
    env = {"PATH": os.environ["PATH"], "LC_ALL": "C", "MARK": "as-the-server-user"}
    counts = run_cachegrind(backend, "/data/dir", "bench", sql,
                            {"work_mem": "4MB", "jit": "off"}, {"env": env})
    assert (tmp_path / "seen.argv").read_text().split("\n")[:-1] == [
        "--single", "-D", "/data/dir", "-c", "work_mem=4MB", "-c", "jit=off", "bench"]
    assert (tmp_path / "seen.stdin").read_text() == sql
    assert (tmp_path / "seen.env").read_text() == "C as-the-server-user\n"
    assert set(counts) == set(COUNTERS) and counts["instructions"] > 10_000
    assert counts["branches"] > counts["mispredicts"] > 0


def test_cachegrind_failures_say_which(tmp_path):
    """The backend's own last words (valgrind's summary, which follows them on stderr, left
    out), and the first failed statement; each cut to a paragraph's length."""
    dead = _script(tmp_path / "dead", "echo 'LOG:  starting' >&2\n"
                   "echo 'FATAL:  data directory \"/data/dir\" does not exist' >&2\nexit 3\n")
    with pytest.raises(ServerError) as e:
        run_cachegrind(dead, "/data/dir", "bench", "", {}, {})
    assert e.value.message == ('The profiled backend failed (exit 3): LOG:  starting '
                               'FATAL:  data directory "/data/dir" does not exist')
    assert e.value.hint == ("Check the settings; `postgres --single` must start on the data "
                            "directory.")
    # the last three lines of the backend's, at most 400 characters of them
    long = _script(tmp_path / "long", "".join(f"echo {c * 300} >&2\n" for c in "abcd")
                   + "exit 1\n")
    with pytest.raises(ServerError) as e:
        run_cachegrind(long, "/data/dir", "bench", "", {}, {})
    assert e.value.message == ("The profiled backend failed (exit 1): " + "b" * 300 + " "
                               + "c" * 99)
    failing = _script(tmp_path / "failing",
                      "cat > /dev/null\necho 'backend> ERROR:  relation \"pgbench_accounts\" "
                      "does not exist'\necho 'backend> ERROR:  " + "y" * 400 + "'\n")
    with pytest.raises(ServerError) as e:
        run_cachegrind(failing, "/data/dir", "bench", "SELECT 1;\n", {}, {})
    assert e.value.message == ('The profiled transactions failed: backend> ERROR:  relation '
                               '"pgbench_accounts" does not exist')
    assert e.value.hint == "The data must be prepared first (pgbench -i)."
    first_long = _script(tmp_path / "first_long", "cat > /dev/null\n"
                         "echo '  backend> ERROR:  " + "z" * 400 + "  '\n")
    with pytest.raises(ServerError) as e:
        run_cachegrind(first_long, "/data/dir", "bench", "SELECT 1;\n", {}, {})
    assert e.value.message == ("The profiled transactions failed: backend> ERROR:  "
                               + "z" * (300 - len("backend> ERROR:  ")))


def test_count_is_the_cost_of_one_more_transaction(tmp_path):
    """A backend that reads its input line by line costs about the same per line whichever
    runs are compared: count's N and 2N against this test's own runs of 0 and 3N lines."""
    reader = _script(tmp_path / "reader", "while read -r line; do :; done\n")
    n = 40
    c = count(reader, "/d", "bench", "select-only", n, 1, {}, {})
    assert c.transactions == n
    zero = run_cachegrind(reader, "/d", "bench", "", {}, {})
    three = run_cachegrind(reader, "/d", "bench", transactions_sql("select-only", 3 * n, 1),
                           {}, {})
    per_line = (three["instructions"] - zero["instructions"]) / (3 * n)
    assert c.instructions == pytest.approx(per_line, rel=0.02)
    assert c.instructions > 1000


def _count(*args: str, n: int = 200, out: str = "") -> dict:
    extra = ("-o", out) if out else ()
    if "--live-seconds" not in args:
        args = (*args, "--live-seconds", "0")
    r = pgaccel("profile", "-n", str(n), "--scale", "1", "--json", *extra, *args, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    return json.loads(r.stdout)


def test_real_counts_repeat_and_see_more_work(tmp_path):
    """Cachegrind's counts of the same config agree within 1%, and plans that do more work (no
    index scans, tpcb-like) count more instructions.  It takes long (about 43 s on a 2-core VM:
    four `pgaccel profile` runs, each a throwaway cluster with scale-1 data and a single-user
    backend under valgrind's cachegrind for 200 transactions, 10 for the one without index
    scans)."""
    a, b = _count(out=str(tmp_path / "a")), _count(out=str(tmp_path / "b"))
    assert a["live"] is None and not (tmp_path / "a" / "flamegraph.svg").exists()
    assert json.loads((tmp_path / "a" / "profile.json").read_text())["per_transaction"] == \
        a["per_transaction"]
    ia, ib = a["per_transaction"]["instructions"], b["per_transaction"]["instructions"]
    assert ia > 10000
    assert abs(ia - ib) / ia < 0.01                      # deterministic, unlike timing
    # without index scans each lookup reads the table: many times the instructions
    slow = _count("--set", "enable_indexscan=off", "--set", "enable_bitmapscan=off", n=10,
                  out=str(tmp_path / "slow"))
    assert slow["settings"] == {"enable_indexscan": "off", "enable_bitmapscan": "off"}
    assert slow["per_transaction"]["instructions"] > 5 * ia
    w = _count("-w", "tpcb-like", out=str(tmp_path / "w"))["per_transaction"]
    assert w["instructions"] > ia and w["branches"] > 0


def test_bad_set_is_a_usage_error():
    r = pgaccel("profile", "--set", "shared_buffers")
    assert r.returncode == 2 and "NAME=VALUE" in r.stderr and "Traceback" not in r.stderr


def test_live_window_counts_every_backend_and_draws_the_flame_graph(tmp_path):
    """perf attached to the postmaster sees the backends pgbench's clients get: CPU time and
    one context switch or more per transaction (a client round trip), call stacks through
    PostgresMain, and an SVG flame graph that parses."""
    import xml.etree.ElementTree as ET
    from pgaccel.metrics.perfprof import HARDWARE_EVENTS
    d = _count("--live-seconds", "3", "-c", "2", n=20, out=str(tmp_path))
    live = d["live"]
    assert live["ops"] > 100 and live["samples"] > 50
    per = live["per_op"]
    assert 1 < per["cpu_us"] < 10000
    assert per["context-switches"] >= 0.5           # the backend sleeps between statements
    assert any("PostgresMain" in s for s in live["folded"])
    assert sum(live["objects"].values()) == live["samples"] and "postgres" in live["objects"]
    # hardware counters: either counted or listed as unavailable, never made up
    for e in HARDWARE_EVENTS:
        assert (live["counts"][e] is None) == (e in live["unavailable"])
    root = ET.fromstring((tmp_path / "flamegraph.svg").read_text())
    assert root.tag.endswith("svg") and len(root.findall(".//{*}rect")) > 10
