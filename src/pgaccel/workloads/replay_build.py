"""Preparing a captured workload's replay on the lab's server (the effects around
``capture/replay.py``'s pure plans): the restored tables' catalog, each statement's
parameter types by PREPARE, samples of the rows the draws read, the fit of ranges and
guessed numbers by EXPLAIN (ANALYZE, BUFFERS), and the scripts and draw tables written to
the bench database.  docs/workloads.md says what a replay understands."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import psycopg
from psycopg import sql

from ..capture import fit
from ..capture.replay import (MIN_REPLAYED_SHARE, Catalog, StatementPlan, column_casts,
                              constant_sql, coverage, draw_rows, inline_constants, literal,
                              param_casts,
                              plan_statement, replayable, samples_needed, script_text,
                              weights)
from ..capture.sqlshape import executable, fingerprint
from ..capture.statements import Statement
from ..errors import UsageError

DRAW = "pgaccel_replay_d{number}"
FIT_S = 10.0                # one statement's fit tries candidates this long at most
SAMPLE_ROWS = 10_000
FIT_DRAWS = 200             # drawn tuples per candidate at most (the same keys for each)


def catalog(conn) -> Catalog:
    """The restored tables' columns and types, the columns a sequence or identity
    fills, the single-column unique ones, and the sequences no column owns."""
    cols: dict[str, dict[str, str]] = {}
    generated, unique = set(), set()
    for schema, table, col, typ, gen, uniq in conn.execute(
            "SELECT n.nspname, c.relname, a.attname, format_type(a.atttypid, NULL), "
            "a.attidentity <> '' OR coalesce(pg_get_expr(d.adbin, d.adrelid), '') "
            "LIKE 'nextval(%%', EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = "
            "c.oid AND i.indisunique AND i.indnatts = 1 AND i.indkey[0] = a.attnum) "
            "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum "
            "WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND a.attnum > 0 "
            "AND NOT a.attisdropped AND n.nspname NOT IN ('pg_catalog', "
            "'information_schema', 'pg_toast') AND c.relname NOT LIKE 'pgaccel_replay%%'"
            ).fetchall():
        for key in (f"{schema}.{table}", table):
            cols.setdefault(key, {})[col] = typ
            if gen:
                generated.add((key, col))
            if uniq:
                unique.add((key, col))
    seqs = tuple(r[0] for r in conn.execute(
        "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'S' "
        "AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND NOT EXISTS "
        "(SELECT 1 FROM pg_depend d WHERE (d.classid = 'pg_class'::regclass "
        "AND d.objid = c.oid AND d.deptype IN ('a', 'i')) OR (d.refobjid = c.oid "
        "AND d.classid = 'pg_attrdef'::regclass)) ORDER BY 1").fetchall())
    return Catalog(cols, frozenset(generated), frozenset(unique), seqs)


def server_types(conn, query: str, inline: dict[int, str], casts: dict[int, str]
           ) -> tuple[dict[int, str], str | None]:
    """The server's type of each ``$n`` (a PREPARE of the statement with its one-valued
    constants inline and ``casts`` around the others, deallocated), or why the server
    refuses the statement."""
    order: dict[int, int] = {}
    typed = param_casts(query)

    def subst(n: int) -> str:
        if n in inline:
            return constant_sql(inline[n], typed.get(n))
        order.setdefault(n, len(order) + 1)
        return f"CAST(${order[n]} AS {casts[n]})" if n in casts else f"${order[n]}"
    try:
        text = executable(query, subst)
    except Exception as e:         # noqa: BLE001 - the parser's own message, said
        return {}, f"PostgreSQL's parser cannot read it ({e})"
    try:
        with conn.transaction():
            conn.execute(f"PREPARE pgaccel_replay_t AS {text}")
            row = conn.execute("SELECT parameter_types::text[] FROM "
                               "pg_prepared_statements WHERE name = 'pgaccel_replay_t'"
                               ).fetchone()
            conn.execute("DEALLOCATE pgaccel_replay_t")
    except psycopg.Error as e:
        first = (str(e).strip().splitlines() or ["?"])[0]
        return {}, f"the lab's server refuses it: {first}"
    types = list(row[0] or [])
    return {n: types[k - 1] for n, k in order.items() if k - 1 < len(types)}, None


def statement_plans(conn, statements: list[Statement], constants: dict, values: dict
                    ) -> list[StatementPlan]:
    """Every replayable statement's plan: its parameters' types from the server, each
    parameter's draw (``replay.plan_statement``), or why it is not replayed."""
    cat = catalog(conn)
    out = []
    for i, st in enumerate(replayable(statements)):
        consts = constants.get(st.queryid)
        inline = inline_constants(consts)
        types, refused = server_types(conn, st.query, inline, {})
        casts = {}
        if refused and ("not unique" in refused or "could not determine" in refused):
            casts = column_casts(st.query, cat)     # $2 + $3: typed as the column
            types, again = server_types(conn, st.query, inline, casts)
            refused = again and refused
        if refused:
            out.append(StatementPlan(i, st, fingerprint(st.query), skipped=refused))
            continue
        plan = plan_statement(i, st, cat, types, consts, values.get(st.queryid, ()))
        plan.casts = casts
        out.append(plan)
    return out


