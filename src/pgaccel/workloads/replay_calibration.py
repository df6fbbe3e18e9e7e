"""A captured workload's calibration (issue 65): the replayed mix run once on the lab's
server with the captured server's own settings, each statement's mean time, rows and shared
blocks per call set beside the capture's (``pgaccel_replay_calibration``), so a replay
whose statements cost several times what they cost on the user's server is flagged
(``replay.cost_flags``) instead of passing on shares alone."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile

from ..capture.replay import replayable
from ..capture.sqlshape import fingerprint
from ..capture.statements import Statement
from ..pg.settings import libpq_options
from .base import BenchContext, RunParams, load_threads
from .pgbench import run_pgbench

CALIBRATION_S = 8.0         # the calibration trial's length
# captured settings a calibration does not carry: the client's own, and timeouts
_NOT_CARRIED = {"application_name", "client_encoding", "DateStyle", "default_transaction_"
                "read_only", "statement_timeout", "lock_timeout", "idle_in_transaction_"
                "session_timeout", "idle_session_timeout", "session_authorization", "role",
                "transaction_timeout"}


def captured_options(path: str) -> str | None:
    """The captured server's own user-settable settings (settings.json), as session
    options: a calibration runs the statements as the user's server planned them."""
    try:
        with open(os.path.join(path, "settings.json")) as f:
            facts = json.load(f)
    except (OSError, ValueError):
        return None
    out = {}
    for r in facts.get("non_default_settings") or []:
        name, value, unit = r.get("name"), r.get("setting"), r.get("unit") or ""
        if (r.get("context") != "user" or value is None or name in _NOT_CARRIED
                or r.get("source") in ("client", "session", "default", "override")
                or name.startswith("transaction_")):
            continue
        m = re.fullmatch(r"(\d+)(\D+)", unit)
        if m and value.lstrip("-").isdigit():
            value = f"{int(value) * int(m.group(1))}{m.group(2)}"
        elif unit and value.lstrip("-").replace(".", "", 1).isdigit():
            value = f"{value}{unit}"
        out[name] = value
    return libpq_options(out)


def calibrate(ctx: BenchContext, params: RunParams, statements: list[Statement],
              options: str | None, done: list[tuple] | None) -> list[tuple]:
    """The calibration trial: the replayed mix with the captured settings as session
    options, at the run's clients, for :data:`CALIBRATION_S` (writes rolled back, so the
    data stays the dump's); a statement that ran fewer than 3 times then runs alone
    until it has.  Each statement's mean time, rows and shared blocks per call against
    the capture's (``pgaccel_replay_calibration``; reports show it,
    ``replay.cost_flags`` flags it).  Once per process: the other servers get the same
    rows: pass back what it returned as ``done``."""
    with ctx.connect() as conn:
        rows = conn.execute("SELECT number, script, writes, weight, replayed_fp FROM "
                            "pgaccel_replay WHERE skipped IS NULL ORDER BY number"
                            ).fetchall()
        conn.execute("DROP TABLE IF EXISTS pgaccel_replay_calibration")
        conn.execute("CREATE TABLE pgaccel_replay_calibration (number int PRIMARY KEY, "
                     "query text, captured_mean_ms float8, replayed_mean_ms float8, "
                     "captured_rows float8, replayed_rows float8, calls bigint, "
                     "captured_blocks float8, replayed_blocks float8)")
        if done is None:
            conn.execute("SELECT pg_stat_statements_reset()")
    if done is None:
        done = _trial(ctx, params, statements, options, rows)
    with ctx.connect() as conn:
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO pgaccel_replay_calibration VALUES (%s, %s, %s, "
                            "%s, %s, %s, %s, %s, %s)", done)
        conn.execute("SELECT pg_stat_statements_reset()")
    return done


def _trial(ctx: BenchContext, params: RunParams, statements: list[Statement],
           options: str | None, rows: list) -> list[tuple]:
    opts = " ".join(x for x in (ctx.target.session_options, options)
                    if x) or None
    stmts = replayable(statements)
    d = tempfile.mkdtemp(prefix="pgaccel-calibrate-", dir=ctx.workdir)
    try:
        scripts = []
        for number, script, wr, weight, _fp in rows:
            path = os.path.join(d, f"c{number}.sql")
            with open(path, "w") as f:
                f.write(f"BEGIN;\n{script}ROLLBACK;\n" if wr else script)
            scripts.append((path, int(weight)))
        if scripts:
            run_pgbench(ctx.pgbench, ctx.bench_conninfo(), scripts=scripts,
                        clients=params.clients,
                        threads=load_threads(params.threads, params.clients),
                        duration=CALIBRATION_S, protocol="prepared", log=False,
                        session_options=opts, workdir=ctx.workdir)
        seen = by_fingerprint(ctx)
        for (_n, _s, _w, _wt, fp), (path, _) in zip(rows, scripts):
            got = seen.get(fp, [0])[0]
            if got < 3:
                run_pgbench(ctx.pgbench, ctx.bench_conninfo(), scripts=[(path, 1)],
                            clients=1, threads=1, transactions=3 - int(got),
                            protocol="prepared", log=False, session_options=opts,
                            workdir=ctx.workdir)
        seen = by_fingerprint(ctx)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    # captured statements the replay runs as one (the same text under two queryids: other
    # parameter types, another user) are one row, their captured calls pooled
    groups: dict[str, list[Statement]] = {}
    first: dict[str, int] = {}
    for number, _script, _wr, _wt, fp in rows:
        if number < len(stmts):
            groups.setdefault(fp, []).append(stmts[number])
            first.setdefault(fp, number)
    out = []
    for fp, sts in groups.items():
        got = seen.get(fp)
        calls = sum(s.calls for s in sts)
        if not got or not got[0] or not calls:
            continue
        n = got[0]
        blocks = (None if any(s.blocks is None for s in sts)
                  else sum(s.blocks for s in sts) / calls)
        out.append((first[fp], sts[0].query, sum(s.mean_ms * s.calls for s in sts) / calls,
                    got[1] / n, sum(s.rows for s in sts) / calls, got[2] / n, n, blocks,
                    got[3] / n))
    return out


def by_fingerprint(ctx: BenchContext) -> dict[str, list[float]]:
    """The bench database's pg_stat_statements by fingerprint: [calls, ms, rows, blocks]."""
    seen: dict[str, list[float]] = {}
    with ctx.connect() as conn:
        for q, calls, ms, nrows, blocks in conn.execute(
                "SELECT query, calls, total_exec_time, rows, shared_blks_hit + "
                "shared_blks_read FROM pg_stat_statements WHERE dbid = (SELECT oid FROM "
                "pg_database WHERE datname = current_database())").fetchall():
            acc = seen.setdefault(fingerprint(q), [0, 0.0, 0, 0])
            for i, v in enumerate((calls, ms, nrows, blocks)):
                acc[i] += v
    return seen
