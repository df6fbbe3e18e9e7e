"""capture/sqlshape.py: what each parameter of a captured statement meets, by PostgreSQL's
own parser (framework-shaped SQL: Django, Rails, Hibernate, SQLAlchemy, hand-written), the
values a normalised text's parameters stood for in a text that ran, and the statement
written back as valid SQL (by hand)."""

from __future__ import annotations

import pytest

from pgaccel.capture.sqlshape import (Param, ShapeError, align, executable, fingerprint,
                                      params_of, shape, writes)


def P(n, role, op="other", tables=(), column=None, cast=None):
    return Param(n, role, op, tuple(tables), column, cast)


# (query, kind, target, upsert, {n: Param})
SHAPES = [
    # Django: quoted identifiers, table-qualified columns
    ('SELECT "app_order"."id" FROM "app_order" WHERE "app_order"."customer_id" = $1',
     "select", None, False, {1: P(1, "column", "=", ["app_order"], "customer_id")}),
    ('SELECT "shop_order"."id" FROM "shop_order" WHERE "shop_order"."customer_id" IN '
     '($1, $2, $3) ORDER BY "shop_order"."created_at" DESC LIMIT $4 OFFSET $5',
     "select", None, False,
     {1: P(1, "column", "in", ["shop_order"], "customer_id"),
      2: P(2, "column", "in", ["shop_order"], "customer_id"),
      3: P(3, "column", "in", ["shop_order"], "customer_id"),
      4: P(4, "limit", "limit", cast="bigint"),
      5: P(5, "offset", "offset", cast="bigint")}),
    # joins with aliases: each alias resolves to its own table
    ("SELECT o.id FROM orders o JOIN customers c ON c.id = o.customer_id "
     "WHERE c.region = $1 AND o.total > $2",
     "select", None, False,
     {1: P(1, "column", "=", ["customers"], "region"),
      2: P(2, "column", ">", ["orders"], "total")}),
    # an unqualified column in a join: every table in scope may have it
    ("SELECT * FROM orders o JOIN customers c ON c.id = o.customer_id WHERE region = $1",
     "select", None, False,
     {1: P(1, "column", "=", ["orders", "customers"], "region")}),
    # Hibernate's aliases and = any ($1)
    ("select p1_0.id,p1_0.sku from product p1_0 where p1_0.sku=$1",
     "select", None, False, {1: P(1, "column", "=", ["product"], "sku")}),
    ("select s1_0.product_id,sum(s1_0.qty) from stock_move s1_0 where "
     "s1_0.product_id = any ($1) group by s1_0.product_id",
     "select", None, False, {1: P(1, "column", "any", ["stock_move"], "product_id")}),
    # a subquery: its own tables first, then the outer ones
    ("SELECT * FROM orders WHERE customer_id IN (SELECT id FROM customers WHERE region = $1)",
     "select", None, False,
     {1: P(1, "column", "=", ["customers", "orders"], "region")}),
    # a correlated EXISTS, an alias shadowed inside a subquery
    ("SELECT * FROM orders o WHERE EXISTS (SELECT 1 FROM order_items oi WHERE "
     "oi.order_id = o.id AND oi.qty > $1) AND o.status = $2",
     "select", None, False,
     {1: P(1, "column", ">", ["order_items"], "qty"),
      2: P(2, "column", "=", ["orders"], "status")}),
    ("SELECT * FROM orders o WHERE o.id IN (SELECT o.order_id FROM order_items o "
     "WHERE o.qty = $1)",
     "select", None, False, {1: P(1, "column", "=", ["order_items"], "qty")}),
    # a subquery in FROM: its alias is the tables it reads
    ("SELECT * FROM (SELECT id, email FROM users WHERE created > $1) s WHERE s.email = $2",
     "select", None, False,
     {1: P(1, "column", ">", ["users"], "created"),
      2: P(2, "column", "=", ["users"], "email")}),
    # CTEs (one reading another): a CTE's name is the tables it reads
    ("WITH m AS (SELECT product_id pid FROM stock_move WHERE moved_at > $1) "
     "SELECT * FROM m JOIN product p ON p.id = m.pid WHERE p.category = $2",
     "select", None, False,
     {1: P(1, "column", ">", ["stock_move"], "moved_at"),
      2: P(2, "column", "=", ["product"], "category")}),
    ("WITH recent AS (SELECT id FROM orders WHERE created_at > $1), big AS (SELECT * FROM "
     "recent r WHERE r.id > $2) SELECT * FROM big b WHERE b.id < $3",
     "select", None, False,
     {1: P(1, "column", ">", ["orders"], "created_at"),
      2: P(2, "column", ">", ["orders"], "id"),
      3: P(3, "column", "<", ["orders"], "id")}),
    # BETWEEN, and an anchor plus an offset
    ("SELECT o.id FROM orders o WHERE o.customer_id BETWEEN $1 AND $2 + $3 "
     "ORDER BY o.created_at DESC LIMIT $4",
     "select", None, False,
     {1: P(1, "column", "between_lo", ["orders"], "customer_id"),
      2: P(2, "column", "between_hi", ["orders"], "customer_id"),
      3: P(3, "shape", "other", ["orders"], "customer_id"),
      4: P(4, "limit", "limit", cast="bigint")}),
    ("SELECT events.id FROM events WHERE events.account_id = $1 AND events.created_at "
     "BETWEEN $2 AND $3 ORDER BY events.created_at DESC",
     "select", None, False,
     {1: P(1, "column", "=", ["events"], "account_id"),
      2: P(2, "column", "between_lo", ["events"], "created_at"),
      3: P(3, "column", "between_hi", ["events"], "created_at")}),
    ("SELECT * FROM t WHERE a NOT BETWEEN $1 AND $2",
     "select", None, False,
     {1: P(1, "column", "between_lo", ["t"], "a"), 2: P(2, "column", "between_hi", ["t"], "a")}),
    # LIKE, ILIKE, operators, a parameter on the left (flipped), through lower()
    ("SELECT * FROM users u WHERE u.email LIKE $1 AND u.name ILIKE $2",
     "select", None, False,
     {1: P(1, "column", "like", ["users"], "email"),
      2: P(2, "column", "like", ["users"], "name")}),
    ("SELECT * FROM t WHERE a <> $1 AND b != $2 AND c >= $3 AND d <= $4 AND "
     "e IS DISTINCT FROM $5",
     "select", None, False,
     {1: P(1, "column", "<>", ["t"], "a"), 2: P(2, "column", "<>", ["t"], "b"),
      3: P(3, "column", ">=", ["t"], "c"), 4: P(4, "column", "<=", ["t"], "d"),
      5: P(5, "column", "=", ["t"], "e")}),
    ("SELECT * FROM orders WHERE $1 < id AND $2 >= total",
     "select", None, False,
     {1: P(1, "column", ">", ["orders"], "id"), 2: P(2, "column", "<=", ["orders"], "total")}),
    ("SELECT * FROM users WHERE lower(email) = $1",
     "select", None, False, {1: P(1, "column", "=", ["users"], "email")}),
    # casts: the type the cast names (the parser's names)
    ("SELECT * FROM users WHERE id = $1::int AND created = CAST($2 AS date)",
     "select", None, False,
     {1: P(1, "column", "=", ["users"], "id", "int4"),
      2: P(2, "column", "=", ["users"], "created", "date")}),
    ("SELECT * FROM t WHERE a = $1::varchar(20) AND b = ANY($2::text[]) AND "
     "c > $3::timestamp with time zone AND d = $4::bigint LIMIT $5::int",
     "select", None, False,
     {1: P(1, "column", "=", ["t"], "a", "varchar"),
      2: P(2, "column", "any", ["t"], "b", "text[]"),
      3: P(3, "column", ">", ["t"], "c", "timestamptz"),
      4: P(4, "column", "=", ["t"], "d", "int8"),
      5: P(5, "limit", "limit", cast="int4")}),
    # shape values: an interval, a number times an interval
    ("SELECT c.region, count(*) FROM orders o JOIN customers c ON c.id = o.customer_id "
     "WHERE o.created_at > now() - $1 * interval '1 hour' GROUP BY c.region",
     "select", None, False, {1: P(1, "shape", ">", ["orders"], "created_at")}),
    ('SELECT "posts"."author_id", COUNT(*) FROM "posts" INNER JOIN "comments" ON '
     '"comments"."post_id" = "posts"."id" WHERE "comments"."created_at" > now() - '
     'interval $1 GROUP BY "posts"."author_id" ORDER BY COUNT(*) DESC LIMIT $2',
     "select", None, False,
     {1: P(1, "shape", ">", ["comments"], "created_at", "interval"),
      2: P(2, "limit", "limit", cast="bigint")}),
    # SQLAlchemy's date_trunc('hour', ...) twice: a function's argument meets no column
    ("SELECT date_trunc($1, events.created_at) AS hour, count(events.id) FROM events "
     "WHERE events.created_at > now() - $2 * interval $3 AND events.kind = $4 "
     "GROUP BY date_trunc($5, events.created_at)",
     "select", None, False,
     {1: P(1, "value"), 2: P(2, "shape", ">", ["events"], "created_at"),
      3: P(3, "shape", ">", ["events"], "created_at", "interval"),
      4: P(4, "column", "=", ["events"], "kind"), 5: P(5, "value")}),
    # UNION: each branch's own tables; the LIMIT of the whole
    ("SELECT * FROM a UNION ALL SELECT * FROM b WHERE x = $1 LIMIT $2",
     "select", None, False,
     {1: P(1, "column", "=", ["b"], "x"), 2: P(2, "limit", "limit", cast="bigint")}),
    # a parameter twice: one entry
    ("SELECT * FROM t WHERE x = $1 OR y = $1",
     "select", None, False, {1: P(1, "column", "=", ["t"], "x")}),
    # meets nothing
    ("SELECT $1::int + 1", "select", None, False, {1: P(1, "value", cast="int4")}),
    # sequences: a sequence's name
    ("SELECT nextval($1)", "select", None, False, {1: P(1, "shape", cast="regclass")}),
    ("SELECT setval($1, $2)", "select", None, False,
     {1: P(1, "shape", cast="regclass"), 2: P(2, "value")}),
    # INSERT: by position, multi-row, RETURNING
    ("INSERT INTO orders (customer_id, status) VALUES ($1, $2), ($3, $4) RETURNING id",
     "insert", "orders", False,
     {1: P(1, "column", "insert", ["orders"], "customer_id"),
      2: P(2, "column", "insert", ["orders"], "status"),
      3: P(3, "column", "insert", ["orders"], "customer_id"),
      4: P(4, "column", "insert", ["orders"], "status")}),
    ("INSERT INTO orders (customer_id, created_at, status, total) VALUES "
     "($1, now(), $2, $3) RETURNING id",
     "insert", "orders", False,
     {1: P(1, "column", "insert", ["orders"], "customer_id"),
      2: P(2, "column", "insert", ["orders"], "status"),
      3: P(3, "column", "insert", ["orders"], "total")}),
    ('INSERT INTO "shop_order" ("customer_id", "status", "created_at") VALUES '
     '($1, $2, $3::timestamptz) RETURNING "shop_order"."id"',
     "insert", "shop_order", False,
     {1: P(1, "column", "insert", ["shop_order"], "customer_id"),
      2: P(2, "column", "insert", ["shop_order"], "status"),
      3: P(3, "column", "insert", ["shop_order"], "created_at", "timestamptz")}),
    ("insert into stock_move (moved_at,product_id,qty,id) values ($1,$2,$3,$4)",
     "insert", "stock_move", False,
     {1: P(1, "column", "insert", ["stock_move"], "moved_at"),
      2: P(2, "column", "insert", ["stock_move"], "product_id"),
      3: P(3, "column", "insert", ["stock_move"], "qty"),
      4: P(4, "column", "insert", ["stock_move"], "id")}),
    # INSERT ... SELECT: the select list by position, the WHERE by its own tables
    ("INSERT INTO order_archive (id, customer_id, total) SELECT id, customer_id, total "
     "FROM orders WHERE id = $1",
     "insert", "order_archive", False,
     {1: P(1, "column", "=", ["orders", "order_archive"], "id")}),
    ("INSERT INTO t (a, b) SELECT x.a, $1 FROM x WHERE x.b = $2",
     "insert", "t", False,
     {1: P(1, "column", "insert", ["t"], "b"), 2: P(2, "column", "=", ["x"], "b")}),
    ("INSERT INTO t (a, b) SELECT $1, $2",
     "insert", "t", False,
     {1: P(1, "column", "insert", ["t"], "a"), 2: P(2, "column", "insert", ["t"], "b")}),
    # ON CONFLICT DO UPDATE: EXCLUDED.x (no parameter), x = x + $n (a delta)
    ("INSERT INTO daily_counts (account_id, day, n) VALUES ($1, $2, $3) ON CONFLICT "
     "(account_id, day) DO UPDATE SET n = EXCLUDED.n",
     "insert", "daily_counts", True,
     {1: P(1, "column", "insert", ["daily_counts"], "account_id"),
      2: P(2, "column", "insert", ["daily_counts"], "day"),
      3: P(3, "column", "insert", ["daily_counts"], "n")}),
    ("INSERT INTO daily_counts (account_id, day, n) VALUES ($1, $2, $3) ON CONFLICT "
     "(account_id, day) DO UPDATE SET n = daily_counts.n + $4",
     "insert", "daily_counts", True,
     {1: P(1, "column", "insert", ["daily_counts"], "account_id"),
      2: P(2, "column", "insert", ["daily_counts"], "day"),
      3: P(3, "column", "insert", ["daily_counts"], "n"),
      4: P(4, "shape", "delta", ["daily_counts"], "n")}),
    ("INSERT INTO kv (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = $3",
     "insert", "kv", True,
     {1: P(1, "column", "insert", ["kv"], "k"), 2: P(2, "column", "insert", ["kv"], "v"),
      3: P(3, "column", "set", ["kv"], "v")}),
    # UPDATE: SET x = $n, SET x = x + $n (delta, also Django's parenthesised form)
    ("UPDATE t SET a = $1, b = b + $2 WHERE id = $3",
     "update", "t", False,
     {1: P(1, "column", "set", ["t"], "a"), 2: P(2, "shape", "delta", ["t"], "b"),
      3: P(3, "column", "=", ["t"], "id")}),
    ('UPDATE "shop_product" SET "stock" = ("shop_product"."stock" - $1) '
     'WHERE "shop_product"."id" = $2',
     "update", "shop_product", False,
     {1: P(1, "shape", "delta", ["shop_product"], "stock"),
      2: P(2, "column", "=", ["shop_product"], "id")}),
    # UPDATE ... FROM, DELETE ... USING: the target and the other tables by alias
    ("UPDATE products p SET stock = p.stock - oi.qty FROM order_items oi "
     "WHERE oi.product_id = p.id AND oi.order_id = $1",
     "update", "products", False,
     {1: P(1, "column", "=", ["order_items"], "order_id")}),
    ("UPDATE orders o SET status = $1 FROM customers c WHERE c.id = o.customer_id "
     "AND c.region = $2",
     "update", "orders", False,
     {1: P(1, "column", "set", ["orders"], "status"),
      2: P(2, "column", "=", ["customers"], "region")}),
    ("DELETE FROM orders o USING customers c WHERE c.id = o.customer_id AND "
     "c.region = $1 AND o.status = $2 RETURNING o.id",
     "delete", "orders", False,
     {1: P(1, "column", "=", ["customers"], "region"),
      2: P(2, "column", "=", ["orders"], "status")}),
    ("DELETE FROM sessions WHERE expires < $1",
     "delete", "sessions", False, {1: P(1, "column", "<", ["sessions"], "expires")}),
    # schema-qualified
    ("SELECT * FROM public.users u WHERE u.id = $1",
     "select", None, False, {1: P(1, "column", "=", ["public.users"], "id")}),
    ("UPDATE public.pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2",
     "update", "public.pgbench_accounts", False,
     {1: P(1, "shape", "delta", ["public.pgbench_accounts"], "abalance"),
      2: P(2, "column", "=", ["public.pgbench_accounts"], "aid")}),
    # a data-modifying CTE
    ("WITH x AS (UPDATE t SET a = $1 WHERE id = $2 RETURNING *) SELECT * FROM x",
     "select", None, False,
     {1: P(1, "column", "set", ["t"], "a"), 2: P(2, "column", "=", ["t"], "id")}),
]


