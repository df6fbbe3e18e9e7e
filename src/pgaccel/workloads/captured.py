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
import json
import math
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from typing import Any, Callable

import psycopg
from psycopg import sql

from ..capture.bundle import read_manifest
from ..capture.replay import (StatementPlan, cost_flags, coverage, fidelity, guesses_of,
                              replayable)
from ..capture.sqlshape import fingerprint, writes
from ..capture.statements import Statement
from ..errors import BenchError, PgaccelError, UsageError
from . import replay_build as build
from . import replay_calibration as calibration
from .base import RESOLVERS, BenchContext, RunParams, RunResult, Workload, load_threads
from .pgbench import libpq_env, run_pgbench

PREFIX = "captured:"
# a captured statement longer than this (ms per call) makes trials take turns: a slice
# (lab/paired.py, 0.25 s) must hold statements ten times its length
TURN_MS = 25.0
# every trial's clients choose the same scripts and rows in the same order (common random
# numbers): with statements of 1 ms and 1 s in one mix, how many long ones a trial drew
# would otherwise be most of its throughput's variance (a 10-s trial of a 1-s statement at
# 2% of the calls: CV 20-44% between trials; docs/workloads.md)
SEED = 65
LONG_CALLS = 50             # long statements per client a trial should hold
SEARCH_LONG_CALLS = 10      # what a search's screening trial holds (its rounds pair them)
# a measured trial of long statements is a fixed amount of work (pgbench -t), not a fixed
# time: at -T the trial's end cut each client's sequence at another place on each config,
# and how many long statements fitted moved the throughput (an A/A of 5-s trials of a mix
# with 1.3-s reports: CV 10%, rounds 14% apart); stopped at FIXED_CAP x the duration
FIXED_CAP = 4
FIXED_MIN = 20


