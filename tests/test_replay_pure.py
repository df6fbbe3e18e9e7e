"""capture/replay.py: each captured statement's plan (where each parameter's value comes
from), its pgbench script, the pre-drawn parameter rows, the share of the capture a replay
runs, the fidelity check and the calibration's cost flags (by hand)."""

from __future__ import annotations

import pytest

from pgaccel.capture.replay import (ANY_DEFAULT, OTHER, Catalog, Draw, Left, StatementPlan,
                                    _guess, column_casts, constant_sql, cost_flags, coverage,
                                    draw_rows, fidelity, inline_constants, literal,
                                    plan_statement, samples_needed, script_text, weights)
from pgaccel.capture.sqlshape import Param, fingerprint
from pgaccel.capture.statements import TRANSACTION, UTILITY, Statement

SKIP_TAIL = ", and no value of it was captured (capture --log --with-values keeps them)"


def _catalog(tables, generated=(), unique=()):
    """As replay_build.catalog makes it: each table under its name and schema.name, types
    as format_type writes them."""
    cols, gen, uniq = {}, set(), set()
    for t, c in tables.items():
        for key in (t, f"public.{t}"):
            cols[key] = dict(c)
    for into, pairs in ((gen, generated), (uniq, unique)):
        for t, c in pairs:
            into |= {(t, c), (f"public.{t}", c)}
    return Catalog(cols, frozenset(gen), frozenset(uniq))


CAT = _catalog({
    "shop_customer": {"id": "bigint", "email": "character varying", "name": "character varying"},
    "customers": {"id": "integer", "name": "text", "region": "text"},
    "orders": {"id": "integer", "customer_id": "integer", "status": "text",
               "created_at": "timestamp with time zone", "total": "numeric"},
    "stock_move": {"id": "bigint", "product_id": "bigint", "qty": "integer",
                   "moved_at": "timestamp without time zone"},
    "events": {"id": "bigint", "account_id": "integer", "kind": "character varying",
               "created_at": "timestamp with time zone"},
    "kv": {"k": "text", "v": "integer"},
}, generated=[("shop_customer", "id"), ("customers", "id"), ("orders", "id"),
              ("events", "id")],
   unique=[("shop_customer", "id"), ("shop_customer", "email"), ("customers", "id"),
           ("orders", "id"), ("stock_move", "id"), ("events", "id"), ("kv", "k")])


def _st(q, calls=100, rows=100, ms=10.0, qid=1, sc=0.0, stt=0.0):
    return Statement(qid, q, calls, ms, ms / calls, 0.0, rows, sc, stt)


def col(table, column, typ, op):
    return Draw("column", table, column, typ, op)


def const(typ, values, why):
    return Draw("const", type=typ, values=tuple(values), why=why)


DJANGO_GET = ('SELECT "shop_customer"."id", "shop_customer"."email" FROM "shop_customer" '
              'WHERE "shop_customer"."id" = $1 LIMIT $2')
DJANGO_IN = ('SELECT "orders"."id" FROM "orders" WHERE "orders"."customer_id" IN ($1, $2, $3)'
             ' ORDER BY "orders"."created_at" DESC LIMIT $4 OFFSET $5')
DJANGO_INSERT = ('INSERT INTO "shop_customer" ("id", "email", "name") VALUES ($1, $2, $3) '
                 'RETURNING "shop_customer"."id"')
ORDERS_RANGE = ("SELECT o.id FROM orders o WHERE o.customer_id BETWEEN $1 AND $2 + $3 "
                "ORDER BY o.created_at DESC LIMIT $4")

# (query, types, constants, tuples, (calls, rows), draws, guesses)
PLANS = [
    # Django's get(): the pk from the rows, LIMIT 21 recovered
    (DJANGO_GET, {1: "bigint", 2: "bigint"}, {2: [("21", 40)]}, (), (100, 100),
     {1: col("shop_customer", "id", "bigint", "="),
      2: const("bigint", [("21", 40)], "captured")}, []),
    # IN (...) each from the column; LIMIT from the rows per call, OFFSET 0
    (DJANGO_IN, {n: "integer" for n in (1, 2, 3)} | {4: "bigint", 5: "bigint"}, None, (),
     (25, 250),
     {1: col("orders", "customer_id", "integer", "in"),
      2: col("orders", "customer_id", "integer", "in"),
      3: col("orders", "customer_id", "integer", "in"),
      4: const("bigint", [("10", 1)], "guess"), 5: const("bigint", [("0", 1)], "guess")},
     ["LIMIT $4 = 10 (the rows per call captured)", "OFFSET $5 = 0"]),
    # an identity column: DEFAULT; another unique one: beyond the largest
    (DJANGO_INSERT, {1: "bigint", 2: "character varying", 3: "character varying"}, None, (),
     (100, 100),
     {1: Draw("default", "shop_customer", "id", "bigint", "insert"),
      2: Draw("next", "shop_customer", "email", "character varying", "insert"),
      3: col("shop_customer", "name", "character varying", "insert")}, []),
    # Hibernate assigns ids itself: a unique key, not generated: beyond the largest
    ("insert into stock_move (moved_at,product_id,qty,id) values ($1,$2,$3,$4)",
     {1: "timestamp without time zone", 2: "bigint", 3: "integer", 4: "bigint"}, None, (),
     (100, 100),
     {1: col("stock_move", "moved_at", "timestamp without time zone", "insert"),
      2: col("stock_move", "product_id", "bigint", "insert"),
      3: col("stock_move", "qty", "integer", "insert"),
      4: Draw("next", "stock_move", "id", "bigint", "insert")}, []),
    # an upsert: its key from the rows (it is meant to conflict); a delta: 1
    ("INSERT INTO kv (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = kv.v + $3",
     {1: "text", 2: "integer", 3: "integer"}, None, (), (100, 100),
     {1: col("kv", "k", "text", "insert"), 2: col("kv", "v", "integer", "insert"),
      3: const("integer", [("1", 1)], "guess")},
     ["$3 = 1 (a number nothing captured)"]),
    # = any ($1): an array of the column's values
    ("select s1_0.product_id,sum(s1_0.qty) from stock_move s1_0 where "
     "s1_0.product_id = any ($1) group by s1_0.product_id", {1: "bigint[]"}, None, (),
     (100, 100), {1: col("stock_move", "product_id", "bigint[]", "any")}, []),
    # a number times an interval: the constants seen, by count; the kind from the rows
    ("SELECT date_trunc('hour', events.created_at), count(*) FROM events WHERE "
     "events.created_at > now() - $1 * interval '1 hour' AND events.kind = $2 GROUP BY 1",
     {1: "double precision", 2: "character varying"}, {1: [("336", 3), ("24", 1)]}, (),
     (100, 100),
     {1: const("double precision", [("336", 3), ("24", 1)], "captured"),
      2: col("events", "kind", "character varying", "=")}, []),
    # LIKE on text: a prefix (said); on a number: the value
    ("SELECT * FROM customers WHERE name LIKE $1", {1: "text"}, None, (), (100, 100),
     {1: col("customers", "name", "text", "like")}, ["LIKE $1: a prefix of name and '%'"]),
    ("SELECT * FROM customers WHERE id::text LIKE $1", {1: "text"}, None, (), (100, 100),
     {1: col("customers", "id", "text", "like")}, []),
    # no server type: the cast's, else the column's
    ("SELECT * FROM orders WHERE created_at > $1::timestamptz AND status = $2", {}, None, (),
     (100, 100),
     {1: col("orders", "created_at", "timestamptz", ">"),
      2: col("orders", "status", "text", "=")}, []),
    # schema-qualified: the catalog's schema.name
    ("SELECT * FROM public.orders o WHERE o.status = $1", {1: "text"}, None, (), (100, 100),
     {1: col("public.orders", "status", "text", "=")}, []),
    # captured lists (a squashed IN) are no constants
    ("SELECT * FROM orders LIMIT $1", {1: "bigint"}, {1: [(["1", "2"], 1), ("5", 2)]}, (),
     (100, 100), {1: const("bigint", [("5", 2)], "captured")}, []),
    # the guesses by type
    ("SELECT * FROM events WHERE created_at > now() - interval $1 AND created_at < $2 + $3",
     {1: "interval", 2: "timestamp with time zone", 3: "interval"}, None, (), (100, 100),
     {1: const("interval", [("1 day", 1)], "guess"),
      2: col("events", "created_at", "timestamp with time zone", "<"),
      3: const("interval", [("1 day", 1)], "guess")},
     ["$1 = interval '1 day'", "$3 = interval '1 day'"]),
]