@pytest.mark.parametrize("query, kind, target, upsert, params", SHAPES,
                         ids=[s[0][:60] for s in SHAPES])
def test_each_parameter_is_what_it_meets(query, kind, target, upsert, params):
    sh = shape(query)
    assert (sh.kind, sh.target, sh.upsert) == (kind, target, upsert)
    assert sh.params == params
    assert list(sh.params) == sorted(sh.params)
    assert sh.writes == (kind in ("insert", "update", "delete", "merge"))
    assert sh.fingerprint == fingerprint(query) != ""


@pytest.mark.parametrize("query, is_range", [
    ("SELECT * FROM t WHERE a > $1", True),
    ("SELECT * FROM t WHERE a <= $1", True),
    ("SELECT * FROM t WHERE a BETWEEN $1 AND $2", True),
    ("SELECT * FROM t WHERE a = $1", False),
    ("SELECT * FROM t WHERE a <> $1", False),
    ("SELECT * FROM t WHERE a LIKE $1", False),
    ("SELECT * FROM t WHERE a IN ($1, $2)", False),
])
def test_ranges(query, is_range):
    assert shape(query).params[1].is_range is is_range


def test_a_parameter_the_walk_misses_is_still_a_value_and_strings_are_not_parameters():
    # $3 in a comment and '$1' in a string are no parameters
    assert params_of("SELECT '$1', $2 /* $3 */ -- $4\n, $5, $2") == [2, 5]
    assert params_of("SELECT FROM WHERE '") == []
    assert shape("SELECT '$1' AS x, $2 FROM t").params == {2: P(2, "value")}
    # MERGE is read: its kind, and every $n of its text has an entry
    sh = shape("MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET a = $1")
    assert (sh.kind, sh.writes, list(sh.params)) == ("merge", True, [1])


