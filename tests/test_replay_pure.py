"""capture/replay.py: each parameter bound to the column it meets, the pgbench script made of
a statement, weights in the captured proportions, and the fidelity check (by hand)."""

from __future__ import annotations

import pytest

from pgaccel.capture.replay import (Binding, Source, bindings, fidelity, normalize, resolve,
                                    script_for, tables_in, weights)
from pgaccel.capture.statements import Statement

COLS = {"pgbench_accounts": {"aid": "integer", "bid": "integer", "abalance": "integer",
                             "filler": "character"},
        "public.pgbench_accounts": {"aid": "integer"},
        "pgbench_history": {"tid": "integer", "bid": "integer", "aid": "integer",
                            "delta": "integer", "mtime": "timestamp without time zone"},
        "users": {"id": "bigint", "email": "text", "created": "date"},
        "orders": {"id": "bigint", "user_id": "bigint", "status": "text"}}


@pytest.mark.parametrize("query, want", [
    ("SELECT abalance FROM pgbench_accounts WHERE aid = $1", {1: Binding("aid")}),
    ("UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2",
     {1: Binding("abalance"), 2: Binding("aid")}),
    ("INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, "
     "CURRENT_TIMESTAMP)", {1: Binding("tid", "pgbench_history"),
                            2: Binding("bid", "pgbench_history"),
                            3: Binding("aid", "pgbench_history"),
                            4: Binding("delta", "pgbench_history")}),
    ("SELECT * FROM users u WHERE u.email LIKE $1 ORDER BY id LIMIT $2 OFFSET $3",
     {1: Binding("email", "u"), 2: Binding(constant=10), 3: Binding(constant=0)}),
    ("SELECT * FROM orders WHERE status IN ($1, $2) AND id BETWEEN $3 AND $4",
     {1: Binding("status"), 2: Binding("status"), 3: Binding("id"), 4: Binding("id")}),
    ("SELECT * FROM orders WHERE $1 < id", {1: Binding("id")}),
    ("SELECT $1::int + 1", {}),
])
def test_each_parameter_is_bound_to_what_it_meets(query, want):
    assert bindings(query) == want


def test_tables_and_aliases():
    q = "SELECT o.id FROM orders o JOIN users AS u ON u.id = o.user_id WHERE u.email = $1"
    assert tables_in(q) == {"orders": "orders", "o": "orders", "users": "users",
                            "u": "users"}
    assert tables_in("UPDATE public.pgbench_accounts SET x = 1") == \
        {"pgbench_accounts": "public.pgbench_accounts"}


def test_resolve_finds_the_table_of_each_column_and_says_what_it_cannot():
    q = "SELECT o.id FROM orders o JOIN users u ON u.id = o.user_id WHERE u.email = $1 " \
        "AND o.status = $2 AND o.total > $3 LIMIT $4"
    src, missing = resolve(q, COLS)
    assert src == {1: Source("users", "email", "text"),
                   2: Source("orders", "status", "text"), 4: 10}
    assert missing == [3]                          # orders has no column total
    src, missing = resolve("SELECT 1 FROM users WHERE id = $1 AND $2::int > 0", COLS)
    assert src == {1: Source("users", "id", "bigint")} and missing == [2]


def test_a_script_draws_integers_with_set_and_the_rest_from_a_sample():
    srcs = {1: Source("users", "id", "bigint", 1, 5000),
            2: Source("users", "email", "text"), 3: Source("users", "created", "date"),
            4: 10}
    s = script_for(3, "SELECT * FROM users WHERE id > $1 AND email = $2 AND created < $3 "
                   "LIMIT $4;", 7, srcs, "pgaccel_replay_s{number}_{index}",
                   {"pgaccel_replay_s3_0": 2500})
    assert s.text.splitlines() == [
        "\\set p1 random(1, 5000)",
        "\\set p4 10",
        "\\set r0 random(1, 2500)",
        "SELECT c0 AS p2, c1 AS p3 FROM pgaccel_replay_s3_0 WHERE i = :r0 \\gset",
        "SELECT * FROM users WHERE id > :p1 AND email = :p2 AND created < :p3 LIMIT :p4;"]
    assert s.lookups == {"pgaccel_replay_s3_0": ["email", "created"]}
    assert s.weight == 7


def test_weights_keep_the_proportions():
    assert weights([1337, 1337, 173]) == [469617, 469617, 60766]
    assert weights([10**9, 1]) == [1000000, 1]


def _st(q, calls, ms, qid=1):
    return Statement(qid, q, calls, ms, ms / calls, 0.0, calls)