@pytest.mark.parametrize("query, types, constants, tuples, cr, draws, guesses", PLANS,
                         ids=[p[0][:50] for p in PLANS])
def test_each_parameter_has_a_draw(query, types, constants, tuples, cr, draws, guesses):
    st = _st(query, calls=cr[0], rows=cr[1])
    plan = plan_statement(4, st, CAT, types, constants, tuples)
    assert plan.skipped is None
    assert plan.draws == draws
    assert plan.guesses == guesses
    assert (plan.number, plan.statement, plan.fingerprint) == (4, st, fingerprint(query))
    assert plan.writes is query.lstrip().lower().startswith("insert")
    assert plan.tuples == []


def test_captured_tuples_are_drawn_whole_where_every_one_has_the_parameter():
    q = "SELECT * FROM events WHERE kind = $1 AND id = $2 LIMIT $3"
    tuples = [{1: "buy", 2: "5", 3: "10"}, {1: "view", 2: "6", 3: "10"}, {}]
    plan = plan_statement(0, _st(q), CAT, {1: "text", 2: "bigint", 3: "bigint"}, None,
                          tuples)
    assert plan.tuples == tuples[:2]                 # an empty tuple is no tuple
    assert plan.draws == {1: Draw("tuple", type="text", op="="),
                          2: Draw("tuple", type="bigint", op="="),
                          3: Draw("tuple", type="bigint", op="limit")}
    assert plan.drawn == [1, 2, 3]
    # a tuple without $2 (a NULL): $2 from the rows, the rest from the tuples
    plan = plan_statement(0, _st(q), CAT, {1: "text", 2: "bigint", 3: "bigint"},
                          {3: [("10", 2)]}, [{1: "buy", 2: None, 3: "10"}, {1: "x", 2: "6",
                                                                          3: "10"}])
    assert plan.draws == {1: Draw("tuple", type="text", op="="),
                          2: col("events", "id", "bigint", "="),
                          3: Draw("tuple", type="bigint", op="limit")}


@pytest.mark.parametrize("query, types, why", [
    ("SELECT * FROM nosuch WHERE kind = $1", {1: "text"},
     "$1 (text) meets kind, which no table in its scope has" + SKIP_TAIL),
    ("SELECT * FROM orders o WHERE o.nosuch = $1", {1: "text"},
     "$1 (text) meets nosuch, which no table in its scope has" + SKIP_TAIL),
    ("SELECT date_trunc($1, created_at) FROM orders", {1: "text"},
     "$1 (text) meets no column" + SKIP_TAIL),
    ("SELECT $1", {}, "$1 (of unknown type) meets no column" + SKIP_TAIL),
    ("SELECT * FROM unnest($1::int[])", {}, "$1 (int4[]) meets no column" + SKIP_TAIL),
    ("SELECT * FROM orders WHERE id = $1 AND $2::text = 'x'", {1: "integer", 2: "text"},
     "$2 (text) meets no column" + SKIP_TAIL),
    ("SELECT FROM WHERE", {},
     "PostgreSQL's parser cannot read it (syntax error at or near \"WHERE\", at index 12)"),
])
def test_a_statement_no_value_reaches_is_skipped_with_the_reason(query, types, why):
    plan = plan_statement(0, _st(query), CAT, types)
    assert plan.skipped == why


@pytest.mark.parametrize("query, types", [
    ("INSERT INTO kv (k, v) VALUES (nextval($1)::text, $2)", {1: "regclass", 2: "integer"}),
    ("SELECT * FROM customers WHERE name = $1 || $2", {1: "text", 2: "text"}),
])
def test_the_reason_does_not_deny_a_column_the_catalog_has(query, types):
    plan = plan_statement(0, _st(query), CAT, types)
    assert plan.skipped is not None
    assert "which no table in its scope has" not in plan.skipped


@pytest.mark.parametrize("seqs, want, which", [
    (("public.stock_move_seq",), "public.stock_move_seq",
     "the database's only sequence no column owns"),
    (("public.a_seq", "public.b_seq"), "public.a_seq",
     "one of the 2 sequences no column owns"),
])
def test_an_unseen_sequence_name_is_one_no_column_owns_and_said(seqs, want, which):
    cat = Catalog(CAT.columns, CAT.generated, CAT.unique, seqs)
    plan = plan_statement(0, _st("select nextval($1)"), cat, {1: "regclass"})
    assert plan.skipped is None
    assert plan.draws[1].inline and plan.draws[1].values[0][0] == want
    assert plan.guesses == [f"$1 = '{want}' ({which}: the capture did not see which one; "
                            "capture --log records it)"]
    assert script_text(plan, "d", 0) == f"SELECT nextval('{want}');\n"


def test_a_captured_sequence_name_wins_over_the_guess():
    cat = Catalog(CAT.columns, CAT.generated, CAT.unique, ("public.other_seq",))
    plan = plan_statement(0, _st("select nextval($1)"), cat, {1: "regclass"},
                          {1: [("stock_move_seq", 9)]})
    assert plan.draws[1].values == (("stock_move_seq", 9),) and not plan.guesses
    # no sequence to choose from: left out, as before
    plan = plan_statement(0, _st("select nextval($1)"), CAT, {1: "regclass"})
    assert plan.skipped == "$1 (regclass) meets no column" + SKIP_TAIL


LIMIT = Param(2, "limit", "limit", cast="bigint")
OFFSET = Param(3, "offset", "offset", cast="bigint")


@pytest.mark.parametrize("p, typ, calls, rows, want", [
    (LIMIT, "bigint", 100, 2000, ("20", "LIMIT $2 = 20 (the rows per call captured)")),
    (LIMIT, "bigint", 100, 149, ("1", "LIMIT $2 = 1 (the rows per call captured)")),
    (LIMIT, "bigint", 100, 0, ("10", "LIMIT $2 = 10 (the rows per call captured)")),
    (LIMIT, "bigint", 0, 0, ("10", "LIMIT $2 = 10 (the rows per call captured)")),
    (OFFSET, "bigint", 100, 2000, ("0", "OFFSET $3 = 0")),
    (Param(1, "value"), "integer", 1, 1, ("1", "$1 = 1 (a number nothing captured)")),
    (Param(1, "value"), "numeric", 1, 1, ("1", "$1 = 1 (a number nothing captured)")),
    (Param(1, "shape", "delta", ("t",), "n"), "", 1, 1,
     ("1", "$1 = 1 (a number nothing captured)")),
    (Param(1, "value"), "interval", 1, 1, ("1 day", "$1 = interval '1 day'")),
    (Param(1, "value", cast="interval"), "", 1, 1, ("1 day", "$1 = interval '1 day'")),
    (Param(1, "value"), "timestamp with time zone", 1, 1, ("now", "$1 = now()")),
    (Param(1, "value"), "timestamp without time zone", 1, 1, ("now", "$1 = now()")),
    (Param(1, "value"), "date", 1, 1, ("today", "$1 = current_date")),
    (Param(1, "value"), "boolean", 1, 1, ("true", "$1 = true")),
    (Param(1, "value"), "text", 1, 1, None),
    (Param(1, "value"), "character varying", 1, 1, None),
    (Param(1, "value"), "integer[]", 1, 1, None),
    (Param(1, "value"), "", 1, 1, None),
])
def test_guess(p, typ, calls, rows, want):
    assert _guess(p, typ, Statement(1, "SELECT 1", calls, 0.0, 0.0, 0.0, rows)) == want