@pytest.mark.parametrize("query, why", [
    ("SELECT FROM WHERE", "PostgreSQL's parser cannot read it (syntax error at or near "
                          "\"WHERE\", at index 12)"),
    ("SELECT 1; SELECT 2", "it holds 2 statements"),
    ("", "it holds 0 statements"),
])
def test_what_the_parser_cannot_read_is_a_shape_error(query, why):
    with pytest.raises(ShapeError) as e:
        shape(query)
    assert str(e.value) == why
    assert isinstance(e.value, ValueError)


def test_a_row_assignment_binds_each_parameter_to_its_own_column():
    sh = shape("UPDATE t SET (a, b) = ($1, $2) WHERE id = $3")
    assert sh.params[1] == P(1, "column", "set", ["t"], "a")
    assert sh.params[2] == P(2, "column", "set", ["t"], "b")


def test_nextval_in_insert_values_is_a_sequence_name():
    sh = shape("INSERT INTO t (id, a) VALUES (nextval($1), $2)")
    assert sh.params[1].cast == "regclass"
    assert sh.params[2] == P(2, "column", "insert", ["t"], "a")


# (template, concrete, params, recovered)
ALIGN = [
    # literals inline (pg_stat_activity, simple protocol)
    ('SELECT "shop_customer"."id" FROM "shop_customer" WHERE "shop_customer"."id" = $1 '
     'LIMIT $2',
     'SELECT "shop_customer"."id" FROM "shop_customer" WHERE "shop_customer"."id" = 42 '
     'LIMIT 21', None, {1: 42, 2: 21}),
    ("SELECT * FROM users ORDER BY id LIMIT $1", "SELECT * FROM users ORDER BY id LIMIT 10",
     None, {1: 10}),
    ("SELECT * FROM users WHERE email = $1 LIMIT $2 OFFSET $3",
     "select * from users where email = 'it''s' limit 20 offset 40", None,
     {1: "it's", 2: 20, 3: 40}),
    # typed literals: interval '30 days' is normalised as interval $1
    ("SELECT * FROM e WHERE created_at > now() - interval $1",
     "SELECT * FROM e WHERE created_at > now() - interval '30 days'", None, {1: "30 days"}),
    ("SELECT * FROM e WHERE created_at > now() - $1::interval",
     "SELECT * FROM e WHERE created_at > now() - '2 hours'::interval", None,
     {1: "2 hours"}),
    ("SELECT * FROM e WHERE created_at > now() - $1 * interval '1 hour'",
     "SELECT * FROM e WHERE created_at > now() - 336 * interval '1 hour'", None,
     {1: 336}),
    ("SELECT * FROM t WHERE created > $1::timestamptz",
     "SELECT * FROM t WHERE created > '2024-01-01 00:00:00+00'::timestamptz", None,
     {1: "2024-01-01 00:00:00+00"}),
    # pg_stat_statements wrote $1::timestamptz; the application an untyped literal
    ("SELECT * FROM t WHERE created > $1::timestamptz",
     "SELECT * FROM t WHERE created > '2024-01-01'", None, {1: "2024-01-01"}),
    ("SELECT date_trunc($1, created_at) FROM t", "SELECT date_trunc('hour', created_at) FROM t",
     None, {1: "hour"}),
    # numbers, booleans, NULL: as a client would bind them
    ("SELECT * FROM t WHERE a = $1 AND b = $2 AND c = $3 AND d = $4",
     "SELECT * FROM t WHERE a = -3 AND b = 1.5 AND c = true AND d = NULL", None,
     {1: -3, 2: 1.5, 3: "true", 4: None}),
    # PostgreSQL 18 squashes a list of constants: the parameter gets the whole list
    ("SELECT * FROM users WHERE id IN ($1 /*, ... */)",
     "SELECT * FROM users WHERE id IN (1, 2, 3, 4, 5)", None,
     {1: [1, 2, 3, 4, 5]}),
    ("SELECT * FROM t WHERE a IN ($1 /*, ... */) AND b = $2",
     "SELECT * FROM t WHERE a IN ($1, $2, $3) AND b = $4",
     {1: "x", 2: "y", 3: "z", 4: "w"}, {1: ["x", "y", "z"], 2: "w"}),
    ("SELECT * FROM t WHERE a = ANY(ARRAY[$1 /*, ... */])",
     "SELECT * FROM t WHERE a = ANY(ARRAY[7, 8])", None, {1: [7, 8]}),
    # before 18: one parameter per element
    ("SELECT * FROM users WHERE id IN ($1, $2, $3)",
     "SELECT * FROM users WHERE id IN (1, 2, 3)", None, {1: 1, 2: 2, 3: 3}),
    ("SELECT * FROM users WHERE id IN ($1, $2, $3)",
     "SELECT * FROM users WHERE id IN (1, 2)", None, {}),
    # = ANY($1): an array literal as its text, an ARRAY[] as a list
    ("SELECT * FROM t WHERE x = ANY($1)", "SELECT * FROM t WHERE x = ANY('{1,2}')", None,
     {1: "{1,2}"}),
    ("SELECT * FROM t WHERE x = ANY($1)", "SELECT * FROM t WHERE x = ANY(ARRAY[1,2])", None,
     {1: [1, 2]}),
    # bound parameters from the log's DETAIL, and a constant the application inlined
    ("SELECT * FROM users WHERE id = $1", "SELECT * FROM users WHERE id = $1", {1: "4711"},
     {1: "4711"}),
    ("SELECT * FROM users WHERE id = $1 LIMIT $2", "SELECT * FROM users WHERE id = $1 LIMIT 20",
     {1: "4711"}, {1: "4711", 2: 20}),
    ("SELECT * FROM users WHERE id = $1 LIMIT $2", "SELECT * FROM users WHERE id = $1 LIMIT $2",
     {1: "4711"}, {1: "4711", 2: None}),
    ("INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4)",
     "INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y')", None,
     {1: 1, 2: "x", 3: 2, 4: "y"}),
    # an expression where the template has a parameter: as SQL text
    ("SELECT * FROM t WHERE a = $1", "SELECT * FROM t WHERE a = abs(5)", None, {1: "abs(5)"}),
    # a constant pg_stat_statements kept must be the same
    ("SELECT * FROM t WHERE a = $1 AND b = 'x'", "SELECT * FROM t WHERE a = 5 AND b = 'x'",
     None, {1: 5}),
    # a quoted number is the text the application wrote, not a number
    ("SELECT * FROM t WHERE a = $1 AND b = 'x'", "SELECT * FROM t WHERE a = '5' AND b = 'x'",
     None, {1: "5"}),
    ("SELECT * FROM t WHERE a = $1 AND b = 'x'", "SELECT * FROM t WHERE a = 5 AND b = 'y'",
     None, {}),
    # not the same statement, or not one statement
    ("SELECT * FROM users WHERE id = $1", "SELECT * FROM orders WHERE id = 1", None, {}),
    ("SELECT * FROM users WHERE id = $1", "SELECT * FROM users WHERE uid = 1", None, {}),
    ("SELECT * FROM t WHERE a = $1", "SELECT * FROM t WHERE a = 5; SELECT 1", None, {}),
    ("SELECT * FROM t WHERE a = $1", "SELECT * FROM t WHERE", None, {}),
]


