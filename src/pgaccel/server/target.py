"""The server a command works on: a throwaway cluster, a local cluster (``--pgdata``) or an
existing server (``--dsn``), behind one interface.

What differs is what a variant may change.  Throwaway and ``--pgdata`` clusters are
restarted with the variant's settings on the postgres command line (no file is edited, and
a ``--pgdata`` cluster is restarted with its original options at the end).  On a ``--dsn``
server pgaccel changes nothing server-wide: only settings a session may set (context
``user``/``superuser``) are applied, through PGOPTIONS; the rest are reported as not tested.

Benchmarks write only to the ``pgaccel_bench`` database (and its template
``pgaccel_bench_template``), which pgaccel creates and drops.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Iterator

import psycopg
from psycopg import conninfo as pgconninfo

from ..errors import ConnectError, PgaccelError, ServerError, UsageError
from .cluster import BENCH_DB, Cluster
from .discovery import Installation, choose_server

TEMPLATE_DB = BENCH_DB + "_template"
SESSION_CONTEXTS = ("user", "superuser")


def safe_dsn(dsn: str) -> str:
    """The DSN for display, with any password removed."""
    try:
        d = pgconninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "(unparseable DSN)"
    d.pop("password", None)
    return pgconninfo.make_conninfo(**{k: v for k, v in d.items() if v is not None}) or "(defaults)"


def explain_connect_error(e: Exception, what: str) -> ConnectError:
    text = str(e).strip()
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
    kind = "abstract"
    can_restart = False

    def __init__(self) -> None:
        self.settings: dict[str, object] = {}
        self.session_options: str | None = None
        self.inst: Installation | None = None

    def admin_conninfo(self) -> str:
        raise NotImplementedError

    def bench_conninfo(self, dbname: str = BENCH_DB) -> str:
        return pgconninfo.make_conninfo(self.admin_conninfo(), dbname=dbname)

    def connect(self, dbname: str | None = None) -> psycopg.Connection:
        ci = self.admin_conninfo() if dbname is None else self.bench_conninfo(dbname)
        try:
            return psycopg.connect(ci, autocommit=True, connect_timeout=15)
        except psycopg.OperationalError as e:
            raise explain_connect_error(e, self.describe()) from None

    def describe(self) -> str:
        return self.kind

    def postmaster_pid(self) -> int | None:
        return None

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


class LocalTarget(Target):
    """A cluster pgaccel starts and stops (throwaway or --pgdata)."""

    can_restart = True

    def __init__(self, cluster: Cluster):
        super().__init__()
        self.cluster = cluster
        self.inst = cluster.inst
        self.kind = "throwaway" if cluster.throwaway else "pgdata"
        self._original_running = cluster.is_running() if not cluster.throwaway else False

    def admin_conninfo(self) -> str:
        return self.cluster.conninfo("postgres")

    def connect(self, dbname: str | None = None) -> psycopg.Connection:
        try:
            return super().connect(dbname)
        except ConnectError as e:
            if not self.cluster.throwaway and re.search(r"peer|ident", e.message, re.I):
                e.hint = ("pgaccel connects to a --pgdata cluster over its socket as $PGUSER, "
                          "else as the data directory's owner; peer authentication only "
                          "admits that OS user. Run pgaccel as the cluster's owner (e.g. "
                          "`sudo -u postgres`), or set PGUSER and a password (PGPASSWORD or "
                          "~/.pgpass) for a password login.")
            raise

    def describe(self) -> str:
        if self.cluster.throwaway:
            return f"throwaway PostgreSQL {self.inst.version} cluster in {self.cluster.base}"
        return f"PostgreSQL cluster {self.cluster.pgdata}"

    def postmaster_pid(self) -> int | None:
        return self.cluster.postmaster_pid()

    def apply(self, settings: dict[str, object]) -> list[str]:
        self.settings = dict(settings)
        self.cluster.restart(self.settings)
        return []

    def close(self) -> None:
        if self.cluster.throwaway:
            self.cluster.cleanup()
        else:
            # give the user's cluster back as it was: file configuration, same run state
            if self.cluster.is_running():
                self.cluster.stop()
            if self._original_running:
                self.cluster.start({})


class DsnTarget(Target):
    """An existing server; only session-level settings are varied."""

    kind = "dsn"

    def __init__(self, dsn: str):
        super().__init__()
        try:
            pgconninfo.conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as e:
            raise UsageError(f"--dsn is not a valid connection string: {e}",
                             "Use a libpq URI (postgresql://user@host:5432/postgres) or "
                             "key=value pairs (host=... port=... dbname=...).") from None
        self.dsn = dsn
        self._contexts: dict[str, str] = {}
        with self.connect() as conn:
            self.server_version = conn.info.server_version
            self._contexts = dict(conn.execute("SELECT name, context FROM pg_settings").fetchall())
            host = conn.info.host
        # a server on this machine: its processes can be measured from /proc
        self.local = host.startswith("/") or host in ("localhost", "127.0.0.1", "::1")
        self._pm: int | None = None
        if self.local:
            from ..metrics.system import find_postmaster
            try:
                with self.connect() as conn:
                    self._pm = find_postmaster(conn.info.backend_pid)
            except PgaccelError:
                self._pm = None

    def admin_conninfo(self) -> str:
        return self.dsn

    def describe(self) -> str:
        return f"the server at {safe_dsn(self.dsn)}"

    def postmaster_pid(self) -> int | None:
        return self._pm

    def apply(self, settings: dict[str, object]) -> list[str]:
        ok = {k: v for k, v in settings.items() if self._contexts.get(k) in SESSION_CONTEXTS}
        self.settings = ok
        self.session_options = " ".join(f"-c {k}={v}" for k, v in ok.items()) or None
        return sorted(set(settings) - set(ok))


@contextmanager
def open_target(*, pg_bin: str | None = None, dsn: str | None = None,
                pgdata: str | None = None, run_as: str | None = None,
                workdir: str | None = None, port: int | None = None,
                keep: bool = False) -> Iterator[Target]:
    """The target the options name; cleaned up (cluster removed, bench DB dropped) on exit."""
    if dsn and pgdata:
        raise UsageError("--dsn and --pgdata name two different servers.", "Give one of them.")
    target: Target
    if dsn:
        target = DsnTarget(dsn)
        try:
            yield target
        finally:
            if not keep:
                try:
                    target.drop_bench_dbs()
                except PgaccelError:
                    pass
        return
    inst = choose_server(pg_bin)
    if pgdata:
        cluster = Cluster.existing(inst, pgdata, port=port, run_as=run_as)
    else:
        cluster = Cluster.create_throwaway(inst, workdir=workdir, port=port, run_as=run_as)
        cluster.keep = keep
    target = LocalTarget(cluster)
    try:
        yield target
    finally:
        target.close()


def ensure_started(target: Target) -> None:
    """Start a local target with its current settings if it is not running."""
    if isinstance(target, LocalTarget) and not target.cluster.is_running():
        try:
            target.cluster.start(target.settings)
        except ServerError:
            raise
