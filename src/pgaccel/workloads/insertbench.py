"""The Insert Benchmark (study 001) as pgbench scripts.

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
from dataclasses import dataclass
from importlib import resources
from typing import Any, Callable

import psycopg

from ..errors import BenchError, UsageError
from ..metrics.system import ncpus
from .base import BenchContext, RunParams, register
from .pgbench import PgbenchResult, run_pgbench
from .steps import ProgressFn, StepResult, StepWorkload, measured_step, option

STEPS = ["l.i0", "l.x", "l.i1", "l.i2", "qr100", "qp100", "qr500", "qp500", "qr1000", "qp1000"]
ROWS_PER_COMMIT = {"l.i0": 100, "l.i1": 50, "l.i2": 5}
VALID_FRACTION = 0.95
# iibench's value ranges (its defaults: cashregisters, products, customers, max_price) and
# its data column: data_length 10, data_random_pct 50 -> int(10 * 0.75 * 0.5) = 3 random
IIBENCH_RANGES = {"cashregisterid": (0, 999), "productid": (0, 9999),
                  "customerid": (0, 99999), "price": (0, 499)}
DATA_FIXED, DATA_RANDOM = "a" * 7, 3
SIZES: dict[str, dict[str, Any]] = {
    # rows per table; rows inserted+deleted per table in l.i1 / l.i2; seconds per q step
    "tiny": {"rows_per_table": 20_000, "i1_rows": 10_000, "i2_rows": 2_000, "query_seconds": 4},
    "small": {"rows_per_table": 250_000, "i1_rows": 100_000, "i2_rows": 20_000,
              "query_seconds": 15},
    "medium": {"rows_per_table": 5_000_000, "i1_rows": 1_000_000, "i2_rows": 200_000,
               "query_seconds": 300},
    "large": {"rows_per_table": 50_000_000, "i1_rows": 10_000_000, "i2_rows": 1_000_000,
              "query_seconds": 1800},
}
COUNT_ROWS_UP_TO = 5_000_000         # count(*) the queues before/after when this small


def table(client: int) -> str:
    return f"ib_purchases_{client + 1}"


def _tmpl(name: str) -> str:
    return resources.files("pgaccel.workloads").joinpath(
        "scripts", "insertbench", f"{name}.sql").read_text().strip("\n")


def _fill(text: str, client: int, **kw: Any) -> str:
    text = text.replace("@T@", table(client)).replace("@C@", str(client))
    for k, v in kw.items():
        text = text.replace(f"@{k.upper()}@", str(v))
    return text


@dataclass
class IBConfig:
    tables: int
    rows_per_table: int
    i1_rows: int
    i2_rows: int
    query_seconds: float
    rowgen: str = "client"
    writer_rows_per_commit: int = 50
    protocol: str = "prepared"


def config(params: RunParams) -> IBConfig:
    size = option(params, "size", "small")
    if size not in SIZES:
        raise UsageError(f"size={size!r} is not an Insert Benchmark size.",
                         f"Choose one of {', '.join(SIZES)} or give rows_per_table etc.")
    base = SIZES[size]
    cfg = IBConfig(
        tables=max(1, params.clients),
        rows_per_table=option(params, "rows_per_table", base["rows_per_table"], int),
        i1_rows=option(params, "i1_rows", base["i1_rows"], int),
        i2_rows=option(params, "i2_rows", base["i2_rows"], int),
        query_seconds=option(params, "query_seconds", base["query_seconds"], float),
        rowgen=option(params, "rowgen", "client"),
        writer_rows_per_commit=option(params, "writer_rows_per_commit", 50, int),
        protocol=params.protocol)
    if cfg.rowgen not in ("server", "client"):
        raise UsageError(f"rowgen={cfg.rowgen!r}: use server or client.")
    if cfg.rows_per_table < 100 or cfg.writer_rows_per_commit < 1:
        raise UsageError("rows_per_table must be at least 100 and writer_rows_per_commit >= 1.")
    return cfg


# -- scripts (pure) ------------------------------------------------------------------------
def client_chain(clients: int, body: Callable[[int], str]) -> str:
    """``body(c)`` for the client whose :client_id is c."""
    if clients == 1:
        return body(0)
    out = []
    for c in range(clients):
        out.append(("\\if" if c == 0 else "\\elif") + f" :client_id = {c}")
        out.append(body(c))
    out.append("\\endif")
    return "\n".join(out)


def insert_statements(rows: int, rowgen: str) -> tuple[str, str]:
    """(client-side \\set prelude, the INSERT statement with @T@) for ``rows`` rows: one
    statement either way (client: values written into its text, as iibench does)."""
    if rowgen == "server":
        return "", _tmpl("insert_server").replace("@ROWS@", str(rows))
    row_sets = _tmpl("insert_client_row")
    prelude = "\n".join(row_sets.replace("@R@", str(r)) for r in range(1, rows + 1))
    vals = ", ".join(f"(now(), :cr{r}, :cu{r}, :pr{r}, :pc{r}.00, '{DATA_FIXED}:da{r}')"
                     for r in range(1, rows + 1))
    return prelude, ("INSERT INTO @T@ (dateandtime, cashregisterid, customerid, productid, "
                     f"price, data) VALUES {vals};")


def write_protocol(cfg: "IBConfig") -> str:
    """The protocol of the write steps' pgbench: simple for client rows (the values are in
    the statement text, as iibench sends them; prepared would also cap a statement at 255
    parameters), the ``protocol`` knob for server rows."""
    return "simple" if cfg.rowgen == "client" else cfg.protocol


def write_script(clients: int, rows: int, rowgen: str, *, delete: bool, pace: bool) -> str:
    """One INSERT of ``rows`` rows (and, with ``delete``, one DELETE of the ``rows`` oldest),
    optionally paced to the schedule in :next_C / :period.

    Each statement commits on its own, as iibench's inserter and deleter (two connections in
    autocommit mode) do; its DELETE has iibench's form, ``... WHERE transactionid IN (SELECT
    ... ORDER BY transactionid LIMIT rows)`` from the lowest id not yet deleted, which the
    client tracks as iibench's statement maker does.  One difference stays: iibench runs the
    two statements on separate connections at the same time, pgaccel's client one after the
    other."""
    prelude, insert = insert_statements(rows, rowgen)      # one statement either way

    def body(c: int) -> str:
        lines = []
        if pace:
            lines.append(_fill(_tmpl("pace"), c))
        lines.append(_fill(insert, c))
        if delete:
            lines.append(_fill(_tmpl("delete_oldest"), c, rows=rows))
            lines.append(f"\\set dmin_{c} :dhi_{c}")
        return "\n".join(lines)

    head = "-- generated by pgaccel: Insert Benchmark writer\n"
    return head + (prelude + "\n" if prelude else "") + client_chain(clients, body) + "\n"


def query_scripts(clients: int, kind: str) -> list[str]:
    """qr: the three index-covered range queries (one script each, chosen at random per
    query); qp: one SELECT of 10 random primary keys in [:lo_C, :hi_C]."""
    names = ["range_market", "range_register", "range_pdc"] if kind == "qr" else ["point"]
    return [f"-- generated by pgaccel: Insert Benchmark {name}\n"
            + client_chain(clients, lambda c, n=name: _fill(_tmpl(n), c)) + "\n"
            for name in names]


def writer_valid(achieved_rows_per_s: float, target_rows_per_s: float) -> bool:
    return achieved_rows_per_s >= VALID_FRACTION * target_rows_per_s


def point_bounds(lo: int, hi: int, deleted_during_step: int) -> tuple[int, int]:
    """Ids that still exist at the end of a q step: the writers delete from the low end."""
    return min(hi, lo + deleted_during_step), hi


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
        "rowgen": "client (default: iibench's multi-row INSERT, values in the statement "
                  "text) or server (INSERT ... SELECT generate_series: about half the "
                  "server's CPU per row, not the benchmark's path)",
        "writer_rows_per_commit": "rows per commit of the q-step background writers (50, as "
                                  "the benchmark's iq.sh runs them; at most the rate)",
        "steps": "comma list of steps to run (default all; a later step reuses the tables)",
    }

    def data_key(self, params: RunParams) -> dict:
        cfg = config(params)
        return {"workload": self.name, "tables": cfg.tables}

    def build(self, ctx: BenchContext, params: RunParams) -> None:
        """Nothing to prepare: l.i0 (re)creates and loads the tables."""

    def step_names(self, params: RunParams) -> list[str]:
        wanted = option(params, "steps", "")
        if not wanted:
            return list(STEPS)
        names = [s.strip() for s in wanted.split(",") if s.strip()]
        bad = [s for s in names if s not in STEPS]
        if bad:
            raise UsageError(f"Unknown Insert Benchmark step(s): {', '.join(bad)}.",
                             f"Steps: {', '.join(STEPS)}.")
        return [s for s in STEPS if s in names]

    def run_steps(self, ctx: BenchContext, params: RunParams,
                  on_progress: ProgressFn | None = None) -> list[StepResult]:
        cfg = config(params)
        out: list[StepResult] = []
        maintained = False
        for step in self.step_names(params):
            if on_progress:
                on_progress(step, 0.0)
            extra: dict[str, Any] = {}
            if step.startswith("q") and not maintained:
                extra["vacuum_checkpoint_s"] = self.vacuum_checkpoint(ctx, cfg)
                maintained = True
            res = self.run_step(ctx, cfg, step)
            res.extra.update(extra)
            out.append(res)
            if on_progress:
                on_progress(step, 1.0)
        return out

    def run_step(self, ctx: BenchContext, cfg: IBConfig, step: str) -> StepResult:
        if step == "l.i0":
            return self.load(ctx, cfg)
        if step == "l.x":
            return self.create_indexes(ctx, cfg)
        if step in ("l.i1", "l.i2"):
            total = cfg.i1_rows if step == "l.i1" else cfg.i2_rows
            return self.insert_delete(ctx, cfg, step, ROWS_PER_COMMIT[step], total)
        return self.query_step(ctx, cfg, step[:2], int(step[2:]))

    # -- steps -------------------------------------------------------------------------
    def load(self, ctx: BenchContext, cfg: IBConfig) -> StepResult:
        with ctx.connect() as conn:
            for c in range(cfg.tables):
                conn.execute(_fill(_tmpl("schema"), c))
        per_client = math.ceil(cfg.rows_per_table / ROWS_PER_COMMIT["l.i0"])
        script = write_script(cfg.tables, ROWS_PER_COMMIT["l.i0"], cfg.rowgen, delete=False,
                              pace=False)

        def body():
            r, secs = self._pgbench(ctx, cfg, [script], transactions=per_client,
                                    protocol=write_protocol(cfg))
            return r.transactions * ROWS_PER_COMMIT["l.i0"], secs, r.client
        res = measured_step(ctx, "l.i0", "inserts/s", body)
        res.extra["rows_per_commit"] = ROWS_PER_COMMIT["l.i0"]
        return res

    def create_indexes(self, ctx: BenchContext, cfg: IBConfig) -> StepResult:
        bounds = self.bounds(ctx, cfg)
        rows = sum(hi - lo + 1 for lo, hi in bounds)
        errors: list[BaseException] = []

        def one(c: int) -> None:
            try:
                with ctx.connect() as conn:
                    for stmt in _fill(_tmpl("indexes"), c).split(";"):
                        if stmt.strip():
                            conn.execute(stmt)
            except BaseException as e:  # re-raised in the caller's thread
                errors.append(e)

        def body():
            t0 = time.monotonic()
            threads = [threading.Thread(target=one, args=(c,)) for c in range(cfg.tables)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise BenchError(f"Creating the secondary indexes failed: {errors[0]}",
                                 "Check the server log (disk space, maintenance_work_mem).")
            return rows, time.monotonic() - t0, {}
        res = measured_step(ctx, "l.x", "rows/s", body)
        res.note = "3 secondary indexes per table; rows/s = table rows indexed per second"
        return res

    def insert_delete(self, ctx: BenchContext, cfg: IBConfig, step: str, rows: int,
                      total: int) -> StepResult:
        bounds = self.bounds(ctx, cfg)
        defines = {f"dmin_{c}": lo for c, (lo, _) in enumerate(bounds)}
        script = write_script(cfg.tables, rows, cfg.rowgen, delete=True, pace=False)
        check = cfg.tables * cfg.rows_per_table <= COUNT_ROWS_UP_TO
        before = self.counts(ctx, cfg) if check else None

        def body():
            r, secs = self._pgbench(ctx, cfg, [script], transactions=max(1, total // rows),
                                    defines=defines, protocol=write_protocol(cfg))
            return r.transactions * rows, secs, r.client
        res = measured_step(ctx, step, "inserts/s", body)
        res.extra.update({"rows_per_commit": rows, "deletes": res.ops})
        if check:
            after = self.counts(ctx, cfg)
            res.extra.update({"rows_before": before, "rows_after": after})
            if before != after:
                res.valid = False
                res.note = f"table sizes changed from {before} to {after}: not a fixed queue"
        return res

    def query_step(self, ctx: BenchContext, cfg: IBConfig, kind: str, rate: int) -> StepResult:
        step, secs = f"{kind}{rate}", cfg.query_seconds
        bounds = self.bounds(ctx, cfg)
        wrpc = max(1, min(cfg.writer_rows_per_commit, rate))
        period = wrpc / rate
        deleted = int(math.ceil(rate * secs * 1.2)) + wrpc
        defines: dict[str, Any] = {"period": f"{period:.6f}"}
        for c, (lo, hi) in enumerate(bounds):
            plo, phi = point_bounds(lo, hi, deleted)
            defines.update({f"dmin_{c}": lo, f"lo_{c}": plo, f"hi_{c}": phi})
        writer = write_script(cfg.tables, wrpc, cfg.rowgen, delete=True, pace=True)
        queries = query_scripts(cfg.tables, kind)
        results: dict[str, Any] = {}

        def go(key: str, scripts: list[str], clients_threads: int, defs: dict) -> None:
            try:
                results[key] = self._pgbench(
                    ctx, cfg, scripts, duration=secs, defines=defs, threads=clients_threads,
                    protocol=write_protocol(cfg) if key == "w" else None)
            except BaseException as e:
                results[key + "_error"] = e

        def body():
            with ctx.connect() as conn:
                now = float(conn.execute("SELECT extract(epoch FROM clock_timestamp())")
                            .fetchone()[0])
            wdefs = {**defines, **{f"next_{c}": f"{now:.6f}"
                                   for c in range(cfg.tables)}}
            threads = [
                threading.Thread(target=go, args=("q", queries, min(cfg.tables, ncpus()),
                                                  defines)),
                threading.Thread(target=go, args=("w", [writer], 1, wdefs))]
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
        q, (w, w_wall) = results["q"][0], results["w"]
        target = rate * cfg.tables
        # over the writer process's whole life (connections and tail included): errs low
        achieved = w.transactions * wrpc / max(secs, w_wall)
        res.latency_ms, res.series = q.latency_ms, q.tps_series
        res.valid = writer_valid(achieved, target)
        res.extra.update({"writer_target_rows_per_s": target,
                          "writer_rows_per_s": achieved,
                          "writer_fraction": achieved / target if target else None,
                          "writer_rows_per_commit": wrpc, "query_client_cpu_s":
                          q.client.get("client_cpu_s"), "writer_client_cpu_s":
                          w.client.get("client_cpu_s")})
        if not res.valid:
            res.note = (f"invalid: the writers reached {achieved:.0f} of {target} rows/s "
                        f"({achieved / target:.0%} < {VALID_FRACTION:.0%})")
        return res

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

    def _pgbench(self, ctx: BenchContext, cfg: IBConfig, scripts: list[str], *,
                 transactions: int | None = None, duration: float | None = None,
                 defines: dict | None = None, threads: int | None = None,
                 protocol: str | None = None) -> tuple[PgbenchResult, float]:
        d = tempfile.mkdtemp(prefix="pgaccel-ib-", dir=ctx.workdir)
        try:
            paths = []
            for i, text in enumerate(scripts):
                p = os.path.join(d, f"s{i}.sql")
                with open(p, "w") as f:
                    f.write(text)
                paths.append((p, 1))
            t0 = time.monotonic()
            r = run_pgbench(ctx.pgbench, ctx.bench_conninfo(), scripts=paths,
                            clients=cfg.tables,
                            threads=threads or min(cfg.tables, ncpus()),
                            transactions=transactions, duration=duration,
                            protocol=protocol or cfg.protocol, defines=defines, log=True,
                            session_options=ctx.target.session_options, workdir=ctx.workdir)
            return r, time.monotonic() - t0
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def summarize(self, results: list[StepResult]) -> dict[str, Any]:
        return {"invalid_steps": [r.step for r in results if not r.valid],
                "throughput": {r.step: r.throughput for r in results}}


INSERT_BENCHMARK = register(InsertBenchmark())
