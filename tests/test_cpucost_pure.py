"""`pgaccel profile`'s arithmetic without valgrind (metrics/cpucost.py): cachegrind's summary
parsed (real valgrind 3.19 summaries), the cost of one transaction from runs of N and 2N
worked out by hand, and the transactions fed to the backend.  The runs under valgrind are
in tests/test_profile.py."""

from __future__ import annotations

import re

import pytest

from pgaccel.errors import NotFound, ServerError
from pgaccel.metrics.cpucost import (COUNTERS, CpuCost, parse_cachegrind, per_transaction,
                                     transactions_sql, valgrind)

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
PARSED = {"instructions": 129833, "i1_misses": 1091, "lli_misses": 1072, "data_refs": 40067,
          "d1_misses": 1494, "lld_misses": 1331, "branches": 26228, "mispredicts": 3359}


def test_parse_the_summary():
    assert parse_cachegrind(SUMMARY) == PARSED
    assert parse_cachegrind("no summary here") == {}


def test_parse_a_billion_and_only_the_counters_asked_for():
    """Thousands separators, the program's own stderr in between, a summary without the
    cache and branch simulation (only instructions), and the lines that look alike but are
    rates or the combined LL line."""
    text = "\n".join([
        "I   refs:      5",                                 # the program's, no ==PID==
        "==7== I   refs:      1,234,567,890",
        "==7== LL refs:         2,585  ( 2,248 rd   +    337 wr)",
        "==7== LL misses:       2,403  ( 2,091 rd   +    312 wr)",
        "==7== I1  miss rate:    0.84%",
        "==7== Mispred rate:     12.8% (  12.4%     +   53.8%   )",
        "==7== Branches:       26,228  (25,949 cond +    279 ind)"])
    assert parse_cachegrind(text) == {"instructions": 1_234_567_890, "branches": 26228}
    # --cache-sim=no: instructions alone, valgrind 3.19 here
    assert parse_cachegrind("==16988== \n==16988== I   refs:      127,325\n") == {
        "instructions": 127325}


def test_per_transaction_by_hand():
    """Runs of 3 and 6 transactions: each counter grows by a different amount, so that a
    counter taken for another, or a division by 2N or by nothing, shows."""
    small = dict(PARSED)
    grow = {"instructions": 120_000, "i1_misses": 21, "lli_misses": 10, "data_refs": 45_000,
            "d1_misses": 300, "lld_misses": -4, "branches": 27_000, "mispredicts": 1350}
    big = {k: small[k] + grow[k] for k in COUNTERS}
    c = per_transaction(small, big, 3)
    assert c == CpuCost(transactions=3, instructions=40_000.0, i1_misses=7.0,
                        lli_misses=pytest.approx(10 / 3), data_refs=15_000.0, d1_misses=100.0,
                        lld_misses=0.0,           # a warm run's last-level misses: not below 0
                        branches=9000.0, mispredicts=450.0)
    assert c.mispredict_rate == pytest.approx(0.05)         # 450 of 9000
    assert c.to_dict() == {"transactions": 3, "instructions": 40_000.0, "i1_misses": 7.0,
                           "lli_misses": c.lli_misses, "data_refs": 15_000.0,
                           "d1_misses": 100.0, "lld_misses": 0.0, "branches": 9000.0,
                           "mispredicts": 450.0}
    assert per_transaction(small, small, 5).instructions == 0.0
    assert CpuCost(1, *(0.0,) * 8).mispredict_rate == 0.0  # no branch: no rate


def test_per_transaction_names_every_counter_either_run_lacks():
    with pytest.raises(ServerError) as e:
        per_transaction({"instructions": 1}, {"instructions": 2}, 1)
    assert e.value.message == ("cachegrind's summary lacks i1_misses, lli_misses, data_refs, "
                               "d1_misses, lld_misses, branches, mispredicts.")
    assert e.value.hint == "Check that valgrind ran with --cache-sim=yes --branch-sim=yes."
    no_branch = {k: v for k, v in PARSED.items() if k != "branches"}
    for small, big in ((PARSED, no_branch), (no_branch, PARSED)):
        with pytest.raises(ServerError) as e:
            per_transaction(small, big, 1)
        assert e.value.message == "cachegrind's summary lacks branches."


