"""What every target is (see ``target.py`` for the three kinds and ``open_target``).

:class:`Target` owns the connection (one ``connect``, its errors explained), the benchmark
database, "is the server on this machine?" (:attr:`Target.is_local`, one rule:
:func:`host_is_local`) and the three questions both apply paths ask a running server:
``pg_settings`` rows, ``pg_file_settings`` errors, and a reload that waits until the
postmaster has re-read its files (through ``database.Database``, the one door to what a
server says about itself, which :meth:`Target.database` hands out).  The local and
``--dsn`` kinds add what only they can do (``target_local.py``, ``target_dsn.py``).
"""

from __future__ import annotations

import os
import re
from typing import Iterable

import psycopg
from psycopg import conninfo as pgconninfo

from ..errors import ConnectError
from ..pg.secrets import REDACTED, scrub_secrets
from ..pg.settings import unsettable
from .cluster import BENCH_DB
from .database import Database, reload_and_wait
from .discovery import Installation

TEMPLATE_DB = BENCH_DB + "_template"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


def safe_dsn(dsn: str | None) -> str:
    """The DSN for display, never with its password: a DSN libpq parses is rebuilt without
    it; one it cannot parse is shown with anything that looks like a password removed."""
    if not dsn:
        return "(defaults)"
    try:
        d = pgconninfo.conninfo_to_dict(dsn)
    except Exception:
        return scrub_secrets(dsn) + " (unparseable)"
    d.pop("password", None)
    try:
        shown = pgconninfo.make_conninfo(**{k: v for k, v in d.items() if v is not None})
    except Exception:
        shown = scrub_secrets(dsn)
    # belt and braces: a password hidden in another key (e.g. options) is still scrubbed
    return scrub_secrets(shown) or "(defaults)"


def _password_of(conninfo: str) -> str | None:
    try:
        return pgconninfo.conninfo_to_dict(conninfo).get("password") or None
    except Exception:
        return None


def host_is_local(host: str | None) -> bool:
    """Whether a server reached through ``host`` (libpq's ``conn.info.host``: a socket
    directory, a name or an address) runs on this machine: a unix socket or a loopback
    name/address, or an address of one of this machine's own interfaces.  Its processes
    can then be read from /proc and its files built for."""
    host = host or ""
    if host.startswith("/") or host in LOOPBACK_HOSTS:
        return True
    return host in _own_addresses()


def _own_addresses() -> set[str]:
    """The IP addresses of this machine's interfaces (in this network namespace)."""
    import socket
    import psutil
    try:
        return {a.address.split("%")[0] for addrs in psutil.net_if_addrs().values()
                for a in addrs if a.family in (socket.AF_INET, socket.AF_INET6)}
    except OSError:
        return set()


def explain_connect_error(e: Exception, what: str, secret: str | None = None) -> ConnectError:
    """One ConnectError for a failed connection; its text never carries a password
    (``secret``: the password the connection used, also removed where it appears bare)."""
    text = scrub_secrets(str(e).strip())
    if secret:
        text = text.replace(secret, REDACTED)
    first = text.splitlines()[0] if text else type(e).__name__
    if re.search(r"password authentication failed|no password supplied|authentication failed|"
                 r"Ident authentication|peer authentication", text, re.I):
        return ConnectError(
            f"Authentication failed connecting to {what}: {first}",
            "Check the user and password (PGPASSWORD, ~/.pgpass, or the DSN) and pg_hba.conf.")
    if re.search(r"does not exist", text) and "database" in text:
        return ConnectError(f"Connecting to {what}: {first}",
                            "Name an existing database in the DSN (e.g. dbname=postgres); "
                            "pgaccel creates its own pgaccel_bench database from there.")
    if re.search(r"Connection refused|No such file or directory|could not translate host|"
                 r"timeout expired|Network is unreachable", text, re.I):
        return ConnectError(f"Could not connect to {what}: {first}",
                            "Is the server running, and are host and port right?")
    return ConnectError(f"Could not connect to {what}: {first}",
                        "Check the DSN and that the server accepts connections.")


