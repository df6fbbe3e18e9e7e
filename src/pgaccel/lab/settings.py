"""Is a variant what it claims?  Compare intended settings with what the server reports.

Values are compared in the setting's base unit from pg_settings (``shared_buffers`` in
8kB pages, ``checkpoint_timeout`` in seconds, ...), so "1GB", "1024MB" and "131072" all
match; booleans accept every spelling PostgreSQL does; enums compare case-insensitively.
"""

from __future__ import annotations

import re
from typing import Any

from ..server.target import Target

_MEM = {"B": 1, "kB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
_TIME = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "min": 60000.0, "h": 3600000.0, "d": 86400000.0}
_TRUE = {"on", "true", "yes", "1", "t", "y"}
_FALSE = {"off", "false", "no", "0", "f", "n"}


def _unit_factor(unit: str | None) -> tuple[str, float] | None:
    """('mem'|'time', size of one base unit in bytes or ms) for a pg_settings unit."""
    if not unit:
        return None
    m = re.fullmatch(r"(\d*)(B|kB|MB|GB|TB|us|ms|s|min|h|d)", unit)
    if not m:
        return None
    mult = int(m.group(1) or 1)
    u = m.group(2)
    return ("mem", mult * _MEM[u]) if u in _MEM else ("time", mult * _TIME[u])


def to_base(value: Any, unit: str | None, vartype: str) -> Any:
    """A value as pg_settings.setting would show it (in the base unit)."""
    s = str(value).strip().strip("'")
    if vartype == "bool":
        low = s.lower()
        if low in _TRUE or (len(low) > 1 and "true".startswith(low)):
            return "on"
        if low in _FALSE or (len(low) > 1 and "false".startswith(low)):
            return "off"
        return low
    if vartype in ("integer", "real"):
        m = re.fullmatch(r"(-?[\d.]+(?:[eE][-+]?\d+)?)\s*([A-Za-z]*)", s)
        if not m:
            return s
        num, u = float(m.group(1)), m.group(2)
        base = _unit_factor(unit)
        if u and base:
            table = _MEM if base[0] == "mem" else _TIME
            if u not in table:
                return s
            num = num * table[u] / base[1]
        return round(num) if vartype == "integer" else num
    if vartype == "enum":
        return s.lower()
    return s


def equal(expected: Any, actual: str, unit: str | None, vartype: str) -> bool:
    e, a = to_base(expected, unit, vartype), to_base(actual, None, vartype)
    if vartype == "real":
        try:
            return abs(float(e) - float(a)) <= 1e-9 * max(1.0, abs(float(e)))
        except (TypeError, ValueError):
            return str(e) == str(a)
    if vartype == "integer" and str(expected).strip() == "-1":
        return str(a) == "-1"
    return str(e) == str(a)


def verify_settings(target: Target, settings: dict[str, object]) -> list[dict[str, Any]]:
    """Settings whose value in pg_settings differs from the intended one."""
    if not settings:
        return []
    with target.connect() as conn:
        rows = conn.execute(
            "SELECT name, setting, unit, vartype, pending_restart FROM pg_settings "
            "WHERE name = ANY(%s)", (list(settings),)).fetchall()
    found = {r[0]: r for r in rows}
    bad = []
    for name, value in settings.items():
        row = found.get(name)
        if row is None:
            bad.append({"name": name, "expected": str(value), "actual": "(unknown setting)"})
            continue
        _, actual, unit, vartype, _pending = row
        if not equal(value, actual, unit, vartype):
            shown = f"{actual}{' x ' + unit if unit else ''}"
            bad.append({"name": name, "expected": str(value), "actual": shown})
    return bad