class Captured(Workload):
    kind = "single"
    unit = "stmt/s"
    remote_clients = False
    defaults = {"duration": 20.0, "warmup": 10.0, "clients": 2, "scale": 1}
    knobs: dict[str, str] = {}

    def __init__(self, name: str):
        self.name = name
        self._files: dict[tuple, tuple[list[tuple[str, int]], list[str]]] = {}
        self._plans: list[StatementPlan] | None = None
        self._draws: dict[int, list[list]] | None = None
        # a fixed-work trial's statements per client, by (clients, duration): set at the
        # first measured trial and kept, so every config runs the same work; sized by the
        # rate the warm-ups before it ran at, by clients
        self._fixed: dict[tuple[int, float], int] = {}
        self._warm_rate: dict[int, float] = {}
        self._calibration: list[tuple] | None = None
        self._fit_errors: list[str] = []
        self.path = os.path.abspath(os.path.expanduser(name[len(PREFIX):]))
        self.manifest = read_manifest(self.path)
        try:
            with open(os.path.join(self.path, "statements.json")) as f:
                raw = json.load(f)
            self.statements = [Statement.from_dict(d) for d in raw]
            # constants normalised away, recovered from the log or pg_stat_activity
            self.constants = {int(d["queryid"]): {int(n): [tuple(x) for x in vs]
                                                  for n, vs in d["constants"].items()}
                              for d in raw if d.get("constants")}
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
            raise UsageError(f"{self.path}: its statements cannot be read ({e}).",
                             "Capture again.") from None
        kept = os.path.isfile(os.path.join(self.path, "values.json"))
        self.summary = (f"the statements {self.manifest.get('database')} ran, captured "
                        f"{self.manifest.get('captured_at')}, replayed by pgbench with "
                        + ("the captured parameter values" if kept else
                           "parameters drawn from the data"))
        self.writes = any(writes(s.query) for s in replayable(self.statements))

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
            self._calibrate(ctx, params)
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
        # the throwaway server has none of the captured server's roles, tablespaces or
        # label providers: the objects go to the bench database's owner and tablespace
        r = subprocess.run([find_client("pg_restore", getattr(ctx.target, "inst", None)),
                            "--no-owner", "--no-privileges", "--no-tablespaces",
                            "--no-security-labels", "--jobs=2",
                            "--dbname", bench_db, data],
                           capture_output=True, text=True,
                           env=libpq_env(ctx.bench_conninfo()))
        if r.returncode != 0:
            raise BenchError(*restore_error(data, r.stderr, r.returncode))
        with ctx.connect() as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            conn.execute("ANALYZE")
            self._make_scripts(conn)
        self._calibrate(ctx, params)

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
        cluster.start(self.required_settings(RunParams()))   # the calibration reads pgss
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

    def plans(self, conn) -> list[StatementPlan]:
        """Every replayable statement's plan (the same on every server of a process)."""
        if self._plans is None:
            self._plans = build.statement_plans(conn, self.statements, self.constants,
                                                self._values())
        return self._plans

    def _make_scripts(self, conn) -> None:
        """The replay's scripts and draw tables in the bench database (fitted once per
        process: every server gets the same draws)."""
        plans = self.plans(conn)
        if self._draws is None:
            self._draws = build.fitted_draws(conn, plans, self._fit_errors)
        build.write_scripts(conn, self.statements, plans, self._draws)

    def _values(self) -> dict[int, list[dict[int, Any]]]:
        """The captured parameter tuples (``values.json``, with --with-values), by the
        statement's queryid: each a {n: value} map."""
        try:
            with open(os.path.join(self.path, "values.json")) as f:
                raw = json.load(f)
        except FileNotFoundError:
            return {}
        except ValueError as e:
            raise UsageError(f"{self.path}/values.json cannot be read ({e}).",
                             "Capture again.") from None
        out: dict[int, list[dict[int, Any]]] = {}
        for k, tuples in (raw.items() if isinstance(raw, dict) else ()):
            if not str(k).lstrip("-").isdigit() or not isinstance(tuples, list):
                continue              # a bundle of an older pgaccel: keyed by text
            out[int(k)] = [{int(n): v for n, v in t.items()} for t in tuples
                           if isinstance(t, dict)]
        return out

    def captured_options(self) -> str | None:
        return calibration.captured_options(self.path)

    def _calibrate(self, ctx: BenchContext, params: RunParams) -> None:
        """The calibration trial (``replay_calibration.py``), once per process."""
        self._calibration = calibration.calibrate(ctx, params, self.statements,
                                                  self.captured_options(), self._calibration)

    def _scripts(self, ctx: BenchContext) -> tuple[list[tuple[str, int]], list[str]]:
        """The scripts as files (written once per server and process, removed at exit):
        ([(path, weight)], the captured texts of the statements run)."""
        key = (id(ctx.target), ctx.bench_conninfo())
        if key not in self._files:
            try:
                with ctx.connect() as conn:
                    rows = conn.execute("SELECT number, weight, script, query FROM "
                                        "pgaccel_replay WHERE skipped IS NULL ORDER BY "
                                        "number").fetchall()
            except (psycopg.Error, PgaccelError):
                return [], []       # not prepared yet (a runner asking what it can do)
            d = tempfile.mkdtemp(prefix="pgaccel-replay-", dir=ctx.workdir)
            atexit.register(shutil.rmtree, d, True)
            out, run = [], []
            for number, weight, script, query in rows:
                run.append(query)
                path = os.path.join(d, f"s{number}.sql")
                with open(path, "w") as f:
                    f.write(script)
                out.append((path, int(weight)))
            self._files[key] = (out, run)
        return self._files[key]

    def longest_ms(self) -> float:
        """The longest captured mean time per call among the statements replayed."""
        return max((s.mean_ms for s in replayable(self.statements)
                    if s.mean_ms == s.mean_ms), default=0.0)

    def design(self) -> str:
        """How the replay runs beside other configs, from the captured latencies."""
        ms = self.longest_ms()
        if ms > TURN_MS:
            return (f"whole trials taking turns: a captured statement takes {ms:.0f} ms per "
                    f"call, and a paused slice would leave it running during another "
                    f"config's measured time")
        return (f"side by side in slices (the longest captured statement takes {ms:.2g} ms "
                "per call)")

    def long_calls(self, duration: float) -> float:
        """About how many statements longer than :data:`TURN_MS` a client completes in
        ``duration`` seconds (0 when none is that long)."""
        long = [s for s in replayable(self.statements) if s.mean_ms > TURN_MS]
        share = sum(s.share_time for s in long)
        calls = sum(s.calls for s in long)
        if not long or not calls or share <= 0:
            return 0.0
        mean_s = sum(s.mean_ms * s.calls for s in long) / calls / 1000
        return duration * share / mean_s

    def trial_seconds(self, per_client: float = SEARCH_LONG_CALLS,
                      lo: float = 5.0, hi: float = 120.0) -> float:
        """How long a trial must be to hold about ``per_client`` of the long statements per
        client (within ``lo``..``hi`` seconds): ``tune --search`` sizes its rounds by it."""
        k = self.long_calls(1.0)          # long statements per client per second
        if k <= 0:
            return lo
        return float(min(hi, max(lo, per_client / k)))

    def short_trial(self, duration: float) -> str | None:
        """A warning when a trial holds well under :data:`LONG_CALLS` long statements
        per client: where its end cuts the mix then moves its throughput."""
        k = self.long_calls(duration)
        if not k or k >= 0.8 * LONG_CALLS:
            return None
        need = duration * LONG_CALLS / k
        return (f"a {duration:.0f}-s trial holds about {k:.0f} of the replay's long "
                f"statements per client ({self.longest_ms():.0f} ms each), so where it ends "
                f"moves its throughput by several percent: --duration {need:.0f} or more "
                f"holds {LONG_CALLS}")

    def turns(self) -> str | None:
        """Why trials take turns instead of running side by side in slices, or None."""
        ms = self.longest_ms()
        if ms <= TURN_MS:
            return None
        return (f"a captured statement takes {ms:.0f} ms per call, and a slice paused "
                f"mid-statement would leave it running during another config's measured "
                f"time, so trials take turns")

    def throughput_from(self) -> str:
        """Where a trial's throughput comes from: ``"totals"`` (pgbench's own, statements
        over the whole trial) when a captured statement takes longer than :data:`TURN_MS`,
        else ``"series"`` (the mean of the steady per-second rates, lab/trial.py).  A second
        of a mix with 1-s statements holds a handful of them, and how many each second
        held is chance: in a 5-s A/A trial of one such mix (1.3-s reports and 0.02-ms
        lookups) the seconds ran 2,550, 852, 698, 942, 1 statements, and the steady-state
        trim picked different seconds in each trial, so identical configs measured 1.81x
        apart in one round; pgbench's totals for those trials were 1.18x apart."""
        return "totals" if self.longest_ms() > TURN_MS else "series"

    def fixed_work(self, ctx: BenchContext, clients: int, duration: float) -> int:
        """Statements per client for a measured trial of long statements when no warm-up
        ran before it (the warm-up's rate sizes it otherwise: ``run``), so that a client is
        busy about ``duration`` seconds (:func:`fixed_transactions`): each statement's
        mean time in the calibration (the run's clients on this server; else the captured
        one), weighted as the replay draws the scripts, plus what each call cost beyond its
        execution there (the round trip and pgbench, :func:`call_overhead_ms`).  Only an
        estimate: the calibration runs the captured settings and rolls its writes back, so
        no commit waits for WAL; the ledger app's 15-s trials, sized this way, took 28-32 s
        (without the overhead 33-37 s)."""
        stmts = replayable(self.statements)
        weights: list[tuple[int, float]] = []
        cal: dict[str, float] = {}
        calls: list[tuple[float, float]] = []
        try:
            with ctx.connect() as conn:
                rows = conn.execute("SELECT number, weight, replayed_fp FROM pgaccel_replay "
                                    "WHERE skipped IS NULL").fetchall()
                fp_of = {n: fp for n, _w, fp in rows}
                weights = [(n, float(w)) for n, w, _fp in rows]
                try:
                    for n, ms, c in conn.execute("SELECT number, replayed_mean_ms, calls "
                                                 "FROM pgaccel_replay_calibration"):
                        if ms is not None and fp_of.get(n) is not None:
                            cal[fp_of[n]] = float(ms)
                            calls.append((float(c or 0), float(ms)))
                except psycopg.Error:
                    conn.rollback()
        except psycopg.Error:
            weights, fp_of = [], {}
        pairs = []
        for n, w in weights:
            fp = fp_of.get(n)
            ms = cal.get(fp) if fp is not None else None
            if ms is None and n < len(stmts):
                ms = stmts[n].mean_ms
            if ms is not None and ms == ms:
                pairs.append((w, float(ms)))
        over = call_overhead_ms(calls, clients, calibration.CALIBRATION_S)
        return fixed_transactions(mean_ms(pairs) + over, duration)

    def pgbench_kw(self, ctx: BenchContext, params: RunParams) -> dict[str, Any] | None:
        """pgbench's arguments; None (trials take turns, one config at a time) when a
        captured statement takes longer than :data:`TURN_MS`: a slice paused by SIGSTOP
        leaves its backend running the statement in another config's measured time."""
        kw = self._kw(ctx, params)
        return None if self.longest_ms() > TURN_MS else kw

    def _kw(self, ctx: BenchContext, params: RunParams) -> dict[str, Any]:
        if params.protocol == "simple":
            raise UsageError("A captured workload's parameters are bound, not pasted: "
                             "--protocol simple would put text values unquoted into the "
                             "statements.", "Use --protocol prepared (the default) or "
                             "extended.")
        scripts, _ = self._scripts(ctx)
        return dict(builtin=None, scripts=scripts, clients=params.clients,
                    threads=load_threads(params.threads, params.clients), rate=params.rate,
                    protocol=params.protocol, defines=None,
                    extra_args=["--random-seed", str(SEED)])

    def round_begin(self, ctx: BenchContext) -> None:
        with ctx.connect() as conn:
            conn.execute("SELECT pg_stat_statements_reset()")

    def _replay_facts(self, conn) -> dict[str, Any]:
        """What the replay runs and leaves out, its guesses and its calibration, from the
        bench database (so a template copy and a later process see the same)."""
        rows = conn.execute("SELECT number, skipped, guesses FROM pgaccel_replay "
                            "ORDER BY number").fetchall()
        stmts = replayable(self.statements)
        plans = [StatementPlan(number, stmts[number], skipped=skipped,
                               guesses=guesses or [])
                 for number, skipped, guesses in rows if number < len(stmts)]
        t, c, left, tx = coverage(self.statements, plans)
        cal = []
        try:
            keys = ("query", "captured_mean_ms", "replayed_mean_ms", "captured_rows",
                    "replayed_rows", "calls", "captured_blocks", "replayed_blocks")
            cal = [dict(zip(keys, r)) for r in conn.execute(
                f"SELECT {', '.join(keys)} FROM pgaccel_replay_calibration ORDER BY number")]
        except psycopg.Error:
            conn.rollback()
        return {"replayed_time": round(t, 4), "replayed_calls": round(c, 4),
                "left": [{"query": x.query[:200], "share_time": round(x.share_time, 4),
                          "share_calls": round(x.share_calls, 4), "reason": x.reason}
                         for x in left],
                "guesses": guesses_of(plans),
                "transaction_control": (None if tx is None else
                                        {"share_calls": round(tx.share_calls, 4),
                                         "share_time": round(tx.share_time, 4)}),
                "design": self.design(), "calibration": cal}

    def round_end(self, ctx: BenchContext) -> dict[str, Any]:
        """The replay's mix read back (``replay.fidelity``) for the trial's metrics, with
        what the replay runs and leaves out and its calibration."""
        with ctx.connect() as conn:
            seen = conn.execute(
                "SELECT query, calls, total_exec_time FROM pg_stat_statements "
                "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = "
                "current_database())").fetchall()
            facts = self._replay_facts(conn)
            aliases = {fp: fingerprint(q) for q, fp in conn.execute(
                "SELECT query, replayed_fp FROM pgaccel_replay WHERE replayed_fp IS NOT NULL")}
        _, run = self._scripts(ctx)
        rows, problems = fidelity(self.statements, seen, run, aliases)
        notes = []
        lost = [x for x in facts["left"] if x["share_time"] >= 0.005
                or x["share_calls"] >= 0.005]
        if lost:
            big = lost[0]
            notes.append(f"{len(lost)} captured statement(s) are not replayed: "
                         f"{1 - facts['replayed_time']:.0%} of the captured time and "
                         f"{1 - facts['replayed_calls']:.0%} of the calls; the largest, "
                         f"'{' '.join(big['query'].split())[:60]}': {big['reason']}")
        notes += [f"the replay's cost is not the captured one: {x}"
                  for x in cost_flags(facts["calibration"])]
        return {"fidelity": [{"query": x.query[:200], "key": x.key,
                              "captured_calls": round(x.captured_calls, 4),
                              "replayed_calls": round(x.replayed_calls, 4),
                              "captured_time": round(x.captured_time, 4),
                              "replayed_time": round(x.replayed_time, 4),
                              "captured_mean_ms": round(x.captured_mean_ms, 4),
                              "replayed_mean_ms": (None if x.replayed_mean_ms is None
                                                   else round(x.replayed_mean_ms, 4))}
                             for x in rows],
                "replay": facts,
                "warnings": problems + notes}

    def run(self, ctx: BenchContext, params: RunParams, duration: float, *,
            stop_when: Callable[[list[float]], bool] | None = None,
            on_progress: Callable[[float, float], None] | None = None,
            log: bool = True) -> RunResult:
        kw = self._kw(ctx, params)
        self.round_begin(ctx)
        # a measured trial of long statements runs a fixed amount of work, the same
        # statements in the same order on every config: its throughput is how long they took
        fixed = self.throughput_from() == "totals" and not kw["rate"]
        per_client = None
        if fixed and log:
            key = (kw["clients"], float(duration))
            if key not in self._fixed:
                rate = self._warm_rate.get(kw["clients"])
                self._fixed[key] = (
                    fixed_transactions(kw["clients"] * 1000.0 / rate, duration) if rate
                    else self.fixed_work(ctx, kw["clients"], duration))
            per_client = self._fixed[key]
        cap_s = max(FIXED_CAP * duration, duration + 30)
        if per_client is not None:
            if on_progress is not None:
                shown = on_progress
                on_progress = lambda t, v: shown(min(t, 0.99 * duration), v)  # noqa: E731
        r = run_pgbench(ctx.pgbench, ctx.bench_conninfo(), scripts=kw["scripts"],
                        clients=kw["clients"], threads=kw["threads"],
                        duration=None if per_client else duration, transactions=per_client,
                        rate=kw["rate"], protocol=kw["protocol"], log=log,
                        extra_args=kw["extra_args"],
                        session_options=ctx.target.session_options, stop_when=stop_when,
                        on_progress=on_progress, workdir=ctx.workdir,
                        deadline_s=cap_s if per_client is not None else None)
        if fixed and not log and kw["clients"] not in self._warm_rate:
            series = r.tps_series
            warm = r.summary_tps or (sum(series) / len(series) if series else 0.0)
            if warm > 0:
                self._warm_rate[kw["clients"]] = warm
        extra = {"summary_tps": r.summary_tps, **self.round_end(ctx)}
        if per_client is not None:
            extra["fixed_work"] = {"transactions_per_client": per_client,
                                   "clients": kw["clients"]}
            if r.summary_tps is None:
                extra["warnings"] = extra["warnings"] + [
                    f"the trial's fixed work ({per_client} statements per client) was not "
                    f"done in {cap_s:.0f} s ({FIXED_CAP}x its duration, at least 30 s more) "
                    "and was stopped: its throughput counts the statements done by then"]
        else:
            short = self.short_trial(duration)
            if short:
                extra["warnings"] = extra["warnings"] + [short]
        tps = r.tps
        if self.throughput_from() == "totals" and r.summary_tps:
            extra["throughput_from"] = "totals"
            tps = r.summary_tps
        return RunResult(ops=r.transactions, duration_s=r.duration_s, throughput=tps,
                         latency_ms=r.latency_ms, series=r.tps_series,
                         latency_series=r.latency_p50_series, client=r.client,
                         failed=r.failed,
                         extra=extra)


