"""``capture --log``: the server's statement logging turned on for the window and put back
after it, also after a kill -9 (docs/workloads.md).

For the window, with ALTER SYSTEM and a reload: ``log_min_duration_statement = 0`` (every
statement), ``log_parameter_max_length = -1`` (whole values) and ``csvlog`` added to
``log_destination``.  The log is read back through SQL (``pg_current_logfile``,
``pg_read_file`` from the offset the window started at), so the server may be remote; it
needs ``logging_collector = on`` (a restart, which pgaccel never does) and a superuser (or the
ALTER SYSTEM and pg_read_server_files grants).

Before the first change, the journal (``<state dir>/capture-journal/capture-PID.json``:
the DSN without its password, each setting's original state: set in postgresql.auto.conf
to a value, or not set there) is written; at the end each setting is put back (ALTER SYSTEM
SET the original, or RESET), the server reloaded and the journal removed.  A journal whose
process is gone is recovered at pgaccel's next start (:func:`recover`): the same statements
over a new connection (the password from the environment or ~/.pgpass, never from a file
of pgaccel's); if that connection fails, the message gives the SQL to run by hand.
"""

from __future__ import annotations

import glob
import json
import os
import time
from typing import Any, Iterator

from ..errors import PgaccelError, ServerError, UsageError
from ..server.database import Database, reload_and_wait
from ..server.target_base import safe_dsn
from ..util import atomic_write_json, owner_alive, process_owner, state_subdir

SETTINGS = ("log_min_duration_statement", "log_parameter_max_length", "log_destination")
PATTERN = "capture-*.json"


def journal_dir() -> str:
    return state_subdir("PGACCEL_CAPTURE_JOURNAL_DIR", "capture-journal")


def originals(db: Database) -> dict[str, dict[str, Any]]:
    """Each setting's state in postgresql.auto.conf: ``{"auto": text}`` with the value as
    the file writes it (pg_file_settings: '64', not SHOW's '64B') when ALTER SYSTEM set it,
    ``{"auto": None}`` when it did not."""
    rows = dict(db.conn.execute(
        "SELECT name, setting FROM pg_file_settings WHERE name = ANY(%s) "
        "AND sourcefile LIKE '%%postgresql.auto.conf' ORDER BY seqno",
        (list(SETTINGS),)).fetchall())
    known = {r[0] for r in db.conn.execute("SELECT name FROM pg_settings WHERE name = "
                                           "ANY(%s)", (list(SETTINGS),)).fetchall()}
    return {name: {"auto": rows.get(name)} for name in SETTINGS if name in known}


def restore_sql(orig: dict[str, dict[str, Any]]) -> list[str]:
    """The statements that put the settings back (then ``SELECT pg_reload_conf()``)."""
    out = []
    for name in SETTINGS:
        if name not in orig:
            continue
        auto = orig[name].get("auto")
        if auto is None:
            out.append(f"ALTER SYSTEM RESET {name}")
        else:
            out.append(f"ALTER SYSTEM SET {name} = '{str(auto).replace(chr(39), chr(39) * 2)}'")
    return out + ["SELECT pg_reload_conf()"]