class Target:
    """A server pgaccel works on.  ``settings`` are the variant settings last applied
    (:meth:`apply`), not the server's: those are :meth:`pg_settings`."""

    kind = "abstract"

    def __init__(self) -> None:
        self.settings: dict[str, object] = {}
        self.session_options: str | None = None
        self.inst: Installation | None = None

    # -- where it is ---------------------------------------------------------------------
    @property
    def host(self) -> str | None:
        """The host libpq reaches the server through (a socket directory for a unix
        socket)."""
        return None

    @property
    def is_local(self) -> bool:
        """The server runs on this machine (see :func:`host_is_local`)."""
        return host_is_local(self.host)

    def describe(self) -> str:
        return self.kind

    def postmaster_pid(self) -> int | None:
        return None

    # -- connections ---------------------------------------------------------------------
    def admin_conninfo(self) -> str:
        raise NotImplementedError

    def bench_conninfo(self, dbname: str = BENCH_DB) -> str:
        return pgconninfo.make_conninfo(self.admin_conninfo(), dbname=dbname)

    def session_conninfo(self, dbname: str | None = None) -> str:
        """The conninfo a load generator's sessions use: with :attr:`session_options` (the
        variant's per-session settings, PGOPTIONS for pgbench) added to the DSN's own
        ``options``."""
        ci = self.admin_conninfo() if dbname is None else self.bench_conninfo(dbname)
        if not self.session_options:
            return ci
        own = pgconninfo.conninfo_to_dict(ci).get("options") or os.environ.get("PGOPTIONS", "")
        return pgconninfo.make_conninfo(
            ci, options=(str(own) + " " + self.session_options).strip())

    def connect(self, dbname: str | None = None, *, session: bool = False) -> psycopg.Connection:
        """A new connection (admin database, or ``dbname``).  ``session=True``: as the load
        generator's sessions see the server, with the variant's session options."""
        if session:
            ci = self.session_conninfo(dbname)
        else:
            ci = self.admin_conninfo() if dbname is None else self.bench_conninfo(dbname)
        try:
            return psycopg.connect(ci, autocommit=True, connect_timeout=15)
        except psycopg.OperationalError as e:
            raise explain_connect_error(e, self.describe(), _password_of(ci)) from None

    # -- what apply asks a running server -------------------------------------------------
    def running(self) -> bool:
        """Whether the server runs (a ``--dsn`` server was reached when it was opened)."""
        return True

    def database(self, dbname: str | None = None, *, session: bool = False) -> Database:
        """The server's catalog and counters over a new connection (:meth:`connect`'s
        arguments); use it as a context manager."""
        return Database(self.connect(dbname, session=session))

    def pg_settings(self, names: Iterable[str]) -> dict[str, dict]:
        """name -> pg_settings row (``shown``: the SHOW form), over a new session."""
        with self.database() as db:
            return db.settings(names)

    def file_errors(self) -> list[tuple]:
        """(sourcefile, sourceline, name, setting, error) of every refused file entry."""
        with self.database() as db:
            return db.file_errors()

    def reload(self) -> None:
        """pg_reload_conf(), and wait until the postmaster has re-read its files."""
        reload_and_wait(self.database)

    # -- benchmarks ----------------------------------------------------------------------
    def unsettable(self, names: Iterable[str]) -> list[str]:
        """Of ``names``, those this target cannot set for a measurement, from the running
        server's pg_settings contexts (``pg.settings.settable``), without applying
        anything."""
        with self.database() as db:
            return unsettable(names, db.contexts(), self.kind)

    def apply(self, settings: dict[str, object]) -> list[str]:
        """Make ``settings`` effective for the next measurements.

        Returns the names of settings that could not be applied on this target."""
        raise NotImplementedError

    def ensure_bench_db(self) -> None:
        with self.connect() as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                  (BENCH_DB,)).fetchone()
            if not exists:
                try:
                    conn.execute(f'CREATE DATABASE "{BENCH_DB}"')
                except psycopg.errors.InsufficientPrivilege:
                    raise ConnectError(
                        f"The user cannot create the {BENCH_DB} database on {self.describe()}.",
                        "Connect as a user with CREATEDB, or create the database yourself "
                        f"(CREATE DATABASE {BENCH_DB}) and grant it to this user.") from None

    def drop_bench_dbs(self) -> None:
        with self.connect() as conn:
            for db in (BENCH_DB, TEMPLATE_DB):
                conn.execute(f'DROP DATABASE IF EXISTS "{db}"')

    def close(self) -> None:
        pass