def mean_ms(weighted: list[tuple[float, float]]) -> float:
    """The mean of ``(weight, ms)`` pairs; NaN when no weight."""
    total = sum(w for w, _ in weighted if w > 0)
    return (sum(w * ms for w, ms in weighted if w > 0) / total) if total else float("nan")


def call_overhead_ms(calls: list[tuple[float, float]], clients: int, seconds: float) -> float:
    """What a call cost beyond its execution in a trial of ``seconds`` at ``clients``
    clients whose statements ran ``calls`` (``(calls, mean ms)`` each): the clients' time
    not spent executing, per call (0 when nothing ran or the executions fill it)."""
    n = sum(c for c, _ in calls)
    if n <= 0 or clients < 1:
        return 0.0
    return max(0.0, (clients * seconds * 1000.0 - sum(c * ms for c, ms in calls)) / n)


def fixed_transactions(per_call_ms: float, duration: float) -> int:
    """Statements per client so that a client taking ``per_call_ms`` a statement is busy
    about ``duration`` seconds; at least :data:`FIXED_MIN`, so a trial never ends on a
    handful."""
    if not per_call_ms or per_call_ms != per_call_ms or per_call_ms <= 0:
        return FIXED_MIN
    return max(FIXED_MIN, math.ceil(duration * 1000.0 / per_call_ms))


