"""`pgaccel profile`: cachegrind's summary parsed (a real valgrind 3.19 summary), the cost of
one transaction from runs of N and 2N, and the real thing: the same config counted twice
agrees within 1%, and a plan that does more work counts more instructions."""

from __future__ import annotations

import json

import pytest

from pgaccel.errors import ServerError
from pgaccel.metrics.cpucost import parse_cachegrind, per_transaction, transactions_sql

from helpers import pgaccel

# valgrind --tool=cachegrind --cache-sim=yes --branch-sim=yes /bin/true, here
SUMMARY = """\
--20822-- warning: simulated LL cache: line_size 64  assoc 2  total_size 536,870,912
==20822== I   refs:      129,833
==20822== I1  misses:      1,091
==20822== LLi misses:      1,072
==20822== I1  miss rate:    0.84%
==20822== LLi miss rate:    0.83%
==20822==
==20822== D   refs:       40,067  (29,803 rd   + 10,264 wr)
==20822== D1  misses:      1,494  ( 1,157 rd   +    337 wr)
==20822== LLd misses:      1,331  ( 1,019 rd   +    312 wr)
==20822== D1  miss rate:     3.7% (   3.9%     +    3.3%  )
==20822== LL refs:         2,585  ( 2,248 rd   +    337 wr)
==20822== LL misses:       2,403  ( 2,091 rd   +    312 wr)
==20822== Branches:       26,228  (25,949 cond +    279 ind)
==20822== Mispredicts:     3,359  ( 3,209 cond +    150 ind)
==20822== Mispred rate:     12.8% (  12.4%     +   53.8%   )
"""


def test_parse_the_summary():
    assert parse_cachegrind(SUMMARY) == {
        "instructions": 129833, "i1_misses": 1091, "lli_misses": 1072, "data_refs": 40067,
        "d1_misses": 1494, "lld_misses": 1331, "branches": 26228, "mispredicts": 3359}
    assert parse_cachegrind("no summary here") == {}


def test_per_transaction_is_the_difference_over_n():
    small = parse_cachegrind(SUMMARY)
    big = {k: v + 1000 * 7 for k, v in small.items()}
    big["lli_misses"] = small["lli_misses"] - 3            # a warm run: clamped to zero
    c = per_transaction(small, big, 1000)
    assert c.instructions == 7.0 and c.branches == 7.0 and c.lli_misses == 0.0
    assert c.mispredict_rate == 1.0
    with pytest.raises(ServerError, match="lacks i1_misses.*branches, mispredicts"):
        per_transaction({"instructions": 1}, {"instructions": 2}, 1)


def test_the_n_run_is_a_prefix_of_the_2n_run():
    for w in ("select-only", "tpcb-like"):
        a, b = transactions_sql(w, 50, 3), transactions_sql(w, 100, 3)
        assert b.startswith(a) and len(b.splitlines()) == 100
    assert "aid = " in transactions_sql("select-only", 1, 1)
    with pytest.raises(ValueError, match="no profile script"):
        transactions_sql("insert-benchmark", 1, 1)


def _count(*args: str, n: int = 200, out: str = "") -> dict:
    extra = ("-o", out) if out else ()
    if "--live-seconds" not in args:
        args = (*args, "--live-seconds", "0")
    r = pgaccel("profile", "-n", str(n), "--scale", "1", "--json", *extra, *args, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    return json.loads(r.stdout)


def test_real_counts_repeat_and_see_more_work(tmp_path):
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