SCRIPTS = [
    # one \gset from the draw table, a one-valued constant inline
    (DJANGO_GET, {1: "bigint", 2: "bigint"}, {2: [("21", 40)]}, {}, {}, 1000,
     "\\set r random(1, 1000)\n"
     "SELECT p1 FROM pgaccel_replay_d4 WHERE i = :r \\gset\n"
     "SELECT shop_customer.id, shop_customer.email FROM shop_customer "
     "WHERE shop_customer.id = :p1 LIMIT '21';\n"),
    # several constants: drawn; guesses inline
    (DJANGO_IN, {n: "integer" for n in (1, 2, 3)} | {4: "bigint", 5: "bigint"},
     {4: [("10", 5), ("20", 1)]}, {}, {}, 1000,
     "\\set r random(1, 1000)\n"
     "SELECT p1, p2, p3, p4 FROM pgaccel_replay_d4 WHERE i = :r \\gset\n"
     "SELECT orders.id FROM orders WHERE orders.customer_id IN (:p1, :p2, :p3) "
     "ORDER BY orders.created_at DESC LIMIT :p4 OFFSET '0';\n"),
    # DEFAULT for the identity, the SQL of a new key for the other unique column
    (DJANGO_INSERT, {1: "bigint", 2: "character varying", 3: "character varying"}, None,
     {2: "md5(random()::text)"}, {}, 500,
     "\\set r random(1, 500)\n"
     "SELECT p3 FROM pgaccel_replay_d4 WHERE i = :r \\gset\n"
     "INSERT INTO shop_customer (id, email, name) VALUES (DEFAULT, md5(random()::text), :p3)"
     " RETURNING shop_customer.id;\n"),
    # CAST(:pN AS type) where the server could not type the statement; a number inline
    # as a number, LIMIT's (typed bigint by the parser) quoted
    (ORDERS_RANGE, {n: "integer" for n in (1, 2, 3)} | {4: "bigint"},
     {3: [(2, 20)], 4: [(20, 20)]}, {}, {1: "integer", 2: "integer"}, 0,
     "\\set r random(1, 1)\n"
     "SELECT p1, p2 FROM pgaccel_replay_d4 WHERE i = :r \\gset\n"
     "SELECT o.id FROM orders AS o WHERE o.customer_id BETWEEN CAST(:p1 AS integer) AND "
     "CAST(:p2 AS integer) + 2 ORDER BY o.created_at DESC LIMIT '20';\n"),
    # nothing drawn: the statement alone, valid SQL again, a constant quoted
    ("SELECT * FROM events WHERE created_at > now() - interval $1 AND kind <> 'it''s'",
     {1: "interval"}, {1: [("7 days", 3)]}, {}, {}, 1000,
     "SELECT * FROM events WHERE created_at > now() - CAST('7 days' AS interval) "
     "AND kind <> 'it''s';\n"),
    ("SELECT * FROM orders WHERE status = $1", {1: "text"}, {}, {}, {}, 10,
     "\\set r random(1, 10)\n"
     "SELECT p1 FROM pgaccel_replay_d4 WHERE i = :r \\gset\n"
     "SELECT * FROM orders WHERE status = :p1;\n"),
]


@pytest.mark.parametrize("query, types, constants, nxt, casts, rows, want", SCRIPTS,
                         ids=[s[0][:50] for s in SCRIPTS])
def test_script_text(query, types, constants, nxt, casts, rows, want):
    plan = plan_statement(4, _st(query), CAT, types, constants)
    assert plan.skipped is None
    plan.casts = casts
    assert script_text(plan, "pgaccel_replay_d4", rows, nxt) == want


def test_a_parameter_without_a_draw_is_null_and_a_one_valued_constant_is_quoted():
    st = _st("SELECT * FROM t WHERE a = $1 AND b = $2")
    plan = StatementPlan(0, st, draws={2: const("text", [("it's", 1)], "captured")})
    assert plan.drawn == []
    assert script_text(plan, "d", 5) == "SELECT * FROM t WHERE a = NULL AND b = 'it''s';\n"
    assert literal("it's") == "'it''s'" and literal(5) == "'5'"


@pytest.mark.parametrize("value, cast, want", [
    (20, None, "20"), (1.5, None, "1.5"), (-3, None, "(-3)"), ("20", None, "'20'"),
    (20, "bigint", "'20'"), ("20", "bigint", "'20'"), ("7 days", "interval", "'7 days'"), ("7 days", None, "'7 days'"),
    ("hour", None, "'hour'"), ("it's", None, "'it''s'"), ("1 + 1", None, "'1 + 1'"),
])
def test_constant_sql(value, cast, want):
    assert constant_sql(value, cast) == want


def test_a_text_constant_that_looks_like_a_number_stays_text():
    p = _plan("SELECT lpad(status, $1, $2) FROM orders", {1: "integer", 2: "text"},
              {1: [("5", 3)], 2: [("0", 3)]})
    assert script_text(p, "d", 1).endswith(", '0') FROM orders;\n")


# the rows the draws read: customer_id i, status unique to the row, names, totals
SAMPLES = {"orders": [{"id": str(i), "customer_id": str(i), "status": f"s{i}",
                       "total": str(7 * i), "created_at": f"2024-01-{1 + i % 28:02d} 10:00"}
                      for i in range(1, 201)],
           "customers": [{"id": str(i), "name": n, "region": "r1"}
                         for i, n in enumerate(["alice", "bob", "carol", "dave", "erin"], 1)]}


def _plan(q, types, constants=None, tuples=(), number=0):
    p = plan_statement(number, _st(q), CAT, types, constants, tuples)
    assert p.skipped is None
    return p


def test_draws_are_the_same_for_a_seed_and_differ_by_seed_and_statement():
    q = "SELECT * FROM orders WHERE customer_id = $1"
    p = _plan(q, {1: "integer"})
    a = draw_rows(p, SAMPLES, seed=1, n=50)
    assert len(a) == 50 and all(len(r) == 1 for r in a)
    assert a == draw_rows(p, SAMPLES, seed=1, n=50)
    assert a != draw_rows(p, SAMPLES, seed=2, n=50)
    assert a != draw_rows(_plan(q, {1: "integer"}, number=1), SAMPLES, seed=1, n=50)
    assert {r[0] for r in a} <= {str(i) for i in range(1, 201)}
    assert len({r[0] for r in a}) > 30                       # not one row over and over


def test_parameters_on_one_table_come_from_one_row():
    p = _plan("SELECT * FROM orders WHERE customer_id = $1 AND status = $2",
              {1: "integer", 2: "text"})
    rows = draw_rows(p, SAMPLES, seed=1, n=200)
    assert all(s == f"s{c}" for c, s in rows)


def test_between_is_ordered_low_to_high_and_from_two_rows():
    p = _plan("SELECT * FROM orders WHERE total BETWEEN $1 AND $2",
              {1: "numeric", 2: "numeric"})
    rows = draw_rows(p, SAMPLES, seed=3, n=300)
    assert all(float(lo) <= float(hi) for lo, hi in rows)
    # totals are 7..1400: as text '98' would come after '1001'
    assert sum(float(lo) < float(hi) for lo, hi in rows) > 280
    assert any(len(lo) < len(hi) for lo, hi in rows)
    # timestamps as text: ordered too
    p = _plan("SELECT * FROM orders WHERE created_at BETWEEN $1 AND $2",
              {1: "timestamp with time zone", 2: "timestamp with time zone"})
    assert all(lo <= hi for lo, hi in draw_rows(p, SAMPLES, seed=3, n=300))


