"""capture/serverlog.py: statements and their parameter values from the three log formats
PostgreSQL writes (by hand), and the sample of tuples a bundle keeps."""

from __future__ import annotations

import csv
import io
import json

import pytest

from pgaccel.capture.replay import normalize
from pgaccel.capture.serverlog import detect, executions, parse_parameters, sample_values

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
    got = list(executions(STDERR))
    assert [(" ".join(q.split()), p) for q, p in got] == [
        ("SELECT abalance FROM pgbench_accounts WHERE aid = $1", {1: "4711"}),
        ("UPDATE t SET v = $1 WHERE id = $2", {1: "it's, a, b", 2: "7"}),
        ("UPDATE t SET v = $1 WHERE id = $2", {1: None, 2: "8"})]
    assert detect(STDERR) == "stderr"


def test_csvlog_and_jsonlog_give_the_same():
    rows = [("duration: 0.120 ms  execute <unnamed>: SELECT a FROM t WHERE id = $1",
             "parameters: $1 = '42'"),
            ("duration: 0.020 ms  statement: BEGIN", "")]
    text = _csv(rows)
    assert detect(text) == "csvlog"
    assert list(executions(text)) == [("SELECT a FROM t WHERE id = $1", {1: "42"})]
    js = "\n".join(json.dumps({"timestamp": "x", "message": m, "detail": d} if d else
                              {"timestamp": "x", "message": m}) for m, d in rows)
    assert detect(js) == "jsonlog"
    assert list(executions(js)) == [("SELECT a FROM t WHERE id = $1", {1: "42"})]


def test_the_sample_keeps_known_statements_drops_nulls_and_stays_under_its_limit():
    ex = [("SELECT a FROM t WHERE id = $1", {1: str(i)}) for i in range(1000)]
    ex += [("SELECT b FROM u WHERE id = $1", {1: None}),
           ("SELECT z FROM other WHERE id = $1", {1: "1"})]
    keys = [normalize("select a from t where id = $1"), normalize("SELECT b FROM u WHERE id = $1")]
    got = sample_values(ex, keys, normalize, limit=100)
    assert list(got) == [keys[0]]
    assert len(got[keys[0]]) == 100 and len({v[0] for v in got[keys[0]]}) == 100
    # a uniform sample: not just the first 100
    assert max(int(v[0]) for v in got[keys[0]]) > 500


def test_a_value_with_a_newline_and_a_tuple_cut_short():
    text = ("2026-11-26 11:00:00.125 UTC [124] LOG:  duration: 1.5 ms  execute P0_1: "
            "UPDATE t SET v = $1 WHERE id = $2\n"
            "2026-11-26 11:00:00.125 UTC [124] DETAIL:  parameters: $1 = 'two\n"
            "\tlines', $2 = '7'\n"
            "2026-11-26 11:00:00.126 UTC [125] LOG:  duration: 1.5 ms  execute P0_1: "
            "UPDATE t SET v = $1 WHERE id = $2\n"
            "2026-11-26 11:00:00.126 UTC [125] DETAIL:  parameters: $1 = 'x', $3 = 'y'\n")
    got = list(executions(text))
    assert got[0][1] == {1: "two\nlines", 2: "7"}
    q = normalize("UPDATE t SET v = $1 WHERE id = $2")
    assert sample_values(got, [q], normalize) == {q: [["two\nlines", "7"]]}