@pytest.mark.parametrize("template, concrete, params, want", ALIGN,
                         ids=[f"{i}:{a[1][:50]}" for i, a in enumerate(ALIGN)])
def test_align_recovers_what_each_parameter_stood_for(template, concrete, params, want):
    assert align(template, concrete, params) == want


@pytest.mark.parametrize("a, b, same", [
    ("SELECT * FROM t WHERE a = $1", "select *  from T where A = 42", True),
    ("SELECT * FROM t WHERE a = $1", "SELECT * FROM t WHERE a = 'x'", True),
    ("SELECT * FROM t LIMIT $1", "SELECT * FROM t LIMIT 10", True),
    ("SELECT * FROM t WHERE c > now() - interval $1",
     "SELECT * FROM t WHERE c > now() - interval '30 days'", True),
    ("SELECT * FROM t WHERE a IN ($1 /*, ... */)", "SELECT * FROM t WHERE a IN (1, 2, 3)", True),
    ("SELECT a FROM t WHERE id = $1", "SELECT b FROM t WHERE id = $1", False),
    ("SELECT * FROM t WHERE a = $1", "SELECT * FROM t WHERE b = $1", False),
    ("SELECT * FROM t WHERE a = $1", "SELECT * FROM t WHERE a > $1", False),
    ("INSERT INTO t (id, v) VALUES ($1, $2)",
     "INSERT INTO t (id, v) VALUES (nextval('q'), $1)", False),
])
def test_fingerprint_ignores_constants_only(a, b, same):
    assert (fingerprint(a) == fingerprint(b)) is same
    assert fingerprint(a) and fingerprint(b)