def test_any_is_an_array_of_rows_values_and_like_a_prefix():
    p = _plan("SELECT * FROM orders o JOIN customers c ON c.id = o.customer_id WHERE "
              "o.id = ANY($1) AND c.name LIKE $2", {1: "integer[]", 2: "text"})
    rows = draw_rows(p, SAMPLES, seed=1, n=100)
    ids = {str(i) for i in range(1, 201)}
    for arr, like in rows:
        assert arr.startswith('{"') and arr.endswith('"}')
        vals = arr[2:-2].split('","')
        assert len(vals) == ANY_DEFAULT == 10 and set(vals) <= ids
        assert like in {"ali%", "bob%", "car%", "dav%", "eri%"}
    assert len({r[0] for r in rows}) == 100


def test_constants_are_drawn_by_how_often_they_were_seen():
    p = _plan("SELECT * FROM orders LIMIT $1", {1: "bigint"}, {1: [("10", 3), ("50", 1)]})
    rows = draw_rows(p, SAMPLES, seed=1, n=1000)
    n10 = sum(r == ["10"] for r in rows)
    assert sum(r == ["50"] for r in rows) == 1000 - n10
    assert 700 <= n10 <= 800                                    # 3 to 1


def test_tuples_are_drawn_whole_lists_as_arrays_and_a_table_without_rows_is_null():
    p = _plan("SELECT * FROM stock_move WHERE product_id = ANY($1) AND qty = $2",
              {1: "bigint[]", 2: "integer"}, None,
              [{1: ["1", "it\"s"], 2: "3"}, {1: ["7"], 2: "4"}])
    rows = draw_rows(p, {}, seed=1, n=50)
    assert {tuple(r) for r in rows} == {('{"1","it\\"s"}', "3"), ('{"7"}', "4")}
    p = _plan("SELECT * FROM stock_move WHERE qty = $1", {1: "integer"})
    assert draw_rows(p, {}, seed=1, n=3) == [[None], [None], [None]]


def test_a_fitted_array_holds_that_many_distinct_values():
    from dataclasses import replace
    from pgaccel.capture import fit
    p = _plan("SELECT * FROM orders o JOIN customers c ON c.id = o.customer_id WHERE "
              "o.status = ANY($1) AND c.region = ANY($2) AND o.total > $3",
              {1: "text[]", 2: "text[]", 3: "numeric"})
    assert fit.targets(p) == ([3], [], [1, 2])
    cands = dict(fit.candidates(p))
    assert "$1, $2 an array of 2 values" in cands and "$1, $2 an array of 1 value" in cands
    assert cands["$1, $2 an array of 2 values"].draws[1].size == 2
    assert cands["$1, $2 an array of 2 values"].draws[3] == p.draws[3]   # one thing at a time
    # as drawn: ANY_DEFAULT distinct values; fitted: that many; a column with one value
    # (every customer in r1) gives an array of one, never a value twice
    for size, want in ((None, ANY_DEFAULT), (2, 2), (30, 30)):
        q = replace(p, draws={**p.draws, 1: replace(p.draws[1], size=size),
                              2: replace(p.draws[2], size=size)})
        for st, reg, _ in draw_rows(q, SAMPLES, seed=1, n=50):
            vals = st[2:-2].split('","')
            assert len(vals) == len(set(vals)) == want
            assert reg == '{"r1"}'
    # the keys of the other parameters stay the same whatever the size (common random
    # numbers: the fit compares sizes on the same rows)
    a = [r[2] for r in draw_rows(cands["$1, $2 an array of 2 values"], SAMPLES, seed=1, n=50)]
    b = [r[2] for r in draw_rows(cands["$1, $2 an array of 5 values"], SAMPLES, seed=1, n=50)]
    assert a == b


def test_a_statement_under_two_queryids_says_its_guesses_once():
    """The ledger's `UPDATE accounts SET balance = balance + $1` was captured twice (psycopg
    sent the amount as int2 and as int4): its guess was printed twice, word for word."""
    from pgaccel.capture.replay import guesses_of
    upd = "UPDATE accounts SET balance = balance + $1 WHERE id = $2"
    g = ["$1 = 1 (a number nothing captured)"]
    plans = [StatementPlan(0, _st(upd, qid=1), guesses=list(g)),
             StatementPlan(1, _st("SELECT 1", qid=2)),
             StatementPlan(2, _st(upd, qid=3), guesses=list(g)),
             StatementPlan(3, _st(upd, qid=4), guesses=["$1 = 3"]),
             StatementPlan(4, _st("SELECT 2 FROM t WHERE a > $1", qid=5), skipped="why",
                           guesses=list(g))]
    assert guesses_of(plans) == [{"query": upd, "guesses": g},
                                 {"query": upd, "guesses": ["$1 = 3"]}]


def _race(cost, captured=(100.0, 10.0), first=4, most=32, fail=(), time_left=10 ** 6,
          captured_ms=0.0):
    """fit.race over candidates whose EXPLAINs return ``cost[k]`` (blocks, rows, ms) each,
    with the tuple counts measured, the failures told and the clock as numbers of EXPLAINs."""
    from pgaccel.capture import fit
    asked: dict[int, list[tuple[int, int]]] = {}
    told: list[int] = []
    clock = [0]

    def measure(k, lo, hi):
        asked.setdefault(k, []).append((lo, hi))
        clock[0] += hi - lo                         # a timed-out EXPLAIN takes time too
        if (k, lo) in fail:
            raise fit.Failed(f"candidate {k} timed out")
        return [cost[k]] * (hi - lo)

    timed: list[bool] = []
    tried = fit.race(list(range(len(cost))), first, most, captured, captured_ms, measure,
                     lambda: clock[0] > time_left, lambda k, _e: told.append(k), timed)
    _race.timed = bool(timed)
    return [t[0] for t in tried], asked, told


def test_a_fit_race_gives_the_tuples_to_the_candidates_still_in_question():
    # the nearest (3) among 7: 7 on 4 tuples, the nearer 4 on 4 more, 2 on 8 more, then 3
    # alone: it is not measured again (60 EXPLAINs where 7 x 32 = 224 were)
    far = [(1000.0 * (k + 1), 1.0, 1.0) for k in range(7)]
    far[3] = (100.0, 10.0, 1.0)
    far[5] = (120.0, 10.0, 1.0)
    far[6] = (140.0, 12.0, 1.0)
    far[2] = (90.0, 30.0, 1.0)
    left, asked, told = _race(far)
    assert left == [3] and not told and not _race.timed
    assert asked[3] == [(0, 4), (4, 8), (8, 16)] and asked[5] == [(0, 4), (4, 8), (8, 16)]
    assert asked[6] == [(0, 4), (4, 8)] and asked[0] == [(0, 4)]
    # all tied (an aggregate over a sequential scan): the nearer half in time goes on (13.6
    # ms captured: 14.9 ms, then 9.8 and 31 ms), as choose() will decide; with no time
    # captured, the first tried, as choose() keeps
    agg = [(100.0, 10.0, ms) for ms in (4.9, 5.2, 9.8, 14.9, 31.0)]
    left, asked, _ = _race(agg, captured_ms=13.6)
    assert left == [3] and asked[3] == [(0, 4), (4, 8), (8, 16)] and asked[4] == [(0, 4), (4, 8)]
    assert _race.timed                        # said: time told the nearest apart
    tied = [(100.0, 10.0, float(k)) for k in range(3)]
    left, asked, _ = _race(tied)
    assert left == [0] and asked[0] == [(0, 4), (4, 8)] and asked[2] == [(0, 4)]
    assert not _race.timed                    # no time captured: time told nothing apart
    # nearest in blocks and rows but not first tried, no time captured: as choose() keeps
    assert _race([(104.0, 10.0, 1.0), (100.0, 10.0, 1.0)])[0] == [0]
    # a candidate failing in the first rung is dropped and said; the others go on
    left, asked, told = _race(tied, fail={(0, 0)})
    assert left == [1] and told == [0]
    # a failure after the first rung abandons that rung: what the one before measured
    # decides, among the candidates that were still in question, less the one that failed
    left, asked, told = _race(tied, fail={(1, 4)})
    assert left == [0] and told == [1] and asked[0] == [(0, 4), (4, 8)]
    left, asked, told = _race(tied, fail={(0, 4)})
    assert left == [1] and told == [0] and asked[1] == [(0, 4)]
    # every candidate failing: the time still ends the first rung
    left, asked, told = _race(tied, fail={(0, 0), (1, 0), (2, 0)}, time_left=5)
    assert left == [] and told == [0, 1] and 2 not in asked
    # out of time in the first rung: the later candidates untried (the first always is);
    # later: that rung abandoned, the one before decides
    left, asked, _ = _race(tied, time_left=5)
    assert left == [0, 1] and 2 not in asked
    left, asked, _ = _race(tied, time_left=13)
    assert left == [0, 1] and asked[0] == [(0, 4), (4, 8)] and asked[1] == [(0, 4)]
    # nothing measured at all: nothing to choose from
    assert _race(tied[:1], fail={(0, 0)})[0] == []