@lru_cache(maxsize=16)
def captured_workload(name: str) -> Captured:
    return Captured(name)


RESOLVERS[PREFIX] = captured_workload


def restore_error(data: str, stderr: str, returncode: int) -> tuple[str, str]:
    """(message, what to do) of a failed pg_restore: its own errors (the first three; its
    last line, 'errors ignored on restore: N', only counts them), and a hint by what they
    say."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    errors = [ln.removeprefix("pg_restore: ").removeprefix("error: ")
              for ln in lines if ln.startswith("pg_restore: error:")]
    said = "; ".join(errors[:3]) + (f" (and {len(errors) - 3} more)" if len(errors) > 3
                                    else "")
    if not said:
        said = lines[-1] if lines else f"exit code {returncode}"
    msg = f"pg_restore of {data} failed: {said}."
    text = stderr.lower()
    if "unsupported version" in text or ("newer" in text and "archive" in text):
        return msg, ("The lab's server must be as new as the captured one: run with "
                     "--pg-bin or --build of that major or newer.")
    if "extension" in text and ("not available" in text or "could not open" in text):
        return msg, ("An extension the captured database uses is not installed for the "
                     "lab's server: install it (its package for this PostgreSQL), then "
                     "run again.")
    return msg, ("pgaccel restores without the captured server's owners, privileges, "
                 "tablespaces and security labels; what failed needs something else of "
                 "it (a role or extension an object names): create that on the lab's "
                 "server's installation, or capture a database without it.")

