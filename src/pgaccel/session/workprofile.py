"""The workload a plan is made for, measured (``tune.workload.WorkloadProfile``): from a
capture bundle's statements, or from a live server's pg_stat_statements (a window of
``--sample`` seconds, else everything since the view was last reset).

Reads only: nothing is created on the server, and where pg_stat_statements is not there the
caller gets the reason and how to turn it on, and plans as before.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

import psycopg

from ..capture.sqlshape import writes
from ..capture.statements import Snapshot, Statement, is_plannable, window, window_of
from ..errors import PgaccelError, UsageError
from ..server.database import Database
from ..tune.workload import StatementCost, WorkloadProfile, profile_of

HOW_TO_ENABLE = ("add pg_stat_statements to shared_preload_libraries, restart the server and "
                 "run CREATE EXTENSION pg_stat_statements; in one of its databases, then "
                 "pgaccel plans from what the server runs")


def costs_of(stmts: Iterable[Statement]) -> list[StatementCost]:
    """A window's statements as the profile reads them (aggregate rows count, as reads)."""
    out = []
    for s in stmts:
        hit = None if s.blocks is None or s.blks_read is None else s.blocks - s.blks_read
        out.append(StatementCost(
            s.query, int(s.calls), float(s.total_ms), int(s.rows),
            bool(s.queryid and is_plannable(s.query) and writes(s.query)),
            hit, s.blks_read, s.temp_blks, s.wal_bytes, s.jit_ms, s.par_workers))
    return out


def profile_from_statements(stmts: Iterable[Statement], source: str,
                            window_s: float | None, connections: int | None = None
                            ) -> WorkloadProfile:
    return profile_of(costs_of(stmts), source, window_s, connections)


def profile_from_bundle(workload) -> WorkloadProfile:
    """A ``captured:DIR`` workload's profile: its bundle's statements over its window."""
    m = workload.manifest
    return profile_from_statements(
        workload.statements, f"the capture {workload.path} ({m.get('database')}, "
                             f"{m.get('captured_at')})",
        m.get("duration_s"), m.get("busiest_connections"))


def profile_for_workloads(specs: Iterable) -> tuple[WorkloadProfile | None, int | None]:
    """The profile a run's plan is made for, and the data's size (PGTune's "Total Data
    Size" answer: the largest workload's): a captured workload's own profile (the first's,
    where there are several); None for the built-in workloads, whose class is the run's
    ``--profile``.  ``specs``: ``decide.model.WorkloadSpec``s."""
    prof, size = None, None
    for ws in specs:
        w = ws.workload
        try:
            n = w.data_bytes(ws.params)
        except (OSError, ValueError, TypeError):
            n = None
        if n is not None:
            size = max(size or 0, int(n))
        if prof is None and hasattr(w, "manifest") and hasattr(w, "statements"):
            prof = profile_from_bundle(w)
    return prof, size


def _snapshots(db: Database) -> list[Snapshot]:
    rows = db.conn.execute(db.sql("statements"), {"datname": None}).fetchall()
    return [s for s in (Snapshot.from_row(r) for r in rows) if s is not None]


def _reader(target) -> Database | None:
    """A connection to a database with pg_stat_statements' view, or None."""
    from .capture import statements_database
    with target.database() as db:
        here = db.conn.info.dbname
        preload = db.show("shared_preload_libraries") or ""
    if "pg_stat_statements" not in [p.strip().strip('"') for p in preload.split(",")]:
        return None
    try:
        name = statements_database(target, here)
    except UsageError:
        return None
    return Database(target.connect(name))


def profile_from_server(target, sample_s: float | None = None,
                        say: Callable[[str], None] = lambda m: None,
                        during: Callable[[], None] | None = None
                        ) -> tuple[WorkloadProfile | None, str]:
    """The profile of what ``target``'s server runs (every database), and a sentence on where
    it came from or why there is none.  With ``sample_s`` the window is ``during()`` (which
    samples the server's other counters over the same seconds) or a sleep of that long."""
    try:
        reader = _reader(target)
    except PgaccelError as e:
        return None, f"pg_stat_statements could not be read ({e}): planned without it"
    if reader is None:
        return None, ("pg_stat_statements is not available on this server, so the plan "
                      f"assumes the workload class: {HOW_TO_ENABLE}")
    with reader as db:
        if sample_s:
            say(f"Reading pg_stat_statements over {sample_s:.0f} s ...")
            before = _snapshots(db)
            t0 = time.monotonic()
            if during is not None:
                during()
            else:
                time.sleep(sample_s)
            after = _snapshots(db)
            stmts, _ = window(before, after, top=1000)
            took = time.monotonic() - t0
            return (profile_from_statements(stmts, f"pg_stat_statements on "
                                                   f"{target.describe()} over {took:.0f} s",
                                            took),
                    f"profile from pg_stat_statements over a {took:.0f}-s window")
        since = _reset_time(db)
        stmts = [w for s in _snapshots(db) if (w := window_of(None, s)) is not None]
        where = (f"pg_stat_statements on {target.describe()}, since "
                 + (since or "its entries were made"))
        return profile_from_statements(stmts, where, None), (
            f"profile from pg_stat_statements since {since or 'its entries were made'} "
            "(--sample N reads a window of N seconds instead)")


def _reset_time(db: Database) -> str | None:
    """When pg_stat_statements was last reset (14+), as text."""
    if db.major < 14:
        return None
    try:
        row = db.conn.execute(db.sql("statements_reset")).fetchone()
    except psycopg.Error:                 # an extension older than its server (1.8)
        db.conn.rollback()
        return None
    return row[0] if row else None
