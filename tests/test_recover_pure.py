"""capture/recover.py: the constants pg_stat_statements normalised away, recovered from
texts that ran (a log's executions with their bound parameters, samples of
pg_stat_activity with literals inline), and the whole tuples kept for --with-values only
(by hand)."""

from __future__ import annotations

import pytest

from pgaccel.capture.recover import MAX_CONSTANTS, Recovery, is_shape_value
from pgaccel.capture.statements import UTILITY, Statement


def _st(qid, q):
    return Statement(qid, q, 10, 1.0, 0.1, 0.0, 10)


STMTS = [
    _st(11, 'SELECT "users"."id" FROM "users" WHERE "users"."email" = $1 '
            'ORDER BY "users"."id" LIMIT $2'),
    _st(12, "SELECT * FROM events WHERE kind = $1 AND created_at > now() - interval $2"),
    _st(13, "SELECT * FROM users WHERE id IN ($1 /*, ... */)"),
    _st(14, "SELECT nextval($1)"),
    _st(15, "SELECT date_trunc($1, created_at), count(*) FROM events WHERE "
            "created_at > now() - $2 * interval '1 hour' GROUP BY 1"),
    _st(0, UTILITY),
]


def test_constants_are_recovered_for_shape_parameters_and_never_for_columns():
    r = Recovery(STMTS)
    # pg_stat_activity: literals inline
    assert r.add('SELECT "users"."id" FROM "users" WHERE "users"."email" = \'a@x.org\' '
                 'ORDER BY "users"."id" LIMIT 20')
    assert r.add('select "users"."id" from "users" where "users"."email" = \'b@x.org\' '
                 'order by "users"."id" limit 20')
    # a log's execution: bound parameters, a LIMIT the application inlined
    assert r.add('SELECT "users"."id" FROM "users" WHERE "users"."email" = $1 '
                 'ORDER BY "users"."id" LIMIT 50', {1: "c@x.org"})
    assert r.add("SELECT * FROM events WHERE kind = 'buy' AND created_at > "
                 "now() - interval '30 days'")
    assert r.add("SELECT * FROM events WHERE kind = $1 AND created_at > now() - interval $2",
                 {1: "view", 2: "7 days"})
    assert r.add("SELECT * FROM users WHERE id IN (1, 2, 3, 4, 5)")
    assert r.add("SELECT nextval('stock_move_seq')")
    assert r.add("SELECT date_trunc('hour', created_at), count(*) FROM events WHERE "
                 "created_at > now() - 336 * interval '1 hour' GROUP BY 1")
    assert (r.matched, r.unmatched) == (8, 0)

    # the LIMIT (most seen first), the interval, the sequence, date_trunc's field and a
    # number in arithmetic: the statement's shape; the emails, 'buy' and the ids: data
    assert r.constants_of(11) == {"2": [[20, 2], [50, 1]]}
    assert r.constants_of(12) == {"2": [["30 days", 1], ["7 days", 1]]}
    assert r.constants_of(13) == {}
    assert r.constants_of(14) == {"1": [["stock_move_seq", 1]]}
    assert r.constants_of(15) == {"1": [["hour", 1]], "2": [[336, 1]]}
    assert r.constants_of(999) == {}

    # the whole tuples, the user's data: the caller writes them for --with-values only
    assert r.values() == {
        "11": [{"1": "a@x.org", "2": 20}, {"1": "b@x.org", "2": 20},
               {"1": "c@x.org", "2": 50}],
        "12": [{"1": "buy", "2": "30 days"}, {"1": "view", "2": "7 days"}],
        "13": [{"1": [1, 2, 3, 4, 5]}],
        "14": [{"1": "stock_move_seq"}],
        "15": [{"1": "hour", "2": 336}]}


def test_a_value_that_is_not_shaped_like_one_is_no_constant_but_stays_in_the_tuple():
    r = Recovery(STMTS)
    assert r.add('SELECT "users"."id" FROM "users" WHERE "users"."email" = \'z\' '
                 'ORDER BY "users"."id" LIMIT \'all of them\'')
    assert r.constants_of(11) == {}
    assert r.values() == {"11": [{"1": "z", "2": "all of them"}]}