def test_a_hot_array_favours_the_frequent_values_by_the_square_of_their_count():
    """Half the sampled orders are one customer's: drawn as often as it is in the rows, an
    array of one names that customer about half the time; favoured, 100/110 of the time
    (the fit's candidate for an application that asks for its busiest keys)."""
    from dataclasses import replace
    from pgaccel.capture import fit
    orders = ([{**SAMPLES["orders"][0], "customer_id": "7"} for _ in range(10)]
              + [{**r, "customer_id": str(100 + i)} for i, r in enumerate(SAMPLES["orders"][:10])])
    p = _plan("SELECT * FROM orders WHERE customer_id = ANY($1)", {1: "integer[]"})
    cands = dict(fit.candidates(p))
    hot = cands["$1 an array of 10 values, the frequent values favoured"]
    assert hot.draws[1].hot and hot.draws[1].size == 10
    assert not cands["as drawn"].draws[1].hot and not cands["$1 an array of 5 values"].draws[1].hot
    assert sum(1 for c in cands.values() if c.draws[1].hot) == 1 + len(fit.SIZES)
    counts = {}
    for h in (False, True):
        q = replace(p, draws={1: replace(p.draws[1], size=1, hot=h)})
        rows = draw_rows(q, {"orders": orders}, seed=1, n=400)
        counts[h] = sum(r[0] == '{"7"}' for r in rows)
    assert 160 <= counts[False] <= 240 and counts[True] >= 340, counts
    # still distinct: an array of 5 names each value once, the frequent one among them
    q = replace(p, draws={1: replace(p.draws[1], size=5, hot=True)})
    for (a,) in draw_rows(q, {"orders": orders}, seed=1, n=50):
        vals = a[1:-1].split(",")
        assert len(vals) == len(set(vals)) == 5


def test_a_fitted_window_selects_its_share_of_the_rows():
    p = _plan("SELECT * FROM orders WHERE total > $1 AND customer_id < $2",
              {1: "numeric", 2: "integer"})
    p.draws = {n: Draw(d.kind, d.table, d.column, d.type, d.op, window=0.1)
               for n, d in p.draws.items()}
    rows = draw_rows(p, SAMPLES, seed=1, n=200)
    # 200 rows, totals 7..1400: the top 5-15%; customer_id 1..200: the bottom 5-15%
    assert all(7 * 171 <= float(t) <= 7 * 191 for t, _ in rows)
    assert all(11 <= int(c) <= 31 for _, c in rows)
    assert len({t for t, _ in rows}) > 10
    # a BETWEEN window: a tenth of the rows wide, anywhere
    p = _plan("SELECT * FROM orders WHERE customer_id BETWEEN $1 AND $2",
              {1: "integer", 2: "integer"})
    p.draws = {n: Draw(d.kind, d.table, d.column, d.type, d.op, window=0.1)
               for n, d in p.draws.items()}
    rows = draw_rows(p, SAMPLES, seed=1, n=100)
    assert all(int(hi) - int(lo) == 20 for lo, hi in rows)
    assert len({lo for lo, _ in rows}) > 10


def test_two_betweens_on_columns_of_one_name_keep_their_own_bounds():
    cat = Catalog({"a": {"created": "integer"}, "b": {"created": "integer"}})
    q = ("SELECT * FROM a JOIN b ON true WHERE a.created BETWEEN $1 AND $2 "
         "AND b.created BETWEEN $3 AND $4")
    p = plan_statement(0, _st(q), cat, {n: "integer" for n in (1, 2, 3, 4)})
    samples = {"a": [{"created": str(i)} for i in range(100)],
               "b": [{"created": str(i)} for i in range(1000, 1100)]}
    for r in draw_rows(p, samples, seed=1, n=50):
        assert all(int(v) < 100 for v in r[:2]) and all(int(v) >= 1000 for v in r[2:])


def test_a_squashed_in_list_from_tuples_is_not_bound_as_one_value():
    q = "SELECT * FROM shop_customer WHERE id IN ($1 /*, ... */)"
    p = _plan(q, {1: "bigint"}, None, [{1: ["1", "2", "3"]}])
    text = script_text(p, "d", 1)
    (row,) = draw_rows(p, {}, seed=1, n=1)
    assert not ("IN (:p1)" in text and str(row[0]).startswith("{"))


def test_the_columns_the_draws_need():
    plans = [_plan("SELECT * FROM orders WHERE customer_id = $1 AND status = $2",
                   {1: "integer", 2: "text"}),
             _plan("SELECT * FROM orders WHERE status = $1 AND total > $2",
                   {1: "text", 2: "numeric"}),
             _plan(DJANGO_INSERT, {1: "bigint", 2: "text", 3: "text"}),
             plan_statement(9, _st("SELECT $1"), CAT, {})]
    assert samples_needed(plans) == {"orders": ["customer_id", "status", "total"],
                                     "shop_customer": ["name"]}


@pytest.mark.parametrize("query, want", [
    # $3, the offset, is left to the server: integer + unknown is integer
    (ORDERS_RANGE, {1: "integer", 2: "integer"}),
    ("SELECT * FROM public.orders o WHERE o.created_at > $1 AND o.status = $2 LIMIT $3",
     {1: "timestamp with time zone", 2: "text"}),
    ("SELECT * FROM nosuch WHERE a = $1", {}),
    ("SELECT FROM WHERE", {}),
])
def test_column_casts(query, want):
    assert column_casts(query, CAT) == want


def test_an_any_parameter_is_cast_to_an_array():
    assert column_casts("SELECT * FROM stock_move WHERE product_id = ANY($1) AND "
                        "qty BETWEEN $2 AND $3 + $4", CAT)[1] == "bigint[]"


def test_the_offset_of_a_timestamp_is_not_cast_to_a_timestamp():
    casts = column_casts("SELECT * FROM events WHERE created_at BETWEEN $1 AND $2 + $3", CAT)
    assert casts.get(3) in (None, "interval")


def test_only_one_valued_constants_are_inline():
    assert inline_constants({1: [("20", 5)], 2: [("1", 1), ("2", 1)], 3: [(None, 4)],
                             4: [(["1", "2"], 1)], 5: []}) == {1: "20"}
    assert inline_constants(None) == {}


def test_weights_keep_the_proportions():
    assert weights([1337, 1337, 173]) == [469617, 469617, 60766]
    assert weights([10**9, 1]) == [1000000, 1]
    assert weights([0, 0]) == [1, 1]


# -- coverage ----------------------------------------------------------------------------