class LogWindow:
    """The logging change and the log's offset for one capture (a context manager)."""

    def __init__(self, target: Any):
        self.target, self.dsn = target, target.dsn
        self.db: Database | None = None
        self.orig: dict[str, dict[str, Any]] = {}
        self.path = os.path.join(journal_dir(), f"capture-{os.getpid()}.json")
        self.file: str | None = None
        self.offset = 0

    def _check(self) -> None:
        assert self.db is not None
        if (self.db.show("logging_collector") or "off") != "on":
            raise UsageError(
                "capture --log reads the server's log through SQL, which needs "
                "logging_collector = on (a restart; pgaccel never restarts a server it "
                "captures).",
                "Turn logging_collector on, or log the window yourself "
                "(log_min_duration_statement = 0) and give the file with --from-log.")
        su = self.db.conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = "
                                  "current_user").fetchone()
        if not (su and su[0]):
            raise UsageError("capture --log changes the server's logging with ALTER SYSTEM "
                             "and reads the log file: it needs a superuser.",
                             "Connect as one, or log the window yourself and give the file "
                             "with --from-log.")

    def _another(self) -> None:
        """Refuse a second --log capture of one server: its journal would take the first
        one's logging for the original and keep it on for good."""
        me = safe_dsn(self.dsn)
        for f, data in _journals(journal_dir()):
            if data.get("dsn") == me:
                raise UsageError(
                    f"Another capture --log of {me} is running, or was killed and its logging "
                    f"not yet put back ({f}).",
                    "Wait for it to end, or run any pgaccel command to put a killed one's "
                    "logging back (it says what to do if it cannot), then capture again.")

    def __enter__(self) -> "LogWindow":
        self._another()
        self.db = Database(self.target.connect())
        try:
            self._check()
        except BaseException:
            self.db.conn.close()
            raise
        self.orig = originals(self.db)
        os.makedirs(journal_dir(), exist_ok=True)
        atomic_write_json(self.path, {"owner": process_owner(), "dsn": safe_dsn(self.dsn),
                                      "settings": self.orig})
        try:
            return self._change()
        except BaseException as e:
            self.__exit__(type(e))           # back to where it was, journal removed
            raise

    def _change(self) -> "LogWindow":
        assert self.db is not None
        dest = self.db.show("log_destination") or "stderr"
        c = self.db.conn
        c.execute("ALTER SYSTEM SET log_min_duration_statement = 0")
        c.execute("ALTER SYSTEM SET log_parameter_max_length = -1")
        if "csvlog" not in [d.strip() for d in dest.split(",")]:
            c.execute(f"ALTER SYSTEM SET log_destination = '{dest},csvlog'")
        reload_and_wait(self.target.database)
        end = time.monotonic() + 5           # the logger opens the csv file on the reload
        self.file = None
        while self.file is None and time.monotonic() < end:
            self.file = c.execute("SELECT pg_current_logfile('csvlog')").fetchone()[0]
            if self.file is None:
                time.sleep(0.1)
        if self.file:
            self.offset = int(c.execute("SELECT (pg_stat_file(%s)).size",
                                        (self.file,)).fetchone()[0])
        return self

    def text(self) -> str:
        """What the csv log gained since the window began."""
        if not self.file or self.db is None:
            return ""
        c = self.db.conn
        size = int(c.execute("SELECT (pg_stat_file(%s)).size", (self.file,)).fetchone()[0])
        if size <= self.offset:
            return ""
        return c.execute("SELECT pg_read_file(%s, %s, %s)",
                         (self.file, self.offset, size - self.offset)).fetchone()[0]

    def __exit__(self, kind: Any = None, *exc: Any) -> None:
        """Every setting put back over a fresh connection (the window's may have been
        closed by an idle timeout); the journal removed only when all are."""
        if self.db is not None:
            self.db.conn.close()
        stmts = restore_sql(self.orig)
        failed = []
        try:
            with self.target.database() as db:
                for stmt in stmts[:-1]:
                    try:
                        db.conn.execute(stmt)
                    except Exception as e:   # noqa: BLE001 - every one is tried
                        failed.append(f"{stmt} ({type(e).__name__})")
            reload_and_wait(self.target.database)
        except PgaccelError as e:
            failed.append(f"the connection: {e.message}")
        if not failed:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            return
        if kind is None:                     # not already failing: say it now
            raise ServerError(
                "capture --log could not put the server's logging back: "
                + "; ".join(failed) + ".",
                f"Run as a superuser there: {'; '.join(stmts)}. The journal {self.path} "
                "is kept; pgaccel's next start tries again.")


def _journals(directory: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for f in sorted(glob.glob(os.path.join(directory, PATTERN))):
        try:
            with open(f) as fh:
                yield f, json.load(fh)
        except (OSError, ValueError):
            continue


def recover(directory: str | None = None) -> list[str]:
    """Put back the logging of every capture whose process is gone; one message each."""
    import psycopg
    out = []
    for f, data in _journals(directory or journal_dir()):
        owner = data.get("owner") or {}
        if owner_alive(owner):
            continue
        stmts = restore_sql(data.get("settings") or {})
        who = f"pgaccel capture (process {owner.get('pid', '?')}), which was killed"
        try:
            with psycopg.connect(data["dsn"], autocommit=True, connect_timeout=10) as conn:
                for s in stmts:
                    conn.execute(s)
        except (psycopg.Error, PgaccelError, KeyError) as e:
            out.append(f"Could not put back the statement logging {who} turned on at "
                       f"{data.get('dsn')} ({type(e).__name__}). Run as a superuser there: "
                       + "; ".join(stmts) + f". Then remove {f}.")
            continue
        os.unlink(f)
        out.append(f"Put back the statement logging {who} had turned on at {data['dsn']}.")
    return out