def test_what_matches_no_captured_statement_is_counted_and_a_null_keeps_no_tuple():
    r = Recovery(STMTS)
    assert not r.add("SELECT * FROM nothing WHERE a = 1")            # another fingerprint
    assert not r.add("SELECT FROM WHERE")                            # unreadable
    assert not r.add("SET work_mem = '64MB'")                        # utility: not captured
    # the same fingerprint, but a constant pg_stat_statements kept differs: not aligned
    stmts = [_st(21, "SELECT * FROM t WHERE a = $1 AND b = 'x'")]
    r2 = Recovery(stmts)
    assert not r2.add("SELECT * FROM t WHERE a = 5 AND b = 'y'")
    assert r2.add("SELECT * FROM t WHERE a = 5 AND b = 'x'")
    assert (r.matched, r.unmatched, r2.matched, r2.unmatched) == (0, 3, 1, 1)
    # a bound parameter the log did not give: matched, its constants kept, no tuple
    r3 = Recovery(STMTS)
    assert r3.add('SELECT "users"."id" FROM "users" WHERE "users"."email" = $1 '
                  'ORDER BY "users"."id" LIMIT $2', {2: "20"})
    assert r3.constants_of(11) == {"2": [["20", 1]]}
    assert r3.values() == {}


def test_a_statement_without_parameters_matches_and_keeps_nothing():
    r = Recovery([_st(31, "SELECT count(*) FROM t")])
    assert r.add("select count(*) from t")
    assert r.matched == 1 and r.constants_of(31) == {}
    # (an empty tuple per execution, which a replay ignores: nothing to draw)
    assert all(t == {} for t in r.values().get("31", []))


def test_tuples_are_a_uniform_sample_under_the_limit_and_constants_the_most_frequent():
    r = Recovery(STMTS, limit=50, seed=3)
    for i in range(1000):
        r.add('SELECT "users"."id" FROM "users" WHERE "users"."email" = '
              f"'u{i}' ORDER BY \"users\".\"id\" LIMIT {i % 30}")
    got = r.values()["11"]
    assert len(got) == 50 and len({t["1"] for t in got}) == 50
    # reservoir sampling: not the first 50 seen
    assert max(int(t["1"][1:]) for t in got) > 500
    c = r.constants_of(11)["2"]
    assert len(c) == MAX_CONSTANTS == 20
    # 1000 = 30 * 33 + 10: 0..9 seen 34 times, the others 33
    assert [n for _, n in c] == [34] * 10 + [33] * 10
    assert {v for v, _ in c[:10]} == set(range(10))


@pytest.mark.parametrize("v, cast, want", [
    ("20", None, True), ("-3", None, True), ("1.5", None, True), (" 20 ", None, True),
    ("true", None, True), ("FALSE", None, True),
    ("30 days", None, True), ("1 hour", None, True), ("2 hours 30 minutes", None, True),
    ("@ 1 day ago", None, True), ("1 mon", None, True), ("3 weeks", None, True),
    ("2024-01-01", None, True), ("2024-01-01 10:00:00", None, True),
    ("2024-01-01T10:00:00+02", None, True), ("2024-01-01 10:00:00.123+00:00", None, True),
    ("2024-01-01 10:00:00Z", None, True),
    ("now", None, True), ("today", None, True), ("hour", None, True), ("HOUR", None, True),
    ("epoch", None, True), ("isodow", None, True),
    # the user's text, and what is not text
    ("alice@example.com", None, False), ("buy", None, False), ("", None, False),
    ("hours", None, False), ("1,000", None, False), ("0x10", None, False),
    (20, None, True), (-1.5, None, True), (True, None, False), (None, None, False),
    (["1", "2"], None, False), (20, "regclass", False),
    # a sequence's name where the parser says one goes (nextval)
    ("stock_move_seq", "regclass", True), ("public.stock_move_seq", "regclass", True),
    ('"Weird Seq"', "regclass", True), ("x; drop table t", "regclass", False),
    ("20", "regclass", False), ("stock_move_seq", None, False),
])
def test_is_shape_value(v, cast, want):
    assert is_shape_value(v, cast) is want


def test_a_logs_executions_feed_the_recovery_both_protocols():
    from pgaccel.capture.serverlog import executions
    log = (
        "2026-11-26 11:00:01.000 UTC [200] LOG:  duration: 0.210 ms  statement: "
        'SELECT "users"."id" FROM "users" WHERE "users"."email" = \'a@x.org\' '
        'ORDER BY "users"."id" LIMIT 21\n'
        "2026-11-26 11:00:01.001 UTC [201] LOG:  duration: 0.100 ms  execute <unnamed>: "
        'SELECT "users"."id" FROM "users" WHERE "users"."email" = $1 '
        'ORDER BY "users"."id" LIMIT $2\n'
        "2026-11-26 11:00:01.001 UTC [201] DETAIL:  parameters: $1 = 'b@x.org', $2 = '21'\n"
        "2026-11-26 11:00:01.002 UTC [201] LOG:  duration: 0.010 ms  statement: BEGIN\n")
    r = Recovery(STMTS)
    assert [r.add(q, p) for q, p in executions(log)] == [True, True, False]
    assert r.constants_of(11) == {"2": [[21, 2]]}
    assert r.values() == {"11": [{"1": "a@x.org", "2": 21}, {"1": "b@x.org", "2": "21"}]}
