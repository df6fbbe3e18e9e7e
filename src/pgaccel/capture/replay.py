"""A captured mix as pgbench scripts, and how faithful a replay was (pure).

Each captured statement becomes one pgbench script, weighted by its calls, so pgbench runs
the statements in the captured proportions (a "transaction" is one statement).  Each
parameter's value (``capture/sqlshape.py`` says what it meets) comes, in this order, from:

1. the values captured for the statement (``--with-values``: whole tuples from the log or
   from samples of pg_stat_activity);
2. a column it is compared with or written to: drawn from the restored rows (a row sample
   of the table, the distribution pg_stats summarises; parameters on one table drawn from one
   row, so ``a = $1 AND b = $2`` finds rows; ``BETWEEN`` ordered; ``= ANY($1)`` an array of
   rows' values; ``LIKE`` a prefix); an insert into a serial or identity column writes
   ``DEFAULT``, one into another unique key a value beyond the largest;
3. the constants captured for it (a ``LIMIT 20``, an ``interval '30 days'`` written in the
   application's text that pg_stat_statements normalised: read from the log and from
   pg_stat_activity, kept in the bundle's statements.json, as they are the statement's
   shape, not data);
4. a guess by the type the server gives the parameter, said per statement (``LIMIT``: the
   rows per call the capture measured; ``OFFSET`` 0; a number 1; an interval 1 day; a
   timestamp now).

A statement whose parameter none of these reach is not replayed, with the reason; so is
one the parser cannot read.  Every statement left out is listed with its shares.

Fidelity: the lab server's pg_stat_statements during the replay against the captured mix,
statement by statement (matched by libpg_query's fingerprint, which ignores constants):
each one's share of calls and of time, for every statement replayed.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from .sqlshape import Param, Shape, ShapeError, executable, fingerprint, shape
from .statements import TRANSACTION, UTILITY, Statement, is_plannable

OTHER = "(other statements)"
# replayed statements' share of the captured time below which the replay is refused
MIN_REPLAYED_SHARE = 0.5
FIDELITY_TOLERANCE = 0.10         # a statement's share may be this far off (absolute)
COST_FACTOR = 2.0                 # a statement's mean time may be this far off (ratio)
TIME_FLOOR_MS = 1.0               # ... when it takes this long
BLOCKS_FLOOR = 10                 # its shared blocks per call, when it reads this many
DRAWS = 1000                      # pre-drawn parameter tuples per statement
ANY_DEFAULT = 10                  # values in an = ANY($n) array when none was captured
INTEGER_TYPES = {"smallint", "integer", "bigint", "int2", "int4", "int8", "numeric",
                 "real", "double precision", "float4", "float8", "oid"}


@dataclass(frozen=True)
class Catalog:
    """The restored database's tables (name and schema.name -> column -> type), the
    columns filled by a default sequence or identity, the unique ones, and the sequences
    that no column default or identity owns (those an application calls nextval on)."""
    columns: Mapping[str, Mapping[str, str]]
    generated: frozenset = frozenset()          # (table, column)
    unique: frozenset = frozenset()             # (table, column)
    free_sequences: tuple[str, ...] = ()        # schema-qualified, sorted

    def find(self, p: Param) -> tuple[str, str, str] | None:
        """(table, column, type) of a parameter's column, first table in scope that has it."""
        for t in p.tables:
            for name in (t, t.rsplit(".", 1)[-1]):
                cols = self.columns.get(name)
                if cols and p.column in cols:
                    return name, p.column, cols[p.column]
        return None


