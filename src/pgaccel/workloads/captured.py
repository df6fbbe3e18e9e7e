"""``captured:DIR``: a workload a user captured from their own server (``pgaccel capture
--data dump``), replayed with pgbench (docs/workloads.md).

Data: the bundle's dump restored into the bench database (``pg_restore --jobs``), ANALYZEd,
with pg_stat_statements made there.  The mix: one pgbench script per captured statement,
weighted by its calls, parameters drawn from the restored data (``capture/replay.py``); the
scripts and the parameters' samples live in the bench database (``pgaccel_replay*``), so a
template copy carries them.  Each trial resets pg_stat_statements before it measures and reads it after
(``round_begin``/``round_end``, also in side-by-side rounds): the replay's mix against the
captured one (``replay.fidelity``) goes with the trial, and a mix more than 10% away on the
statements that carry most of the time is a warning of the trial (and so of the report's
headline).

Why pgbench and not pgreplay: the lab's protocol measures a fixed interval per trial at a
steady rate with its per-second series, the same for every config; pgbench runs a weighted
mix for a duration at any client count (and in slices beside another server); pgreplay
replays one log once, with its timing, and leaves the comparison to a person.  pgreplay's
fidelity to sessions and timing is what a later --from-log capture may add.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from typing import Any, Callable

import psycopg
from psycopg import sql

from ..capture.bundle import read_manifest
from ..capture.replay import (MIN_REPLAYED_SHARE, Source, fidelity, normalize, params_of,
                              replayable, resolve, script_for, script_with_values, weights)
from ..capture.statements import Statement
from ..errors import BenchError, PgaccelError, UsageError
from .base import RESOLVERS, BenchContext, RunParams, RunResult, Workload, load_threads
from .pgbench import libpq_env, run_pgbench

PREFIX = "captured:"
SAMPLE = "pgaccel_replay_s{number}_{index}"
VALUES = "pgaccel_replay_v{number}"
SAMPLE_ROWS = 10_000
WRITES = ("insert", "update", "delete", "merge")


class Captured(Workload):
    kind = "single"
    unit = "stmt/s"
    remote_clients = False
    defaults = {"duration": 20.0, "warmup": 10.0, "clients": 2, "scale": 1}
    knobs: dict[str, str] = {}

    def __init__(self, name: str):
        self.name = name
        self._files: dict[tuple, tuple[list[tuple[str, int]], list[str]]] = {}
        self.path = os.path.abspath(os.path.expanduser(name[len(PREFIX):]))
        self.manifest = read_manifest(self.path)
        try:
            with open(os.path.join(self.path, "statements.json")) as f:
                self.statements = [Statement.from_dict(d) for d in json.load(f)]
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
            raise UsageError(f"{self.path}: its statements cannot be read ({e}).",
                             "Capture again.") from None
        kept = os.path.isfile(os.path.join(self.path, "values.json"))
        self.summary = (f"the statements {self.manifest.get('database')} ran, captured "
                        f"{self.manifest.get('captured_at')}, replayed by pgbench with "
                        + ("the captured parameter values" if kept else
                           "parameters drawn from the data"))
        self.writes = any(s.query.lstrip().lower().startswith(WRITES)
                          for s in replayable(self.statements))

    def data_group(self) -> str:
        return self.name

    def data_key(self, params: RunParams) -> dict:
        copy = os.path.join(self.path, "pgdata")
        return {"workload": "captured", "path": self.path,
                "captured_at": self.manifest.get("captured_at"),
                "pgdata": os.path.realpath(copy) if os.path.isdir(copy) else None}

    def data_bytes(self, params: RunParams) -> int | None:
        try:
            with open(os.path.join(self.path, "relations.json")) as f:
                rels = json.load(f)
        except (OSError, ValueError):
            return None
        return int(sum(r.get("total_bytes") or 0 for r in rels if r.get("kind") in "rpm"))

    def required_settings(self, params: RunParams) -> dict[str, str]:
        return {"shared_preload_libraries": "pg_stat_statements"}

    # -- the data and the scripts -------------------------------------------------------
    def build(self, ctx: BenchContext, params: RunParams) -> None:
        copy = os.path.join(self.path, "pgdata")
        if os.path.isdir(copy):
            self._from_copy(ctx, os.path.realpath(copy))
            return
        data = os.path.join(self.path, "data")
        if not os.path.isdir(data):
            raise UsageError(f"{self.path} was captured without its data.",
                             "Capture again with --data dump, or link a copy of the "
                             f"server's data directory as {copy} (a replay needs the "
                             "tables' rows to draw its parameters from).")
        from psycopg import conninfo as pgconninfo
        from ..server.discovery import find_client
        # the connection through the environment (the password never on a command line)
        bench_db = pgconninfo.conninfo_to_dict(ctx.bench_conninfo())["dbname"]
        r = subprocess.run([find_client("pg_restore", getattr(ctx.target, "inst", None)),
                            "--no-owner", "--no-privileges", "--jobs=2",
                            "--dbname", bench_db, data],
                           capture_output=True, text=True,
                           env=libpq_env(ctx.bench_conninfo()))
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or [str(r.returncode)])[-1]
            raise BenchError(f"pg_restore of {data} failed: {last}",
                             "The lab's server must be as new as the captured one.")
        with ctx.connect() as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            conn.execute("ANALYZE")
            self._make_scripts(conn)

    def _from_copy(self, ctx: BenchContext, copy: str) -> None:
        """The lab's server on a copy of the user's data directory (``DIR/pgdata``, often a
        link to a pg_basebackup or a snapshot): the captured database becomes the bench
        database of that copy."""
        from ..server.cluster import BENCH_DB
        cluster = getattr(ctx.target, "cluster", None)
        if cluster is None or not cluster.throwaway:
            raise UsageError(f"{self.path}/pgdata is replayed on throwaway servers only.",
                             "Leave out --dsn and --pgdata.")
        cluster.adopt_copy(copy)
        cluster.start({})
        db = self.manifest.get("database")
        with cluster.connect() as conn:
            names = {r[0] for r in conn.execute("SELECT datname FROM pg_database").fetchall()}
            if db not in names:
                raise UsageError(f"{copy} has no database {db!r}, the one captured.",
                                 "Link a copy of the captured server's data directory.")
            if db != BENCH_DB:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(
                    sql.Identifier(BENCH_DB)))
                conn.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                    sql.Identifier(db), sql.Identifier(BENCH_DB)))
        with ctx.connect() as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            conn.execute("ANALYZE")
            self._make_scripts(conn)

    def _make_scripts(self, conn) -> None:
        cols: dict[str, dict[str, str]] = {}
        for schema, table, col, typ in conn.execute(
                "SELECT table_schema, table_name, column_name, data_type "
                "FROM information_schema.columns WHERE table_schema NOT IN "
                "('pg_catalog', 'information_schema')").fetchall():
            for key in (f"{schema}.{table}", table):
                cols.setdefault(key, {})[col] = typ
        stmts = replayable(self.statements)
        ws = weights([s.calls for s in stmts])
        conn.execute("DROP TABLE IF EXISTS pgaccel_replay")
        conn.execute("CREATE TABLE pgaccel_replay (number int PRIMARY KEY, weight bigint, "
                     "script text, query text, skipped text, share_time float8)")
        values = self._values()
        unique: dict[str, set[str]] = {}
        for schema, table, col in conn.execute(
                "SELECT n.nspname, c.relname, a.attname FROM pg_index i "
                "JOIN pg_class c ON c.oid = i.indrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey) "
                "WHERE i.indisunique AND n.nspname NOT IN ('pg_catalog', "
                "'information_schema')").fetchall():
            for key in (f"{schema}.{table}", table):
                unique.setdefault(key, set()).add(col)
        for i, (s, w) in enumerate(zip(stmts, ws)):
            tuples = values.get(normalize(s.query))
            if tuples and len(tuples[0]) == len(params_of(s.query)):
                sc = self._with_values(conn, i, s.query, w, tuples)
                conn.execute("INSERT INTO pgaccel_replay VALUES (%s, %s, %s, %s, NULL, %s)",
                             (i, sc.weight, sc.text, s.query, s.share_time))
                continue
            sources, missing = resolve(s.query, cols)

            def skip(why: str) -> None:
                conn.execute("INSERT INTO pgaccel_replay VALUES (%s, 0, NULL, %s, %s, %s)",
                             (i, s.query, why, s.share_time))
            if missing:
                skip(f"${missing[0]} is bound to no known column")
                continue
            if s.query.lstrip().lower().startswith("insert"):
                keyed = [f"{x.table}.{x.column}" for x in sources.values()
                         if isinstance(x, Source) and x.column in unique.get(x.table, ())]
                if keyed:          # drawn values would repeat a key: pgbench would abort
                    skip(f"it inserts {keyed[0]}, a unique key")
                    continue
            for n, src in list(sources.items()):
                if isinstance(src, Source) and src.integer:
                    lo, hi = conn.execute(sql.SQL("SELECT min({c}), max({c}) FROM {t}").format(
                        c=sql.Identifier(src.column), t=_table(src.table))).fetchone()
                    sources[n] = Source(src.table, src.column,
                                        "empty" if lo is None else src.type, lo, hi)
            empty = [x for x in sources.values() if isinstance(x, Source) and x.type == "empty"]
            rows = {} if empty else self._samples(conn, i, sources)
            if empty or any(v == 0 for v in rows.values()):
                skip("a column its parameters are drawn from has no values")
                continue
            sc = script_for(i, s.query, w, sources, SAMPLE, rows)
            conn.execute("INSERT INTO pgaccel_replay VALUES (%s, %s, %s, %s, NULL, %s)",
                         (i, sc.weight, sc.text, s.query, s.share_time))
        n = conn.execute("SELECT coalesce(sum(share_time), 0) FROM pgaccel_replay "
                         "WHERE skipped IS NULL").fetchone()[0]
        total = sum(s.share_time for s in stmts) or 1.0
        if n / total < MIN_REPLAYED_SHARE:
            raise UsageError(
                f"Only {n / total:.0%} of the captured statements' time can be replayed: "
                "the others' parameters are bound to no column pgaccel recognises, insert "
                "a unique key, or come from an empty table.",
                "docs/workloads.md lists the patterns a replay understands.")

    def _values(self) -> dict[str, list[list[str]]]:
        """The captured parameter tuples (``values.json``, with --with-values), by the
        statement's normalised text."""
        try:
            with open(os.path.join(self.path, "values.json")) as f:
                return json.load(f)
        except FileNotFoundError:
            return {}
        except ValueError as e:
            raise UsageError(f"{self.path}/values.json cannot be read ({e}).",
                             "Capture again.") from None

    def _with_values(self, conn, number: int, query: str, weight: int,
                     tuples: list[list[str]]):
        name = VALUES.format(number=number)
        k = len(tuples[0])
        cols = sql.SQL(", ").join(sql.SQL("{} text").format(sql.Identifier(f"p{n}"))
                                  for n in params_of(query))
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE TABLE {} (i int PRIMARY KEY, {})").format(
            sql.Identifier(name), cols))
        with conn.cursor() as cur:
            cur.executemany(
                sql.SQL("INSERT INTO {} VALUES (%s, {})").format(
                    sql.Identifier(name), sql.SQL(", ").join([sql.Placeholder()] * k)),
                [(j + 1, *t) for j, t in enumerate(tuples)])
        return script_with_values(number, query, weight, name, len(tuples))

    def _samples(self, conn, number: int, sources: dict) -> dict[str, int]:
        """The sample tables of a statement's non-integer parameters (one per table)."""
        by: dict[str, list[str]] = {}
        for src in sources.values():
            if isinstance(src, Source) and not (src.integer and src.low is not None):
                by.setdefault(src.table, []).append(src.column)
        rows = {}
        for k, (table, columns) in enumerate(sorted(by.items())):
            name = SAMPLE.format(number=number, index=k)
            sel = sql.SQL(", ").join(sql.SQL("{} AS {}").format(sql.Identifier(c),
                                                               sql.Identifier(f"c{j}"))
                                     for j, c in enumerate(columns))
            notnull = sql.SQL(" AND ").join(sql.SQL("{} IS NOT NULL").format(
                sql.Identifier(c)) for c in columns)
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL(
                "CREATE TABLE {n} AS SELECT row_number() OVER () AS i, x.* FROM "
                "(SELECT {sel} FROM {t} WHERE {nn} ORDER BY random() LIMIT {lim}) x").format(
                n=sql.Identifier(name), sel=sel, t=_table(table), nn=notnull,
                lim=sql.Literal(SAMPLE_ROWS)))
            conn.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY (i)").format(
                sql.Identifier(name)))
            rows[name] = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
                sql.Identifier(name))).fetchone()[0]
        return rows

    def _scripts(self, ctx: BenchContext
                 ) -> tuple[list[tuple[str, int]], list[str], list[str]]:
        """The scripts as files (written once per server and process, removed at exit):
        ([(path, weight)], warnings about the statements left out, the statements run)."""
        key = (id(ctx.target), ctx.bench_conninfo())
        if key not in self._files:
            try:
                with ctx.connect() as conn:
                    rows = conn.execute("SELECT number, weight, script, query, skipped, "
                                        "share_time FROM pgaccel_replay ORDER BY number"
                                        ).fetchall()
            except (psycopg.Error, PgaccelError):
                return [], [], []   # not prepared yet (a runner asking what it can do)
            d = tempfile.mkdtemp(prefix="pgaccel-replay-", dir=ctx.workdir)
            atexit.register(shutil.rmtree, d, True)
            out, left, run = [], [], []
            for number, weight, script, query, skipped, share in rows:
                if skipped:
                    left.append((query, share or 0.0, skipped))
                    continue
                run.append(query)
                path = os.path.join(d, f"s{number}.sql")
                with open(path, "w") as f:
                    f.write(script)
                out.append((path, int(weight)))
            notes = []
            if left and sum(x[1] for x in left) >= 0.01:
                q, _, why = max(left, key=lambda x: x[1])
                notes.append(f"{len(left)} captured statement(s), "
                             f"{sum(x[1] for x in left):.0%} of the captured time, are not "
                             f"replayed; the largest, '{' '.join(q.split())[:60]}': {why}")
            self._files[key] = (out, notes, run)
        return self._files[key]

    def pgbench_kw(self, ctx: BenchContext, params: RunParams) -> dict[str, Any] | None:
        if params.protocol == "simple":
            raise UsageError("A captured workload's parameters are bound, not pasted: "
                             "--protocol simple would put text values unquoted into the "
                             "statements.", "Use --protocol prepared (the default) or "
                             "extended.")
        scripts, _, _ = self._scripts(ctx)
        return dict(builtin=None, scripts=scripts, clients=params.clients,
                    threads=load_threads(params.threads, params.clients), rate=params.rate,
                    protocol=params.protocol, defines=None, extra_args=None)

    def round_begin(self, ctx: BenchContext) -> None:
        with ctx.connect() as conn:
            conn.execute("SELECT pg_stat_statements_reset()")

    def round_end(self, ctx: BenchContext) -> dict[str, Any]:
        """The replay's mix read back (``replay.fidelity``) for the trial's metrics."""
        with ctx.connect() as conn:
            seen = conn.execute(
                "SELECT query, calls, total_exec_time FROM pg_stat_statements "
                "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = "
                "current_database())").fetchall()
        _, notes, run = self._scripts(ctx)
        rows, problems = fidelity(self.statements, seen, run)
        return {"fidelity": [{"query": x.query[:200],
                              "key": hashlib.sha1(normalize(x.query).encode()).hexdigest()[:16],
                              "captured_calls": round(x.captured_calls, 4),
                              "replayed_calls": round(x.replayed_calls, 4),
                              "captured_time": round(x.captured_time, 4),
                              "replayed_time": round(x.replayed_time, 4)} for x in rows[:10]],
                "warnings": problems + notes}

    def run(self, ctx: BenchContext, params: RunParams, duration: float, *,
            stop_when: Callable[[list[float]], bool] | None = None,
            on_progress: Callable[[float, float], None] | None = None,
            log: bool = True) -> RunResult:
        kw = self.pgbench_kw(ctx, params)
        self.round_begin(ctx)
        r = run_pgbench(ctx.pgbench, ctx.bench_conninfo(), scripts=kw["scripts"],
                        clients=kw["clients"], threads=kw["threads"], duration=duration,
                        rate=kw["rate"], protocol=kw["protocol"], log=log,
                        session_options=ctx.target.session_options, stop_when=stop_when,
                        on_progress=on_progress, workdir=ctx.workdir)
        return RunResult(ops=r.transactions, duration_s=r.duration_s, throughput=r.tps,
                         latency_ms=r.latency_ms, series=r.tps_series,
                         latency_series=r.latency_p50_series, client=r.client,
                         failed=r.failed,
                         extra={"summary_tps": r.summary_tps, **self.round_end(ctx)})


def _table(name: str) -> sql.Composable:
    return sql.SQL(".").join(sql.Identifier(p) for p in name.split("."))


@lru_cache(maxsize=16)
def captured_workload(name: str) -> Captured:
    return Captured(name)


RESOLVERS[PREFIX] = captured_workload
