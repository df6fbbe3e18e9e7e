"""capture/serverlog.py: statements and their parameter values from the three log formats
PostgreSQL writes: bound statements with their DETAIL's parameters, simple-protocol ones
(values inline) with none (by hand)."""

from __future__ import annotations

import csv
import io
import json

from pgaccel.capture.serverlog import detect, executions, parse_parameters

STDERR = """\
2026-11-26 11:00:00.123 UTC [123] LOG:  duration: 0.020 ms  parse <unnamed>: SELECT abalance FROM pgbench_accounts WHERE aid = $1
2026-11-26 11:00:00.123 UTC [123] LOG:  duration: 0.030 ms  bind <unnamed>: SELECT abalance FROM pgbench_accounts WHERE aid = $1
2026-11-26 11:00:00.123 UTC [123] DETAIL:  parameters: $1 = '4711'
2026-11-26 11:00:00.123 UTC [123] LOG:  duration: 0.120 ms  execute <unnamed>: SELECT abalance FROM pgbench_accounts WHERE aid = $1
2026-11-26 11:00:00.123 UTC [123] DETAIL:  parameters: $1 = '4711'
2026-11-26 11:00:00.124 UTC [123] LOG:  duration: 0.050 ms  statement: SELECT 1 WHERE 2 = 2
2026-11-26 11:00:00.125 UTC [124] LOG:  duration: 1.500 ms  execute P0_1: UPDATE t
\tSET v = $1
\tWHERE id = $2
2026-11-26 11:00:00.125 UTC [124] DETAIL:  parameters: $1 = 'it''s, a, b', $2 = '7'
2026-11-26 11:00:00.126 UTC [124] LOG:  duration: 0.100 ms  execute P0_1: UPDATE t
\tSET v = $1
\tWHERE id = $2
2026-11-26 11:00:00.126 UTC [124] DETAIL:  parameters: $1 = NULL, $2 = '8'
"""


def _csv(rows):
    out = io.StringIO()
    w = csv.writer(out)
    for msg, detail in rows:
        w.writerow(["2026-11-26 11:00:00.123 UTC", "postgres", "shop", "123", "[local]",
                    "x", "1", "SELECT", "2026-11-26 11:00:00 UTC", "3/4", "0", "LOG",
                    "00000", msg, detail, "", "", "", "", "", "", "", "client backend"])
    return out.getvalue()


def test_parameters_with_quotes_commas_and_null():
    assert parse_parameters("$1 = '4711', $2 = NULL, $3 = 'it''s, a'") == \
        {1: "4711", 2: None, 3: "it's, a"}


def test_stderr_executions_with_continuation_lines_and_without_parse_or_bind():
    # parse and bind lines are not executions; a simple-protocol statement is, with none
    got = list(executions(STDERR))
    assert [(" ".join(q.split()), p) for q, p in got] == [
        ("SELECT abalance FROM pgbench_accounts WHERE aid = $1", {1: "4711"}),
        ("SELECT 1 WHERE 2 = 2", {}),
        ("UPDATE t SET v = $1 WHERE id = $2", {1: "it's, a, b", 2: "7"}),
        ("UPDATE t SET v = $1 WHERE id = $2", {1: None, 2: "8"})]
    assert detect(STDERR) == "stderr"


def test_csvlog_and_jsonlog_give_the_same():
    rows = [("duration: 0.120 ms  execute <unnamed>: SELECT a FROM t WHERE id = $1",
             "parameters: $1 = '42'"),
            ("duration: 0.020 ms  statement: BEGIN", "")]
    text = _csv(rows)
    assert detect(text) == "csvlog"
    want = [("SELECT a FROM t WHERE id = $1", {1: "42"}), ("BEGIN", {})]
    assert list(executions(text)) == want
    js = "\n".join(json.dumps({"timestamp": "x", "message": m, "detail": d} if d else
                              {"timestamp": "x", "message": m}) for m, d in rows)
    assert detect(js) == "jsonlog"
    assert list(executions(js)) == want
    assert list(executions(text, "csvlog")) == want and list(executions(js, "jsonlog")) == want


def test_a_value_with_a_newline_and_a_tuple_cut_short():
    text = ("2026-11-26 11:00:00.125 UTC [124] LOG:  duration: 1.5 ms  execute P0_1: "
            "UPDATE t SET v = $1 WHERE id = $2\n"
            "2026-11-26 11:00:00.125 UTC [124] DETAIL:  parameters: $1 = 'two\n"
            "\tlines', $2 = '7'\n"
            "2026-11-26 11:00:00.126 UTC [125] LOG:  duration: 1.5 ms  execute P0_1: "
            "UPDATE t SET v = $1 WHERE id = $2\n"
            "2026-11-26 11:00:00.126 UTC [125] DETAIL:  parameters: $1 = 'x', $3 = 'y'\n")
    got = list(executions(text))
    assert got == [("UPDATE t SET v = $1 WHERE id = $2", {1: "two\nlines", 2: "7"}),
                   ("UPDATE t SET v = $1 WHERE id = $2", {1: "x", 3: "y"})]


SIMPLE = """\
2026-11-26 11:00:01.000 UTC [200] LOG:  duration: 0.210 ms  statement: SELECT "users"."id" FROM "users" WHERE "users"."email" = 'it''s@x.org'
\tLIMIT 21
2026-11-26 11:00:01.001 UTC [200] LOG:  duration: 0.050 ms  statement: SELECT * FROM e WHERE created_at > now() - interval '30 days'
2026-11-26 11:00:01.002 UTC [200] LOG:  statement: SELECT 'no duration'
2026-11-26 11:00:01.003 UTC [200] LOG:  connection authorized: user=app database=shop
2026-11-26 11:00:01.004 UTC [200] ERROR:  relation "nope" does not exist
2026-11-26 11:00:01.004 UTC [200] STATEMENT:  SELECT * FROM nope
2026-11-26 11:00:01.005 UTC [200] LOG:  duration: 0.100 ms  execute <unnamed>: SELECT * FROM t WHERE id = $1
2026-11-26 11:00:01.005 UTC [200] DETAIL:  parameters: $1 = '9'
2026-11-26 11:00:01.006 UTC [200] LOG:  duration: 0.080 ms  execute S_1: SELECT now()
"""


def test_simple_protocol_statements_come_with_their_literals_and_no_parameters():
    got = list(executions(SIMPLE))
    assert got == [
        ('SELECT "users"."id" FROM "users" WHERE "users"."email" = \'it\'\'s@x.org\'\nLIMIT 21',
         {}),
        ("SELECT * FROM e WHERE created_at > now() - interval '30 days'", {}),
        ("SELECT * FROM t WHERE id = $1", {1: "9"}),
        ("SELECT now()", {})]
    # the same from csvlog: an execution's DETAIL is its own column
    text = _csv([("duration: 0.210 ms  statement: SELECT * FROM e WHERE k = 'x'", ""),
                 ("duration: 0.100 ms  execute <unnamed>: SELECT * FROM t WHERE id = $1",
                  "parameters: $1 = '9'"),
                 ("connection received: host=[local]", "")])
    assert list(executions(text)) == [("SELECT * FROM e WHERE k = 'x'", {}),
                                      ("SELECT * FROM t WHERE id = $1", {1: "9"})]