def fitted_draws(conn, plans: list[StatementPlan], errors: list[str]
                 ) -> dict[int, list[list]]:
    """Each drawn statement's parameter rows, from samples of the restored tables, with
    the plans whose ranges and guessed numbers a fit narrowed put in their place."""
    samples = sample(conn, samples_needed(plans))
    for i, p in enumerate(plans):
        plans[i] = fit_plan(conn, p, samples, errors)
    return {p.number: draw_rows(p, samples, seed=1) for p in plans if not p.skipped and p.drawn}


def write_scripts(conn, statements: list[Statement], plans: list[StatementPlan],
                  draws: dict[int, list[list]]) -> None:
    """The replay's scripts and draw tables in the bench database (``pgaccel_replay``,
    ``pgaccel_replay_d{n}``); a UsageError naming the statements left out when less than
    :data:`MIN_REPLAYED_SHARE` of the captured time would replay."""
    conn.execute("DROP TABLE IF EXISTS pgaccel_replay")
    conn.execute("CREATE TABLE pgaccel_replay (number int PRIMARY KEY, weight bigint, "
                 "script text, query text, skipped text, share_time float8, "
                 "share_calls float8, writes bool, guesses text[], replayed_fp text, "
                 "casts text)")
    ws = dict(zip((p.number for p in plans), weights([p.statement.calls for p in plans])))
    for p in plans:
        st = p.statement
        script = None
        if not p.skipped:
            table = DRAW.format(number=p.number)
            rows = draws.get(p.number, [])
            draw_table(conn, table, p.drawn, rows)
            try:
                script = script_text(p, table, len(rows), next_values(conn, p))
            except psycopg.Error as e:
                p.skipped = f"its new keys cannot be made ({str(e).splitlines()[0]})"
            if p.drawn and any(v is None for r in rows for v in r) and not p.tuples:
                p.skipped = "a column its parameters are drawn from has no values"
        conn.execute("INSERT INTO pgaccel_replay VALUES (%s, %s, %s, %s, %s, %s, %s, %s, "
                     "%s, %s, %s)", (p.number, 0 if p.skipped else ws[p.number],
                                     None if p.skipped else script, st.query, p.skipped,
                                     st.share_time, st.share_calls, p.writes, p.guesses,
                                     replayed_fp(script), json.dumps(p.casts or {})))
    t, _c, left, _tx = coverage(statements, plans)
    if t < MIN_REPLAYED_SHARE:
        worst = "; ".join(f"'{' '.join(x.query.split())[:60]}' ({x.share_time:.0%} of "
                          f"the time): {x.reason}" for x in left[:3])
        raise UsageError(
            f"Only {t:.0%} of the captured statements' time can be replayed. "
            f"Not replayed: {worst}.",
            "Capture with --log --with-values to keep the values the server saw; "
            "docs/workloads.md lists what a replay understands.")


def fit_plan(conn, plan: StatementPlan, samples: dict, errors: list[str]
             ) -> StatementPlan:
    """The candidate (``capture/fit.py``) whose shared blocks and rows per call on
    the restored data come nearest the captured ones, by EXPLAIN (ANALYZE, BUFFERS) of
    drawn tuples, raced by successive halving (:func:`fit.rungs`, :func:`fit.keep`) up to
    :data:`FIT_DRAWS` tuples each and :data:`FIT_S` seconds; the plan as it was when nothing
    needs fitting."""
    st = plan.statement
    if not any(fit.targets(plan)) or not st.calls:
        return plan
    want = ((st.blocks or 0) / st.calls, st.rows / st.calls)
    timeout = int(max(2000, 20 * st.mean_ms))
    cands = list(fit.candidates(plan))
    # the first rung as many tuples as the time allows (an EXPLAIN costs about 1 ms more
    # than the statement); with skewed keys a mean of a few is a lottery, so the ones still
    # in question get more
    first = int(min(fit.FIRST_DRAWS,
                    max(3, FIT_S * 1000 / (len(cands) * max(st.mean_ms, 1.0)))))
    started = time.monotonic()

    def measure(k: int, lo: int, hi: int) -> list[fit.Measured]:
        label, cand = cands[k]
        out = []
        try:
            # one transaction a candidate and rung (only reads are fitted)
            with conn.transaction():
                conn.execute(f"SET LOCAL statement_timeout = {timeout}")
                for row in draw_rows(cand, samples, seed=1, n=hi)[lo:]:
                    vals = dict(zip(cand.drawn, row))
                    text = executable(st.query, lambda i: concrete(cand, i, vals))
                    doc = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + text
                                       ).fetchone()[0]
                    top = (doc[0] if isinstance(doc, list) else doc)["Plan"]
                    out.append((top.get("Shared Hit Blocks", 0)
                                + top.get("Shared Read Blocks", 0),
                                top.get("Actual Rows", 0) * top.get("Actual Loops", 1),
                                top.get("Actual Total Time", 0.0)))
        except psycopg.Error as e:
            raise fit.Failed(f"{label}: {str(e).splitlines()[0]}") from e
        return out

    timed: list[bool] = []
    tried = fit.race(cands, first, FIT_DRAWS, want, st.mean_ms, measure,
                     lambda: time.monotonic() - started > FIT_S,
                     lambda _k, e: errors.append(str(e)), timed)
    chosen = fit.choose(want, st.mean_ms, tried)
    if chosen is None:
        return plan
    (what, best), by_time = chosen
    by_time = by_time or bool(timed)
    if best is not plan:
        best.guesses = [g for g in best.guesses if not g.startswith(
            tuple(f"${n} = 1 " for n in fit.targets(plan)[1]))]
        best.guesses.append(f"{what}: fitted to the {want[0]:.3g} shared blocks and "
                            f"{want[1]:.3g} rows per call captured"
                            + (f", and to its {st.mean_ms:.3g} ms per call, which alone "
                               "told the nearest apart" if by_time else ""))
    return best