def test_fidelity_passes_a_faithful_replay_and_names_a_statement_that_is_off():
    cap = [_st("SELECT a FROM t WHERE id = $1", 900, 100.0),
           _st("SELECT g, count(*) FROM t GROUP BY g", 100, 900.0, 2),
           _st("(utility statements)", 50, 5.0, 0)]
    good = [("SELECT a FROM t WHERE id = $1", 9100, 1000.0),
            ("select g,  count(*) from t group by g", 900, 8900.0),
            ("SELECT c0 AS p1 FROM pgaccel_replay_s0_0 WHERE i = $1", 9000, 50.0)]
    rows, problems = fidelity(cap, good)
    assert problems == []
    assert rows[0].captured_time == pytest.approx(0.9)
    assert rows[0].replayed_time == pytest.approx(8900 / 9900)
    assert rows[1].captured_calls == pytest.approx(0.9)
    # the report query runs at a third of its captured share of calls
    bad = [("SELECT a FROM t WHERE id = $1", 9700, 5000.0),
           ("SELECT g, count(*) FROM t GROUP BY g", 300, 5000.0)]
    rows, problems = fidelity(cap, bad)
    assert len(problems) == 1 and "GROUP BY g" in problems[0]
    assert "took 50% of the time" in problems[0] and "captured 90%" in problems[0]


def test_normalize_matches_parameters_and_spacing():
    assert normalize("SELECT  a FROM t\n WHERE id = $12") == "select a from t where id = ?"
    assert normalize("END;") == normalize("END") == "end"


def test_a_runs_fidelity_is_the_median_of_its_trials_and_counts_the_flagged_ones():
    from pgaccel.report.fidelity import FLAG, fidelity_of

    def trial(rep_time, flagged):
        return {"workload": "captured:/b", "metrics": {
            "fidelity": [{"query": "SELECT g", "captured_calls": 0.1, "captured_time": 0.9,
                          "replayed_calls": 0.1, "replayed_time": rep_time},
                         {"query": "SELECT a", "captured_calls": 0.9, "captured_time": 0.1,
                          "replayed_calls": 0.9, "replayed_time": 1 - rep_time}],
            "warnings": [f"{FLAG}: 'SELECT g' took 50% of the time"] if flagged else []}}
    (f,) = fidelity_of([trial(0.88, False), trial(0.5, True), trial(0.92, False),
                        {"workload": "tpcb-like", "metrics": {}}])
    assert (f.workload, f.trials, f.flagged) == ("captured:/b", 3, 1)
    assert [r["query"] for r in f.rows] == ["SELECT g", "SELECT a"]
    assert f.rows[0]["replayed_time"] == pytest.approx(0.88)         # the median
    assert f.line == ("captured:/b: the replay is not the captured mix in 1 of 3 trials: "
                      "'SELECT g' took 50% of the time.")
    (ok,) = fidelity_of([trial(0.9, False)])
    assert "ran the captured mix" in ok.line and "all 1 trials" in ok.line


def test_a_statement_keeps_its_lines_so_a_comment_ends_where_it_did():
    s = script_for(0, "SELECT a -- the note\nFROM t WHERE id = $1", 1,
                   {1: Source("t", "id", "integer", 1, 9)}, "x{number}_{index}", {})
    assert s.text.splitlines()[-2:] == ["SELECT a -- the note", "FROM t WHERE id = :p1;"]


def test_fidelity_counts_only_what_the_replay_runs_and_merges_roles():
    cap = [_st("SELECT x FROM big WHERE blob ~ $1", 10, 600.0, 1),       # not replayed
           _st("SELECT a FROM t WHERE id = $1", 300, 200.0, 2),
           _st("SELECT a FROM t WHERE id = $1", 300, 100.0, 3),          # another role
           _st("SELECT b FROM u WHERE id = $1", 400, 100.0, 4)]
    seen = [("SELECT a FROM t WHERE id = $1", 600, 750.0),
            ("SELECT b FROM u WHERE id = $1", 400, 250.0)]
    rows, problems = fidelity(cap, seen, included=["SELECT a FROM t WHERE id = $1",
                                                   "SELECT b FROM u WHERE id = $1"])
    assert problems == []
    assert [(r.captured_calls, r.captured_time) for r in rows] == [(0.6, 0.75), (0.4, 0.25)]
    _, problems = fidelity(cap, seen)          # the left-out statement counted: flagged
    assert problems and "blob" in problems[0]


def test_two_long_statements_with_one_prefix_stay_two_rows():
    from pgaccel.report.fidelity import fidelity_of
    head = "SELECT " + ", ".join(f"c{i}" for i in range(60))
    rows = [{"query": (head + " FROM a")[:200], "key": "k1", "captured_calls": 0.5,
             "captured_time": 0.5, "replayed_calls": 0.5, "replayed_time": 0.5},
            {"query": (head + " FROM b")[:200], "key": "k2", "captured_calls": 0.5,
             "captured_time": 0.5, "replayed_calls": 0.5, "replayed_time": 0.5}]
    (f,) = fidelity_of([{"workload": "captured:/b", "metrics": {"fidelity": rows}}])
    assert len(f.rows) == 2
