"""One trial: a variant's settings in effect, data and caches in a known state, a warm-up,
then one measured interval with every cost counted.

Every trial starts the same way, whatever ran before it:

1. the server is restarted with the variant's settings (shared buffers start empty) and the
   settings are checked in pg_settings;
2. for a workload that writes, the bench database is re-created from its template, so
   every trial starts from the same rows (copying a template is seconds where a fresh
   ``pgbench -i`` is minutes, and needs no extra space beyond the template);
3. ``CHECKPOINT``, then every relation is read through the OS page cache and into shared
   buffers with pg_prewarm (``read`` then ``buffer``) — this VM evicts cold page cache
   within about a minute, so without it the previous trial decides what is cached;
4. a warm-up that is not counted, ended once the per-second rate is steady;
5. the measured run, with wait events sampled at about 10 Hz.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import psycopg

from ..errors import BenchError, ServerError
from ..metrics import pg as pgmetrics
from ..metrics import system as sysmetrics
from ..server.cluster import BENCH_DB
from ..server.target import TEMPLATE_DB, Target
from ..workloads.base import BenchContext, RunParams, RunResult, Workload
from .settings import verify_settings
from .stats import is_steady, steady_state


@dataclass
class TrialSpec:
    variant: str
    settings: dict[str, object]
    workload: Workload
    params: RunParams
    round: int = 0


@dataclass
class Trial:
    variant: str
    workload: str
    round: int
    clients: int
    started_at: float
    throughput: float
    unit: str
    metrics: dict[str, Any] = field(default_factory=dict)
    series: list[float] = field(default_factory=list)
    latency_series: list[float] = field(default_factory=list)
    warmup_s: float = 0.0
    not_applied: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def steady(series: list[float], window: int = 5, tolerance: float = 0.08) -> bool:
    """Warm-up stop rule: the last ``window`` per-second rates vary by less than
    ``tolerance`` (CV) with no significant drift (see stats.is_steady)."""
    return is_steady(series, tolerance, window=window)


# -- data and cache state ------------------------------------------------------------------
def snapshot_template(target: Target) -> None:
    """Copy the prepared bench database to its template (after prepare)."""
    with target.connect() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE_DB}"')
        _terminate(conn, BENCH_DB)
        conn.execute(f'CREATE DATABASE "{TEMPLATE_DB}" TEMPLATE "{BENCH_DB}"')


def restore_from_template(target: Target) -> None:
    with target.connect() as conn:
        _terminate(conn, BENCH_DB)
        conn.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}"')
        conn.execute(f'CREATE DATABASE "{BENCH_DB}" TEMPLATE "{TEMPLATE_DB}"')


def _terminate(conn: psycopg.Connection, db: str) -> None:
    conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                 "WHERE datname = %s AND pid <> pg_backend_pid()", (db,))


def checkpoint(ctx: BenchContext) -> bool:
    """CHECKPOINT, so every trial starts without dirty buffers from the one before.  On a
    --dsn server the user may lack the right (superuser or pg_checkpoint on 15+): then the
    trial goes on without it, and says so in its metrics."""
    with ctx.connect() as conn:
        try:
            conn.execute("CHECKPOINT")
            return True
        except psycopg.errors.InsufficientPrivilege:
            return False


def prewarm(ctx: BenchContext) -> dict[str, Any]:
    """Read every bench relation into the OS cache, then into shared buffers."""
    t0 = time.monotonic()
    with ctx.connect() as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        except psycopg.Error:
            return {"prewarm": "unavailable (install the PostgreSQL contrib package)"}
        rels = [r[0] for r in conn.execute(
            "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname NOT IN ('pg_catalog', "
            "'information_schema', 'pg_toast') AND c.relkind IN ('r', 'i', 'm') "
            "ORDER BY pg_relation_size(c.oid) DESC").fetchall()]
        blocks = 0
        for mode in ("read", "buffer"):
            for rel in rels:
                blocks += conn.execute("SELECT pg_prewarm(%s::regclass, %s)",
                                       (rel, mode)).fetchone()[0]
    return {"prewarm_s": time.monotonic() - t0, "prewarm_blocks": blocks}


# -- wait events ---------------------------------------------------------------------------
class WaitSampler:
    """Samples pg_stat_activity for active client backends at ~10 Hz in a thread."""

    def __init__(self, target: Target, interval: float = 0.1):
        self.target, self.interval = target, interval
        self.counts: Counter[str] = Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "WaitSampler":
        try:
            self._conn = self.target.connect(BENCH_DB)
        except Exception:
            self._conn = None
            return self
        major = self._conn.info.server_version // 10000
        self._sql = pgmetrics.wait_event_sql(major)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        assert self._conn is not None
        while not self._stop.wait(self.interval):
            try:
                rows = self._conn.execute(self._sql).fetchall()
            except psycopg.Error:
                return
            self.samples += 1
            for etype, event in rows:
                self.counts[f"{etype}:{event}" if etype != "CPU" else "CPU"] += 1

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=2)
        if self._conn is not None:
            self._conn.close()

    def top(self, n: int = 5) -> list[dict[str, Any]]:
        total = sum(self.counts.values()) or 1
        return [{"event": k, "samples": v, "share": v / total}
                for k, v in self.counts.most_common(n)]


class Measure:
    """Counts what happens between ``__enter__`` and ``__exit__``: server process-tree CPU,
    context switches and I/O; host CPU, context switches and disk bytes; PostgreSQL WAL,
    checkpoint and database counters; wait events sampled at ~10 Hz.

    ``metrics(ops, client)`` returns the totals plus per-operation costs; ``client`` is the
    load generator's rusage summary (client_cpu_s, client_ctx_switches) when known."""

    def __init__(self, ctx: BenchContext, sample_waits: bool = True):
        self.ctx, self.sample_waits = ctx, sample_waits
        self.started = 0.0

    def __enter__(self) -> "Measure":
        target = self.ctx.target
        self.pid = target.postmaster_pid()
        with self.ctx.connect() as conn:
            self.pg_before = pgmetrics.snapshot(conn)
        self.tree_before = sysmetrics.tree_snapshot(self.pid) if self.pid else None
        self.sys_before = sysmetrics.system_snapshot()
        self.sampler = WaitSampler(target) if self.sample_waits else None
        if self.sampler:
            self.sampler.__enter__()
        self.started = time.time()
        return self

    def __exit__(self, *exc) -> None:
        if self.sampler:
            self.sampler.__exit__(*exc)
        self.sys_after = sysmetrics.system_snapshot()
        self.tree_after = sysmetrics.tree_snapshot(self.pid) if self.pid else None
        if exc[0] is None:
            with self.ctx.connect() as conn:
                self.pg_after = pgmetrics.snapshot(conn)

    def metrics(self, ops: int, client: dict[str, Any] | None = None) -> dict[str, Any]:
        m: dict[str, Any] = {
            **(client or {}),
            **sysmetrics.tree_delta(self.tree_before, self.tree_after),
            **sysmetrics.system_delta(self.sys_before, self.sys_after),
            "pg": pgmetrics.delta(self.pg_before, self.pg_after),
        }
        if self.sampler:
            m["waits"] = self.sampler.top()
            m["wait_samples"] = self.sampler.samples
        m.update(per_op_costs(m, ops))
        return m


