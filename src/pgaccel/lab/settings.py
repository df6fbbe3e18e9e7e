"""Is a variant what it claims?  Compare intended settings with what the server reports.

Each value is compared with pg_settings.setting by :func:`pgaccel.pg.values.same_value`:
in the setting's base unit (``shared_buffers`` in 8kB pages, ``checkpoint_timeout`` in
seconds, ...), so "1GB", "1024MB" and "131072" all match; booleans accept every spelling
PostgreSQL does; enums compare case-insensitively; -1 follows that function's rule.

Settings are read the way the benchmark's sessions see them: over a connection that carries
the target's session options (a ``--dsn`` target applies a variant through PGOPTIONS, so its
values are session values, invisible to a plain new connection); server-wide settings (a
restarted local cluster) show the same either way.
"""

from __future__ import annotations

from typing import Any

from ..pg.values import same_value
from ..server.target import Target


def verify_settings(target: Target, settings: dict[str, object]) -> list[dict[str, Any]]:
    """Settings whose value in pg_settings differs from the intended one."""
    if not settings:
        return []
    with target.database(session=True) as db:
        found = db.settings(settings)
    bad = []
    for name, value in settings.items():
        row = found.get(name)
        if row is None:
            bad.append({"name": name, "expected": str(value), "actual": "(unknown setting)"})
            continue
        actual, unit, vartype = row["setting"], row["unit"], row["vartype"]
        if not same_value(value, actual, unit, vartype, name):
            shown = f"{actual}{' x ' + unit if unit else ''}"
            bad.append({"name": name, "expected": str(value), "actual": shown})
    return bad