def test_select_only_transactions():
    # seed 1, scale 2: 200,000 accounts (149214 > 100,000: the scale counts)
    assert transactions_sql("select-only", 3, 2) == (
        "SELECT abalance FROM pgbench_accounts WHERE aid = 35223;\n"
        "SELECT abalance FROM pgbench_accounts WHERE aid = 149214;\n"
        "SELECT abalance FROM pgbench_accounts WHERE aid = 16544;\n")
    assert transactions_sql("select-only", 3, 2, seed=1) == transactions_sql("select-only", 3, 2)
    assert transactions_sql("select-only", 3, 2, seed=2) != transactions_sql("select-only", 3, 2)


def test_tpcb_like_transactions_are_pgbenchs_statements():
    one = transactions_sql("tpcb-like", 1, 3, seed=7)
    aid, tid, bid, delta = 169782, 5, 2, -4209              # seed 7's draws
    assert one == (
        f"BEGIN; UPDATE pgbench_accounts SET abalance = abalance + {delta} WHERE aid = {aid}; "
        f"SELECT abalance FROM pgbench_accounts WHERE aid = {aid}; "
        f"UPDATE pgbench_tellers SET tbalance = tbalance + {delta} WHERE tid = {tid}; "
        f"UPDATE pgbench_branches SET bbalance = bbalance + {delta} WHERE bid = {bid}; "
        f"INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) "
        f"VALUES ({tid}, {bid}, {aid}, {delta}, CURRENT_TIMESTAMP); END;\n")


def test_tpcb_like_draws_cover_pgbenchs_ranges():
    """aid in 1..100,000 x scale, tid in 1..10 x scale, bid in 1..scale, delta in
    -5000..5000, as pgbench's built-in script draws them."""
    def draws(text, pattern):
        return [int(x) for x in re.findall(pattern, text)]
    s = transactions_sql("tpcb-like", 4000, 1, seed=280)  # a seed that draws the extremes
    assert len(s.splitlines()) == 4000 and s.endswith("END;\n")
    aids = draws(s, r"WHERE aid = (\d+); SELECT")
    assert min(aids) == 1 and 99_980 < max(aids) <= 100_000
    assert set(draws(s, r"WHERE tid = (\d+);")) == set(range(1, 11))
    assert set(draws(s, r"WHERE bid = (\d+);")) == {1}
    deltas = draws(s, r"abalance \+ (-?\d+) WHERE")
    assert (min(deltas), max(deltas)) == (-5000, 5000)
    s4 = transactions_sql("tpcb-like", 3000, 4)
    assert set(draws(s4, r"WHERE bid = (\d+);")) == {1, 2, 3, 4}
    assert set(draws(s4, r"WHERE tid = (\d+);")) == set(range(1, 41))
    assert max(draws(s4, r"WHERE aid = (\d+); SELECT")) > 300_000


def test_the_n_run_is_a_prefix_of_the_2n_run():
    for w in ("select-only", "tpcb-like"):
        a, b = transactions_sql(w, 50, 3), transactions_sql(w, 100, 3)
        assert b.startswith(a) and len(b.splitlines()) == 100
    with pytest.raises(ValueError, match="no profile script for 'insert-benchmark'; one of "
                                         "select-only, tpcb-like"):
        transactions_sql("insert-benchmark", 1, 1)


def test_without_valgrind_the_profile_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))               # an empty directory
    with pytest.raises(NotFound) as e:
        valgrind()
    assert e.value.message == ("valgrind is not installed; the CPU profile runs the backend "
                               "under cachegrind.")
    assert e.value.hint == "Run `apt-get install valgrind` (or ./install.sh)."
    exe = tmp_path / "valgrind"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert valgrind() == str(exe)