def _S(qid, q, calls, ms, sc, stt):
    return Statement(qid, q, calls, ms, ms / calls, 0.0, calls, sc, stt)


COV = [_S(1, "SELECT a FROM t WHERE id = $1", 500, 300.0, 0.5, 0.3),
       _S(2, "SELECT b FROM u WHERE x = $1", 100, 200.0, 0.1, 0.2),
       _S(0, TRANSACTION, 200, 100.0, 0.2, 0.1),
       _S(0, UTILITY, 100, 300.0, 0.1, 0.3),
       _S(0, OTHER, 50, 50.0, 0.05, 0.05),
       _S(3, "SELECT c FROM v", 50, 50.0, 0.05, 0.05)]        # no plan: never planned


def test_coverage_leaves_out_transaction_control_and_says_why_each_is_left():
    plans = [StatementPlan(0, COV[0]),
             StatementPlan(1, COV[1], skipped="$1 (text) meets no column")]
    t, c, left, tx = coverage(COV, plans)
    assert tx is COV[2]
    # shares of the statements' own: 0.3 of 0.9 of the time, 0.5 of 0.8 of the calls
    assert (t, c) == (pytest.approx(0.3 / 0.9), pytest.approx(0.5 / 0.8))
    assert [(x.query, round(x.share_time, 4), round(x.share_calls, 4), x.reason)
            for x in left] == [
        (UTILITY, 0.3333, 0.125, "utility statements (SET, VACUUM, DDL ...): counted "
                                 "without their text, which may hold passwords"),
        ("SELECT b FROM u WHERE x = $1", 0.2222, 0.125, "$1 (text) meets no column"),
        (OTHER, 0.0556, 0.0625, "beyond the capture's --top statements, merged without "
                                "their texts"),
        ("SELECT c FROM v", 0.0556, 0.0625, "not a statement a replay can run")]
    assert all(isinstance(x, Left) for x in left)
    # what is replayed and what is left add up to the whole
    assert t + sum(x.share_time for x in left) == pytest.approx(1.0)
    assert c + sum(x.share_calls for x in left) == pytest.approx(1.0)


def test_coverage_without_transaction_control_and_with_everything_replayed():
    stmts = [_S(1, "SELECT a FROM t WHERE id = $1", 30, 75.0, 0.75, 0.75),
             _S(2, "SELECT b FROM u WHERE x = $1", 10, 25.0, 0.25, 0.25)]
    t, c, left, tx = coverage(stmts, [StatementPlan(0, stmts[0]), StatementPlan(1, stmts[1])])
    assert (t, c, left, tx) == (1.0, 1.0, [], None)
    t, c, left, tx = coverage(stmts, [StatementPlan(0, stmts[0])])
    assert (t, c) == (0.75, 0.75) and [x.query for x in left] == [stmts[1].query]


# -- fidelity ----------------------------------------------------------------------------

def _f(q, calls, ms, qid=1):
    return Statement(qid, q, calls, ms, ms / calls, 0.0, calls)


A, B, C = ("SELECT a FROM t WHERE id = $1", "SELECT b FROM u WHERE k = $1",
           "SELECT count(*) FROM big WHERE g = $1")
# calls 60% / 39% / 1%, time 30% / 60% / 10%
FID = [_f(A, 600, 300.0, 1), _f(B, 390, 600.0, 2), _f(C, 10, 100.0, 3),
       _f(UTILITY, 5000, 5000.0, 0)]
DRAW_QUERY = ("SELECT p1 FROM pgaccel_replay_d0 WHERE i = $1", 99999, 9999.0)


@pytest.mark.parametrize("replayed, flagged", [
    # faithful, the texts with their literals, other case and spacing
    ([("select a from t where id = 5", 6000, 3000.0), ("SELECT b FROM u WHERE k = 'x'", 3900,
      6000.0), ("SELECT  count(*)\nFROM big WHERE g = $1", 100, 1000.0), DRAW_QUERY], []),
    # the smallest statement is judged too: 1% of the calls captured, 15% replayed
    ([(A, 5100, 3000.0), (B, 3400, 6000.0), (C, 1500, 1000.0)], [C]),
    # within 10 points: 60% of the time captured, 69% replayed
    ([(A, 6000, 2100.0), (B, 3900, 6900.0), (C, 100, 1000.0)], []),
    # 11 points off: both that gained and that lost
    ([(A, 6000, 1900.0), (B, 3900, 7100.0), (C, 100, 1000.0)], [B, A]),
    # a statement the replay never ran
    ([(A, 6100, 4000.0), (B, 3900, 6000.0)], [A]),
])
def test_fidelity_judges_every_statement_within_ten_points(replayed, flagged):
    rows, problems = fidelity(FID, replayed)
    assert [r.query for r in rows] == [B, A, C]              # most captured time first
    assert [(r.captured_calls, r.captured_time) for r in rows] == \
        [(0.39, 0.6), (0.6, 0.3), (0.01, 0.1)]
    assert len(problems) == len(flagged)
    for q, msg in zip(flagged, problems):
        assert msg.startswith(f"the replay is not the captured mix: '{q}' took ")


def test_fidelity_says_both_shares_and_the_means():
    rows, problems = fidelity(FID, [(A, 5100, 3000.0), (B, 3400, 6000.0), (C, 1500, 1000.0)])
    assert problems == [f"the replay is not the captured mix: '{C}' took 10% of the time "
                        "and 15% of the calls, captured 10% and 1%"]
    c = rows[2]
    assert (c.key, c.replayed_n) == (fingerprint(C), 1500)
    assert (c.replayed_calls, c.replayed_time) == (0.15, 0.1)
    assert c.captured_mean_ms == 10.0 and c.replayed_mean_ms == pytest.approx(1000 / 1500)
    assert c.worst == pytest.approx(0.14)
    rows, _ = fidelity(FID, [(A, 10, 1.0)])
    assert rows[0].replayed_n == 0 and rows[0].replayed_mean_ms is None


def test_fidelity_matches_a_replayed_text_by_its_alias_and_merges_roles():
    ins = "INSERT INTO t (id, v) VALUES ($1, $2)"
    as_run = "INSERT INTO t (id, v) VALUES (nextval('pgaccel_replay_q1_1'), $1)"
    cap = [_f(A, 300, 200.0, 1), _f(A, 300, 100.0, 2),          # one shape, two roles
           _f(ins, 400, 100.0, 3)]
    seen = [(A, 600, 750.0), (as_run, 400, 250.0)]
    rows, problems = fidelity(cap, seen)
    assert [(r.query, r.replayed_n) for r in rows] == [(A, 600), (ins, 0)]
    assert len(problems) == 2
    rows, problems = fidelity(cap, seen, aliases={fingerprint(as_run): fingerprint(ins)})
    assert problems == []
    assert [(r.captured_calls, r.captured_time, r.replayed_n) for r in rows] == \
        [(0.6, 0.75, 600), (0.4, 0.25, 400)]


def test_fidelity_counts_only_what_the_replay_runs():
    cap = [_f("SELECT x FROM big WHERE blob ~ $1", 10, 600.0, 1),   # not replayed
           _f(A, 600, 300.0, 2), _f(B, 400, 100.0, 4)]
    seen = [(A, 600, 750.0), (B, 400, 250.0)]
    rows, problems = fidelity(cap, seen, included=[A, B])
    assert problems == []
    assert [(r.captured_calls, r.captured_time) for r in rows] == [(0.6, 0.75), (0.4, 0.25)]
    # the left-out statement counted: it and the shares of the others are off
    _, problems = fidelity(cap, seen)
    assert len(problems) == 3 and "blob" in problems[0]
    assert f"'{A}' took 75% of the time and 60% of the calls, captured 30% and 59%" in \
        problems[1]


# -- the calibration's cost ----------------------------------------------------------------

