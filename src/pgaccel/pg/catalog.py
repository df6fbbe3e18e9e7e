"""The parameter catalog of a real PostgreSQL binary or server, and plan validation.

Two sources, same :class:`GucCatalog`:

* ``postgres --describe-config`` (no server needed; runs even as root).  One line per
  parameter, tab-separated: name, context, group, vartype (BOOLEAN, INTEGER, REAL, STRING,
  ENUM), reset value, min, max, short description, extra description.  It has no units and
  no enum values, so units come from ``versions.GUCS`` and enum checks are skipped.
* ``pg_settings`` of a running server: context, vartype, unit, min_val, max_val, enumvals.

``validate`` checks every PostgreSQL change of a plan against a catalog: unknown name,
value outside [min, max] after unit conversion, enum value not offered, malformed bool
(units, rounding and booleans as ``values.py`` reads them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from . import versions
from .values import parse_bool, setting_number

# -- catalog ----------------------------------------------------------------------------

@dataclass
class GucInfo:
    name: str
    context: str
    vartype: str                      # bool | integer | real | string | enum
    unit: str | None = None
    min_val: float | None = None
    max_val: float | None = None
    enumvals: tuple[str, ...] | None = None
    reset_val: str | None = None


@dataclass
class GucCatalog:
    gucs: dict[str, GucInfo] = field(default_factory=dict)
    major: int | None = None
    source: str = ""                  # "describe-config /usr/lib/postgresql/15/bin" ...

    def __contains__(self, name: str) -> bool:
        return name in self.gucs

    def get(self, name: str) -> GucInfo | None:
        return self.gucs.get(name)

    def restart(self, name: str) -> bool | None:
        g = self.gucs.get(name)
        return None if g is None else g.context == "postmaster"

    def context(self, name: str) -> str | None:
        g = self.gucs.get(name)
        return g.context if g else None


def _num(text: Any) -> float | None:
    if text is None or text == "":
        return None
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def parse_describe_config(text: str, major: int | None = None,
                          source: str = "describe-config") -> GucCatalog:
    cat = GucCatalog(major=major, source=source)
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) < 7 or not re.fullmatch(r"[a-z_][a-z0-9_.]*", parts[0]):
            continue
        name, context, _group, vartype, reset, lo, hi = parts[:7]
        vt = {"BOOLEAN": "bool"}.get(vartype.upper(), vartype.lower())
        spec = versions.GUCS.get(name)
        cat.gucs[name] = GucInfo(name, context, vt, spec.unit if spec else None,
                                 _num(lo) if vt in ("integer", "real") else None,
                                 _num(hi) if vt in ("integer", "real") else None,
                                 None, reset or None)
    return cat


def catalog_from_rows(rows: Iterable[tuple], major: int | None = None,
                      source: str = "pg_settings") -> tuple[GucCatalog, dict[str, str]]:
    """(catalog, current settings as SHOW prints them) from rows of pg/sql's ``catalog``
    query (``server.database.Database.catalog`` reads them)."""
    cat = GucCatalog(major=major, source=source)
    current: dict[str, str] = {}
    for name, context, vartype, unit, lo, hi, enumvals, reset, shown in rows:
        cat.gucs[name] = GucInfo(name, context, vartype, unit or None, _num(lo), _num(hi),
                                 tuple(enumvals) if enumvals else None, reset)
        current[name] = shown
    return cat, current


# -- validation -------------------------------------------------------------------------

def check_value(name: str, value: str, cat: GucCatalog) -> str | None:
    """Why ``name = value`` would be refused by the catalog's server, or None."""
    g = cat.get(name)
    if g is None:
        return f"{name}: unknown parameter for {cat.source or 'this server'}"
    v = str(value).strip()
    if g.vartype == "bool":
        if parse_bool(v) is not None:
            return None
        return f"{name}: {v!r} is not a boolean (on/off)"
    if g.vartype == "enum":
        if g.enumvals is not None and v.lower() not in [e.lower() for e in g.enumvals]:
            return f"{name}: {v!r} is not one of {', '.join(g.enumvals)}"
        return None
    if g.vartype in ("integer", "real"):
        try:
            x = setting_number(v, g.unit, g.vartype)   # rounded as PostgreSQL does
        except ValueError as e:
            return f"{name}: {e}"
        if g.min_val is not None and x < g.min_val:
            return f"{name}: {v} is below the minimum {_show(g.min_val, g.unit)}"
        if g.max_val is not None and x > g.max_val:
            return f"{name}: {v} is above the maximum {_show(g.max_val, g.unit)}"
    return None


def _show(x: float, unit: str | None) -> str:
    n = int(x) if float(x).is_integer() else x
    return f"{n} (unit {unit})" if unit else str(n)


def validate(plan_or_changes, cat: GucCatalog) -> list[str]:
    """Problems with the plan's applicable PostgreSQL changes against ``cat``."""
    changes = getattr(plan_or_changes, "changes", plan_or_changes)
    problems = []
    for c in changes:
        if c.layer != "postgres" or c.advice_only:
            continue
        p = check_value(c.name, c.proposed, cat)
        if p:
            problems.append(p)
    return problems
