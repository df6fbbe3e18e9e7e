"""A cluster on this machine that pgaccel may start, stop, reload and restart: a throwaway
one it created, or the user's own (``--pgdata``).

:class:`LocalTarget` is everything commands and apply code do with such a cluster; the
:class:`~pgaccel.server.cluster.Cluster` behind it is the process-level object (initdb,
pg_ctl, the reaper).  Besides connecting (the base class) it:

* reads and checks the configuration files without touching the running server, with
  ``postgres -C`` (``server/binary.py``), passing the options the cluster was started with
  (``postmaster.opts``: Debian's ``-c config_file=...``): :meth:`config_file`,
  :meth:`check_files`, :meth:`raw_values`, :meth:`huge_pages`;
* starts, stops and restarts it, through pg_ctl as the server's OS user, or through the
  user's ``restart_cmd`` (``--restart-cmd``, e.g. systemctl) when given, then waits until
  it accepts connections (:meth:`wait_ready`);
* on :meth:`close`, removes a throwaway cluster; a ``--pgdata`` one is given back as it
  was found (restarted with its own configuration if it was running) when
  ``restore_on_close`` (benchmarks restart it with variants' ``-c`` options), and left
  exactly as it is otherwise (planning and ``tune --apply``, which put it back themselves).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from typing import Iterable

import psycopg

from ..errors import ConnectError, ServerError
from .binary import config_values, postgres_c, server_huge_pages
from .cluster import UNKNOWN_FAILURE, Cluster, explain_start_failure
from .target_base import Target


class LocalTarget(Target):
    """A cluster pgaccel starts and stops (throwaway or --pgdata)."""

    def __init__(self, cluster: Cluster, restart_cmd: str | None = None, *,
                 restore_on_close: bool = True):
        super().__init__()
        self.cluster = cluster
        self.inst = cluster.inst
        self.kind = "throwaway" if cluster.throwaway else "pgdata"
        self.restart_cmd = restart_cmd
        self.restore_on_close = restore_on_close
        self._original_running = (cluster.is_running()
                                  if restore_on_close and not cluster.throwaway else False)

    # -- where it is ---------------------------------------------------------------------
    @property
    def host(self) -> str:
        return self.cluster.sockdir

    @property
    def pgdata(self) -> str:
        return self.cluster.pgdata

    @property
    def user(self):
        """The OS user the server runs as (``osuser.OsUser``)."""
        return self.cluster.user

    @property
    def opts(self) -> list[str]:
        """The cluster's own command-line options (from postmaster.opts)."""
        return shlex.split(self.cluster.original_opts or "")

    def admin_conninfo(self) -> str:
        return self.cluster.conninfo("postgres")

    def connect(self, dbname: str | None = None, *, session: bool = False
                ) -> psycopg.Connection:
        try:
            return super().connect(dbname, session=session)
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
            build = f" of the pgaccel build {self.inst.build}" if self.inst.build else ""
            return (f"throwaway PostgreSQL {self.inst.version} cluster in {self.cluster.base}"
                    + build)
        return f"PostgreSQL cluster {self.cluster.pgdata}"

    def postmaster_pid(self) -> int | None:
        return self.cluster.postmaster_pid()

    # -- the configuration files (postgres -C; the server is not touched) ----------------
    def _postgres_c(self, name: str) -> subprocess.CompletedProcess:
        return postgres_c(self.inst.path("postgres"), self.pgdata, name, opts=self.opts,
                          user=self.user)

    def config_file(self) -> str:
        """The real path of the cluster's postgresql.conf."""
        r = self._postgres_c("config_file")
        if r.returncode != 0 or not r.stdout.strip():
            _, line, advice = explain_start_failure(r.stderr)
            known = advice != UNKNOWN_FAILURE          # a failure the log explains
            raise ServerError(f"Cannot read the configuration of {self.pgdata}: {line}",
                              advice if known else "Fix the configuration files first "
                              "(postgres -C config_file must work).")
        return os.path.realpath(r.stdout.strip().splitlines()[-1])

    def check_files(self) -> str | None:
        """The server's complaint about its configuration files, or None (``postgres -C``
        parses every file and checks every value without starting anything)."""
        r = self._postgres_c("config_file")
        if r.returncode == 0:
            return None
        lines = [ln.strip() for ln in r.stderr.splitlines() if ln.strip()]
        for ln in lines:
            if re.search(r"invalid value|unrecognized configuration|outside the valid range|"
                         r"requires a|syntax error|could not", ln, re.I):
                return ln
        return lines[0] if lines else f"postgres -C exited with {r.returncode}"

    def raw_values(self, names: Iterable[str]) -> dict[str, str]:
        """Raw values (in each parameter's unit) the files give ``names``, running or not;
        names the binary does not know are left out."""
        return config_values(self.inst.path("postgres"), self.pgdata, names, user=self.user,
                             opts=self.opts)

    def huge_pages(self, settings: dict[str, str]) -> int | None:
        """``shared_memory_size_in_huge_pages`` with ``settings`` (15+, stopped cluster)."""
        return server_huge_pages(self.inst.path("postgres"), self.pgdata, settings, self.user)

    # -- run state -----------------------------------------------------------------------
    def running(self) -> bool:
        return self.cluster.is_running()

    def start(self) -> None:
        """Start with the target's settings (none: the cluster's own configuration)."""
        self.cluster.start(self.settings)

    def stop(self) -> None:
        self.cluster.stop()

    def apply(self, settings: dict[str, object]) -> list[str]:
        self.settings = dict(settings)
        self.cluster.restart(self.settings)
        return []

    def restart(self) -> None:
        """Restart (``restart_cmd`` when given, else pg_ctl with the target's settings);
        raises ServerError with the server's log line when it does not come up."""
        if not self.restart_cmd:
            self.cluster.restart(self.settings)
            return
        try:
            r = subprocess.run(shlex.split(self.restart_cmd), capture_output=True, text=True,
                               timeout=300)
        except (OSError, ValueError, subprocess.TimeoutExpired) as e:
            raise ServerError(f"--restart-cmd {self.restart_cmd!r} could not run: {e}",
                              "Check the command.") from None
        if r.returncode != 0:
            out = (r.stderr or r.stdout).strip().splitlines()
            raise ServerError(f"--restart-cmd {self.restart_cmd!r} failed (exit "
                              f"{r.returncode}): {out[-1] if out else ''}",
                              "See the server log (journalctl -u <unit> for systemd).")
        self.wait_ready()

    def wait_ready(self, timeout: float = 120) -> None:
        """Wait until the server accepts connections (after ``restart_cmd``)."""
        end = time.monotonic() + timeout
        last = ""
        while time.monotonic() < end:
            self.cluster.read_pidfile()
            try:
                with self.connect() as conn:
                    conn.execute("SELECT 1")
                return
            except Exception as e:  # noqa: BLE001 - any failure means "not up yet"
                text = getattr(e, "message", None) or str(e)
                last = text.strip().splitlines()[0] if text.strip() else type(e).__name__
            time.sleep(0.5)
        raise ServerError(f"The server did not accept connections within {timeout:.0f}s after "
                          f"--restart-cmd: {last}", "See the server log.")

    def close(self) -> None:
        if self.cluster.throwaway:
            self.cluster.cleanup()
        elif self.restore_on_close:
            # give the user's cluster back as it was: file configuration, same run state
            if self.cluster.is_running():
                self.cluster.stop()
            if self._original_running:
                self.cluster.start({})