@dataclass(frozen=True)
class Draw:
    """How one parameter gets its value: ``column`` (from ``table.column``'s rows, by
    ``op``), ``const`` (``values``: captured constants and their counts, or one guess),
    ``default`` (DEFAULT), ``next`` (beyond the largest key: ``type`` says how),
    ``tuple`` (from the captured tuples)."""
    kind: str
    table: str | None = None
    column: str | None = None
    type: str | None = None
    op: str = "other"
    values: tuple[tuple[str | None, int], ...] = ()
    why: str = ""
    window: float | None = None       # a range's share of the rows (fitted), else any row
    size: int | None = None           # distinct values in an = ANY($n) array (fitted), else
    #                                   ANY_DEFAULT
    hot: bool = False                 # an array's values favour the frequent ones (fitted):
    #                                   each drawn by the square of its count in the sample

    @property
    def inline(self) -> bool:
        """One constant: written into the statement as the literal the application wrote
        (``date_trunc('hour', ...)`` twice stays one expression for GROUP BY)."""
        return self.kind == "const" and len(self.values) == 1 and self.values[0][0] is not None


@dataclass
class StatementPlan:
    """One statement's replay: its draws, or why it is not replayed."""
    number: int
    statement: Statement
    fingerprint: str = ""
    writes: bool = False
    draws: dict[int, Draw] = field(default_factory=dict)
    skipped: str | None = None
    guesses: list[str] = field(default_factory=list)
    tuples: list[dict[int, Any]] = field(default_factory=list)
    casts: dict[int, str] = field(default_factory=dict)     # $n -> the type it is cast to

    @property
    def drawn(self) -> list[int]:
        """The parameters read from the statement's draw table."""
        return [n for n, d in self.draws.items()
                if d.kind in ("column", "const", "tuple") and not d.inline]


def replayable(stmts: Iterable[Statement]) -> list[Statement]:
    return [s for s in stmts if s.queryid and is_plannable(s.query)]


def _guess(p: Param, typ: str, st: Statement) -> tuple[str, str] | None:
    """A typed value for a parameter nothing else reaches, and how it was chosen."""
    t = (typ or p.cast or "").lower()
    if p.role == "limit":
        per = round(st.rows / st.calls) if st.calls else 0
        v = max(1, per) if per else 10
        return str(v), f"LIMIT ${p.number} = {v} (the rows per call captured)"
    if p.role == "offset":
        return "0", f"OFFSET ${p.number} = 0"
    if t.endswith("[]"):
        return None
    if t in INTEGER_TYPES or p.op == "delta":
        return "1", f"${p.number} = 1 (a number nothing captured)"
    if t == "interval":
        return "1 day", f"${p.number} = interval '1 day'"
    if t.startswith("timestamp") or t.startswith("time"):
        return "now", f"${p.number} = now()"
    if t == "date":
        return "today", f"${p.number} = current_date"
    if t == "boolean":
        return "true", f"${p.number} = true"
    return None


def _sequence_guess(p: Param, typ: str, catalog: Catalog) -> tuple[str, str] | None:
    """``nextval($1)`` whose sequence the capture did not see (pg_stat_activity's samples
    missed it and there was no log): a sequence no column owns, as the application names
    one that its INSERTs then write explicitly. Which one changes nothing a replay measures
    (every nextval costs the same), so the first, said."""
    if (typ or p.cast or "").lower() != "regclass" or not catalog.free_sequences:
        return None
    seqs = catalog.free_sequences
    which = ("the database's only sequence no column owns" if len(seqs) == 1 else
             f"one of the {len(seqs)} sequences no column owns")
    return seqs[0], (f"${p.number} = '{seqs[0]}' ({which}: the capture did not see "
                     "which one; capture --log records it)")


