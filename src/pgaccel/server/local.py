"""A local cluster pgaccel may reload and restart (thin: processes and one connection).

``LocalServer`` wraps a :class:`~pgaccel.server.cluster.Cluster` (a throwaway one, or an
existing ``--pgdata`` one): ``postgres -C`` to read and check the configuration files
without touching the running server, pg_settings reads, reload (and wait), start, stop, and
restart through pg_ctl as the server's OS user or the user's ``--restart-cmd``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from typing import Iterable

import psycopg

from ..errors import ServerError
from . import pgsql


class LocalServer:
    """A local cluster pgaccel may reload and restart: pg_ctl as the server's OS user, or
    ``restart_cmd`` (e.g. systemctl) when given."""

    def __init__(self, cluster, restart_cmd: str | None = None):
        self.cluster = cluster
        self.restart_cmd = restart_cmd
        self.opts = shlex.split(cluster.original_opts or "")

    def _postgres(self, *args: str) -> subprocess.CompletedProcess:
        from .osuser import as_user_kwargs
        cmd = [self.cluster.inst.path("postgres"), "-D", self.cluster.pgdata, *self.opts, *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                              **as_user_kwargs(self.cluster.user))

    def config_file(self) -> str:
        r = self._postgres("-C", "config_file")
        if r.returncode != 0 or not r.stdout.strip():
            from .cluster import explain_start_failure
            _, line, _ = explain_start_failure(r.stderr)
            raise ServerError(f"Cannot read the configuration of {self.cluster.pgdata}: {line}",
                              "Fix the configuration files first (postgres -C config_file "
                              "must work).")
        return os.path.realpath(r.stdout.strip().splitlines()[-1])

    def check_files(self) -> str | None:
        """The server's complaint about its configuration files, or None (``postgres -C``
        parses every file and checks every value without starting anything)."""
        r = self._postgres("-C", "config_file")
        if r.returncode == 0:
            return None
        lines = [ln.strip() for ln in r.stderr.splitlines() if ln.strip()]
        for ln in lines:
            if re.search(r"invalid value|unrecognized configuration|outside the valid range|"
                         r"requires a|syntax error|could not", ln, re.I):
                return ln
        return lines[0] if lines else f"postgres -C exited with {r.returncode}"

    def raw_values(self, names: Iterable[str]) -> dict[str, str]:
        out = {}
        for n in names:
            r = self._postgres("-C", n)
            if r.returncode == 0 and r.stdout.strip():
                out[n] = r.stdout.strip().splitlines()[-1]
        return out

    def running(self) -> bool:
        return self.cluster.is_running()

    def connect(self):
        from .target import explain_connect_error
        try:
            return self.cluster.connect("postgres", connect_timeout=10)
        except psycopg.OperationalError as e:
            raise explain_connect_error(e, f"the cluster in {self.cluster.pgdata}") from None

    def settings(self, names: Iterable[str]) -> dict[str, dict]:
        with self.connect() as conn:
            return pgsql.settings(conn, names)

    def reload(self) -> None:
        pgsql.reload_and_wait(self.connect)

    def start(self) -> None:
        self.cluster.start({})

    def stop(self) -> None:
        self.cluster.stop()

    def restart(self) -> None:
        """Restart; raises ServerError with the server's log line when it does not come up."""
        if not self.restart_cmd:
            self.cluster.restart({})
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
        end = time.monotonic() + timeout
        last = ""
        while time.monotonic() < end:
            self.cluster.read_pidfile()
            try:
                with self.connect() as conn:
                    conn.execute("SELECT 1")
                return
            except Exception as e:  # noqa: BLE001 - any failure means "not up yet"
                last = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            time.sleep(0.5)
        raise ServerError(f"The server did not accept connections within {timeout:.0f}s after "
                          f"--restart-cmd: {last}", "See the server log.")
