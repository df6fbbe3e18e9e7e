"""``pgaccel capture``: what a live server runs, as a workload bundle (docs/workloads.md).

Reads only, on the user's server: pg_stat_statements before and after the window (the
statements' calls and times in it: ``capture/statements.py``), the schema (``pg_dump
--schema-only``), the relations' sizes and row counts, the non-default settings and the
version.  pg_stat_statements must be loaded (shared_preload_libraries) and its extension
made in some database: the view is read there (it shows every database's statements), and
nothing is created, so nothing is left behind, even after a kill -9.
No parameter value is kept: pg_stat_statements' texts are normalised, and utility
statements, which keep their constants, are counted without their text.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from typing import Callable

from psycopg import conninfo as pgconninfo

from .. import __version__
from ..capture.bundle import check_destination, write_bundle
from ..capture.statements import Snapshot, window
from ..errors import PgaccelError, ServerError, UsageError
from ..pg.secrets import scrub_secrets
from ..server.database import Database
from ..server.discovery import find_client
from ..server.target_dsn import DsnTarget
from ..workloads.pgbench import libpq_env
from .activity import ActivitySampler
from .capturelog import LogWindow


@dataclass(frozen=True)
class CaptureRequest:
    dsn: str
    duration_s: float = 600.0
    out: str | None = None
    top: int = 50
    data: str = "none"                 # "dump": the database's data too (pg_dump -Fd)
    jobs: int = 2                      # pg_dump's parallel jobs
    from_log: str | None = None        # a server log with the statements' parameters
    log: bool = False                  # turn the server's statement logging on for the window
    with_values: bool = False          # keep those values in the bundle (values.json)


def _snapshots(db: Database, datname: str) -> tuple[list[Snapshot], int]:
    """The top-level statements of the captured database, and how many this role may not
    see (NULL queryid)."""
    rows = db.conn.execute(db.sql("statements"), {"datname": datname}).fetchall()
    snaps = [Snapshot.from_row(r) for r in rows]
    return [x for x in snaps if x is not None], sum(1 for x in snaps if x is None)


def statements_database(target: DsnTarget, here: str) -> str:
    """A database whose pg_stat_statements view can be read: the captured one (``here``)
    when it has the extension, else the first other database that has it (the view shows
    every database's statements; the capture keeps ``here``'s).  Nothing is created."""
    with target.database() as db:
        dbs = [r[0] for r in db.conn.execute(
            "SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate "
            "ORDER BY datname <> %s, datname", (here,)).fetchall()]
    for name in dbs:
        try:
            with Database(target.connect(name)) as db:
                if db.conn.execute("SELECT 1 FROM pg_extension WHERE extname = "
                                   "'pg_stat_statements'").fetchone():
                    return name
        except PgaccelError:
            continue                     # a database this role may not connect to
    raise UsageError(
        "pg_stat_statements is loaded, but no database has its view (the extension).",
        f"Run `CREATE EXTENSION pg_stat_statements;` in {here} (pgaccel creates nothing on "
        "a server it captures), then capture again.")


_OPTION_PASSWORD = re.compile(r"(\bpassword\s+)'(?:[^']|'')*'", re.I)


def redact_schema(text: str) -> str:
    """A schema dump without passwords: user mappings' ``password '...'`` options and any
    connection string's (subscriptions are left out of the dump altogether)."""
    return scrub_secrets(_OPTION_PASSWORD.sub(lambda m: m.group(1) + "'<redacted>'", text))


def _pg_dump(target: DsnTarget, dbname: str, args: list[str], timeout: float | None
             ) -> str:
    """pg_dump ``args`` of the database (its output); the password goes through the
    environment, never the command line; files it writes are its owner's only."""
    env = libpq_env(pgconninfo.make_conninfo(target.dsn, dbname=dbname))
    try:
        r = subprocess.run([find_client("pg_dump"), *args, "--no-owner", "--no-privileges"],
                           capture_output=True, text=True, env=env,
                           timeout=timeout, preexec_fn=lambda: os.umask(0o077))
    except subprocess.TimeoutExpired:
        raise ServerError(f"pg_dump {args[0]} took more than {timeout:.0f} s.",
                          "Check the server's load and locks (pg_dump waits for them), "
                          "then capture again.") from None
    if r.returncode != 0:
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else str(r.returncode)
        raise ServerError(f"pg_dump {args[0]} failed: {scrub_secrets(last)}.",
                          "A pg_dump as new as the server is needed (--pg-bin), and a role "
                          "that may read the database.")
    return r.stdout