def sample(conn, need: dict[str, list[str]]) -> dict[str, list[dict]]:
    """Rows of each table the draws read (the columns they need, as text; the same
    rows on every server: a fixed seed over the same restored data)."""
    out = {}
    for table, columns in need.items():
        sel = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c))
                                 for c in columns)
        notnull = sql.SQL(" AND ").join(sql.SQL("{} IS NOT NULL").format(
            sql.Identifier(c)) for c in columns)
        with conn.transaction():
            conn.execute("SELECT setseed(0.25)")
            rows = conn.execute(sql.SQL(
                "SELECT {sel} FROM {t} WHERE {nn} ORDER BY random() LIMIT {lim}").format(
                sel=sel, t=table_ident(table), nn=notnull, lim=sql.Literal(SAMPLE_ROWS))
                ).fetchall()
        out[table] = [dict(zip(columns, r)) for r in rows]
    return out


def draw_table(conn, name: str, drawn: list[int], rows: list[list]) -> None:
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))
    if not drawn:
        return
    cols = sql.SQL(", ").join(sql.SQL("{} text").format(sql.Identifier(f"p{n}"))
                              for n in drawn)
    conn.execute(sql.SQL("CREATE TABLE {} (i int PRIMARY KEY, {})").format(
        sql.Identifier(name), cols))
    with conn.cursor() as cur:
        with cur.copy(sql.SQL("COPY {} FROM STDIN").format(sql.Identifier(name))) as cp:
            for j, r in enumerate(rows):
                cp.write_row((j + 1, *r))


def next_values(conn, p: StatementPlan) -> dict[int, str]:
    """The SQL that makes a new unique key for each ``next`` parameter: a sequence of
    the replay's from beyond the largest integer key; a fresh uuid; else a random
    text."""
    out = {}
    for n, d in p.draws.items():
        if d.kind != "next":
            continue
        t = (d.type or "").lower()
        if t in ("smallint", "integer", "bigint"):
            seq = f"pgaccel_replay_q{p.number}_{n}"
            top = conn.execute(sql.SQL("SELECT coalesce(max({c}), 0) FROM {t}").format(
                c=sql.Identifier(d.column), t=table_ident(d.table))).fetchone()[0]
            conn.execute(sql.SQL("DROP SEQUENCE IF EXISTS {}").format(
                sql.Identifier(seq)))
            conn.execute(sql.SQL("CREATE SEQUENCE {} START {}").format(
                sql.Identifier(seq), sql.Literal(int(top) + 1)))
            out[n] = f"nextval('{seq}')"
        elif t == "uuid":
            out[n] = "gen_random_uuid()"
        else:
            out[n] = "md5(random()::text || clock_timestamp()::text)"
    return out


def concrete(plan: StatementPlan, n: int, vals: dict[int, Any]) -> str:
    """A parameter as a literal, for an EXPLAIN of one drawn tuple."""
    d = plan.draws.get(n)
    if d is None:
        return "NULL"
    if d.inline:
        return constant_sql(d.values[0][0], param_casts(plan.statement.query).get(n))
    v = vals.get(n)
    if v is None:
        return "NULL"
    lit = literal(v)
    return f"CAST({lit} AS {plan.casts[n]})" if n in plan.casts else lit


def replayed_fp(script: str | None) -> str | None:
    """The fingerprint of the statement as a script runs it (its last line)."""
    if not script:
        return None
    last = script.rstrip().rsplit("\n", 1)[-1].rstrip(";")
    return fingerprint(re.sub(r"(?<![:\w]):p(\d+)", r"$\1", last)) or None


def table_ident(name: str) -> sql.Composable:
    return sql.SQL(".").join(sql.Identifier(p) for p in name.split("."))
