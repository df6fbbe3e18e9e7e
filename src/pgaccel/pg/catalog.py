"""The parameter catalog of a real PostgreSQL binary or server, and plan validation.

Two sources, same :class:`GucCatalog`:

* ``postgres --describe-config`` (no server needed; runs even as root).  One line per
  parameter, tab-separated: name, context, group, vartype (BOOLEAN, INTEGER, REAL, STRING,
  ENUM), reset value, min, max, short description, extra description.  It has no units and
  no enum values, so units come from ``versions.GUCS`` and enum checks are skipped.
* ``pg_settings`` of a running server: context, vartype, unit, min_val, max_val, enumvals.

``validate`` checks every PostgreSQL change of a plan against a catalog: unknown name,
value outside [min, max] after unit conversion, enum value not offered, malformed bool.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from . import versions

# -- units ------------------------------------------------------------------------------

MEMORY_UNITS = {"B": 1, "kB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
TIME_UNITS = {"us": 0.001, "ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_NUM_UNIT = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z]*)\s*$")
_BOOL_TRUE = ("on", "true", "yes", "1")
_BOOL_FALSE = ("off", "false", "no", "0")


def unit_scale(unit: str | None) -> tuple[str, float] | None:
    """pg_settings.unit ('8kB', 'kB', 'MB', 's', 'ms') -> (kind, size in bytes or ms)."""
    if not unit:
        return None
    m = re.fullmatch(r"(\d*)\s*([A-Za-z]+)", unit)
    if not m:
        return None
    n = int(m.group(1) or 1)
    if m.group(2) in MEMORY_UNITS:
        return "memory", n * MEMORY_UNITS[m.group(2)]
    if m.group(2) in TIME_UNITS:
        return "time", n * TIME_UNITS[m.group(2)]
    return None


def to_unit(value: str, unit: str | None) -> float:
    """A setting value as PostgreSQL reads it, expressed in the parameter's unit.

    '4GB' with unit '8kB' -> 524288; '15min' with unit 's' -> 900; '12' -> 12.
    Raises ValueError when the text is not a number with an acceptable unit."""
    m = _NUM_UNIT.match(str(value))
    if not m:
        raise ValueError(f"{value!r} is not a number")
    num, suffix = float(m.group(1)), m.group(2)
    if not suffix:
        return num
    scale = unit_scale(unit)
    if scale is None:
        raise ValueError(f"{value!r} has a unit but the parameter takes none")
    kind, base = scale
    table = MEMORY_UNITS if kind == "memory" else TIME_UNITS
    if suffix not in table:
        valid = ", ".join(table)
        raise ValueError(f"{value!r}: unit {suffix!r} is not valid here (valid: {valid})")
    return num * table[suffix] / base


def fmt_bytes(n: int) -> str:
    """Bytes as PostgreSQL accepts them, exact: 4GB, 16MB, 1920kB (rounded down to 1kB)."""
    kb = max(int(n) // 1024, 0)
    if kb and kb % (1024 * 1024) == 0:
        return f"{kb // (1024 * 1024)}GB"
    if kb and kb % 1024 == 0:
        return f"{kb // 1024}MB"
    return f"{kb}kB"


def fmt_ms(ms: int) -> str:
    for suffix, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms and ms % size == 0:
            return f"{ms // size}{suffix}"
    return f"{ms}ms"


def parse_bytes(value: str, unit: str | None = "kB") -> int:
    """A memory setting ('4GB', '16384' with unit 8kB) -> bytes."""
    scale = unit_scale(unit)
    return int(to_unit(value, unit) * (scale[1] if scale else 1))


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


SETTINGS_SQL = ("SELECT name, context, vartype, unit, min_val, max_val, enumvals, reset_val, "
                "current_setting(name) AS shown FROM pg_settings")


def catalog_from_rows(rows: Iterable[tuple], major: int | None = None,
                      source: str = "pg_settings") -> tuple[GucCatalog, dict[str, str]]:
    """(catalog, current settings as SHOW prints them) from rows of SETTINGS_SQL."""
    cat = GucCatalog(major=major, source=source)
    current: dict[str, str] = {}
    for name, context, vartype, unit, lo, hi, enumvals, reset, shown in rows:
        cat.gucs[name] = GucInfo(name, context, vartype, unit or None, _num(lo), _num(hi),
                                 tuple(enumvals) if enumvals else None, reset)
        current[name] = shown
    return cat, current


def catalog_from_server(conn) -> tuple[GucCatalog, dict[str, str]]:
    """Catalog and current values from a psycopg connection's pg_settings (thin)."""
    major = conn.info.server_version // 10000
    rows = conn.execute(SETTINGS_SQL).fetchall()
    return catalog_from_rows(rows, major, f"pg_settings of PostgreSQL {major}")


# -- validation -------------------------------------------------------------------------

def check_value(name: str, value: str, cat: GucCatalog) -> str | None:
    """Why ``name = value`` would be refused by the catalog's server, or None."""
    g = cat.get(name)
    if g is None:
        return f"{name}: unknown parameter for {cat.source or 'this server'}"
    v = str(value).strip()
    if g.vartype == "bool":
        low = v.lower()
        if low in _BOOL_TRUE + _BOOL_FALSE:
            return None
        return f"{name}: {v!r} is not a boolean (on/off)"
    if g.vartype == "enum":
        if g.enumvals is not None and v.lower() not in [e.lower() for e in g.enumvals]:
            return f"{name}: {v!r} is not one of {', '.join(g.enumvals)}"
        return None
    if g.vartype in ("integer", "real"):
        try:
            x = to_unit(v, g.unit)
        except ValueError as e:
            return f"{name}: {e}"
        if g.vartype == "integer":
            x = math.floor(x + 0.5)   # PostgreSQL rounds to the nearest unit
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
