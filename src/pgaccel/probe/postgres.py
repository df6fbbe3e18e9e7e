"""PostgreSQL facts: the installation's build (pg_config) and a running server's state."""

from __future__ import annotations

import subprocess
from typing import Any

import psycopg

from ..server.discovery import Installation

_NONDEFAULT_SQL = """
SELECT name, setting, unit, source, context, pending_restart
FROM pg_settings
WHERE source NOT IN ('default', 'override') AND name NOT LIKE 'lc\\_%'
ORDER BY name"""


def pg_config(inst: Installation) -> dict[str, str]:
    """``pg_config`` output as a dict (CONFIGURE, CFLAGS, CC, VERSION, ...); {} if absent."""
    if "pg_config" not in inst.programs:
        return {}
    try:
        out = subprocess.run([inst.path("pg_config")], capture_output=True, text=True,
                             timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    info: dict[str, str] = {}
    for line in out.splitlines():
        key, sep, val = line.partition(" = ")
        if sep:
            info[key.strip()] = val.strip()
    return info


def build_summary(cfg: dict[str, str]) -> dict[str, Any]:
    """The build facts the tuner and report care about."""
    configure = cfg.get("CONFIGURE", "")
    flags = {opt: f"--with-{opt}" in configure
             for opt in ("lz4", "zstd", "liburing", "llvm", "openssl", "icu", "libnuma")}
    return {"version": cfg.get("VERSION"), "cc": cfg.get("CC"), "cflags": cfg.get("CFLAGS"),
            "configure": configure, "with": flags}


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
        {"name": r[0], "setting": r[1], "unit": r[2], "source": r[3], "context": r[4],
         "pending_restart": r[5]} for r in rows]
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
