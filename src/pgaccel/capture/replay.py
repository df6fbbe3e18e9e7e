"""A captured mix as pgbench scripts, and how faithful a replay was (pure).

Each captured statement becomes one pgbench script, weighted by its calls, so pgbench runs
the statements in the captured proportions (a "transaction" is one statement).  Without
captured values, each parameter ``$n`` is bound to the column it is compared with or
written to, and drawn from the restored data:

* ``col = $n`` (and ``<``, ``>``, ``<=``, ``>=``, ``<>``, ``LIKE``), ``col IN ($n, ...)``,
  ``col BETWEEN $n AND $m``, ``SET col = col + $n``, and ``INSERT INTO t (a, b) VALUES ($1,
  $2)`` by position: an integer column uniformly between its smallest and largest value
  (``\\set``, as pgbench's own scripts do), any other type from a sample of its rows
  (one primary-key lookup per statement, ``\\gset``);
* ``LIMIT $n``: 10, ``OFFSET $n``: 0;
* a statement with a parameter bound to nothing known is not replayed (and said, with its
  share of the captured time).

With values captured from the server log (``capture --from-log --with-values``), a
statement's parameters are instead one of its captured tuples, drawn uniformly.

Fidelity: the lab server's pg_stat_statements during the replay against the captured mix,
statement by statement (texts matched with their parameters and spacing normalised): each
one's share of calls and of time.  The statements that carry most of the captured time are
the ones that must be right.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from .statements import Statement, is_plannable

LIMIT_DEFAULT, OFFSET_DEFAULT = 10, 0
_IDENT = r'(?:"[^"]+"|[A-Za-z_][A-Za-z0-9_$]*)'
_QUAL = rf"(?:{_IDENT}\.)?{_IDENT}"
_OPS = r"(?:=|<>|!=|<=|>=|<|>|\s+(?:I?LIKE)\s+)"
_PARAM = r"\$(\d+)"
INTEGER_TYPES = {"smallint", "integer", "bigint", "int2", "int4", "int8"}
# replayed statements' share of the captured time below which the replay is refused
MIN_REPLAYED_SHARE = 0.5
FIDELITY_TOLERANCE = 0.10         # a top statement's share may be this far off (absolute)
TOP_TIME_SHARE = 0.8              # the statements that carry this much of the time


def normalize(query: str) -> str:
    """A statement's text for matching: parameters as ``?``, spacing collapsed, lower
    case, no trailing semicolon (a log shows a script's, pg_stat_statements does not)."""
    return " ".join(re.sub(_PARAM, "?", query).lower().split()).rstrip("; ")


def _unquote(name: str) -> str:
    return name[1:-1] if name.startswith('"') else name.lower()


def tables_in(query: str) -> dict[str, str]:
    """alias (or the table's own name) -> table, from FROM, JOIN, UPDATE and INSERT INTO."""
    out: dict[str, str] = {}
    kw = r"(?:from|join|update|into)"
    skip = {"where", "set", "on", "using", "values", "select", "join", "inner", "left",
            "right", "full", "cross", "group", "order", "limit", "natural", "as", "default"}
    for m in re.finditer(rf"\b{kw}\s+(?:only\s+)?({_QUAL})(?:\s+(?:as\s+)?({_IDENT}))?",
                         query, re.I):
        table = ".".join(_unquote(p) for p in re.findall(_IDENT, m.group(1)))
        alias = m.group(2)
        short = table.rsplit(".", 1)[-1]
        out.setdefault(short, table)
        if alias and alias.lower() not in skip:
            out[_unquote(alias)] = table
    return out


@dataclass(frozen=True)
class Binding:
    """What ``$n`` is: a column (``qualifier`` an alias or table, or None) or a constant."""
    column: str | None = None
    qualifier: str | None = None
    constant: int | None = None


def bindings(query: str) -> dict[int, Binding]:
    """Each parameter's binding, as far as the patterns above find one."""
    out: dict[int, Binding] = {}

    def col(text: str) -> Binding:
        parts = [_unquote(p) for p in re.findall(_IDENT, text)]
        return Binding(parts[-1], parts[-2] if len(parts) > 1 else None)

    for m in re.finditer(rf"\blimit\s+{_PARAM}", query, re.I):
        out[int(m.group(1))] = Binding(constant=LIMIT_DEFAULT)
    for m in re.finditer(rf"\boffset\s+{_PARAM}", query, re.I):
        out[int(m.group(1))] = Binding(constant=OFFSET_DEFAULT)
    for m in re.finditer(rf"({_QUAL})\s*=\s*\1\s*[-+*]\s*{_PARAM}", query, re.I):
        out.setdefault(int(m.group(2)), col(m.group(1)))
    for m in re.finditer(rf"({_QUAL})\s*{_OPS}\s*{_PARAM}", query, re.I):
        out.setdefault(int(m.group(2)), col(m.group(1)))
    for m in re.finditer(rf"{_PARAM}\s*{_OPS}\s*({_QUAL})", query, re.I):
        out.setdefault(int(m.group(1)), col(m.group(2)))
    for m in re.finditer(rf"({_QUAL})\s+(?:not\s+)?in\s*\(([^)]*)\)", query, re.I):
        for p in re.findall(_PARAM, m.group(2)):
            out.setdefault(int(p), col(m.group(1)))
    for m in re.finditer(rf"({_QUAL})\s+(?:not\s+)?between\s+{_PARAM}\s+and\s+{_PARAM}",
                         query, re.I):
        out.setdefault(int(m.group(2)), col(m.group(1)))
        out.setdefault(int(m.group(3)), col(m.group(1)))
    m = re.search(rf"\binsert\s+into\s+({_QUAL})\s*\(([^)]*)\)\s*values\s*\(([^)]*)\)",
                  query, re.I)
    if m:
        cols = [_unquote(c.strip()) for c in m.group(2).split(",")]
        vals = [v.strip() for v in m.group(3).split(",")]
        table = ".".join(_unquote(p) for p in re.findall(_IDENT, m.group(1)))
        for c, v in zip(cols, vals):
            p = re.fullmatch(_PARAM, v)
            if p:
                out.setdefault(int(p.group(1)), Binding(c, table.rsplit(".", 1)[-1]))
    return out


def params_of(query: str) -> list[int]:
    return sorted({int(p) for p in re.findall(_PARAM, query)})


@dataclass(frozen=True)
class Source:
    """Where a parameter's values come from in the lab's data."""
    table: str
    column: str
    type: str
    low: Any = None               # an integer column's smallest and largest value
    high: Any = None

    @property
    def integer(self) -> bool:
        return self.type in INTEGER_TYPES


def resolve(query: str, columns: Mapping[str, Mapping[str, str]]
            ) -> tuple[dict[int, Source | int], list[int]]:
    """Each parameter's source (a column of a table in ``columns``: table -> column ->
    type) or constant, and the parameters bound to nothing known."""
    aliases = tables_in(query)
    binds = bindings(query)
    out: dict[int, Source | int] = {}
    missing = []
    for n in params_of(query):
        b = binds.get(n)
        if b is None:
            missing.append(n)
            continue
        if b.constant is not None:
            out[n] = b.constant
            continue
        tables = ([aliases.get(b.qualifier, b.qualifier)] if b.qualifier
                  else list(dict.fromkeys(aliases.values())))
        found = None
        for t in tables:
            short = t.rsplit(".", 1)[-1] if t else t
            for name in (t, short):
                if name in columns and b.column in columns[name]:
                    found = Source(name, b.column, columns[name][b.column])
                    break
            if found:
                break
        if found is None:
            missing.append(n)
        else:
            out[n] = found
    return out, missing


@dataclass
class Script:
    """One statement as a pgbench script: its text and weight; ``lookups``: the sample
    tables it reads its non-integer parameters from (table -> columns)."""
    number: int
    query: str
    weight: int
    text: str
    lookups: dict[str, list[str]] = field(default_factory=dict)


def script_for(number: int, query: str, weight: int, sources: Mapping[int, Source | int],
               sample_table: str, sample_rows: Mapping[str, int]) -> Script:
    """The pgbench script of one statement: ``\\set`` per integer parameter, one ``\\gset``
    lookup per sampled table (``sample_table`` formatted with the statement number and the
    table's position; ``sample_rows``: rows in each sample), then the statement with
    ``$n`` as ``:pn``."""
    lines: list[str] = []
    lookups: dict[str, list[tuple[int, str]]] = {}
    for n, src in sorted(sources.items()):
        if isinstance(src, int):
            lines.append(f"\\set p{n} {src}")
        elif src.integer and src.low is not None and src.high is not None:
            lines.append(f"\\set p{n} random({int(src.low)}, {int(src.high)})")
        else:
            lookups.setdefault(src.table, []).append((n, src.column))
    tables = {}
    for i, (table, cols) in enumerate(sorted(lookups.items())):
        name = sample_table.format(number=number, index=i)
        rows = max(1, int(sample_rows.get(name, 1)))
        lines.append(f"\\set r{i} random(1, {rows})")
        sel = ", ".join(f"c{j} AS p{n}" for j, (n, _c) in enumerate(cols))
        lines.append(f"SELECT {sel} FROM {name} WHERE i = :r{i} \\gset")
        tables[name] = [c for _n, c in cols]
    body = re.sub(_PARAM, lambda m: f":p{m.group(1)}", query.strip().rstrip(";"))
    lines.append(body + ";")          # its own lines: a -- comment ends at its newline
    return Script(number, query, weight, "\n".join(lines) + "\n", tables)


def script_with_values(number: int, query: str, weight: int, table: str, rows: int
                       ) -> Script:
    """The pgbench script of a statement whose captured parameter tuples are in ``table``
    (columns ``i``, ``p1`` .. ``pk``): one tuple drawn per execution (``\\gset``)."""
    ns = params_of(query)
    body = re.sub(_PARAM, lambda m: f":p{m.group(1)}", query.strip().rstrip(";"))
    text = (f"\\set r random(1, {max(1, rows)})\n"
            f"SELECT {', '.join(f'p{n}' for n in ns)} FROM {table} WHERE i = :r \\gset\n"
            + body + ";\n")
    return Script(number, query, weight, text, {table: [f"p{n}" for n in ns]})


def weights(calls: Sequence[int], total: int = 1_000_000) -> list[int]:
    """pgbench script weights in the captured proportions (each at least 1)."""
    s = sum(calls) or 1
    return [max(1, round(c * total / s)) for c in calls]


def replayable(stmts: Iterable[Statement]) -> list[Statement]:
    return [s for s in stmts if s.queryid and is_plannable(s.query)]


@dataclass(frozen=True)
class FidelityRow:
    query: str
    captured_calls: float
    replayed_calls: float
    captured_time: float
    replayed_time: float

    @property
    def worst(self) -> float:
        return max(abs(self.replayed_calls - self.captured_calls),
                   abs(self.replayed_time - self.captured_time))


def fidelity(captured: Sequence[Statement], replayed: Iterable[tuple[str, int, float]],
             included: Iterable[str] | None = None) -> tuple[list[FidelityRow], list[str]]:
    """Each replayable captured statement's share of calls and of time, captured against
    replayed (``replayed``: pg_stat_statements' (query, calls, total ms) on the lab server;
    shares among the captured statements found; ``included``: the statements the replay
    runs, so one left out does not make the others' shares look wrong), and the problems: a statement among those
    carrying :data:`TOP_TIME_SHARE` of the captured time whose share is more than
    :data:`FIDELITY_TOLERANCE` away."""
    by: dict[str, Statement] = {}
    for s in replayable(captured):      # one text run by several roles: one statement
        k = normalize(s.query)
        o = by.get(k)
        by[k] = s if o is None else Statement(o.queryid, o.query, o.calls + s.calls,
                                              o.total_ms + s.total_ms, 0.0, 0.0,
                                              o.rows + s.rows)
    if included is not None:            # shares among what the replay runs
        keep = {normalize(q) for q in included}
        by = {k: s for k, s in by.items() if k in keep}
    cap = list(by.values())
    got: dict[str, tuple[int, float]] = {}
    for q, calls, ms in replayed:
        k = normalize(q)
        if k in by:
            c0, t0 = got.get(k, (0, 0.0))
            got[k] = (c0 + int(calls), t0 + float(ms))
    cc = sum(s.calls for s in cap) or 1
    ct = sum(s.total_ms for s in cap) or 1.0
    rc = sum(c for c, _ in got.values()) or 1
    rt = sum(t for _, t in got.values()) or 1.0
    rows = [FidelityRow(s.query, s.calls / cc, got.get(k, (0, 0.0))[0] / rc,
                        s.total_ms / ct, got.get(k, (0, 0.0))[1] / rt)
            for k, s in by.items()]
    rows.sort(key=lambda r: -r.captured_time)
    problems, acc = [], 0.0
    for r in rows:
        if acc >= TOP_TIME_SHARE:
            break
        acc += r.captured_time
        if r.worst > FIDELITY_TOLERANCE:
            short = " ".join(r.query.split())[:70]
            problems.append(
                f"the replay is not the captured mix: '{short}' took {r.replayed_time:.0%} "
                f"of the time and {r.replayed_calls:.0%} of the calls, captured "
                f"{r.captured_time:.0%} and {r.captured_calls:.0%}")
    return rows, problems