def literal(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def constant_sql(value: Any, cast: str | None = None) -> str:
    """A constant written back where the statement had it: a number literal as a number
    (``sold_on - 7``: quoted, the server would read a date), a string literal, a typed
    literal's value (``interval $1``) and a guess quoted (``lpad(s, 5, '0')``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and cast is None:
        v = repr(value) if isinstance(value, float) else str(value)
        return f"({v})" if v.startswith("-") else v
    return literal(str(value))


def param_casts(query: str) -> dict[int, str | None]:
    """Each ``$n``'s type name where the text casts it (``interval $1``, ``$2::int``)."""
    return dict(_param_casts(query))


@functools.lru_cache(maxsize=256)
def _param_casts(query: str) -> tuple[tuple[int, str | None], ...]:
    # parsed once per statement: a fit asks for every drawn tuple's literals
    try:
        return tuple((n, p.cast) for n, p in shape(query).params.items())
    except ShapeError:
        return ()


def column_casts(query: str, catalog: Catalog) -> dict[int, str]:
    """For a statement the server cannot type (``col BETWEEN $1 AND $2 + $3``: unknown +
    unknown), each parameter that meets a column cast to the column's type."""
    try:
        sh = shape(query)
    except ShapeError:
        return {}
    out = {}
    for n, p in sh.params.items():
        # the column's own parameters only: an offset ($3 of ``$2 + $3``) is left to the
        # server, which types it from the cast anchor (an interval beside a timestamp)
        found = catalog.find(p) if p.role == "column" else None
        if found is not None:
            out[n] = found[2] + ("[]" if p.op == "any" else "")
    return out


def inline_constants(constants: Mapping[int, Sequence[tuple[str | None, int]]] | None
                     ) -> dict[int, str]:
    """The captured constants seen with one value only: written inline."""
    return {n: vs[0][0] for n, vs in (constants or {}).items()
            if len(vs) == 1 and vs[0][0] is not None and not isinstance(vs[0][0], list)}


def plan_statement(number: int, st: Statement, catalog: Catalog,
                   types: Mapping[int, str] | None = None,
                   constants: Mapping[int, Sequence[tuple[str | None, int]]] | None = None,
                   tuples: Sequence[Mapping[int, Any]] = ()) -> StatementPlan:
    """How a statement replays (``types``: the server's type of each ``$n`` from a
    PREPARE; ``constants``: captured constants per parameter with counts;
    ``tuples``: captured parameter tuples)."""
    plan = StatementPlan(number, st, fingerprint(st.query))
    try:
        sh: Shape = shape(st.query)
    except ShapeError as e:
        plan.skipped = str(e)
        return plan
    plan.writes = sh.writes
    constants = constants or {}
    types = types or {}
    full = [dict(t) for t in tuples if t]
    if full:
        plan.tuples = full
    for n, p in sh.params.items():
        typ = types.get(n) or p.cast or ""
        if full and all(t.get(n) is not None for t in full):
            plan.draws[n] = Draw("tuple", type=typ, op=p.op)
            continue
        found = catalog.find(p) if p.role == "column" else None
        if found is not None:
            table, col, ctype = found
            key = (table, col)
            if p.op == "insert" and key in catalog.generated:
                plan.draws[n] = Draw("default", table, col, ctype, p.op)
            elif p.op == "insert" and key in catalog.unique and not sh.upsert:
                plan.draws[n] = Draw("next", table, col, ctype, p.op)
            elif p.op == "like" and ctype not in INTEGER_TYPES:
                plan.draws[n] = Draw("column", table, col, ctype, p.op)
                plan.guesses.append(f"LIKE ${n}: a prefix of {col} and '%'")
            else:
                plan.draws[n] = Draw("column", table, col, typ or ctype, p.op)
            continue
        got = [(v, c) for v, c in (constants.get(n) or ()) if not isinstance(v, list)]
        if got:
            plan.draws[n] = Draw("const", type=typ, values=tuple(got), why="captured")
            continue
        g = _guess(p, typ, st) or _sequence_guess(p, typ, catalog)
        if g is None:
            if p.column and p.role != "column":
                what = f"is computed into {p.column} (through a function or an operator)"
            elif p.column:
                what = f"meets {p.column}, which no table in its scope has"
            else:
                what = "meets no column"
            plan.skipped = (f"${n} ({typ or 'of unknown type'}) {what}, and no value of it "
                            "was captured (capture --log --with-values keeps them)")
            return plan
        plan.draws[n] = Draw("const", type=typ, values=((g[0], 1),), why="guess")
        plan.guesses.append(g[1])
    return plan


def script_text(plan: StatementPlan, table: str, rows: int,
                next_value: Mapping[int, str] | None = None) -> str:
    """The pgbench script of a planned statement: one ``\\gset`` from its draw table
    (``table``, ``rows`` tuples) when it draws any parameter, then the statement, valid SQL
    again, with ``:pn`` for drawn parameters, DEFAULT and ``next_value`` (the SQL that
    makes a new key) for the others."""
    lines = []
    drawn = plan.drawn
    if drawn:
        lines.append(f"\\set r random(1, {max(1, rows)})")
        lines.append(f"SELECT {', '.join(f'p{n}' for n in drawn)} FROM {table} "
                     "WHERE i = :r \\gset")
    next_value = next_value or {}
    typed = param_casts(plan.statement.query)

    def subst(n: int) -> str:
        d = plan.draws.get(n)
        if d is None:
            return "NULL"
        if d.kind == "default":
            return "DEFAULT"
        if d.kind == "next":
            return next_value[n]
        if d.inline:
            return constant_sql(d.values[0][0], typed.get(n))
        if n in plan.casts:
            return f"CAST(:p{n} AS {plan.casts[n]})"
        return f":p{n}"
    lines.append(executable(plan.statement.query, subst) + ";")
    return "\n".join(lines) + "\n"


def samples_needed(plans: Iterable[StatementPlan]) -> dict[str, list[str]]:
    """table -> the columns whose rows the draws need."""
    out: dict[str, list[str]] = {}
    for p in plans:
        if p.skipped:
            continue
        for d in p.draws.values():
            if d.kind == "column":
                cols = out.setdefault(d.table, [])
                if d.column not in cols:
                    cols.append(d.column)
    return out


def _array(values: Sequence[Any]) -> str:
    def one(v: Any) -> str:
        if v is None:
            return "NULL"
        s = str(v).replace("\\", "\\\\").replace('"', '\\"')
        return f'"{s}"'
    return "{" + ",".join(one(v) for v in values) + "}"


def draw_rows(plan: StatementPlan, samples: Mapping[str, Sequence[Mapping[str, Any]]],
              seed: int, n: int = DRAWS) -> list[list[Any]]:
    """The statement's pre-drawn tuples (values of :attr:`StatementPlan.drawn`, as text):
    the same for every server (``seed``), from ``samples`` (table -> sampled rows)."""
    rng = random.Random(seed * 7919 + plan.number)
    # windows from a generator of their own: the rows drawn are the same whatever the
    # window, so a fit compares candidates on the same keys (common random numbers)
    wrng = random.Random(seed * 104729 + plan.number)
    arng = random.Random(seed * 15485863 + plan.number)      # arrays' values: the same
    drawn = plan.drawn
    out = []
    for i in range(n):
        tup = rng.choice(plan.tuples) if plan.tuples else {}
        row_of: dict[str, Mapping[str, Any]] = {}
        vals: dict[int, Any] = {}
        pos: dict[tuple, float] = {}         # a windowed range's start, per column
        for k in drawn:
            d = plan.draws[k]
            if d.kind == "tuple":
                v = tup.get(k)
                if isinstance(v, list):  # ANY(ARRAY[...]) an array; a squashed IN list
                    v = _array(v) if d.op == "any" else (v[0] if v else None)  # one value
                vals[k] = v
            elif d.kind == "const":              # several: drawn by how often seen
                vs = [v for v, _ in d.values]
                vals[k] = rng.choices(vs, weights=[c for _, c in d.values])[0]
            else:
                rows = samples.get(d.table) or []
                if not rows:
                    vals[k] = None
                    continue
                if d.op == "any":
                    vals[k] = _array(_distinct(rows, d.column, d.size or ANY_DEFAULT, arng,
                                               d.hot))
                    continue
                if d.window is not None and d.op in _RANGE:
                    vals[k] = _windowed(d, rows, wrng, pos)
                    continue
                if d.table not in row_of:
                    row_of[d.table] = rng.choice(rows)
                # the upper bound of a BETWEEN from a row of its own, the rest from one
                row = rng.choice(rows) if d.op == "between_hi" else row_of[d.table]
                v = row[d.column]
                if d.op == "like" and v is not None:
                    v = str(v)[:3] + "%"
                vals[k] = v
        _order_between(plan, vals)
        out.append([vals[k] for k in drawn])
    return out


def _distinct(rows: Sequence[Mapping[str, Any]], column: str, k: int,
              rng: random.Random, hot: bool = False) -> list[Any]:
    """``k`` distinct values of ``column`` from the sampled rows (fewer when it has fewer),
    in the order drawn: an application's ``IN``/``ANY`` list names each value once.  Each
    value is drawn as often as it is in the rows, or with ``hot`` by the square of that
    (an application that asks for its best sellers reads more rows per value than one
    asking for any product: Hibernate's stock query, 0.8x the captured blocks without)."""
    out: list[Any] = []
    seen: set = set()
    vals, cum = _squared(rows, column) if hot else ([], [])
    # favoured first; what a few favourites leave unfilled, as often as in the rows
    for pick in ((lambda: rng.choices(vals, cum_weights=cum)[0]) if vals else None,
                 lambda: rng.choice(rows)[column]):
        for _ in range(20 * k if pick else 0):
            v = pick()
            if v not in seen:
                seen.add(v)
                out.append(v)
                if len(out) == k:
                    return out
    return out


_squared_cache: dict[tuple[int, str], tuple[Sequence, list, list]] = {}


def _squared(rows: Sequence[Mapping[str, Any]], column: str) -> tuple[list, list]:
    """The column's distinct values in the rows (first seen first) and the cumulative
    squares of their counts."""
    key = (id(rows), column)
    hit = _squared_cache.get(key)
    if hit is not None and hit[0] is rows:      # the same list, not one at a reused id
        return hit[1], hit[2]
    counts: dict[Any, int] = {}
    for r in rows:
        counts[r[column]] = counts.get(r[column], 0) + 1
    vals, cum, total = [], [], 0
    for v, c in counts.items():
        total += c * c
        vals.append(v)
        cum.append(total)
    if len(_squared_cache) >= 64:
        _squared_cache.clear()
    _squared_cache[key] = (rows, vals, cum)     # one entry a column: arrays on two alternate
    return vals, cum


_RANGE = {"<", "<=", ">", ">=", "between_lo", "between_hi"}
_sorted_cache: dict[tuple[int, str], tuple[Sequence, list]] = {}


def _key(v: Any) -> tuple:
    try:
        return (0, float(v), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(v))


def _windowed(d: Draw, rows: Sequence[Mapping[str, Any]], rng: random.Random,
              pos: dict[tuple, float]) -> Any:
    """A range bound that selects about ``d.window`` of the rows: ``col > $n`` the top
    share, ``col < $n`` the bottom one, ``BETWEEN`` a window of that width anywhere."""
    key = (id(rows), d.column)
    hit = _sorted_cache.get(key)
    if hit is not None and hit[0] is rows:      # the same list, not one at a reused id
        vals = hit[1]
    else:
        vals = sorted((r[d.column] for r in rows if r[d.column] is not None), key=_key)
        _sorted_cache.clear()
        _sorted_cache[key] = (rows, vals)
    if not vals:
        return None
    w = min(1.0, max(0.0, d.window or 0.0))
    n = len(vals)
    if d.op in (">", ">="):
        q = 1 - w * rng.uniform(0.5, 1.5)
    elif d.op in ("<", "<="):
        q = w * rng.uniform(0.5, 1.5)
    else:
        start = pos.setdefault((d.table, d.column), rng.uniform(0, 1 - w))
        q = start if d.op == "between_lo" else start + w
    return vals[min(n - 1, max(0, int(q * n)))]


def _order_between(plan: StatementPlan, vals: dict[int, Any]) -> None:
    """``BETWEEN $a AND $b`` drawn from two rows: the smaller first (bounds paired by
    table and column)."""
    lo = {(d.table, d.column): k for k, d in plan.draws.items()
          if d.op == "between_lo" and k in vals}
    for k, d in plan.draws.items():
        j = lo.get((d.table, d.column))
        if d.op == "between_hi" and j is not None and k in vals:
            a, b = vals[j], vals[k]
            if a is None or b is None:
                continue
            try:
                swap = float(a) > float(b)
            except (TypeError, ValueError):
                swap = str(a) > str(b)
            if swap:
                vals[j], vals[k] = b, a


def weights(calls: Sequence[int], total: int = 1_000_000) -> list[int]:
    """pgbench script weights in the captured proportions (each at least 1)."""
    s = sum(calls) or 1
    return [max(1, round(c * total / s)) for c in calls]


@dataclass(frozen=True)
class Left:
    """A captured statement (or group) that is not replayed, and why."""
    query: str
    share_time: float
    share_calls: float
    reason: str


def guesses_of(plans: Iterable[StatementPlan]) -> list[dict[str, Any]]:
    """What the replay guessed, per statement text (the first 200 characters), once: one
    statement captured under two queryids (psycopg sends an int as int2 or int4 by its
    value) is one line with its guesses, not two alike."""
    out: list[dict[str, Any]] = []
    seen: set = set()
    for p in plans:
        if not p.guesses or p.skipped:
            continue
        key = (p.statement.query[:200], tuple(p.guesses))
        if key not in seen:
            seen.add(key)
            out.append({"query": key[0], "guesses": list(p.guesses)})
    return out


def coverage(stmts: Sequence[Statement], plans: Iterable[StatementPlan]
             ) -> tuple[float, float, list[Left], Statement | None]:
    """The share of the captured time and calls the replay runs (of the statements'
    own: BEGIN, COMMIT and the like apart, as each replayed statement commits alone), every
    statement (or group) it does not, most time first, and the transaction control row."""
    run = {p.statement.queryid for p in plans if not p.skipped}
    reasons = {p.statement.queryid: p.skipped for p in plans if p.skipped}
    tx = next((s for s in stmts if s.query == TRANSACTION), None)
    rest_t = 1.0 - (tx.share_time if tx else 0.0)
    rest_c = 1.0 - (tx.share_calls if tx else 0.0)
    t = c = 0.0
    left = []
    for s in stmts:
        if s.query == TRANSACTION:
            continue
        st = s.share_time / rest_t if rest_t > 0 else 0.0
        sc = s.share_calls / rest_c if rest_c > 0 else 0.0
        if s.queryid and s.queryid in run:
            t += st
            c += sc
            continue
        if s.query == UTILITY:
            why = ("utility statements (SET, VACUUM, DDL ...): counted without their text, "
                   "which may hold passwords")
        elif s.query == OTHER:
            why = "beyond the capture's --top statements, merged without their texts"
        else:
            why = reasons.get(s.queryid) or "not a statement a replay can run"
        left.append(Left(s.query, st, sc, why))
    left.sort(key=lambda x: -x.share_time)
    return t, c, left, tx


@dataclass(frozen=True)
class FidelityRow:
    query: str
    key: str
    captured_calls: float
    replayed_calls: float
    captured_time: float
    replayed_time: float
    captured_mean_ms: float
    replayed_mean_ms: float | None
    replayed_n: int

    @property
    def worst(self) -> float:
        return max(abs(self.replayed_calls - self.captured_calls),
                   abs(self.replayed_time - self.captured_time))


def fidelity(captured: Sequence[Statement], replayed: Iterable[tuple[str, int, float]],
             included: Iterable[str] | None = None,
             aliases: Mapping[str, str] | None = None) -> tuple[list[FidelityRow], list[str]]:
    """Each replayed captured statement's share of calls and of time, captured against
    replayed (``replayed``: pg_stat_statements' (query, calls, total ms) on the lab server,
    matched by fingerprint, ``aliases``: the fingerprint of a statement as replayed, where it
    differs (``DEFAULT``, ``nextval(...)`` for a parameter), -> the captured one's; shares
    among the statements the replay runs, ``included``: their captured texts), and the
    problems: every statement whose share is more than
    :data:`FIDELITY_TOLERANCE` away."""
    by: dict[str, Statement] = {}
    for s in replayable(captured):      # one shape run by several roles: one statement
        k = fingerprint(s.query)
        o = by.get(k)
        by[k] = s if o is None else Statement(o.queryid, o.query, o.calls + s.calls,
                                              o.total_ms + s.total_ms, 0.0, 0.0,
                                              o.rows + s.rows)
    if included is not None:
        keep = {fingerprint(q) for q in included}
        by = {k: s for k, s in by.items() if k in keep}
    got: dict[str, tuple[int, float]] = {}
    aliases = aliases or {}
    for q, calls, ms in replayed:
        k = fingerprint(q)
        k = aliases.get(k, k)
        if k in by:
            c0, t0 = got.get(k, (0, 0.0))
            got[k] = (c0 + int(calls), t0 + float(ms))
    cap = list(by.values())
    cc = sum(s.calls for s in cap) or 1
    ct = sum(s.total_ms for s in cap) or 1.0
    rc = sum(c for c, _ in got.values()) or 1
    rt = sum(t for _, t in got.values()) or 1.0
    rows = []
    for k, s in by.items():
        n, ms = got.get(k, (0, 0.0))
        rows.append(FidelityRow(s.query, k, s.calls / cc, n / rc, s.total_ms / ct, ms / rt,
                                s.total_ms / s.calls if s.calls else 0.0,
                                ms / n if n else None, n))
    rows.sort(key=lambda r: -r.captured_time)
    problems = []
    for r in rows:
        if r.worst > FIDELITY_TOLERANCE:
            short = " ".join(r.query.split())[:70]
            problems.append(
                f"the replay is not the captured mix: '{short}' took {r.replayed_time:.0%} "
                f"of the time and {r.replayed_calls:.0%} of the calls, captured "
                f"{r.captured_time:.0%} and {r.captured_calls:.0%}")
    return rows, problems


def cost_flags(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Calibration rows (query, captured/replayed mean ms, rows and blocks per call) more
    than :data:`COST_FACTOR` off, said with both numbers: the time of a statement taking
    :data:`TIME_FLOOR_MS` or more (below, a difference is the scheduler's and the client's
    more than the statement's), the shared blocks per call of one touching
    :data:`BLOCKS_FLOOR` or more."""
    out = []
    for r in rows:
        short = " ".join(str(r["query"]).split())[:70]
        a, b = r.get("captured_mean_ms"), r.get("replayed_mean_ms")
        if a and b is not None and max(a, b) >= TIME_FLOOR_MS:
            ratio = b / a
            if ratio > COST_FACTOR or ratio < 1 / COST_FACTOR:
                out.append(f"'{short}' took {b:.3g} ms per call in the calibration, "
                           f"{a:.3g} ms captured ({ratio:.2g}x)")
                continue
        a, b = r.get("captured_blocks"), r.get("replayed_blocks")
        if a is not None and b is not None and max(a, b) >= BLOCKS_FLOOR:
            ratio = b / a if a else float("inf")
            if ratio > COST_FACTOR or ratio < 1 / COST_FACTOR:
                out.append(f"'{short}' read {b:.3g} shared blocks per call in the "
                           f"calibration, {a:.3g} captured ({ratio:.2g}x)")
    return out
