"""What each parameter of a captured statement is, by PostgreSQL's own parser (pure).

pg_stat_statements keeps a statement's text with its constants replaced by ``$n`` (after the
application's own ``$n``).  To replay it, each parameter needs a value like the ones the
application sent, and so needs to be known for what it is.  pglast (libpg_query: the
server's own grammar) parses the text; :func:`shape` walks the tree with the tables and
aliases in scope (joins, subqueries, CTEs, ``UPDATE ... FROM``, ``DELETE ... USING``) and
says for each parameter what it meets:

* a **column**: compared with it (``=``, ``<``, ``>``, ``<>``, ``LIKE``, ``IN (...)``,
  ``= ANY($n)``, ``BETWEEN``), written to it (``INSERT`` by position, also multi-row
  ``VALUES`` and ``INSERT ... SELECT``; ``UPDATE ... SET``; ``ON CONFLICT DO UPDATE SET``),
  through casts; for ``col > $2 + $3`` the first is drawn from the column (the anchor) and
  the second is an offset;
* a **shape** value: a constant that sets how much a statement does rather than which row
  it touches (``LIMIT``, ``OFFSET``, an interval, ``now() - $1 * interval $2``, an offset,
  a function's argument), with the type the parser's context gives it (a cast, LIMIT).

:func:`align` lines a normalised text up with one that ran (a log line, a sample of
pg_stat_activity): the value each ``$n`` stood for.  :func:`fingerprint` (libpg_query's,
which ignores constants) matches the two before aligning.  :func:`executable` writes the
statement as valid SQL again (``interval $2`` is not valid SQL; ``CAST($2 AS interval)`` is)
with each ``$n`` replaced.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from pglast import ast, enums, parse_sql
from pglast.parser import ParseError, fingerprint as _fingerprint, scan
from pglast.stream import RawStream

K = enums.A_Expr_Kind
_ARITH = {"+", "-", "*", "/", "%"}
_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}
_SEQUENCE_FUNCS = {"nextval", "currval", "setval"}
_RANGE_OPS = {"<", ">", "<=", ">=", "between_lo", "between_hi"}


class ShapeError(ValueError):
    """A statement the parser cannot read (said as the statement's reason, never raised
    past :func:`shape`)."""


@dataclass(frozen=True)
class Param:
    """What ``$number`` meets.  ``role``: ``column`` (its values are the column's),
    ``shape`` (a constant that sets how much the statement does: ``column`` is the one it
    bounds, if any), ``limit``, ``offset``, or ``value`` (meets nothing known).
    ``tables``: the tables the column may belong to (innermost scope first; the catalog
    decides).  ``op``: ``=``, ``<``, ``>``, ``<=``, ``>=``, ``<>``, ``like``, ``in``,
    ``any``, ``between_lo``, ``between_hi``, ``set``, ``insert``, ``delta`` or ``other``.
    ``cast``: the type a cast around it names."""
    number: int
    role: str
    op: str = "other"
    tables: tuple[str, ...] = ()
    column: str | None = None
    cast: str | None = None

    @property
    def is_range(self) -> bool:
        return self.op in _RANGE_OPS


_STRENGTH = {"column": 4, "limit": 3, "offset": 3, "shape": 2, "value": 1}


@dataclass
class Shape:
    """A statement: its kind (select, insert, update, delete, merge), the table it writes,
    each parameter, and its fingerprint."""
    kind: str
    target: str | None
    params: dict[int, Param]
    fingerprint: str
    upsert: bool = False              # INSERT ... ON CONFLICT

    @property
    def writes(self) -> bool:
        return self.kind in ("insert", "update", "delete", "merge")


@dataclass
class _Scope:
    tables: dict[str, tuple[str, ...]] = field(default_factory=dict)   # alias -> tables
    parent: "_Scope | None" = None
    ctes: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def lookup(self, alias: str) -> tuple[str, ...] | None:
        s: _Scope | None = self
        while s is not None:
            if alias in s.tables:
                return s.tables[alias]
            s = s.parent
        return None

    def cte(self, name: str) -> tuple[str, ...] | None:
        s: _Scope | None = self
        while s is not None:
            if name in s.ctes:
                return s.ctes[name]
            s = s.parent
        return None

    def all_tables(self) -> tuple[str, ...]:
        out: list[str] = []
        s: _Scope | None = self
        while s is not None:
            for ts in s.tables.values():
                out.extend(t for t in ts if t not in out)
            s = s.parent
        return tuple(out)


def _name(rv: ast.RangeVar) -> str:
    return f"{rv.schemaname}.{rv.relname}" if rv.schemaname else rv.relname


def _type_name(tn: ast.TypeName) -> str:
    names = [n.sval for n in tn.names if n.sval != "pg_catalog"]
    return ".".join(names) + ("[]" if tn.arrayBounds else "")


def _strings(fields) -> list[str]:
    return [f.sval for f in fields if isinstance(f, ast.String)]


class _Walker:
    def __init__(self) -> None:
        self.params: dict[int, Param] = {}

    # -- recording -------------------------------------------------------------------
    def note(self, p: Param) -> None:
        old = self.params.get(p.number)
        if old is None or _STRENGTH[p.role] > _STRENGTH[old.role]:
            if old is not None and old.cast and not p.cast:
                p = replace(p, cast=old.cast)
            self.params[p.number] = p

    @staticmethod
    def _param(e) -> tuple[int, str | None] | None:
        """``$n`` or ``$n::type`` (its number and the cast's type)."""
        if isinstance(e, ast.ParamRef):
            return e.number, None
        if isinstance(e, ast.TypeCast) and isinstance(e.arg, ast.ParamRef):
            return e.arg.number, _type_name(e.typeName)
        return None

    def _params_in(self, e, sc: _Scope) -> list[tuple[int, str | None]]:
        """Every parameter in an expression (walking it for sublinks too)."""
        found: list[tuple[int, str | None]] = []

        def rec(x) -> None:
            if isinstance(x, tuple):
                for y in x:
                    rec(y)
                return
            if not isinstance(x, ast.Node):
                return
            p = self._param(x)
            if p is not None:
                found.append(p)
                return
            if isinstance(x, (ast.SubLink, ast.SelectStmt)):
                self.walk(x, sc)
                return
            for f in x:
                rec(getattr(x, f))
        rec(e)
        return found

    # -- columns ---------------------------------------------------------------------
    def column(self, e, sc: _Scope) -> tuple[tuple[str, ...], str] | None:
        """The column an expression is (through casts, COLLATE and one-column functions
        such as ``lower(email)``)."""
        if isinstance(e, ast.TypeCast):
            return self.column(e.arg, sc)
        if isinstance(e, ast.CollateClause):
            return self.column(e.arg, sc)
        if isinstance(e, ast.FuncCall) and e.args and len(e.args) == 1 \
                and not self._has_param(e.args):
            return self.column(e.args[0], sc)
        if not isinstance(e, ast.ColumnRef):
            return None
        parts = _strings(e.fields)
        if not parts or len(parts) != len(e.fields):
            return None                      # t.* or an indirection
        if len(parts) == 1:
            return sc.all_tables(), parts[0]
        qual = parts[-2]
        tables = sc.lookup(qual)
        if tables is None:
            tables = (".".join(parts[:-1]),)
        return tables, parts[-1]

    def _has_param(self, e) -> bool:
        if isinstance(e, tuple):
            return any(self._has_param(x) for x in e)
        if not isinstance(e, ast.Node):
            return False
        if isinstance(e, ast.ParamRef):
            return True
        return any(self._has_param(getattr(e, f)) for f in e)

    # -- binding ---------------------------------------------------------------------
    def bind(self, e, col: tuple[tuple[str, ...], str], op: str, sc: _Scope) -> None:
        """``e`` is compared with or written to the column ``col``."""
        tables, name = col
        p = self._param(e)
        if p is not None:
            self.note(Param(p[0], "column", op, tables, name, p[1]))
            return
        if isinstance(e, tuple):
            for x in e:
                self.bind(x, col, op, sc)
            return
        if isinstance(e, ast.A_Expr) and e.kind == K.AEXPR_OP and e.name \
                and _strings(e.name)[-1] in ("+", "-") and e.lexpr is not None:
            anchor = self._param(e.lexpr)
            if anchor is not None:           # $2 + $3: drawn from the column, plus an offset
                self.note(Param(anchor[0], "column", op, tables, name, anchor[1]))
                for n, cast in self._params_in(e.rexpr, sc):
                    self.note(Param(n, "shape", "other", tables, name, cast))
                return
            other = self.column(e.lexpr, sc)
            if other is not None and other[1] == name and op == "set":
                for n, cast in self._params_in(e.rexpr, sc):      # SET x = x + $1
                    self.note(Param(n, "shape", "delta", tables, name, cast))
                return
        if isinstance(e, ast.FuncCall) and e.args and \
                _strings(e.funcname)[-1].lower() in _SEQUENCE_FUNCS:
            self.walk(e, sc)                     # VALUES (nextval($1), ...): a sequence
            return
        for n, cast in self._params_in(e, sc):   # through arithmetic or a function
            self.note(Param(n, "shape", op, tables, name, cast))

    def a_expr(self, e: ast.A_Expr, sc: _Scope) -> None:
        kind = e.kind
        op = _strings(e.name)[-1].lower() if e.name else ""
        if kind == K.AEXPR_OP and op in _ARITH:
            self.generic(e, sc)
            return
        if kind in (K.AEXPR_IN,):
            op = "in"
        elif kind in (K.AEXPR_OP_ANY, K.AEXPR_OP_ALL):
            op = "any" if op == "=" else "other"
        elif kind in (K.AEXPR_LIKE, K.AEXPR_ILIKE, K.AEXPR_SIMILAR):
            op = "like"
        elif kind in (K.AEXPR_BETWEEN, K.AEXPR_NOT_BETWEEN, K.AEXPR_BETWEEN_SYM,
                      K.AEXPR_NOT_BETWEEN_SYM):
            col = self.column(e.lexpr, sc)
            if col is not None and isinstance(e.rexpr, tuple) and len(e.rexpr) == 2:
                self.bind(e.rexpr[0], col, "between_lo", sc)
                self.bind(e.rexpr[1], col, "between_hi", sc)
                return
            self.generic(e, sc)
            return
        elif kind in (K.AEXPR_DISTINCT, K.AEXPR_NOT_DISTINCT):
            op = "="
        elif op in ("!=",):
            op = "<>"
        elif op in ("~~", "~~*"):
            op = "like"
        col = self.column(e.lexpr, sc) if e.lexpr is not None else None
        other = e.rexpr
        if col is None or not self._has_param(other):
            col2 = self.column(e.rexpr, sc) if not isinstance(e.rexpr, tuple) else None
            if col2 is not None and e.lexpr is not None and self._has_param(e.lexpr):
                col, other, op = col2, e.lexpr, _FLIP.get(op, op)
        if col is not None and self._has_param(other):
            self.bind(other, col, op, sc)
            if e.lexpr is not None and other is not e.lexpr:
                self.walk(e.lexpr, sc)
            return
        self.generic(e, sc)

    # -- statements and scopes -------------------------------------------------------
    def from_item(self, item, sc: _Scope, into: _Scope) -> None:
        if isinstance(item, ast.RangeVar):
            name = _name(item)
            tables = (sc.cte(name) or (name,)) if not item.schemaname else (name,)
            alias = item.alias.aliasname if item.alias else item.relname
            into.tables[alias] = tables
            if alias != item.relname:
                into.tables.setdefault(item.relname, tables)
        elif isinstance(item, ast.JoinExpr):
            self.from_item(item.larg, sc, into)
            self.from_item(item.rarg, sc, into)
            if item.quals is not None:
                self.walk(item.quals, into)
        elif isinstance(item, ast.RangeSubselect):
            sub = self.select(item.subquery, sc)
            if item.alias:
                into.tables[item.alias.aliasname] = sub
        elif isinstance(item, ast.RangeFunction):
            self.generic(item, sc)
        elif item is not None:
            self.generic(item, sc)

    def with_clause(self, w, sc: _Scope) -> None:
        if w is None:
            return
        for cte in w.ctes or ():
            tables = self.any_stmt(cte.ctequery, sc)
            sc.ctes[cte.ctename] = tables

    def select(self, s, parent: _Scope | None) -> tuple[str, ...]:
        """Walk a SELECT; the base tables it reads (for a subquery's or CTE's alias)."""
        sc = _Scope(parent=parent)
        if not isinstance(s, ast.SelectStmt):
            return self.any_stmt(s, sc)
        self.with_clause(s.withClause, sc)
        if s.larg is not None or s.rarg is not None:          # UNION / INTERSECT
            a = self.select(s.larg, sc)
            b = self.select(s.rarg, sc)
            self._limits(s, sc)
            return tuple(dict.fromkeys(a + b))
        for item in s.fromClause or ():
            self.from_item(item, sc, sc)
        for f in ("targetList", "whereClause", "groupClause", "havingClause",
                  "sortClause", "windowClause", "distinctClause", "valuesLists"):
            self.walk(getattr(s, f), sc)
        self._limits(s, sc)
        return sc.all_tables() if sc.tables else ()

    def _limits(self, s: ast.SelectStmt, sc: _Scope) -> None:
        for attr, role in (("limitCount", "limit"), ("limitOffset", "offset")):
            e = getattr(s, attr)
            if e is None:
                continue
            p = self._param(e)
            if p is not None:
                self.note(Param(p[0], role, role, cast=p[1] or "bigint"))
            else:
                self.walk(e, sc)

    def any_stmt(self, s, sc: _Scope) -> tuple[str, ...]:
        if isinstance(s, ast.SelectStmt):
            return self.select(s, sc)
        if isinstance(s, ast.InsertStmt):
            return self.insert(s, sc)
        if isinstance(s, ast.UpdateStmt):
            return self.update(s, sc)
        if isinstance(s, ast.DeleteStmt):
            return self.delete(s, sc)
        self.generic(s, sc)
        return ()

    def _target(self, rv: ast.RangeVar, sc: _Scope) -> tuple[str, ...]:
        name = _name(rv)
        tables = (name,)
        sc.tables[rv.alias.aliasname if rv.alias else rv.relname] = tables
        sc.tables.setdefault(rv.relname, tables)
        return tables

    def insert(self, s: ast.InsertStmt, parent: _Scope) -> tuple[str, ...]:
        sc = _Scope(parent=parent)
        self.with_clause(s.withClause, sc)
        tables = self._target(s.relation, sc)
        cols = [c.name for c in s.cols or ()]
        sel = s.selectStmt
        if isinstance(sel, ast.SelectStmt) and sel.valuesLists:
            for row in sel.valuesLists:
                for i, v in enumerate(row):
                    if i < len(cols):
                        self.bind(v, (tables, cols[i]), "insert", sc)
                    else:
                        self.walk(v, sc)
        elif isinstance(sel, ast.SelectStmt):
            inner = _Scope(parent=sc)
            self.with_clause(sel.withClause, inner)
            for item in sel.fromClause or ():
                self.from_item(item, inner, inner)
            for i, rt in enumerate(sel.targetList or ()):
                if i < len(cols) and self._has_param(rt.val):
                    self.bind(rt.val, (tables, cols[i]), "insert", inner)
                else:
                    self.walk(rt.val, inner)
            for f in ("whereClause", "groupClause", "havingClause", "sortClause"):
                self.walk(getattr(sel, f), inner)
            self._limits(sel, inner)
        oc = s.onConflictClause
        if oc is not None:
            self.walk(oc.infer, sc)
            for rt in oc.targetList or ():
                self.bind(rt.val, (tables, rt.name), "set", sc)
            self.walk(oc.whereClause, sc)
        self.walk(_returning(s), sc)
        return tables

    def update(self, s: ast.UpdateStmt, parent: _Scope) -> tuple[str, ...]:
        sc = _Scope(parent=parent)
        self.with_clause(s.withClause, sc)
        tables = self._target(s.relation, sc)
        for item in s.fromClause or ():
            self.from_item(item, sc, sc)
        walked = set()
        for rt in s.targetList or ():
            v = rt.val
            if isinstance(v, ast.MultiAssignRef):       # SET (a, b) = ($1, $2)
                src = v.source
                args = getattr(src, "args", None) if isinstance(src, ast.RowExpr) else None
                if args and v.colno <= len(args):
                    self.bind(args[v.colno - 1], (tables, rt.name), "set", sc)
                elif id(src) not in walked:               # = (SELECT ...): once
                    walked.add(id(src))
                    self.walk(src, sc)
                continue
            self.bind(v, (tables, rt.name), "set", sc)
        self.walk(s.whereClause, sc)
        self.walk(_returning(s), sc)
        return tables

    def delete(self, s: ast.DeleteStmt, parent: _Scope) -> tuple[str, ...]:
        sc = _Scope(parent=parent)
        self.with_clause(s.withClause, sc)
        tables = self._target(s.relation, sc)
        for item in s.usingClause or ():
            self.from_item(item, sc, sc)
        self.walk(s.whereClause, sc)
        self.walk(_returning(s), sc)
        return tables

    # -- generic ---------------------------------------------------------------------
    def walk(self, e, sc: _Scope) -> None:
        if isinstance(e, tuple):
            for x in e:
                self.walk(x, sc)
            return
        if not isinstance(e, ast.Node):
            return
        if isinstance(e, ast.A_Expr):
            self.a_expr(e, sc)
        elif isinstance(e, ast.SubLink):
            if e.testexpr is not None and e.subLinkType == enums.SubLinkType.ANY_SUBLINK:
                self.walk(e.testexpr, sc)
            elif e.testexpr is not None:
                self.walk(e.testexpr, sc)
            self.select(e.subselect, sc)
        elif isinstance(e, (ast.SelectStmt, ast.InsertStmt, ast.UpdateStmt,
                            ast.DeleteStmt)):
            self.any_stmt(e, sc)
        elif isinstance(e, ast.FuncCall) and e.args and \
                _strings(e.funcname)[-1].lower() in _SEQUENCE_FUNCS:
            p = self._param(e.args[0])           # nextval('seq'): a sequence's name
            if p is not None:
                self.note(Param(p[0], "shape", "other", cast=p[1] or "regclass"))
            self.walk(e.args[1:], sc)
        else:
            p = self._param(e)
            if p is not None:
                self.note(Param(p[0], "value", "other", cast=p[1]))
            else:
                self.generic(e, sc)

    def generic(self, e, sc: _Scope) -> None:
        for f in e:
            self.walk(getattr(e, f), sc)


def _returning(s):
    return getattr(s, "returningList", None) or getattr(s, "returningClause", None)


def _parse_one(query: str):
    try:
        stmts = parse_sql(query)
    except ParseError as e:
        raise ShapeError(f"PostgreSQL's parser cannot read it ({e})") from None
    if len(stmts) != 1:
        raise ShapeError(f"it holds {len(stmts)} statements")
    return stmts[0].stmt


_KINDS = {ast.SelectStmt: "select", ast.InsertStmt: "insert", ast.UpdateStmt: "update",
          ast.DeleteStmt: "delete", ast.MergeStmt: "merge"}


def shape(query: str) -> Shape:
    """The statement's shape (:class:`ShapeError` if the parser cannot read it)."""
    s = _parse_one(query)
    w = _Walker()
    kind = _KINDS.get(type(s), "other")
    target = None
    tables = w.any_stmt(s, _Scope())
    if kind in ("insert", "update", "delete"):
        target = tables[0] if tables else None
    for n in params_of(query):               # every $n of the text, found or not
        if n not in w.params:
            w.params[n] = Param(n, "value")
    upsert = isinstance(s, ast.InsertStmt) and s.onConflictClause is not None
    return Shape(kind, target, dict(sorted(w.params.items())), fingerprint(query), upsert)


def fingerprint(query: str) -> str:
    """libpg_query's fingerprint: the same for a normalised text and one that ran."""
    try:
        return _fingerprint(query)
    except ParseError:
        return ""


def params_of(query: str) -> list[int]:
    """The ``$n`` of a text (by the server's own tokens: not inside strings or comments)."""
    try:
        toks = scan(query)
    except ParseError:
        return []
    out = set()
    for t in toks:
        if t.name == "PARAM":
            out.add(int(query[t.start + 1:t.end + 1]))
    return sorted(out)


def _literal(node) -> str | None | list:
    """A concrete expression's value as text (what a client would bind)."""
    if isinstance(node, ast.A_Const):
        if node.isnull:
            return None
        v = node.val
        for attr in ("sval", "ival", "fval", "boolval", "bsval"):
            if hasattr(v, attr):
                x = getattr(v, attr)
                if attr == "boolval":
                    return "true" if x else "false"
                if attr == "ival":             # a number stays one (``sold_on - 7``)
                    return int(x)
                if attr == "fval":
                    return float(x)
                return str(x)
    if isinstance(node, ast.TypeCast):
        return _literal(node.arg)
    if isinstance(node, ast.A_ArrayExpr):
        return [_literal(x) for x in node.elements or ()]
    return RawStream()(node)


_POSITION = re.compile(r"location|_len$|_start$|_end$")


class _Mismatch(Exception):
    pass


def align(template: str, concrete: str, params: Mapping[int, str | None] | None = None
          ) -> dict[int, Any]:
    """The value each ``$n`` of ``template`` (a normalised text) stood for in
    ``concrete`` (a text that ran: literals inline, or its own ``$m`` with ``params``,
    a log's DETAIL).  A parameter that squashes a list (PostgreSQL 18's ``IN ($1 /*, ...
    */)``) gets the list.  Empty if the two are not the same statement."""
    try:
        t, c = _parse_one(template), _parse_one(concrete)
    except ShapeError:
        return {}
    got: dict[int, Any] = {}
    params = params or {}

    def value(node):
        if isinstance(node, ast.ParamRef):
            return params.get(node.number)
        if isinstance(node, ast.TypeCast) and isinstance(node.arg, ast.ParamRef):
            return params.get(node.arg.number)
        if isinstance(node, tuple):
            return [value(x) for x in node]
        return _literal(node)

    def rec(a, b) -> None:
        if isinstance(a, ast.ParamRef):
            got[a.number] = value(b)
            return
        if isinstance(a, ast.TypeCast) and isinstance(a.arg, ast.ParamRef) \
                and not isinstance(b, ast.TypeCast):
            got[a.arg.number] = value(b)
            return
        if isinstance(a, tuple):
            if not isinstance(b, tuple):
                raise _Mismatch
            if len(a) == 1 and len(b) > 1 and isinstance(a[0], ast.ParamRef):
                got[a[0].number] = [value(x) for x in b]
                return
            if len(a) != len(b):
                raise _Mismatch
            for x, y in zip(a, b):
                rec(x, y)
            return
        if isinstance(a, ast.Node):
            if type(a) is not type(b):
                if isinstance(a, ast.A_Const) or isinstance(b, ast.A_Const):
                    return                  # a constant pg_stat_statements kept
                raise _Mismatch
            for f in a:
                if not _POSITION.search(f):
                    rec(getattr(a, f), getattr(b, f))
            return
        if a != b:
            raise _Mismatch

    try:
        rec(t, c)
    except _Mismatch:
        return {}
    return got


def executable(query: str, subst: Callable[[int], str]) -> str:
    """The statement as valid SQL (deparsed: ``interval $2`` becomes ``CAST($2 AS
    interval)``), each ``$n`` replaced by ``subst(n)`` (pgbench's ``:pn``, a literal)."""
    texts, numbers = _deparsed_pieces(query)
    out = [texts[0]]
    for n, text in zip(numbers, texts[1:]):
        out.append(subst(n))
        out.append(text)
    return "".join(out)


@functools.lru_cache(maxsize=256)
def _deparsed_pieces(query: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The deparsed text cut at its ``$n`` (the pieces around them, and each one's n):
    parsed once per statement, since a replay's fit writes one statement hundreds of
    times over with drawn values."""
    text = RawStream()(_parse_one(query))
    texts, numbers, last = [], [], 0
    for t in scan(text):
        if t.name == "PARAM":
            texts.append(text[last:t.start])
            numbers.append(int(text[t.start + 1:t.end + 1]))
            last = t.end + 1
    texts.append(text[last:])
    return tuple(texts), tuple(numbers)


_DML = (ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt, ast.MergeStmt)


def writes(query: str) -> bool:
    """Whether a statement changes data (also from a CTE: ``WITH x AS (UPDATE ...)``)."""
    try:
        root = _parse_one(query)
    except ShapeError:
        return bool(re.match(r"\s*(insert|update|delete|merge)\b", query, re.I))

    def rec(x) -> bool:
        if isinstance(x, tuple):
            return any(rec(y) for y in x)
        if not isinstance(x, ast.Node):
            return False
        return isinstance(x, _DML) or any(rec(getattr(x, f)) for f in x)
    return rec(root)