def _read_log(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError as e:
        raise UsageError(f"--from-log {path}: {e.strerror or e}.",
                         "Give the server log file (csvlog, jsonlog or stderr) that was "
                         "written during the window.") from None


def _recover(stmts: list, log_text: str | None, activity: ActivitySampler, keep: bool,
             form: str | None = None) -> tuple[list[dict], dict, dict]:
    """statements.json's rows with the constants recovered (``capture/recover.py``), the
    values kept (``--with-values``: values.json), and what the manifest says of both."""
    from ..capture.recover import Recovery
    from ..capture.serverlog import executions
    rec = Recovery(stmts)
    for text in activity.texts:
        rec.add(text)
    from_activity = rec.matched
    if log_text is not None:
        for text, params in executions(log_text, form):
            rec.add(text, params)
    rows = []
    for s in stmts:
        d = s.to_dict()
        c = rec.constants_of(s.queryid) if s.queryid else {}
        if c:
            d["constants"] = c
        rows.append(d)
    n_const = sum(1 for d in rows if d.get("constants"))
    note = {"constants": (f"recovered for {n_const} statements (numbers, intervals, dates "
                          "and booleans that meet no column: LIMIT 20, interval '30 days'), "
                          f"from {len(activity.texts)} samples of pg_stat_activity "
                          f"({from_activity} matched)"
                          + (f" and {rec.matched - from_activity} log executions"
                             if log_text is not None else "")
                          + (f"; pg_stat_activity could not be read: {activity.error}"
                             if activity.error else ""))}
    values = rec.values() if keep else {}
    n = sum(len(v) for v in rec.tuples.values())
    if log_text is None and not keep:
        note["parameter_values"] = ("not captured (a replay draws them from the data; "
                                    "--log --with-values keeps them)")
    elif not keep:
        note["parameter_values"] = (f"read from the log ({len(rec.tuples)} statements, {n} "
                                    "whole tuples) and not kept: --with-values keeps them; "
                                    "a replay draws them from the data")
    else:
        note["parameter_values"] = (f"kept from the log: {len(values)} statements, {n} "
                                    "tuples (values.json); a replay draws them from there, "
                                    "the others from the data")
    return rows, values, note


def capture(req: CaptureRequest, tick: Callable[[float, float], None] = lambda a, b: None
            ) -> tuple[str, dict]:
    """Capture the window; (bundle directory, manifest).  ``tick(elapsed, total)`` is
    called about every second while the window runs."""
    import json
    if req.with_values and not (req.from_log or req.log):
        raise UsageError("--with-values keeps the parameter values of the server's log.",
                         "Add --log (pgaccel turns the logging on for the window) or give "
                         "--from-log FILE (a csvlog, jsonlog or stderr log written with "
                         "log_min_duration_statement = 0), or leave out --with-values.")
    if req.log and req.from_log:
        raise UsageError("--log and --from-log both name the log.", "Give one of them.")
    if req.from_log:
        _read_log(req.from_log)            # readable, before the window is spent
    check_destination(req.out)             # writable and new, before the window too
    target = DsnTarget(req.dsn)
    with target.database() as db:
        datname = db.conn.info.dbname
        preload = db.show("shared_preload_libraries") or ""
        if "pg_stat_statements" not in [p.strip().strip('"') for p in preload.split(",")]:
            raise UsageError(
                f"pg_stat_statements is not loaded on {target.display_dsn} "
                f"(shared_preload_libraries = '{preload}').",
                "Add pg_stat_statements to shared_preload_libraries and restart the server "
                "(pgaccel never restarts a server it captures), then capture again.")
        facts = db.facts()
        relations = [dict(zip(("schema", "name", "kind", "bytes", "total_bytes",
                               "reltuples", "live_rows", "seq_scan", "idx_scan",
                               "inserted", "updated", "deleted"), r))
                     for r in db.conn.execute(db.sql("relation_stats")).fetchall()]
    schema_sql = redact_schema(_pg_dump(target, datname, ["--schema-only",
                                                          "--no-subscriptions"], 600))
    from contextlib import ExitStack
    log_text = None
    with ExitStack() as stack:
        reader = stack.enter_context(
            Database(target.connect(statements_database(target, datname))))
        window_log = stack.enter_context(LogWindow(target)) if req.log else None
        before, _ = _snapshots(reader, datname)
        t0 = time.time()
        start = time.monotonic()
        with ActivitySampler(lambda: target.connect(datname), datname) as activity:
            while (elapsed := time.monotonic() - start) < req.duration_s:
                tick(elapsed, req.duration_s)
                time.sleep(min(1.0, req.duration_s - elapsed))
        after, hidden = _snapshots(reader, datname)
        took = time.monotonic() - start
        if window_log is not None:
            log_text = window_log.text()
    stmts, totals = window(before, after, req.top)
    if req.from_log:
        log_text = _read_log(req.from_log)    # with the window's lines
    rows, values, notes = _recover(stmts, log_text, activity, req.with_values,
                                   "csvlog" if req.log else None)
    out = req.out or os.path.join(os.getcwd(), f"capture-{datname}-"
                                  f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(t0))}")
    manifest = {
        "pgaccel": __version__, "captured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z",
                                                             time.localtime(t0)),
        "duration_s": round(took, 3), "database": datname,
        "server": {"version": facts["version"], "version_num": facts["version_num"],
                   "major": facts["major"]},
        "statements_from": "pg_stat_statements (normalised texts; utility statements "
                           "counted without text)",
        "parameter_values": notes["parameter_values"],
        "constants": notes["constants"],
        "data": ("data/: pg_dump --format=directory" if req.data == "dump"
                 else "none (schema only)"),
        "totals": totals,
        "hidden_statements": hidden,
        # the most client backends running a statement at once in pg_stat_activity's samples
        "busiest_connections": None if activity.error else activity.peak_active,
    }
    files = {"statements.json": json.dumps(rows, indent=1) + "\n",
             "schema.sql": schema_sql,
             "relations.json": json.dumps(relations, indent=1, default=str) + "\n",
             "settings.json": json.dumps(facts, indent=1, default=str) + "\n"}
    if values:
        files["values.json"] = json.dumps(values) + "\n"

    def dump(tmp: str) -> None:
        if req.data == "dump":
            _pg_dump(target, datname, ["--format=directory", f"--jobs={max(1, req.jobs)}",
                                       "--no-subscriptions",
                                       f"--file={os.path.join(tmp, 'data')}"], None)
    return write_bundle(out, manifest, files, dump), {**manifest, "statements": stmts}
