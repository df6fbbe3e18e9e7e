"""What both apply paths (local and ``--dsn``) ask a running server, over one connection.

``settings`` (pg_settings rows with the SHOW form), ``file_errors`` (pg_file_settings
entries the server refused) and ``reload_and_wait`` (pg_reload_conf() and the wait until
the postmaster has re-read its files).  Thin: each is one query or one poll.
"""

from __future__ import annotations

import time
from typing import Iterable

from ..errors import ServerError

RELOAD_WAIT = 10.0

_SETTINGS_Q = ("SELECT name, setting, unit, vartype, source, sourcefile, sourceline, "
               "pending_restart, current_setting(name) FROM pg_settings WHERE name = ANY(%s)")
_SETTINGS_KEYS = ("name", "setting", "unit", "vartype", "source", "sourcefile", "sourceline",
                  "pending_restart", "shown")


def settings(conn, names: Iterable[str]) -> dict[str, dict]:
    """name -> pg_settings row (``shown``: the SHOW form) for the names the server knows."""
    rows = conn.execute(_SETTINGS_Q, (list(names),)).fetchall()
    return {r[0]: dict(zip(_SETTINGS_KEYS, r)) for r in rows}


def file_errors(conn) -> list[tuple]:
    """(sourcefile, sourceline, name, setting, error) for every refused file entry."""
    return conn.execute("SELECT sourcefile, sourceline, name, setting, error FROM "
                        "pg_file_settings WHERE error IS NOT NULL").fetchall()


def reload_and_wait(connect) -> None:
    """pg_reload_conf(), then wait until the postmaster has re-read its files: a new
    session's pg_conf_load_time() is the postmaster's, and moves on at each reload."""
    with connect() as conn:
        t0 = conn.execute("SELECT pg_conf_load_time()").fetchone()[0]
        conn.execute("SELECT pg_reload_conf()")
    end = time.monotonic() + RELOAD_WAIT
    while time.monotonic() < end:
        with connect() as conn:
            if conn.execute("SELECT pg_conf_load_time()").fetchone()[0] > t0:
                return
        time.sleep(0.05)
    raise ServerError(f"The server did not re-read its configuration within {RELOAD_WAIT:.0f}s "
                      "of pg_reload_conf().", "Check the server log.")


def error_line(e: BaseException) -> str:
    """The first line of an error's message (a PgaccelError's message, else str(e), else
    the exception's type)."""
    text = (getattr(e, "message", None) or str(e) or type(e).__name__).strip()
    return text.splitlines()[0] if text else type(e).__name__
