"""The Insert Benchmark (study 001) as pgbench scripts (built in ``ibscripts.py``).

One table per client (``ib_purchases_1..N``, client ``c`` owns table ``c+1``); the scripts
pick the client's table with an ``\\if :client_id = c`` chain, so one pgbench process drives
all clients.  Steps, in order:

``l.i0``  load in primary-key order, 100 rows per INSERT/commit, no secondary indexes;
``l.x``   create the three secondary indexes (each client indexes its own table);
``l.i1``  insert 50 rows and delete the 50 oldest per commit: each table is a fixed-size
          queue (the client tracks the oldest id in a pgbench variable, as iibench's deleter
          does with min(transactionid));
``l.i2``  the same with 5 rows per commit;
then ``VACUUM (ANALYZE)`` of every table and a ``CHECKPOINT``;
``qrN``/``qpN`` range / point queries as fast as possible while a background writer per
          client inserts and deletes N rows/s.  A q step is *invalid* when the writers did
          not reach 95% of their target rate.

Query and writer clients are two pgbench processes: pgbench's ``-R`` limits every client of
a process, and the queries must run unthrottled.  The writers are paced to a schedule
(``pg_sleep`` until the next slot, measured on the server's clock) rather than with ``-R``,
whose Poisson arrivals give the writer rate a random error of 1/sqrt(commits) — enough, in
a short step, to fail the 95% rule by chance.

Rows come from the client by default, as the public client (iibench.py) sends them: one
multi-row ``INSERT ... VALUES (...), (...)`` per commit with the step's batch size, values
written into the statement text (psycopg2 interpolates them; pgbench's simple protocol does
the same, so the write steps run ``-M simple`` whatever ``protocol`` says), with its value
distributions: cashregisterid 0..999, productid 0..9999, customerid 0..99999, price 0..499
sent as ``N.00`` into the int column, data 10 characters (7 'a' and 3 random).
``dateandtime`` is the server's ``now()`` where iibench sends the client's clock as a
literal.  ``rowgen=server`` builds the rows inside the server instead (``INSERT ... SELECT
... FROM generate_series``): cheaper for the server per row (9.2 against 17.6 µs measured
here) and nearly free for the client, but not the path the benchmark measures.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import threading
import time
import dataclasses
from contextlib import ExitStack
from typing import Any, Iterator, Sequence

import psycopg

from ..errors import BenchError, UsageError
from .base import BenchContext, RunParams, load_threads, register
from .ibplans import IndexPlan, LoadPlan, QueryPlan, drop_statements
from .ibscripts import (COUNT_ROWS_UP_TO, ROWS_PER_COMMIT, STEPS, VALID_FRACTION, IBConfig,
                        config, fill, host_sizes, paced_seconds, point_bounds, query_scripts,
                        table, template, write_protocol, write_script, writer_valid)
from .pgbench import PgbenchResult, run_pgbench
from .pinning import Share
from .slices import PausedPgbench
from .steps import ProgressFn, StepResult, StepWorkload, measured_step, option

# the load steps that run as one pgbench of a fixed number of commits (l.x is DDL)
LOAD_STEPS = ("l.i0", "l.i1", "l.i2")


def write_scripts(d: str, texts: list[str]) -> list[tuple[str, int]]:
    """pgbench script files in ``d``, one per text, each weighted 1."""
    out = []
    for i, text in enumerate(texts):
        p = os.path.join(d, f"s{i}.sql")
        with open(p, "w") as f:
            f.write(text)
        out.append((p, 1))
    return out


def index_at_once(jobs: list, what: str = "Creating the secondary indexes") -> None:
    """Run l.x's ``jobs`` (one per table) each on a thread of its own, all at once, as the
    benchmark's clients do; the first error re-raised as one paragraph (``what`` failed)."""
    errors: list[BaseException] = []

    def run(job) -> None:
        try:
            job()
        except BaseException as e:     # re-raised in the caller's thread
            errors.append(e)
    threads = [threading.Thread(target=run, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise BenchError(f"{what} failed: {errors[0]}",
                         "Check the server log (disk space, maintenance_work_mem).")


# -- the workload --------------------------------------------------------------------------
class InsertBenchmark(StepWorkload):
    name = "insert-benchmark"
    summary = ("Insert Benchmark: load, index, insert+delete queues, then range/point "
               "queries under rate-limited writers; per-step CPU, ctx switches, KB per op")
    unit = "inserts/s"
    common_knobs = ("protocol",)
    writes = True
    defaults = {"clients": 2, "size": "small"}
    knobs = {
        "clients": "clients, and tables (one per client)",
        "size": "tiny | small (a couple of minutes here) | medium | large (hours)",
        "rows_per_table": "rows each table holds after l.i0, rounded up to 100s (a "
                          "fixed-size queue after)",
        "i1_rows": "rows inserted and deleted per table in l.i1 (50 per commit)",
        "i2_rows": "rows inserted and deleted per table in l.i2 (5 per commit)",
        "query_seconds": "seconds per qr/qp step",
        "index_passes": "times l.x builds its indexes, each pass but the last dropped after "
                        "it (1, the benchmark's; more measure l.x longer where its builds "
                        "last a fraction of a second)",
        "rowgen": "client (default: iibench's multi-row INSERT, values in the statement "
                  "text) or server (INSERT ... SELECT generate_series: about half the "
                  "server's CPU per row, not the benchmark's path)",
        "writer_rows_per_commit": "rows per commit of the q-step background writers (50, as "
                                  "the benchmark's iq.sh runs them; at most the rate)",
        "steps": "comma list of steps to run (default all; a later step reuses the tables)",
        "load_analyze": "auto (autovacuum analyzes the tables while l.i0 loads them, the "
                        "benchmark's way) or after: held off them during l.i0, then one "
                        "ANALYZE of each when it is done (untimed). Its sample is 30,000 "
                        "rows whatever the table's size, so with a short autovacuum_naptime "
                        "on small tables it ran at every visit and cost l.i0 a fifth of its "
                        "rate, where the study's 200M-row tables load for hours",
        "load_seconds": "size the load steps to the host: before the first round the lab "
                        "times l.i0 alone on the base's server and cuts rows_per_table (and "
                        "i1_rows and i2_rows by the same share, never below a floor) so l.i0 "
                        "lasts about this many seconds a variant; never more rows than given",
    }

    def data_key(self, params: RunParams) -> dict:
        cfg = config(params)
        return {"workload": self.name, "tables": cfg.tables}

    def build(self, ctx: BenchContext, params: RunParams) -> None:
        """Nothing to prepare: l.i0 (re)creates and loads the tables."""

    def sizes_to_host(self, params: RunParams) -> bool:
        """Whether ``params`` ask for :meth:`size_to_host` (``load_seconds`` given; checked
        here, before any server is touched)."""
        secs = option(params, "load_seconds", 0.0, float)
        if secs != 0 and not 0.5 <= secs <= 3600:
            raise UsageError(f"load_seconds={secs:g}: give the seconds l.i0 should last a "
                             "variant, 0.5 to 3600 (or leave it out to keep the rows given).")
        return secs != 0

    def size_to_host(self, ctx: BenchContext, params: RunParams) -> dict[str, Any] | None:
        """With ``load_seconds``: l.i0 alone on ``ctx`` with a fifth of its rows (at least
        10,000 a table), and ``params.options`` given the sizes :func:`host_sizes` makes of
        the rate it ran at (a host half as fast as another gets half the rows, so its rounds
        take as long and as many fit a budget).  What was measured and chosen, for run.json;
        None without the knob.  The tables it leaves go with the next ``steps_start``."""
        if not self.sizes_to_host(params):
            return None
        secs = option(params, "load_seconds", 0.0, float)
        cfg = config(params)
        probe = dataclasses.replace(
            cfg, rows_per_table=max(10_000, cfg.rows_per_table // 500 * 100))
        res = self.load_step(ctx, self.load_plan(ctx, probe, "l.i0"))
        sizes = host_sizes(cfg, res.throughput, secs)
        given = {k: getattr(cfg, k)
                 for k in ("rows_per_table", "i1_rows", "i2_rows", "index_passes")}
        params.options.update({k: sizes[k] for k in given})
        return {"load_seconds": secs, "probe_rows": probe.tables * probe.rows_per_table,
                "probe_inserts_per_s": round(res.throughput, 1), "given": given, **sizes}

    def step_names(self, params: RunParams) -> list[str]:
        wanted = option(params, "steps", "")
        if not wanted:
            return list(STEPS)
        names = [s.strip() for s in wanted.split(",") if s.strip()]
        bad = [s for s in names if s not in STEPS]
        if bad:
            raise UsageError(f"Unknown Insert Benchmark step(s): {', '.join(bad)}.",
                             f"Steps: {', '.join(STEPS)}.")
        queries = [s for s in names if s.startswith("q")]
        if "l.i0" in names and "l.x" not in names and queries:
            raise UsageError(
                f"steps={wanted!r}: l.i0 creates the tables afresh and l.x, which builds their "
                f"secondary indexes, does not run, so {', '.join(queries)} would query tables "
                "without the indexes their queries use (qr100 ran 55 queries/s so here, "
                "55,000 after l.x).",
                "Add l.x to steps, or leave l.i0 out to query the tables an earlier run left.")
        return [s for s in STEPS if s in names]

    def least_seconds(self, params: RunParams) -> float:
        """Its q steps' seconds (each runs ``query_seconds``); the load steps run until
        their rows are written, at a rate not known before."""
        qs = sum(1 for s in self.step_names(params) if s.startswith("q"))
        return qs * config(params).query_seconds

    interleaves = True
    # iter_steps(plans=True) yields every step as a plan the lab runs side by side in turns
    slices_queries = True

    def run_steps(self, ctx: BenchContext, params: RunParams,
                  on_progress: ProgressFn | None = None) -> list[StepResult]:
        return list(self.iter_steps(ctx, params, on_progress))

    def iter_steps(self, ctx: BenchContext, params: RunParams,
                   on_progress: ProgressFn | None = None, *,
                   plans: bool = False
                   ) -> Iterator[StepResult | QueryPlan | LoadPlan | IndexPlan]:
        """The steps one at a time, each measured when asked for: the lab runs another
        variant's same step in between (``lab/paired_steps.py``).  With ``plans``, a q step
        is not run but yielded as its :class:`QueryPlan`, a load step as its
        :class:`LoadPlan` and l.x as its :class:`IndexPlan` (the lab runs every variant's in
        turns, ``lab/paired_qsteps.py``, ``lab/paired_lsteps.py`` and
        ``lab/paired_xstep.py``, then hands a load step's result back through
        :meth:`finish_load`); the maintenance before the first q step
        is done here either way."""
        cfg = config(params)
        maintained = False
        for step in self.step_names(params):
            if on_progress:
                on_progress(step, 0.0)
            extra: dict[str, Any] = {}
            if step.startswith("q") and not maintained:
                extra["vacuum_checkpoint_s"] = self.vacuum_checkpoint(ctx, cfg)
                maintained = True
            if plans and step.startswith("q"):
                plan = self.query_plan(ctx, cfg, step[:2], int(step[2:]))
                yield dataclasses.replace(plan, extra=extra)
                continue
            if plans and step in LOAD_STEPS:
                yield self.load_plan(ctx, cfg, step)
                continue
            if plans and step == "l.x":
                yield self.index_plan(ctx, cfg)
                continue
            res = self.run_step(ctx, cfg, step)
            res.extra.update(extra)
            if on_progress:
                on_progress(step, 1.0)
            yield res

    def run_step(self, ctx: BenchContext, cfg: IBConfig, step: str) -> StepResult:
        if step in LOAD_STEPS:
            return self.load_step(ctx, self.load_plan(ctx, cfg, step))
        if step == "l.x":
            return self.create_indexes(ctx, cfg)
        return self.query_step(ctx, cfg, step[:2], int(step[2:]))

    # -- steps -------------------------------------------------------------------------
    def load_plan(self, ctx: BenchContext, cfg: IBConfig, step: str) -> LoadPlan:
        """What a load step runs, the same whether whole (:meth:`load_step`) or in slices
        beside other servers' (``lab/paired_lsteps.py``).  l.i0 (re)creates the tables
        now; l.i1 and l.i2 read each queue's oldest id now, and count the queues when they
        are small enough to count."""
        rows = ROWS_PER_COMMIT[step]
        if step == "l.i0":
            with ctx.connect() as conn:
                for c in range(cfg.tables):
                    conn.execute(fill(template("schema"), c))
                    if cfg.load_analyze == "after":
                        conn.execute(fill(template("analyze_hold"), c))
            return LoadPlan(step, cfg, write_script(cfg.tables, rows, cfg.rowgen,
                                                    delete=False, pace=False),
                            math.ceil(cfg.rows_per_table / rows), rows)
        total = cfg.i1_rows if step == "l.i1" else cfg.i2_rows
        bounds = self.bounds(ctx, cfg)
        check = cfg.tables * cfg.rows_per_table <= COUNT_ROWS_UP_TO
        return LoadPlan(step, cfg, write_script(cfg.tables, rows, cfg.rowgen, delete=True,
                                                pace=False),
                        max(1, total // rows), rows,
                        defines={f"dmin_{c}": lo for c, (lo, _) in enumerate(bounds)},
                        before=self.counts(ctx, cfg) if check else None)

    def load_step(self, ctx: BenchContext, plan: LoadPlan) -> StepResult:
        """A load step taken whole: one pgbench for its commits, measured from start to
        end."""
        def body():
            r, secs = self.run_scripts(ctx, plan.cfg, [plan.script],
                                       transactions=plan.transactions,
                                       defines=plan.defines or None,
                                       protocol=write_protocol(plan.cfg))
            return r.transactions * plan.rows, secs, r.client
        return self.finish_load(ctx, plan, measured_step(ctx, plan.step, "inserts/s", body))

    def finish_load(self, ctx: BenchContext, plan: LoadPlan, res: StepResult) -> StepResult:
        """A load step's result completed: rows per commit, deletes, and for a queue step
        whose sizes were counted before, the rule that they did not change; after l.i0 with
        ``load_analyze = after``, its tables analyzed (after every variant's slices in a
        lab, so untimed) and autovacuum's thresholds given back to them."""
        res.extra.update(plan.extra)
        res.extra["rows_per_commit"] = plan.rows
        if plan.step == "l.i0":
            if plan.cfg.load_analyze == "after":     # untimed, as the checkpoints between steps
                with ctx.connect() as conn:
                    for c in range(plan.cfg.tables):
                        conn.execute(fill(template("analyze_release"), c))
                res.extra["analyzed_after_load"] = True
            return res
        res.extra["deletes"] = res.ops
        if plan.before is not None:
            after = self.counts(ctx, plan.cfg)
            res.extra.update({"rows_before": plan.before, "rows_after": after})
            if plan.before != after:
                res.valid = False
                res.note = (f"table sizes changed from {plan.before} to {after}: not a "
                            "fixed queue")
        return res

    def index_plan(self, ctx: BenchContext, cfg: IBConfig) -> IndexPlan:
        """What l.x runs, the same whether whole (:meth:`create_indexes`) or index by
        index beside other servers' (``lab/paired_xstep.py``): the rows are counted now."""
        rows = sum(hi - lo + 1 for lo, hi in self.bounds(ctx, cfg))
        stmts = [[x.strip() for x in fill(template("indexes"), c).split(";") if x.strip()]
                 for c in range(cfg.tables)]
        built = "" if cfg.index_passes == 1 else \
            f", built {cfg.index_passes} times (each but the last dropped)"
        return IndexPlan("l.x", stmts, rows,
                         note=f"3 secondary indexes per table{built}; rows/s = table rows "
                              "indexed per second",
                         extra={"index_passes": cfg.index_passes},
                         passes=cfg.index_passes,
                         drops=[drop_statements(s) for s in stmts])

    def create_indexes(self, ctx: BenchContext, cfg: IBConfig) -> StepResult:
        """l.x taken whole: each table's statements on a connection of its own, all tables
        at once, measured from the first to the last."""
        plan = self.index_plan(ctx, cfg)

        def one(stmts: list[str]) -> None:
            with ctx.connect() as conn:
                for stmt in stmts:
                    conn.execute(stmt)

        def body():
            secs = 0.0
            for p in range(plan.passes):
                if p:       # the previous pass's indexes, dropped outside the seconds
                    index_at_once([lambda s=s: one(s) for s in plan.drops],
                                  "Dropping the previous pass's indexes")
                t0 = time.monotonic()
                index_at_once([lambda s=s: one(s) for s in plan.statements])
                secs += time.monotonic() - t0
            return plan.ops, secs, {}
        res = measured_step(ctx, "l.x", "rows/s", body)
        res.note = plan.note
        res.extra.update(plan.extra)
        return res

    def query_plan(self, ctx: BenchContext, cfg: IBConfig, kind: str, rate: int
                   ) -> "QueryPlan":
        """What a q step runs: its writer script and defines (each table's bounds read now),
        its query scripts; the same whether it runs whole (:meth:`query_step`) or in
        slices beside other servers' (``lab/paired_qsteps.py``)."""
        bounds = self.bounds(ctx, cfg)
        wrpc = max(1, min(cfg.writer_rows_per_commit, rate))
        deleted = int(math.ceil(rate * cfg.query_seconds * 1.2)) + wrpc
        defines: dict[str, Any] = {"period": f"{wrpc / rate:.6f}", "client_base": 0}
        for c, (lo, hi) in enumerate(bounds):
            plo, phi = point_bounds(lo, hi, deleted)
            defines.update({f"dmin_{c}": lo, f"lo_{c}": plo, f"hi_{c}": phi})
        return QueryPlan(step=f"{kind}{rate}", seconds=cfg.query_seconds, cfg=cfg,
                         defines=defines, wrpc=wrpc, target=rate * cfg.tables,
                         writer=write_script(cfg.tables, wrpc, cfg.rowgen, delete=True,
                                             pace=True),
                         queries=query_scripts(cfg.tables, kind))

    @staticmethod
    def writer_defines(ctx: BenchContext, plan: "QueryPlan") -> dict[str, Any]:
        """The writers' defines: every table's schedule starts now, on the server's clock
        (their pace reads it, ``scripts/insertbench/pace.sql``)."""
        with ctx.connect() as conn:
            now = float(conn.execute("SELECT extract(epoch FROM clock_timestamp())")
                        .fetchone()[0])
        return {**plan.defines, **{f"next_{c}": f"{now:.6f}" for c in range(plan.cfg.tables)}}

    @staticmethod
    def writer_run_seconds(plan: "QueryPlan", writer: PgbenchResult) -> float:
        """The seconds a q step's writers (one pgbench run of the step's seconds) are
        judged over (``ibscripts.paced_seconds``): their schedules start just before pgbench
        does, and pgbench lets a commit begun before its ``-T`` end, so a commit due in
        the step's last period may count (the rate is capped at the target)."""
        return paced_seconds(writer.transactions, plan.cfg.tables,
                             float(plan.defines["period"]), plan.seconds)

    @staticmethod
    def judge_writers(res: StepResult, plan: "QueryPlan", writer_tx: int,
                      writer_s: float) -> StepResult:
        """The q step's rule on ``res``: the writers' ``writer_tx`` commits over their
        ``writer_s`` seconds against the target rate."""
        achieved = writer_tx * plan.wrpc / writer_s if writer_s > 0 else 0.0
        target = plan.target
        res.valid = writer_valid(achieved, target)
        res.extra.update({"writer_target_rows_per_s": target, "writer_rows_per_s": achieved,
                          "writer_fraction": achieved / target if target else None,
                          "writer_rows_per_commit": plan.wrpc})
        if not res.valid:
            res.note = (f"invalid: the writers reached {achieved:.0f} of {target} rows/s "
                        f"({achieved / target:.0%} < {VALID_FRACTION:.0%})")
        return res

    def query_step(self, ctx: BenchContext, cfg: IBConfig, kind: str, rate: int) -> StepResult:
        plan = self.query_plan(ctx, cfg, kind, rate)
        step, secs = plan.step, plan.seconds
        results: dict[str, Any] = {}

        def go(key: str, scripts: list[str], clients_threads: int, defs: dict) -> None:
            try:
                results[key] = self.run_scripts(
                    ctx, cfg, scripts, duration=secs, defines=defs, threads=clients_threads,
                    protocol=write_protocol(cfg) if key == "w" else None)
            except BaseException as e:
                results[key + "_error"] = e

        def body():
            writer_defines = self.writer_defines(ctx, plan)
            threads = [
                threading.Thread(target=go, args=("q", plan.queries,
                                                  load_threads(None, cfg.tables),
                                                  plan.defines)),
                threading.Thread(target=go, args=("w", [plan.writer], 1,
                                                  writer_defines))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for key in ("q_error", "w_error"):
                if key in results:
                    raise results[key]
            q, w = results["q"][0], results["w"][0]
            client = {"client_cpu_s": q.client.get("client_cpu_s", 0)
                      + w.client.get("client_cpu_s", 0),
                      "client_ctx_switches": q.client.get("client_ctx_switches", 0)
                      + w.client.get("client_ctx_switches", 0)}
            return q.transactions, secs, client
        res = measured_step(ctx, step, "queries/s", body)
        q, w = results["q"][0], results["w"][0]
        res.latency_ms, res.series = q.latency_ms, q.tps_series
        res.extra.update({"query_client_cpu_s": q.client.get("client_cpu_s"),
                          "writer_client_cpu_s": w.client.get("client_cpu_s")})
        return self.judge_writers(res, plan, w.transactions, self.writer_run_seconds(plan, w))

    # -- between steps -----------------------------------------------------------------
    def vacuum_checkpoint(self, ctx: BenchContext, cfg: IBConfig) -> float:
        t0 = time.monotonic()
        with ctx.connect() as conn:
            for c in range(cfg.tables):
                conn.execute(f"VACUUM (ANALYZE) {table(c)}")
            conn.execute("CHECKPOINT")
        return time.monotonic() - t0

    def bounds(self, ctx: BenchContext, cfg: IBConfig) -> list[tuple[int, int]]:
        out = []
        with ctx.connect() as conn:
            for c in range(cfg.tables):
                try:
                    lo, hi = conn.execute(
                        f"SELECT min(transactionid), max(transactionid) FROM {table(c)}"
                    ).fetchone()
                except psycopg.errors.UndefinedTable:
                    lo = hi = None
                if lo is None:
                    raise BenchError(f"Table {table(c)} is missing or empty.",
                                     "Run step l.i0 first (it loads the tables).")
                out.append((int(lo), int(hi)))
        return out

    def counts(self, ctx: BenchContext, cfg: IBConfig) -> list[int]:
        with ctx.connect() as conn:
            return [conn.execute(f"SELECT count(*) FROM {table(c)}").fetchone()[0]
                    for c in range(cfg.tables)]

    def run_scripts(self, ctx: BenchContext, cfg: IBConfig, scripts: list[str], *,
                 transactions: int | None = None, duration: float | None = None,
                 defines: dict | None = None, threads: int | None = None,
                 protocol: str | None = None) -> tuple[PgbenchResult, float]:
        d = tempfile.mkdtemp(prefix="pgaccel-ib-", dir=ctx.workdir)
        try:
            paths = write_scripts(d, scripts)
            t0 = time.monotonic()
            r = run_pgbench(ctx.pgbench, ctx.bench_conninfo(), scripts=paths,
                            clients=cfg.tables,
                            threads=load_threads(threads, cfg.tables),
                            transactions=transactions, duration=duration,
                            protocol=protocol or cfg.protocol, defines=defines, log=True,
                            session_options=ctx.target.session_options, workdir=ctx.workdir)
            return r, time.monotonic() - t0
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def paused_scripts(self, stack: ExitStack, ctx: BenchContext, cfg: IBConfig,
                       scripts: list[str], *, protocol: str | None = None,
                       defines: dict | None = None, transactions: int | None = None,
                       shares: Sequence[Share] | None = None,
                       threads: int | None = None,
                       expect_seconds: float | None = None,
                       siblings: int = 1) -> PausedPgbench:
        """:meth:`run_scripts`'s pgbench, started stopped for the lab's slices
        (``workloads/slices.PausedPgbench``): a day's ``-T`` as a limit, or with
        ``transactions`` its commits per client.  ``shares``: one pgbench per share, on its
        CPU (the query scripts number their clients from ``client_base``).
        ``expect_seconds``: how long it will run, and ``siblings``: how many such pgbench log
        at once, for where its logs go (``PausedPgbench``).
        ``stack`` removes its files and ends it."""
        d = tempfile.mkdtemp(prefix="pgaccel-ib-", dir=ctx.workdir)
        stack.callback(shutil.rmtree, d, True)
        kw = {"builtin": None, "scripts": write_scripts(d, scripts), "clients": cfg.tables,
              "threads": load_threads(threads, cfg.tables), "rate": None,
              "protocol": protocol or cfg.protocol, "defines": defines or None,
              "extra_args": None}
        p = PausedPgbench(ctx.pgbench, ctx.bench_conninfo(), kw, 86400,
                          session_options=ctx.target.session_options, workdir=ctx.workdir,
                          transactions=transactions, shares=shares,
                          expect_seconds=expect_seconds, siblings=siblings)
        stack.callback(p.close)
        return p

    def summarize(self, results: list[StepResult]) -> dict[str, Any]:
        return {"invalid_steps": [r.step for r in results if not r.valid],
                "throughput": {r.step: r.throughput for r in results}}


INSERT_BENCHMARK = register(InsertBenchmark())
