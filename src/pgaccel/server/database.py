"""The one door to what a connected server says about itself (pg_activity's ``Data``, in
spirit): its version, its settings and their catalog, its configuration files' errors,
extensions, database size, relations and statistics counters.

A :class:`Database` owns one psycopg connection; every query that reads ``pg_settings`` or
another catalog view goes through it, and the text of each query is a ``pg/sql`` file named
for the versions it holds (``NAME-MIN-MAX.sql``).  Targets hand one out
(``Target.database()``); code that already holds a connection wraps it
(``Database(conn)``).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable

import psycopg
from psycopg.rows import dict_row

from ..errors import ServerError
from ..pg.catalog import GucCatalog, catalog_from_rows
from ..pg.secrets import scrub_secrets
from ..pg.sql import load_sql

RELOAD_WAIT = 10.0
_SETTING_KEYS = ("name", "setting", "unit", "vartype", "source", "sourcefile", "sourceline",
                 "pending_restart", "shown")
NOT_READABLE = "(needs superuser or pg_read_all_settings)"
# the settings a server's facts carry (what it needs of memory and huge pages, its I/O)
FACT_SETTINGS = ("shared_buffers", "max_connections", "huge_pages", "data_directory",
                 "shared_memory_size", "shared_memory_size_in_huge_pages", "huge_page_size",
                 "io_method", "wal_compression", "jit", "data_checksums")


class Database:
    """A connected server (see the module docstring).  Used as a context manager, it closes
    its connection at the end."""

    def __init__(self, conn: psycopg.Connection):
        self.conn = conn
        self._version: str | None = None

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.conn.close()

    # -- version --------------------------------------------------------------------------
    @property
    def version_num(self) -> int:
        """server_version_num: 150014 for 15.14, 180006 for 18.6."""
        return int(self.conn.info.server_version)

    @property
    def major(self) -> int:
        return self.version_num // 10000

    @property
    def version(self) -> str:
        """SHOW server_version ('15.14 (Debian 15.14-0+deb12u1)')."""
        if self._version is None:
            self._version = str(self._one("SHOW server_version")[0])
        return self._version

    def sql(self, name: str) -> str:
        """The text of query ``name`` for this server's version (``pg/sql``)."""
        text = load_sql(name, self.major)
        if text is None:
            raise ServerError(f"pgaccel has no {name} query for PostgreSQL {self.major}.",
                              "Use PostgreSQL 13 or newer.")
        return text

    # -- settings -------------------------------------------------------------------------
    def settings(self, names: Iterable[str]) -> dict[str, dict[str, Any]]:
        """name -> pg_settings row (setting, unit, vartype, source, sourcefile, sourceline,
        pending_restart, and ``shown``: the SHOW form) for the names the server knows."""
        rows = self.conn.execute(self.sql("settings"), (list(names),)).fetchall()
        return {r[0]: dict(zip(_SETTING_KEYS, r)) for r in rows}

    def show(self, name: str) -> str | None:
        """A setting as SHOW prints it; None when this server has no such setting, and
        :data:`NOT_READABLE` when the user may not read it."""
        try:
            return str(self._one("SELECT current_setting(%s)", (name,))[0])
        except psycopg.errors.UndefinedObject:
            return None
        except psycopg.errors.InsufficientPrivilege:
            return NOT_READABLE

    def catalog(self) -> tuple[GucCatalog, dict[str, str]]:
        """The server's parameter catalog (context, type, unit, bounds, enum values, reset
        value) and every current value as SHOW prints it."""
        rows = self.conn.execute(self.sql("catalog")).fetchall()
        return catalog_from_rows(rows, self.major, f"pg_settings of PostgreSQL {self.major}")

    def contexts(self) -> dict[str, str]:
        """name -> pg_settings.context (postmaster, sighup, user, ...)."""
        catalog, _ = self.catalog()
        return {name: g.context for name, g in catalog.gucs.items()}

    def non_default_settings(self) -> list[dict[str, Any]]:
        """Settings not at their built-in default, with their source; values that may
        hold a password are scrubbed."""
        return [{"name": r[0], "setting": scrub_secrets(r[1]) if r[1] else r[1],
                 "unit": r[2], "source": r[3], "context": r[4], "pending_restart": r[5]}
                for r in self.conn.execute(self.sql("nondefault_settings")).fetchall()]

    def facts(self) -> dict[str, Any]:
        """What `probe` and `run` report of a running server: version, non-default settings
        with their source, and the settings that say what memory and huge pages it needs."""
        out: dict[str, Any] = {"version": self.version, "version_num": self.version_num,
                               "major": self.major,
                               "non_default_settings": self.non_default_settings()}
        for name in FACT_SETTINGS:
            value = self.show(name)
            if value is not None:
                out[name] = value
        return out

    def file_errors(self) -> list[tuple]:
        """(sourcefile, sourceline, name, setting, error) of every refused file entry."""
        return self.conn.execute(self.sql("file_errors")).fetchall()

    def conf_load_time(self) -> Any:
        return self._one("SELECT pg_conf_load_time()")[0]

    # -- the database ----------------------------------------------------------------------
    def database_size(self) -> int:
        return int(self._one("SELECT pg_database_size(current_database())")[0])

    def ensure_extension(self, name: str) -> bool:
        """CREATE EXTENSION IF NOT EXISTS; False when the server cannot (not installed,
        not allowed)."""
        try:
            self.conn.execute(f'CREATE EXTENSION IF NOT EXISTS "{name}"')
            return True
        except psycopg.Error:
            return False

    def relations(self) -> list[str]:
        """Tables, indexes and materialized views of the user's schemas, largest first."""
        return [r[0] for r in self.conn.execute(self.sql("relations")).fetchall()]

    # -- statistics -------------------------------------------------------------------------
    def counters(self) -> dict[str, Any]:
        """The cumulative counters of the server and of this connection's database, as
        ``metrics.pg.delta`` reads them (a counter this version lacks is absent)."""
        snap: dict[str, Any] = {}
        db = self._row("database")
        snap.update({f"db_{k}": v for k, v in db.items() if k != "wal_lsn"})
        snap["wal_lsn"] = str(db.get("wal_lsn")) if db.get("wal_lsn") is not None else None
        snap.update({f"ckpt_{k}": v for k, v in self._row("checkpoints").items()})
        snap.update({f"stat_{k}": v for k, v in self._row("wal").items()})
        snap.update({f"io_{k}": v for k, v in self._row("io").items()})
        # this database's tables: how often (auto)vacuum and autoanalyze finished on them
        snap.update({f"tables_{k}": int(v) for k, v in self._row("tables").items()})
        return snap

    def checkpoint_counts(self) -> dict[str, Any]:
        return self._row("checkpoints")

    def active_waits(self) -> list[tuple[str, str]]:
        """(wait event type, wait event) of every active client backend but this one; CPU
        where it waits on nothing."""
        return self.conn.execute(self.sql("wait_events")).fetchall()

    # -- helpers ------------------------------------------------------------------------------
    def _one(self, query: str, params: tuple = ()) -> tuple:
        row = self.conn.execute(query, params).fetchone()
        assert row is not None
        return row

    def _row(self, name: str) -> dict[str, Any]:
        """The one row of version-dependent query ``name``; {} where this version has no
        such query."""
        text = load_sql(name, self.major)
        if not text:
            return {}
        with self.conn.cursor(row_factory=dict_row) as cur:
            cur.execute(text)
            row = cur.fetchone()
        return dict(row) if row else {}


def reload_and_wait(open_db: Callable[[], Database]) -> None:
    """pg_reload_conf(), then wait until the postmaster has re-read its files: a new
    session's pg_conf_load_time() is the postmaster's, and moves on at each reload."""
    with open_db() as db:
        t0 = db.conf_load_time()
        db.conn.execute("SELECT pg_reload_conf()")
    end = time.monotonic() + RELOAD_WAIT
    while time.monotonic() < end:
        with open_db() as db:
            if db.conf_load_time() > t0:
                return
        time.sleep(0.05)
    raise ServerError(f"The server did not re-read its configuration within {RELOAD_WAIT:.0f}s "
                      "of pg_reload_conf().", "Check the server log.")


def error_line(e: BaseException) -> str:
    """The first line of an error's message (a PgaccelError's message, else str(e), else
    the exception's type)."""
    text = (getattr(e, "message", None) or str(e) or type(e).__name__).strip()
    return text.splitlines()[0] if text else type(e).__name__
