"""Statements and their parameter values from a PostgreSQL server log (pure).

With ``log_min_duration_statement = 0`` (and ``log_parameter_max_length = -1`` so values are
not cut), a statement run with bound parameters (the extended protocol: every driver's
prepared or parameterised statements) is logged as::

    LOG:  duration: 0.120 ms  execute <unnamed>: SELECT ... WHERE aid = $1
    DETAIL:  parameters: $1 = '4711'

The three formats PostgreSQL writes are read: ``csvlog`` (message and detail columns),
``jsonlog`` (15+; ``message`` and ``detail``) and ``stderr`` (any ``log_line_prefix``; a
statement's continuation lines start with a tab).  Statements logged with their values
inline (the simple protocol, ``statement: ...``) come with no parameters: their literals are
in the text (``capture/recover.py`` aligns them).  Values are the user's data: callers keep
them only when asked (``--with-values``).
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Iterator

_EXEC = re.compile(r"duration: [\d.]+ ms\s+execute [^:]*:\s*(?P<q>.*)", re.S)
_STATEMENT = re.compile(r"duration: [\d.]+ ms\s+statement:\s*(?P<q>.*)", re.S)
_DETAIL = re.compile(r"^\s*parameters:\s*(?P<p>.*)$", re.S)
_PARAM = re.compile(r"\$(\d+)\s*=\s*(NULL|'((?:[^']|'')*)')")
CSV_MESSAGE, CSV_DETAIL = 13, 14          # csvlog's columns (0-based)


def parse_parameters(text: str) -> dict[int, str | None]:
    """``$1 = '4711', $2 = NULL, $3 = 'it''s'`` -> {1: '4711', 2: None, 3: "it's"}."""
    out: dict[int, str | None] = {}
    for m in _PARAM.finditer(text):
        out[int(m.group(1))] = None if m.group(2) == "NULL" else m.group(3).replace("''", "'")
    return out


def _pairs_csv(text: str) -> Iterator[tuple[str, str]]:
    csv.field_size_limit(1 << 30)        # a 200 kB statement logged whole is one field
    for row in csv.reader(io.StringIO(text)):
        if len(row) > CSV_DETAIL:
            yield row[CSV_MESSAGE], row[CSV_DETAIL]


def _pairs_json(text: str) -> Iterator[tuple[str, str]]:
    for line in text.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict):
            yield str(d.get("message") or ""), str(d.get("detail") or "")


def _pairs_stderr(text: str) -> Iterator[tuple[str, str]]:
    """(message, detail) of each entry: a LOG line and the DETAIL line that follows it,
    each with its tab-indented continuation lines (a statement's, or a value's with a
    newline in it)."""
    msg: list[str] | None = None
    detail: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("\t") and msg is not None:
            (detail if detail is not None else msg).append(line[1:])
            continue
        j = line.find("DETAIL:  ")
        if j >= 0 and msg is not None and detail is None:
            detail = [line[j + len("DETAIL:  "):]]
            continue
        if msg is not None:
            yield "\n".join(msg), "\n".join(detail or [])
            msg, detail = None, None
        i = line.find("LOG:  ")
        if i >= 0:
            msg = [line[i + len("LOG:  "):]]
    if msg is not None:
        yield "\n".join(msg), "\n".join(detail or [])


def detect(text: str) -> str:
    head = text.lstrip()[:200]
    if head.startswith("{"):
        return "jsonlog"
    if re.match(r"\d{4}-\d\d-\d\d [\d:.]+ \w+,", head):
        return "csvlog"
    return "stderr"


def executions(text: str, form: str | None = None) -> Iterator[tuple[str, dict[int, str | None]]]:
    """(statement text, its parameters) for every logged execution: a bound statement's
    with its DETAIL's parameters, a simple-protocol statement's (its values inline) with
    none."""
    form = form or detect(text)
    pairs = {"csvlog": _pairs_csv, "jsonlog": _pairs_json}.get(form, _pairs_stderr)(text)
    for message, detail in pairs:
        msg = message.strip()
        m = _EXEC.match(msg)
        if m:
            d = _DETAIL.match(detail or "")
            yield m.group("q").strip(), parse_parameters(d.group("p")) if d else {}
            continue
        m = _STATEMENT.match(msg)
        if m:
            yield m.group("q").strip(), {}