def test_a_fingerprint_of_what_the_parser_cannot_read_is_empty():
    assert fingerprint("SELECT FROM WHERE") == ""


@pytest.mark.parametrize("query, want", [
    ("SELECT * FROM e WHERE created_at > now() - interval $1 LIMIT $2",
     "SELECT * FROM e WHERE created_at > now() - CAST(:p1 AS interval) LIMIT :p2"),
    ('SELECT "u"."id" FROM "users" "u" WHERE "u"."email" = $1',
     "SELECT u.id FROM users AS u WHERE u.email = :p1"),
    ("SELECT * FROM t WHERE a IN ($1 /*, ... */)", "SELECT * FROM t WHERE a IN (:p1)"),
    ("INSERT INTO t (a, b) VALUES ($1, $2) ON CONFLICT (a) DO UPDATE SET b = EXCLUDED.b",
     "INSERT INTO t (a, b) VALUES (:p1, :p2) ON CONFLICT (a) DO UPDATE SET b = excluded.b"),
    ("select a -- a note\nfrom t where id = $1", "SELECT a FROM t WHERE id = :p1"),
    ("SELECT '$1' AS x, $2 FROM t", "SELECT '$1' AS x, :p2 FROM t"),
    ("SELECT * FROM t WHERE x = $10 AND y = $1", "SELECT * FROM t WHERE x = :p10 AND y = :p1"),
    ("SELECT $1::int", "SELECT CAST(:p1 AS integer)"),
    ("SELECT * FROM t WHERE d = CAST($1 AS date)", "SELECT * FROM t WHERE d = CAST(:p1 AS date)"),
])
def test_executable_is_valid_sql_with_each_parameter_replaced(query, want):
    assert executable(query, lambda n: f":p{n}") == want