# -- the trial -----------------------------------------------------------------------------
def run_trial(ctx: BenchContext, spec: TrialSpec, *, restart: bool = True,
              on_progress: Callable[[str, float], None] | None = None) -> Trial:
    target, wl, params = ctx.target, spec.workload, spec.params
    note = on_progress or (lambda phase, frac: None)
    not_applied: list[str] = []
    if restart or target.settings != spec.settings:
        note("restart", 0.0)
        not_applied = target.apply(spec.settings)
    mismatches = verify_settings(target, {k: v for k, v in spec.settings.items()
                                          if k not in not_applied})
    if mismatches:
        raise ServerError(
            f"Variant {spec.variant!r} is not what it claims: "
            + "; ".join(f"{m['name']} is {m['actual']!r}, expected {m['expected']!r}"
                        for m in mismatches),
            "A setting did not take effect (overridden elsewhere, or needs a restart this "
            "target cannot do); the variant is not measured.")
    if wl.writes:
        restore_from_template(target)
    checkpointed = checkpoint(ctx)
    note("prewarm", 0.0)
    warm_info = {**prewarm(ctx), "checkpoint": checkpointed}
    note("warm-up", 0.0)
    t_w = time.monotonic()
    if params.warmup >= 1:  # pgbench -T needs whole seconds; 0 means no warm-up
        wl.run(ctx, params, params.warmup, stop_when=lambda s: steady(s), log=False)
    warmup_s = time.monotonic() - t_w

    note("measure", 0.0)
    with Measure(ctx) as meas:
        res: RunResult = wl.run(ctx, params, params.duration,
                                on_progress=lambda t, v: note("measure", t / params.duration))
    if res.ops == 0:
        raise BenchError(f"{wl.name} completed no operations in {params.duration:.0f} s.",
                         "Look at the server log; the server may be overloaded or stuck.")
    lo, hi = steady_state(res.series)
    steady_part = res.series[lo:hi]
    throughput = (sum(steady_part) / len(steady_part)) if steady_part else res.throughput
    m: dict[str, Any] = {
        "throughput": throughput, "throughput_all": res.throughput,
        "steady_range": [lo, hi], "ops": res.ops, "duration_s": res.duration_s,
        "failed": res.failed, "latency_ms": res.latency_ms,
        **meas.metrics(res.ops, res.client), **warm_info, **res.extra,
    }
    from ..workloads.steps import warnings_for
    m["warnings"] = list(dict.fromkeys([*(res.extra.get("warnings") or []), *warnings_for(m)]))
    started = meas.started
    return Trial(variant=spec.variant, workload=wl.name, round=spec.round,
                 clients=params.clients, started_at=started, throughput=throughput,
                 unit=wl.unit, metrics=m, series=res.series,
                 latency_series=res.latency_series, warmup_s=warmup_s,
                 not_applied=not_applied)


def per_op_costs(m: dict[str, Any], ops: int) -> dict[str, Any]:
    """Costs per operation: CPU in microseconds, I/O in KB, WAL in bytes."""
    out: dict[str, Any] = {}
    if ops <= 0:
        return out
    if "server_cpu_s" in m:
        out["server_cpu_us_per_op"] = m["server_cpu_s"] * 1e6 / ops
    if "client_cpu_s" in m:
        out["client_cpu_us_per_op"] = m["client_cpu_s"] * 1e6 / ops
    if "server_cpu_s" in m and "client_cpu_s" in m:
        tot = m["server_cpu_s"] + m["client_cpu_s"]
        out["client_cpu_share"] = m["client_cpu_s"] / tot if tot else None
    if "host_ctx_switches" in m:
        out["ctx_switches_per_op"] = m["host_ctx_switches"] / ops
    if "disk_read_bytes" in m:
        out["read_kb_per_op"] = m["disk_read_bytes"] / 1024 / ops
        out["write_kb_per_op"] = m["disk_write_bytes"] / 1024 / ops
    wal = m.get("pg", {}).get("wal_bytes")
    if wal is not None:
        out["wal_bytes_per_op"] = wal / ops
    return out
