"""An existing server reached only through a connection string (``--dsn``).

pgaccel changes nothing server-wide through a benchmark on it: only settings a session may
set (context ``user``/``superuser``) are applied, through PGOPTIONS.  ``tune --apply``
reaches it through the same object (``pg_settings``, ``file_errors``, ``reload`` from the
base class; ALTER SYSTEM on :meth:`connect`).  The DSN is shown only without its password
(:attr:`DsnTarget.display_dsn`).
"""

from __future__ import annotations

from typing import Iterable

import psutil
from psycopg import conninfo as pgconninfo

from ..errors import UsageError
from ..pg.secrets import scrub_secrets
from ..pg.settings import libpq_options, unsettable
from .target_base import Target, safe_dsn



def find_postmaster(backend_pid: int) -> int | None:
    """The postmaster of a local backend (walk up while the parent is a postgres process)."""
    try:
        p = psutil.Process(backend_pid)
        while True:
            parent = p.parent()
            if parent is None or parent.pid == 1:
                return p.pid
            name = parent.name()
            if "postgres" not in name and "postmaster" not in name:
                return p.pid
            p = parent
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


class DsnTarget(Target):
    """An existing server; only session-level settings are varied."""

    kind = "dsn"

    def __init__(self, dsn: str):
        super().__init__()
        try:
            pgconninfo.conninfo_to_dict(dsn)
        except Exception as e:  # psycopg's text may quote the DSN: never its password
            raise UsageError("--dsn is not a valid connection string: "
                             f"{scrub_secrets(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)}.",
                             "Use a libpq URI (postgresql://user@host:5432/postgres) or "
                             "key=value pairs (host=... port=... dbname=...).") from None
        self.dsn = dsn
        self._contexts: dict[str, str] = {}
        self._pm: int | None = None
        with self.database() as db:
            self.server_version = db.version_num
            self._contexts = db.contexts()
            self._host = db.conn.info.host
            # a server on this machine: its processes can be measured from /proc
            if self.is_local:
                self._pm = find_postmaster(db.conn.info.backend_pid)

    @property
    def host(self) -> str | None:
        return self._host

    @property
    def display_dsn(self) -> str:
        """The DSN without its password."""
        return safe_dsn(self.dsn)

    def admin_conninfo(self) -> str:
        return self.dsn

    def describe(self) -> str:
        return f"the server at {self.display_dsn}"

    def postmaster_pid(self) -> int | None:
        return self._pm

    def unsettable(self, names: Iterable[str]) -> list[str]:
        """Only what a session may set (``pg.settings.settable``)."""
        return unsettable(names, self._contexts, "dsn")

    def apply(self, settings: dict[str, object]) -> list[str]:
        skip = set(self.unsettable(settings))
        ok = {k: v for k, v in settings.items() if k not in skip}
        self.settings = ok
        self.session_options = libpq_options(ok)
        return sorted(skip)
