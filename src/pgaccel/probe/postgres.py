"""PostgreSQL facts: the installation's build (pg_config) and a running server's state."""

from __future__ import annotations

from typing import Any

import psycopg

from ..pg.secrets import scrub_secrets


_NONDEFAULT_SQL = """
SELECT name, setting, unit, source, context, pending_restart
FROM pg_settings
WHERE source NOT IN ('default', 'override') AND name NOT LIKE 'lc\\_%'
ORDER BY name"""


def server_facts(conn: psycopg.Connection) -> dict[str, Any]:
    """Version, non-default settings with their source, and huge-page needs."""
    info = conn.info
    facts: dict[str, Any] = {
        "version": conn.execute("SHOW server_version").fetchone()[0],
        "version_num": info.server_version,
        "major": info.server_version // 10000,
    }
    rows = conn.execute(_NONDEFAULT_SQL).fetchall()
    facts["non_default_settings"] = [
        {"name": r[0], "setting": scrub_secrets(r[1]) if r[1] else r[1], "unit": r[2],
         "source": r[3], "context": r[4], "pending_restart": r[5]} for r in rows]
    for name in ("shared_buffers", "max_connections", "huge_pages", "data_directory",
                 "shared_memory_size", "shared_memory_size_in_huge_pages", "huge_page_size",
                 "io_method", "wal_compression", "jit"):
        try:
            facts[name] = conn.execute(f"SHOW {name}").fetchone()[0]
        except psycopg.errors.UndefinedObject:
            pass
        except psycopg.errors.InsufficientPrivilege:
            facts[name] = "(needs superuser or pg_read_all_settings)"
    return facts