def test_executable_takes_any_substitute_and_refuses_what_it_cannot_read():
    q = "SELECT * FROM t WHERE a = $1 AND b = $2"
    assert executable(q, {1: "DEFAULT", 2: "'it''s'"}.__getitem__) == \
        "SELECT * FROM t WHERE a = DEFAULT AND b = 'it''s'"
    with pytest.raises(ShapeError):
        executable("SELECT FROM WHERE", str)


@pytest.mark.parametrize("query, want", [
    ("SELECT 1", False),
    ("SELECT * FROM t FOR UPDATE", False),
    ("WITH x AS (SELECT 1) SELECT * FROM x", False),
    ("select nextval('s')", False),
    ("INSERT INTO t VALUES (1)", True),
    ("  update t set a = 1", True),
    ("delete from t", True),
    ("WITH x AS (UPDATE t SET a = 1 RETURNING *) SELECT * FROM x", True),
    ("WITH x AS (DELETE FROM t RETURNING *) INSERT INTO u SELECT * FROM x", True),
    ("MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE", True),
    # what the parser cannot read: by its first word
    ("INSERT INTO broken (", True),
    ("DELETE FROM broken WHERE", True),
    ("SELECT broken FROM", False),
])
def test_writes(query, want):
    assert writes(query) is want
