"""Parallel sequential scan (study 002): how a scan scales with the number of workers.

Table ``pscan(id bigint, b bit(256))``.  Two queries, each timed at every degree from 0 to
``max_workers``: ``count(*)`` (I/O and tuple-visiting cost) and a CPU-heavy bit-and
predicate (``(b & mask) = mask`` on every row: more CPU per row scales further).

A degree is forced inside one transaction that is rolled back afterwards::

    SET LOCAL max_parallel_workers_per_gather = N; SET LOCAL parallel_setup_cost = 0;
    SET LOCAL parallel_tuple_cost = 0; SET LOCAL min_parallel_table_scan_size = 0;
    ALTER TABLE pscan SET (parallel_workers = N);      -- N > 0

and ``EXPLAIN (ANALYZE)`` checks that N workers were really planned and launched; a step
that ran with fewer is marked invalid with the reason (:func:`degree_problem`).  Fewer
*launched* means the server ran out of worker slots (``max_parallel_workers`` /
``max_worker_processes``).  Fewer *planned* means the planner would not take the parallel
plan at all: with ``parallel_leader_participation = off`` at one worker this always happens,
because PostgreSQL's cost model (costsize.c ``get_parallel_divisor``) then divides the scan's
CPU cost by the workers alone, i.e. by 1, so the parallel plan costs the serial one plus
the Gather and Finalize Aggregate and no setting makes it cheaper (parallel costs cannot go
below 0); that step runs, and is timed, as a serial scan.

Reported per degree: median time, speedup over the serial scan, efficiency (speedup per
participating process: the workers plus the leader when parallel_leader_participation is on)
and the worker count launched.  The summary sets the planner's own choice (EXPLAIN under the
server's settings, and the degree its size rule gives uncapped) beside the measured best, and
the ``ALTER TABLE ... SET (parallel_workers = N)`` that would pin it.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any, Callable, Iterator, Mapping

import psycopg

from ..errors import BenchError, UsageError
from ..metrics.system import ncpus
from .base import BenchContext, RunParams, register
from .steps import ProgressFn, RepeatPlan, StepResult, StepWorkload, option, run_repeats

TABLE = "pscan"
BITS = 256
MASK_POSITIONS = (3, 41, 77, 110, 150, 181, 219, 250)   # 8 bits set: 1 row in 256 matches
MASK = "".join("1" if i in MASK_POSITIONS else "0" for i in range(BITS))
QUERIES = {
    "count": f"SELECT count(*) FROM {TABLE}",
    "bitand": f"SELECT count(*) FROM {TABLE} WHERE (b & B'{MASK}') = B'{MASK}'",
}


def plan_workers(plan_json: Any) -> tuple[int, int | None]:
    """(Workers Planned, Workers Launched) summed over Gather nodes of an EXPLAIN JSON."""
    planned, launched, seen = 0, 0, False

    def walk(node: dict) -> None:
        nonlocal planned, launched, seen
        if "Workers Planned" in node:
            planned += int(node["Workers Planned"])
        if "Workers Launched" in node:
            seen = True
            launched += int(node["Workers Launched"])
        for child in node.get("Plans", []):
            walk(child)

    doc = plan_json[0] if isinstance(plan_json, list) else plan_json
    walk(doc["Plan"])
    return planned, (launched if seen else None)


def degrees_for(params: RunParams) -> list[int]:
    text = option(params, "degrees", "")
    if text:
        try:
            ds = sorted({int(x) for x in str(text).split(",") if x.strip()})
        except ValueError:
            raise UsageError(f"degrees={text!r}: give worker counts like 0,1,2,4.") from None
        if not ds or ds[0] < 0:
            raise UsageError("degrees must be worker counts >= 0.")
        return ds if ds[0] == 0 else [0] + ds
    return list(range(0, option(params, "max_workers", ncpus(), int) + 1))


def speedup_table(medians: dict[int, float], leader: bool) -> dict[int, dict[str, float]]:
    """Per degree: speedup over degree 0 and efficiency per participating process."""
    base = medians.get(0)
    out: dict[int, dict[str, float]] = {}
    for d, t in sorted(medians.items()):
        sp = base / t if base and t else float("nan")
        procs = d + 1 if (leader or d == 0) else d
        out[d] = {"speedup": sp, "efficiency": sp / procs}
    return out


def force_degree_sql(degree: int) -> list[str]:
    """Statements (inside a transaction) that make the next scan use exactly ``degree``."""
    sql = [f"SET LOCAL max_parallel_workers_per_gather = {degree}",
           "SET LOCAL parallel_setup_cost = 0", "SET LOCAL parallel_tuple_cost = 0",
           "SET LOCAL min_parallel_table_scan_size = 0"]
    if degree > 0:
        sql.append(f"ALTER TABLE {TABLE} SET (parallel_workers = {degree})")
    return sql


def degree_problem(degree: int, planned: int, launched: int, leader: bool,
                   limit: int) -> str | None:
    """Why a step forced to ``degree`` workers did not run with that many (None: it did).

    ``planned``/``launched``: the Gather's Workers Planned/Launched; ``leader``:
    parallel_leader_participation; ``limit``: max_parallel_workers."""
    if planned != degree:
        ran = "a serial scan" if planned == 0 else f"{planned} workers"
        if not leader and degree == 1 and planned == 0:
            why = ("with parallel_leader_participation = off PostgreSQL's cost model "
                   "(get_parallel_divisor) divides the scan's CPU cost by the workers only, "
                   "i.e. by 1, so a one-worker parallel plan never costs less than the serial "
                   "plan and no setting can force it; not a worker-slot limit")
        else:
            why = (f"the planner did not take the forced plan (max_parallel_workers_per_gather "
                   f"and parallel_workers = {degree}, parallel costs 0)")
        return (f"asked for {degree} worker{'s' if degree != 1 else ''}, {planned} planned: "
                f"this step timed {ran}, not degree {degree}; {why}")
    if launched != degree:
        return (f"asked for {degree} workers, {launched} launched "
                f"(max_parallel_workers={limit}; raise it and max_worker_processes)")
    return None


class ParallelScan(StepWorkload):
    name = "parallel-scan"
    summary = ("Parallel seq scan: count(*) and a bit-and predicate at 0..N workers; speedup, "
               "efficiency, the planner's degree beside the measured best")
    unit = "queries/s"
    common_knobs = ()
    writes = False
    defaults = {"rows": 2_000_000, "repeats": 3}
    knobs = {
        "rows": "rows in pscan (about 75 bytes each: 2,000,000 is ~150 MB)",
        "max_workers": "largest degree tried (default: the number of CPUs)",
        "degrees": "explicit comma list of degrees instead (0 is always included)",
        "repeats": "timed runs per degree (the median counts)",
        "queries": "comma list of: count, bitand (default both)",
    }

    def data_key(self, params: RunParams) -> dict:
        return {"workload": self.name, "rows": option(params, "rows", 2_000_000, int),
                "bits": BITS}

    def required_settings(self, params: RunParams) -> dict[str, str]:
        top = max(degrees_for(params))
        return {"max_worker_processes": str(max(8, top + 2)),
                "max_parallel_workers": str(max(8, top))}

    def step_names(self, params: RunParams) -> list[str]:
        return [f"{q}@{d}" for q in self.queries(params) for d in degrees_for(params)]

    def queries(self, params: RunParams) -> list[str]:
        qs = [q.strip() for q in str(option(params, "queries", "count,bitand")).split(",")
              if q.strip()]
        bad = [q for q in qs if q not in QUERIES]
        if bad or not qs:
            raise UsageError(f"queries={','.join(qs)}: choose from {', '.join(QUERIES)}.")
        return qs

    def build(self, ctx: BenchContext, params: RunParams) -> None:
        rows = option(params, "rows", 2_000_000, int)
        with ctx.connect() as conn:
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
            conn.execute(f"CREATE TABLE {TABLE} (id bigint NOT NULL, b bit({BITS}) NOT NULL)")
            conn.execute(f"INSERT INTO {TABLE} SELECT g, ('x' || md5(g::text) || "
                         f"md5((g::bigint * 7919)::text))::bit({BITS}) FROM generate_series(1, %s) g",
                         (rows,))
            conn.execute(f"VACUUM (ANALYZE) {TABLE}")

    # -- measuring ---------------------------------------------------------------------
    # each degree is measured when the lab asks for it, so the variants take turns degree
    # by degree on servers of their own (lab/paired_steps.py)
    interleaves = True

    # in the lab, a degree's timed runs take turns with the other variants' run by run
    # (a RepeatPlan each: lab/paired_repeats.py)
    slices_queries = True

    def run_steps(self, ctx: BenchContext, params: RunParams,
                  on_progress: ProgressFn | None = None) -> list[StepResult]:
        return list(self.iter_steps(ctx, params, on_progress))

    def iter_steps(self, ctx: BenchContext, params: RunParams,
                   on_progress: ProgressFn | None = None, *,
                   plans: bool = False) -> Iterator[StepResult | RepeatPlan]:
        """Every query at every degree, in :meth:`step_names`' order, each measured only
        when the next is asked for; with ``plans``, each step is yielded as its
        :class:`RepeatPlan` instead, for the lab to run (it must have finished before the
        next step is asked for: a degree's speed-up is over that query's serial scan)."""
        repeats = max(1, option(params, "repeats", 3, int))
        degrees = degrees_for(params)
        with ctx.database() as db:
            self._prewarm(db)
            limit = int(db.show("max_parallel_workers") or 8)
            leader = db.show("parallel_leader_participation") == "on"
        for q in self.queries(params):
            planner = self.planner_choice(ctx, q)
            serial: list[float] = []          # this query's serial median, once measured
            for d in degrees:
                step = f"{q}@{d}"

                def complete(res: StepResult, d: int = d, step: str = step) -> StepResult:
                    med = res.extra["median_s"]
                    if d == 0:
                        serial[:] = [med]
                    sp = speedup_table({0: serial[0] if serial else med, d: med}, leader)[d]
                    res.extra.update({**sp, **planner})
                    problem = degree_problem(d, res.extra["workers_planned"],
                                             res.extra["workers_launched"], leader, limit)
                    if problem:
                        res.valid = False
                        res.note = problem
                    if on_progress:
                        on_progress(step, 1.0)
                    return res
                if on_progress:
                    on_progress(step, 0.0)
                plan = self.degree_plan(ctx, q, d, repeats, then=complete)
                yield plan if plans else run_repeats(ctx, plan)

    def measure_degree(self, ctx: BenchContext, query: str, degree: int,
                       repeats: int) -> StepResult:
        """``repeats`` timed runs of ``query`` at ``degree`` on one server, as one step."""
        return run_repeats(ctx, self.degree_plan(ctx, query, degree, repeats))

    def degree_plan(self, ctx: BenchContext, query: str, degree: int, repeats: int, *,
                    then: Callable[[StepResult], StepResult] = lambda r: r) -> RepeatPlan:
        """One degree's step as a :class:`RepeatPlan`: a connection of its own with the
        degree forced, a warm-up run (which gives the answer), then timed runs; at the end
        EXPLAIN ANALYZE says the workers planned and launched; ``then`` completes it."""
        sql = QUERIES[query]
        held: dict[str, Any] = {}

        def start() -> None:
            conn = held["conn"] = ctx.connect()
            conn.autocommit = False
            for s in force_degree_sql(degree):
                conn.execute(s)
            held["pid"] = conn.info.backend_pid
            held["answer"] = conn.execute(sql).fetchone()[0]     # warm-up, and the answer

        def once() -> float:
            t0 = time.perf_counter()
            held["conn"].execute(sql).fetchone()
            return time.perf_counter() - t0

        def abort() -> None:
            conn = held.pop("conn", None)
            if conn is not None:
                conn.close()

        def finish(times: list[float], res: StepResult) -> StepResult:
            conn = held["conn"]
            try:
                plan = conn.execute(f"EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) {sql}"
                                    ).fetchone()[0]
                conn.rollback()
            finally:
                abort()
            planned, launched = plan_workers(plan if not isinstance(plan, str)
                                             else json.loads(plan))
            med = statistics.median(times)
            res.throughput = 1.0 / med if med else 0.0
            res.extra.update({"query": query, "degree": degree, "median_s": med,
                              "times_s": list(times), "workers_planned": planned,
                              "workers_launched": launched if launched is not None else 0,
                              "answer": held.get("answer")})
            return then(res)
        return RepeatPlan(f"{query}@{degree}", "queries/s", repeats, start, once, finish,
                          abort, lambda: [held.get("pid")])

    def planner_choice(self, ctx: BenchContext, query: str) -> dict[str, int]:
        """Workers the planner picks by itself: under the server's settings, and by its
        table-size rule alone (per-gather cap lifted)."""
        out = {}
        with ctx.connect() as conn:
            conn.autocommit = False
            plan = conn.execute(f"EXPLAIN (FORMAT JSON) {QUERIES[query]}").fetchone()[0]
            out["planner_degree"] = plan_workers(plan)[0]
            conn.execute("SET LOCAL max_parallel_workers_per_gather = 1024")
            plan = conn.execute(f"EXPLAIN (FORMAT JSON) {QUERIES[query]}").fetchone()[0]
            out["size_rule_degree"] = plan_workers(plan)[0]
            conn.rollback()
        return out

    def _prewarm(self, db) -> None:
        conn = db.conn
        if not db.ensure_extension("pg_prewarm"):
            conn.execute(QUERIES["count"])               # no pg_prewarm: one scan instead
            return
        try:
            conn.execute(f"SELECT pg_prewarm('{TABLE}', 'read')")
            conn.execute(f"SELECT pg_prewarm('{TABLE}', 'buffer')")
        except psycopg.errors.UndefinedTable:
            raise BenchError(f"Table {TABLE} is missing.", "Prepare the workload first.")

    def summarize(self, results: list[StepResult]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for q in dict.fromkeys(r.extra["query"] for r in results):
            rs = [r for r in results if r.extra["query"] == q and r.valid]
            if not rs:
                continue
            best = min(rs, key=lambda r: r.extra["median_s"])
            d = best.extra["degree"]
            out[q] = {"planner_degree": best.extra.get("planner_degree"),
                      "size_rule_degree": best.extra.get("size_rule_degree"), "best_degree": d,
                      "best_speedup": best.extra["speedup"],
                      "best_median_s": best.extra["median_s"],
                      "pin": (f"ALTER TABLE {TABLE} SET (parallel_workers = {d});"
                              + (f" -- and max_parallel_workers_per_gather >= {d}" if d else
                                 " -- serial is fastest: or max_parallel_workers_per_gather=0"))}
        return out

    def conclusion(self, qps: Mapping[str, float | None]) -> str | None:
        """Study 002's point in one sentence, from one variant's QPS per step (the lab's
        rQPS table): per query, the degree that ran fastest and its speed-up over the
        serial scan."""
        by_query: dict[str, dict[int, float]] = {}
        for step, x in qps.items():
            q, _, d = step.rpartition("@")
            if q and d.isdigit() and x:
                by_query.setdefault(q, {})[int(d)] = x
        said = []
        for q, rates in by_query.items():
            best = max(rates, key=lambda d: rates[d])
            # degrees within 2% of the best are named with it: not told apart here
            close = sorted(d for d in rates if d != best and rates[d] >= 0.98 * rates[best])
            serial = rates.get(0)
            said.append(f"{q} fastest {'serial' if best == 0 else f'at degree {best}'}"
                        + (f", {rates[best] / serial:.2f}× the serial scan's rate"
                           if serial and best else "")
                        + (f" (within 2%: {', '.join(map(degree_name, close))})"
                           if close else ""))
        return "; ".join(said) or None


def degree_name(d: int) -> str:
    return "serial" if d == 0 else f"degree {d}"


PARALLEL_SCAN = register(ParallelScan())
