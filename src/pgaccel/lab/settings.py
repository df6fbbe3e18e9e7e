"""Is a variant what it claims?  Compare intended settings with what the server reports.

Values are compared in the setting's base unit from pg_settings (``shared_buffers`` in
8kB pages, ``checkpoint_timeout`` in seconds, ...), so "1GB", "1024MB" and "131072" all
match; booleans accept every spelling PostgreSQL does; enums compare case-insensitively.
"""

from __future__ import annotations

from typing import Any

from ..server.target import Target
from ..pg.catalog import to_unit

_TRUE = {"on", "true", "yes", "1", "t", "y"}
_FALSE = {"off", "false", "no", "0", "f", "n"}


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
        try:
            num = to_unit(s, unit)          # the catalog's unit arithmetic (tune/gucs.py)
        except ValueError:
            return s
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