def _cal(cap_ms, rep_ms, cap_blocks=None, rep_blocks=None, q="SELECT  a\nFROM t"):
    return {"query": q, "captured_mean_ms": cap_ms, "replayed_mean_ms": rep_ms,
            "captured_blocks": cap_blocks, "replayed_blocks": rep_blocks}


@pytest.mark.parametrize("row, want", [
    (_cal(1.0, 2.1), ["'SELECT a FROM t' took 2.1 ms per call in the calibration, 1 ms "
                      "captured (2.1x)"]),
    (_cal(4.0, 1.9), ["'SELECT a FROM t' took 1.9 ms per call in the calibration, 4 ms "
                      "captured (0.47x)"]),
    (_cal(0.5, 1.2), ["'SELECT a FROM t' took 1.2 ms per call in the calibration, 0.5 ms "
                      "captured (2.4x)"]),                 # the larger is at least 1 ms
    (_cal(1.0, 2.0), []),                                  # 2x: not more
    (_cal(4.0, 2.0), []),
    (_cal(0.3, 0.9), []),                                  # 3x, but under 1 ms
    (_cal(0.0, 5.0), []),                                  # nothing captured to compare
    (_cal(1.0, None), []),
    # the blocks per call, from 10 blocks
    (_cal(0.2, 0.2, 5, 12), ["'SELECT a FROM t' read 12 shared blocks per call in the "
                             "calibration, 5 captured (2.4x)"]),
    (_cal(0.2, 0.2, 100, 40), ["'SELECT a FROM t' read 40 shared blocks per call in the "
                               "calibration, 100 captured (0.4x)"]),
    (_cal(0.2, 0.2, 0, 20), ["'SELECT a FROM t' read 20 shared blocks per call in the "
                             "calibration, 0 captured (infx)"]),
    (_cal(0.2, 0.2, 3, 9), []),                            # 3x, under 10 blocks
    (_cal(0.2, 0.2, 10, 20), []),
    (_cal(0.2, 0.2, 10, None), []),
    # time off: said once, the blocks not again
    (_cal(1.0, 3.0, 10, 100), ["'SELECT a FROM t' took 3 ms per call in the calibration, "
                               "1 ms captured (3x)"]),
    # time within, blocks off
    (_cal(1.0, 1.5, 10, 100), ["'SELECT a FROM t' read 100 shared blocks per call in the "
                               "calibration, 10 captured (10x)"]),
])
def test_cost_flags(row, want):
    assert cost_flags([row]) == want


def test_cost_flags_cut_a_long_text():
    q = "SELECT " + ", ".join(f"c{i}" for i in range(40)) + " FROM t"
    (msg,) = cost_flags([_cal(1.0, 5.0, q=q)])
    assert msg.startswith("'" + q[:70] + "' took 5 ms")


# -- the report's fidelity (report/fidelity.py) across a run's trials ---------------------

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
    assert (ok.trials, ok.flagged) == (1, 0) and "all 1 trials" in ok.line


def test_two_long_statements_with_one_prefix_stay_two_rows():
    from pgaccel.report.fidelity import fidelity_of
    head = "SELECT " + ", ".join(f"c{i}" for i in range(60))
    rows = [{"query": (head + " FROM a")[:200], "key": "k1", "captured_calls": 0.5,
             "captured_time": 0.5, "replayed_calls": 0.5, "replayed_time": 0.5},
            {"query": (head + " FROM b")[:200], "key": "k2", "captured_calls": 0.5,
             "captured_time": 0.5, "replayed_calls": 0.5, "replayed_time": 0.5}]
    (f,) = fidelity_of([{"workload": "captured:/b", "metrics": {"fidelity": rows}}])
    assert len(f.rows) == 2


def test_a_fixed_work_replay_says_how_much_work_each_trial_ran():
    from pgaccel.report.fidelity import fidelity_of
    row = {"query": "SELECT g", "captured_calls": 1.0, "captured_time": 1.0,
           "replayed_calls": 1.0, "replayed_time": 1.0}

    def trial(n):
        m = {"fidelity": [row]}
        if n:
            m["fixed_work"] = {"transactions_per_client": n, "clients": 2}
        return {"workload": "captured:/b", "metrics": m}
    (f,) = fidelity_of([trial(1424), trial(1424)])
    assert f.fixed == (1424,)
    assert f.fixed_line == ("Each measured trial ran the same 1,424 statements per client in "
                            "the same order on every config (a fixed amount of work: its "
                            "throughput is the time they took)")
    (two,) = fidelity_of([trial(1424), trial(3000)])                 # two client counts
    assert "the same 1,424 or 3,000 statements" in two.fixed_line
    (timed,) = fidelity_of([trial(0)])                               # a fixed time: unsaid
    assert timed.fixed == () and timed.fixed_line == ""


# -- capture/fit.py: which candidate a fit keeps ----------------------------------------------

def test_a_fit_keeps_the_nearest_in_blocks_and_rows_and_breaks_ties_by_time():
    from pgaccel.capture.fit import choose, distance
    # an aggregate over a sequential scan: every number of hours reads the 318 blocks and
    # returns the 7 regions; only the time per call tells them apart (captured 13.6 ms)
    agg = [("$1 = 1", (318.0, 7.0), 4.9), ("$1 = 3", (318.0, 7.0), 5.2),
           ("$1 = 300", (320.0, 7.0), 9.8), ("$1 = 1000", (318.0, 7.0), 14.9),
           ("$1 = 10000", (318.0, 7.0), 31.0)]
    assert choose((318.0, 7.0), 13.6, agg) == ("$1 = 1000", True)
    # one candidate nearest in blocks and rows: time is not asked (it depends on the host)
    rng = [("as drawn", (9000.0, 1500.0), 40.0), ("0.1%", (90.0, 15.0), 0.4),
           ("1%", (850.0, 150.0), 3.0)]
    assert choose((82.7, 18.0), 3.0, rng) == ("0.1%", False)
    # a tie on equal footing keeps the first tried; nothing tried: None
    assert choose((10.0, 1.0), 1.0, [("a", (10.0, 1.0), 2.0), ("b", (10.0, 1.0), 2.0)]) \
        == ("a", False)
    assert choose((10.0, 1.0), 1.0, []) is None
    # the tie margin is 0.05 in the summed log ratios: 5% more blocks is still a tie
    assert distance((318.0, 7.0), (334.0, 7.0)) < 0.05 < distance((318.0, 7.0), (340.0, 7.0))
    assert choose((318.0, 7.0), 10.0, [("a", (318.0, 7.0), 1.0), ("b", (334.0, 7.0), 10.0),
                                       ("c", (340.0, 7.0), 10.0)]) == ("b", True)


def test_a_fit_races_its_candidates_by_successive_halving():
    """The tuples per candidate double each rung up to the most; the nearer half goes on,
    those tied with the nearest in blocks and rows first (nearest in time among them)."""
    from pgaccel.capture.fit import keep, rungs
    assert rungs(200) == [12, 24, 48, 96, 192, 200]
    assert rungs(200, 3) == [3, 6, 12, 24, 48, 96, 192, 200]     # a 1-s statement's
    assert rungs(5) == [5] and rungs(200, 0)[0] == 1
    # Hibernate's `product_id = any ($1)` (686 blocks and 4.92 rows a call captured): the
    # arrays of 5, 3 and 2 values and the 10 drawn go on, in the order tried
    hib = [("as drawn", (1100.0, 10.0), 1.0), ("1", (140.0, 1.0), 0.2),
           ("2", (280.0, 2.0), 0.4), ("3", (400.0, 3.0), 0.6), ("5", (550.0, 5.0), 0.8),
           ("30", (800.0, 30.0), 1.5), ("100", (800.0, 100.0), 2.0)]
    assert keep((686.0, 4.92), 1.1, hib) == [0, 2, 3, 4]
    # an aggregate over a sequential scan: all tied; the nearer half in time (13.6 ms
    # captured) goes on, as choose() breaks such a tie
    agg = [(f"$1 = {v}", (318.0, 7.0), ms) for v, ms in ((1, 4.9), (3, 5.2), (300, 9.8),
                                                         (1000, 14.9), (10000, 31.0))]
    assert keep((318.0, 7.0), 13.6, agg) == [2, 3, 4]
    assert keep((318.0, 7.0), 0.0, agg) == [0, 1, 2]      # no time captured: the first tried
    # the tied ones come first, nearest in time, then the others by distance
    four = [("a", (10.0, 1.0), 9.0), ("b", (100.0, 9.0), 1.0), ("c", (10.3, 1.0), 1.0),
            ("d", (13.0, 1.0), 1.0)]
    assert keep((10.0, 1.0), 1.0, four) == [0, 2]
    assert keep((10.0, 1.0), 1.0, four + [("e", (10.4, 1.0), 1.2)]) == [0, 2, 4]
    assert keep((10.0, 1.0), 1.0, four[:1]) == [0] and keep((10.0, 1.0), 1.0, []) == []


