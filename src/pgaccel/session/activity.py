"""Samples of pg_stat_activity during a capture window: the texts that ran, with the
literals the application wrote inline (``capture/recover.py`` matches them to the captured
statements).  One thread on a connection of its own reads the view every
:data:`INTERVAL_S`; each backend's statement is kept once (by its pid and start), whether it
is still running or the backend's last one.  Reads only; values are not kept beyond the
capture unless ``--with-values`` asks (the constants that meet no column are)."""

from __future__ import annotations

import threading
from typing import Callable

from ..errors import PgaccelError
from ..server.database import Database

INTERVAL_S = 0.1
MAX_TEXTS = 200_000          # observations kept at most (a window of hours)


class ActivitySampler:
    """``with ActivitySampler(connect, datname) as s: ...``; then ``s.texts``."""

    def __init__(self, connect: Callable[[], object], datname: str):
        self.connect = connect
        self.datname = datname
        self.texts: list[str] = []
        self.peak_active = 0           # the most client backends running a statement at once
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pgaccel-activity",
                                        daemon=True)

    def __enter__(self) -> "ActivitySampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        seen: set[tuple[int, object]] = set()
        try:
            with Database(self.connect()) as db:
                q = db.sql("activity")
                db.conn.autocommit = True
                while not self._stop.wait(INTERVAL_S):
                    rows = db.conn.execute(q, {"datname": self.datname}).fetchall()
                    self.peak_active = max(self.peak_active,
                                           sum(1 for r in rows if r[3] == "active"))
                    for pid, start, text, _ in rows:
                        key = (pid, start)
                        if key in seen or text.startswith("<insufficient"):
                            continue
                        seen.add(key)
                        if len(self.texts) < MAX_TEXTS:
                            self.texts.append(text)
                    if len(seen) > 4 * MAX_TEXTS:
                        seen.clear()
        except (PgaccelError, Exception) as e:   # noqa: BLE001 - said in the manifest
            self.error = str(e).splitlines()[0] if str(e) else type(e).__name__
