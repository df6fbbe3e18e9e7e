"""PostgreSQL-layer renderers: a conf.d snippet, ALTER SYSTEM statements, JSON.

Pure text from a Plan.  Only applicable changes (not ``advice_only``) are rendered as
settings; values are single-quoted, which PostgreSQL accepts for every parameter type.
The Linux renderers (sysctl.d, tuned, script) live in ``linux.py``.
"""

from __future__ import annotations

from typing import Any

from ..util import format_bytes
from .plan import Change, Plan


def _quote(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _pg(plan: Plan) -> list[Change]:
    return [c for c in plan.layer("postgres") if not c.advice_only]


def describe(plan: Plan) -> str:
    i = plan.inputs or {}
    mem = format_bytes(int(i.get("memory_bytes", 0))) if i else "?"
    return (f"PostgreSQL {i.get('pg_version', '?')} on {i.get('cpus', 0):g} CPUs / {mem}, "
            f"{i.get('storage', '?')} storage, {i.get('workload', '?')} workload, "
            f"{i.get('connections', '?')} connections")


def render_conf(plan: Plan) -> str:
    """A conf.d snippet (e.g. conf.d/90-pgaccel.conf, included after postgresql.conf)."""
    lines = [f"# Written by pgaccel tune for {describe(plan)}.",
             "# Settings marked [restart] take effect after a server restart; the others "
             "after a reload.", ""]
    for c in _pg(plan):
        tag = " [restart]" if c.restart else ""
        lines += [f"# {c.reason}{tag}", f"{c.name} = {_quote(c.proposed)}"]
    return "\n".join(lines) + "\n"


def render_sql(plan: Plan) -> str:
    """ALTER SYSTEM statements (written to postgresql.auto.conf) and a reload."""
    changes = _pg(plan)
    lines = [f"-- Written by pgaccel tune for {describe(plan)}."]
    for c in changes:
        tag = "  -- needs a restart" if c.restart else ""
        lines.append(f"ALTER SYSTEM SET {c.name} = {_quote(c.proposed)};{tag}")
    lines.append("SELECT pg_reload_conf();")
    restart = [c.name for c in changes if c.restart]
    if restart:
        lines.append(f"-- Restart the server for: {', '.join(restart)}")
    return "\n".join(lines) + "\n"


def plan_json(plan: Plan, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    d = plan.to_dict()
    d.update(extra or {})
    return d