# pg_restore 15's stderr, restoring a dump of a table in tablespace "fast" (without
# --no-tablespaces, which replays now pass) into a server that has no such tablespace
TABLESPACE_STDERR = (
    'pg_restore: error: could not set default_tablespace to fast: ERROR:  invalid value for '
    'parameter "default_tablespace": "fast"\nDETAIL:  Tablespace "fast" does not exist.\n'
    'pg_restore: warning: errors ignored on restore: 1\n')


@pytest.mark.parametrize("stderr, said, hint", [
    (TABLESPACE_STDERR,
     "could not set default_tablespace to fast: ERROR:  invalid value for parameter "
     "\"default_tablespace\": \"fast\"", "without the captured server's owners"),
    ("pg_restore: error: unsupported version (1.16) in file header\n",
     "unsupported version (1.16) in file header", "as new as the captured one"),
    ("pg_restore: error: could not execute query: ERROR:  extension \"postgis\" is not "
     "available\n" * 5 + "pg_restore: warning: errors ignored on restore: 5\n",
     "could not execute query: ERROR:  extension \"postgis\" is not available; " * 2 +
     "could not execute query: ERROR:  extension \"postgis\" is not available (and 2 more)",
     "An extension the captured database uses is not installed"),
    ("", "exit code 1", "without the captured server's owners"),
])
def test_a_failed_restore_says_pg_restores_own_errors(stderr, said, hint):
    """It said the last line ('errors ignored on restore: 1') and blamed the version."""
    from pgaccel.workloads.captured import restore_error
    msg, what = restore_error("/b/data", stderr, 1)
    assert msg == f"pg_restore of /b/data failed: {said}."
    assert hint in what


def _bundle(tmp_path, *means_ms: float):
    """A capture bundle with one SELECT per mean time (the manifest and statements.json
    as `pgaccel capture` writes them), read as the workload a run would replay."""
    import json
    from pgaccel.workloads.captured import Captured
    (tmp_path / "manifest.json").write_text(json.dumps(
        {"kind": "pgaccel-capture", "schema": 1, "database": "app",
         "captured_at": "2026-12-07T17:56:02+0000", "duration_s": 90.0}))
    rows = [Statement(queryid=i + 1, query=f"SELECT c{i} FROM t WHERE id = $1", calls=100,
                      total_ms=100 * ms, mean_ms=ms, stddev_ms=0.0, rows=100).to_dict()
            for i, ms in enumerate(means_ms)]
    (tmp_path / "statements.json").write_text(json.dumps(rows))
    return Captured(f"captured:{tmp_path}")


@pytest.mark.parametrize("means, source", [
    ((0.02, 1309.0), "totals"),        # a 1.3-s report beside point lookups: totals
    ((0.02, 25.5), "totals"),          # just over TURN_MS (25 ms): trials take turns
    ((0.02, 25.0), "series"),          # at TURN_MS: slices, the steady seconds' mean
    ((0.02, 0.3), "series"),
])
def test_a_replay_of_long_statements_takes_its_throughput_from_the_totals(
        tmp_path, means, source):
    """When trials take turns (a statement over 25 ms), a second of the trial holds a
    handful of long statements and the steady-state trim picks seconds by chance: the
    trial's throughput is pgbench's own total (lab/trial.py reads ``throughput_from``)."""
    w = _bundle(tmp_path, *means)
    assert w.throughput_from() == source
    assert (w.turns() is not None) == (source == "totals")


# the ledger app's calibration at 4 clients (8 s): a 1.3-s report beside point lookups,
# inserts and updates, (calls, mean ms per call); its 15-s fixed-work trials took 33-37 s
# sized without the overhead, 22-27 s sized by the calibration's calls per second
_LEDGER = [(11, 2073.5), (3489, 0.1358), (1701, 0.0512), (7867, 0.0117), (1757, 0.0237),
           (1093, 0.0275)]


def test_a_calls_overhead_is_the_clients_time_not_spent_executing():
    from pgaccel.workloads.captured import call_overhead_ms
    # 4 clients x 8 s = 32,000 ms; 23,533 of it executing; 15,918 calls
    assert call_overhead_ms(_LEDGER, 4, 8.0) == pytest.approx(0.5319, abs=1e-4)
    assert call_overhead_ms(_LEDGER, 1, 8.0) == 0.0          # executions fill the time
    assert call_overhead_ms([], 4, 8.0) == 0.0
    assert call_overhead_ms([(0, 5.0)], 4, 8.0) == 0.0


@pytest.mark.parametrize("per_call_ms, duration, want", [
    (0.8906 + 0.5319, 15.0, 10_545),    # the ledger: its trials then took 14-16 s
    (2.0, 10.0, 5_000),
    (2.0, 10.001, 5_001),               # rounded up, never short of the duration
    (5_000.0, 10.0, 20),                # 2 statements' worth: FIXED_MIN
    (float("nan"), 10.0, 20),           # nothing to size by
    (0.0, 10.0, 20),
])
def test_a_fixed_work_trial_holds_its_duration_of_statements(per_call_ms, duration, want):
    from pgaccel.workloads.captured import FIXED_MIN, fixed_transactions
    assert FIXED_MIN == 20
    assert fixed_transactions(per_call_ms, duration) == want


def test_the_mean_time_of_a_statement_is_weighted_by_how_often_the_replay_draws_it():
    import math
    from pgaccel.workloads.captured import mean_ms
    assert mean_ms([(1, 1000.0), (999, 0.1)]) == pytest.approx((1000 + 99.9) / 1000)
    assert mean_ms([(0, 1000.0), (3, 0.5)]) == 0.5             # a weight of 0 draws nothing
    assert math.isnan(mean_ms([]))


def test_a_fixed_work_trials_cap_stops_a_load_generator_that_prints_nothing():
    """pgbench -t prints its progress lines from its first thread only while that thread's
    clients run, so the cap of a fixed-work trial is kept on the clock, not by stop_when
    (which only progress lines call): a real process that prints nothing is stopped."""
    import re
    import signal
    import time
    from pgaccel.workloads.loadgen import run_loadgen
    seen = []
    t0 = time.monotonic()
    run = run_loadgen(["sleep", "30"], env={"PATH": "/usr/bin:/bin"}, cwd=None,
                      progress_re=re.compile(r"progress: ([\d.]+) s, ([\d.]+) tps"),
                      stop_signal=signal.SIGINT, stop_when=lambda s: seen.append(s) or False,
                      deadline_s=0.5)
    assert time.monotonic() - t0 < 10
    assert run.stopped_early and run.returncode == -signal.SIGINT and seen == []
    done = run_loadgen(["true"], env={"PATH": "/usr/bin:/bin"}, cwd=None,
                       progress_re=re.compile("x"), deadline_s=5)
    assert not done.stopped_early and done.returncode == 0     # ended before the cap
