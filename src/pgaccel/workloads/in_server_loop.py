"""The in-server query loop (study 003): how much of a client-driven rate is the client.

Three steps on pgbench's data (``pgbench -i``, shared with the built-in workloads):

``select-only``   pgbench's select-only script, client-driven: one query per round trip;
``loop-plpgsql``  ``SELECT exec_query_in_loop_plpgsql(n)``: the same query n times in PL/pgSQL;
``loop-c``        ``SELECT exec_query_in_loop(n)``: the same loop in C through SPI.

Queries per second of each, side by side: ``1 - select_only / loop_c`` is the share of a
client-driven query's cost spent outside executing it (client, protocol, network,
per-statement transaction overhead); ``loop_plpgsql / loop_c`` is the interpreter's toll.

The C function is compiled with PGXS against the *target* server's headers (its own
``pg_config``) into a directory pgaccel owns that the server's OS user can read, and created
with ``CREATE FUNCTION ... AS '/abs/path/pgaccel_loop.so'`` — nothing is installed into the
server's directories.  Without PGXS (Debian/Ubuntu: ``postgresql-server-dev-NN``), a C
compiler, superuser rights or a server on this host, the C step is skipped with the reason.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any, Iterator, Mapping

import psycopg

from ..errors import BenchError
from .base import BenchContext, RunParams, load_threads, register
from .builtin import SELECT_ONLY
from .pgbench import run_pgbench
from .steps import (PgbenchPlan, ProgressFn, RepeatPlan, StepResult, StepWorkload,
                    measured_step, option, timed_seconds)

EXT_NAME = "pgaccel_loop"
C_FUNC = "exec_query_in_loop"
PLPGSQL_FUNC = "exec_query_in_loop_plpgsql"
WARM_CAP_S = 5                       # a step's warm-up runs at most this long


class CVariantUnavailable(Exception):
    """Why the C loop cannot run here (the step is skipped with this message)."""


def _ext_file(name: str) -> str:
    return resources.files("pgaccel.workloads").joinpath("ext", name).read_text()


def pg_config_for(ctx: BenchContext, major: int) -> str:
    inst = ctx.target.inst
    if inst is None or inst.major != major:
        from ..server.discovery import find_installations
        inst = next((i for i in find_installations() if i.major == major
                     and "pg_config" in i.programs), None)
    if inst is None or "pg_config" not in inst.programs:
        raise CVariantUnavailable(
            f"pg_config of PostgreSQL {major} is not installed here; install "
            f"postgresql-server-dev-{major} (Debian/Ubuntu) to build the C loop.")
    return inst.path("pg_config")


def pgxs_available(pg_config: str, major: int) -> str:
    """The PGXS makefile path, or CVariantUnavailable naming the package to install."""
    r = subprocess.run([pg_config, "--pgxs"], capture_output=True, text=True)
    path = r.stdout.strip()
    if r.returncode != 0 or not path or not os.path.exists(path):
        raise CVariantUnavailable(
            f"PGXS is missing ({path or 'pg_config --pgxs failed'}): install the server "
            f"development files, Debian/Ubuntu: `apt-get install postgresql-server-dev-{major}`"
            " (RHEL: postgresqlNN-devel), to build the C loop.")
    return path


def ext_dir(major: int, version: str) -> str:
    """A directory this user owns and the server's OS user can read (0755), per server
    version and source: ``$TMPDIR/pgaccel-ext-<uid>/<version>-<hash>``."""
    src = _ext_file(f"{EXT_NAME}.c") + _ext_file("Makefile")
    digest = hashlib.sha256(src.encode()).hexdigest()[:12]
    root = os.path.join(tempfile.gettempdir(), f"pgaccel-ext-{os.geteuid()}")
    os.makedirs(root, mode=0o755, exist_ok=True)
    st = os.lstat(root)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise CVariantUnavailable(f"{root} is not a directory owned by this user and "
                                  "writable only by it; remove it and retry.")
    os.chmod(root, 0o755)
    return os.path.join(root, f"{version}-{digest}")


def build_extension(pg_config: str, major: int, version: str) -> str:
    """Compile pgaccel_loop.so (once per server version and source); its absolute path."""
    pgxs_available(pg_config, major)
    d = ext_dir(major, version)
    so = os.path.join(d, f"{EXT_NAME}.so")
    if os.path.exists(so):
        return so
    tmp = tempfile.mkdtemp(prefix="build-", dir=os.path.dirname(d))
    try:
        for name in (f"{EXT_NAME}.c", "Makefile"):
            with open(os.path.join(tmp, name), "w") as f:
                f.write(_ext_file(name))
        make = shutil.which("make")
        if not make:
            raise CVariantUnavailable("make is not installed (Debian/Ubuntu: build-essential).")
        r = subprocess.run([make, "-C", tmp, f"PG_CONFIG={pg_config}", "with_llvm=no"],
                           capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(os.path.join(tmp, f"{EXT_NAME}.so")):
            tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
            raise CVariantUnavailable("building the C loop failed (a C compiler is needed, "
                                      "Debian/Ubuntu: build-essential): " + " | ".join(tail))
        for name in os.listdir(tmp):
            os.chmod(os.path.join(tmp, name), 0o644)
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, d)
        except OSError:                    # built concurrently by another pgaccel
            shutil.rmtree(tmp, ignore_errors=True)
        return so
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


def install_functions(ctx: BenchContext) -> str | None:
    """Create both loop functions in the bench database; the reason when C is skipped."""
    sql = resources.files("pgaccel.workloads").joinpath(
        "scripts", "in_server_loop", "functions.sql").read_text()
    with ctx.database() as db:
        conn = db.conn
        conn.execute(sql)
        major, version = db.major, db.version.split()[0]
        try:
            if not ctx.target.is_local:
                raise CVariantUnavailable("the server is on another host; the C loop's "
                                          "library must be on the server's host.")
            so = build_extension(pg_config_for(ctx, major), major, version)
            conn.execute(f"CREATE OR REPLACE FUNCTION {C_FUNC}(bigint) RETURNS bigint "
                         f"AS '{so}', '{C_FUNC}' LANGUAGE C STRICT VOLATILE")
        except CVariantUnavailable as e:
            return str(e)
        except psycopg.errors.InsufficientPrivilege:
            return "creating a C function needs a superuser connection."
        except psycopg.Error as e:
            return f"the server could not load the C loop: {str(e).strip().splitlines()[0]}"
    return None


class InServerLoop(StepWorkload):
    name = "in-server-loop"
    summary = ("pgbench select-only beside the same query looped inside the server "
               "(PL/pgSQL and C): the client-plus-network share of each query")
    unit = "queries/s"
    common_knobs = ("threads", "warmup", "protocol")
    writes = False
    defaults = {"scale": 10, "clients": 2, "duration": 20, "warmup": 5, "n": 20000}
    knobs = {
        "scale": "pgbench scale (100,000 accounts per unit)",
        "clients": "connections, each running the loop (or the client-driven queries)",
        "duration": "seconds per step",
        "n": "queries per exec_query_in_loop(n) call (the study used 100000)",
    }

    def data_group(self) -> str:
        return SELECT_ONLY.data_group()

    def data_key(self, params: RunParams) -> dict:
        return SELECT_ONLY.data_key(params)

    def build(self, ctx: BenchContext, params: RunParams) -> None:
        SELECT_ONLY.build(ctx, params)

    def step_names(self, params: RunParams) -> list[str]:
        return ["select-only", "loop-plpgsql", "loop-c"]

    def least_seconds(self, params: RunParams) -> float:
        """The warm-up and measured seconds of select-only and loop-plpgsql; loop-c's
        too where its C function builds (not known before the run)."""
        return 2 * sum(timed_seconds(params, WARM_CAP_S))

    # each step is measured when the lab asks for it, so the variants take turns step by
    # step on servers of their own (lab/paired_steps.py)
    interleaves = True

    # in the lab, a loop step's calls take turns with the other variants' call by call
    # (a RepeatPlan each: lab/paired_repeats.py), select-only in slices (a PgbenchPlan:
    # lab/paired_pgbench.py)
    slices_queries = True

    def run_steps(self, ctx: BenchContext, params: RunParams,
                  on_progress: ProgressFn | None = None) -> list[StepResult]:
        return list(self.iter_steps(ctx, params, on_progress))

    def iter_steps(self, ctx: BenchContext, params: RunParams,
                   on_progress: ProgressFn | None = None, *,
                   plans: bool = False) -> Iterator[StepResult | RepeatPlan]:
        """The three steps in order, each measured only when the next is asked for; loop-c
        without its C function is an invalid step that says why.  With ``plans``, the loop
        steps are yielded as their :class:`RepeatPlan` (:meth:`loop_plan`) for the lab to
        run (each must have finished before the next step is asked for)."""
        from ..metrics.measure import prewarm
        n = max(1, option(params, "n", 20000, int))
        c_skip = install_functions(ctx)
        prewarm(ctx)
        for step in self.step_names(params):
            if on_progress:
                on_progress(step, 0.0)
            if step == "loop-c" and c_skip:
                yield StepResult(step=step, ops=0, seconds=0.0, throughput=0.0,
                                 unit=self.unit, valid=False, note=f"skipped: {c_skip}")
                continue
            if plans:
                yield (self.select_plan(ctx, params, on_progress) if step == "select-only"
                       else self.loop_plan(ctx, params, step, n, on_progress))
                continue
            res = self.run_one(ctx, params, step, n)
            if on_progress:
                on_progress(step, 1.0)
            yield res

    def select_plan(self, ctx: BenchContext, params: RunParams,
                    on_progress: ProgressFn | None = None) -> PgbenchPlan:
        """The select-only step as a :class:`PgbenchPlan`: pgbench's select-only with the
        step's clients, warm-up and seconds, for the lab to take in slices."""
        warm, secs = timed_seconds(params, WARM_CAP_S)

        def finish(res: StepResult) -> StepResult:
            res.extra.update({"calls": res.ops, "queries_per_call": 1})
            if on_progress:
                on_progress("select-only", 1.0)
            return res
        return PgbenchPlan("select-only", self.unit, SELECT_ONLY.pgbench_kw(ctx, params),
                           float(secs), float(warm), writes=False, finish=finish)

    def loop_plan(self, ctx: BenchContext, params: RunParams, step: str, n: int,
                  on_progress: ProgressFn | None = None) -> RepeatPlan:
        """A loop step as a :class:`RepeatPlan`: ``clients`` connections of its own, a
        warm-up of calls on all of them at once (the step's warm-up seconds), then timed
        runs, each one call of ``n`` queries on every client at once, until they add up to
        the step's seconds.  A run's rate is the sum of its clients' own rates (``n`` over
        each one's call time: a client that finished first does not wait in it), the
        step's the median run's, as pgbench's clients each calling in a loop would give."""
        func = PLPGSQL_FUNC if step == "loop-plpgsql" else C_FUNC
        sql = f"SELECT {func}(%s)"
        clients = max(1, params.clients)
        warm, secs = timed_seconds(params, WARM_CAP_S)
        held: dict[str, Any] = {"rates": []}

        def call(conn) -> float:
            t0 = time.perf_counter()
            conn.execute(sql, (n,)).fetchone()
            return time.perf_counter() - t0

        def all_at_once() -> list[float]:
            return list(held["pool"].map(call, held["conns"]))

        def start() -> None:
            held["conns"] = []
            held["pool"] = ThreadPoolExecutor(clients, thread_name_prefix="pgaccel-loop")
            for _ in range(clients):
                conn = ctx.connect()
                conn.autocommit = True
                held["conns"].append(conn)
            t_end = time.monotonic() + warm
            while time.monotonic() < t_end:
                all_at_once()

        def once() -> float:
            t0 = time.perf_counter()
            each = all_at_once()
            held["rates"].append(sum(n / t for t in each if t > 0))
            return time.perf_counter() - t0

        def abort() -> None:
            pool = held.pop("pool", None)
            if pool is not None:
                pool.shutdown(wait=True)
            for conn in held.pop("conns", []):
                conn.close()

        def finish(times: list[float], res: StepResult) -> StepResult:
            abort()
            rates = held["rates"]
            if not rates:
                raise BenchError(f"{step} completed no calls.",
                                 "Lower n (queries per call) or raise duration.")
            res.throughput = statistics.median(rates)
            res.series = list(rates)
            res.extra.update({"calls": len(rates) * clients, "queries_per_call": n,
                              "runs": len(rates), "median_s": statistics.median(times)})
            if on_progress:
                on_progress(step, 1.0)
            return res
        return RepeatPlan(step, self.unit, 3, start, once, finish, abort,
                          lambda: [c.info.backend_pid for c in held.get("conns", [])],
                          seconds=float(secs), ops_per_run=clients * n)

    def run_one(self, ctx: BenchContext, params: RunParams, step: str, n: int) -> StepResult:
        per_call = 1 if step == "select-only" else n
        d = tempfile.mkdtemp(prefix="pgaccel-loop-", dir=ctx.workdir)
        try:
            scripts = None
            if step != "select-only":
                path = os.path.join(d, "loop.sql")
                func = PLPGSQL_FUNC if step == "loop-plpgsql" else C_FUNC
                with open(path, "w") as f:
                    f.write(f"SELECT {func}(:n);\n")
                scripts = [(path, 1)]
            kw: dict[str, Any] = dict(
                builtin="select-only" if scripts is None else None, scripts=scripts,
                clients=params.clients, threads=load_threads(params.threads, params.clients),
                protocol=params.protocol, defines={"n": n} if scripts else None,
                session_options=ctx.target.session_options, workdir=ctx.workdir)
            warm, secs = timed_seconds(params, WARM_CAP_S)    # pgbench -T: exact run time
            if warm:
                run_pgbench(ctx.pgbench, ctx.bench_conninfo(), duration=warm, log=False, **kw)
            holder: dict[str, Any] = {}

            def body():
                r = run_pgbench(ctx.pgbench, ctx.bench_conninfo(), duration=secs, log=True,
                                **kw)
                holder["r"] = r
                return r.transactions * per_call, float(secs), r.client
            res = measured_step(ctx, step, self.unit, body)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        r = holder["r"]
        if r.transactions == 0:
            raise BenchError(f"{step} completed no calls in {params.duration:.0f} s.",
                             "Lower n (queries per call) or raise duration.")
        res.series = [x * per_call for x in r.tps_series]
        res.latency_ms = r.latency_ms
        res.extra.update({"calls": r.transactions, "queries_per_call": per_call})
        return res

    def summarize(self, results: list[StepResult]) -> dict[str, Any]:
        qps = {r.step: r.throughput for r in results if r.valid and r.ops}
        out: dict[str, Any] = {"queries_per_s": qps}
        so, pl, c = qps.get("select-only"), qps.get("loop-plpgsql"), qps.get("loop-c")
        share = outside_share(qps)
        if share is not None:
            out["outside_query_share"] = share
            out["outside_query_share_vs"] = "loop-c" if c else "loop-plpgsql"
        if pl and c:
            out["plpgsql_vs_c"] = pl / c
        skipped = [r.note for r in results if not r.valid]
        if skipped:
            out["skipped"] = skipped
        return out

    def conclusion(self, qps: Mapping[str, float | None]) -> str | None:
        """Study 003's point in one sentence, from one variant's QPS per step (the lab's
        rQPS table): how much of a client-driven query's time is the client and the
        network, against the same query looped inside the server."""
        share = outside_share(qps)
        if share is None:
            return None
        so, pl, c = qps.get("select-only"), qps.get("loop-plpgsql"), qps.get("loop-c")
        loop, lang = (c, "C") if c else (pl, "PL/pgSQL")
        rates = (f"pgbench's select-only ran {so:,.0f} queries/s, the same query looped "
                 f"inside the server in {lang} {loop:,.0f}/s"
                 + (f" (in PL/pgSQL {pl:,.0f}/s, {pl / c:.2f}× C's)" if pl and c else ""))
        if share <= 0:
            return f"the loop inside the server was no faster than the client: {rates}"
        return f"the client and the network took {share:.0%} of each query's time: {rates}"


def outside_share(qps: Mapping[str, float | None]) -> float | None:
    """The share of a client-driven select-only query's time spent outside the server's
    query (1 - its rate / the C loop's, else the PL/pgSQL loop's), or None without both."""
    so = qps.get("select-only")
    loop = qps.get("loop-c") or qps.get("loop-plpgsql")
    return 1 - so / loop if so and loop else None


IN_SERVER_LOOP = register(InServerLoop())
