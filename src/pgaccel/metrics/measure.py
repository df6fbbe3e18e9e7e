"""Measuring one interval on a server: cache state before it (CHECKPOINT, pg_prewarm) and
everything it costs (:class:`Measure`: server process tree, host, PostgreSQL counters, wait
events sampled at ~10 Hz by :class:`WaitSampler`, how fast the CPUs ran by
``hostspeed.SpeedProbe``), with per-operation costs.

Used by the trial runner (``lab/trial.py``) and by step workloads (``workloads/steps.py``)
alike; it knows a target and a bench context, nothing of experiments.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any, Protocol

import psycopg

from ..server.cluster import BENCH_DB
from ..server.database import Database
from ..server.target import Target
from . import system as sysmetrics
from .pg import delta as pg_delta
from .hostspeed import SpeedProbe
from .registry import per_op_costs


class BenchContext(Protocol):
    """What measuring needs of a workload's context (``workloads.base.BenchContext`` is
    one): the target, and a connection to the bench database."""

    target: Target

    def connect(self) -> psycopg.Connection: ...


# -- cache state -------------------------------------------------------------------------
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
    with Database(ctx.connect()) as db:
        if not db.ensure_extension("pg_prewarm"):
            return {"prewarm": "unavailable (install the PostgreSQL contrib package)"}
        rels = db.relations()
        blocks = 0
        for mode in ("read", "buffer"):
            for rel in rels:
                blocks += db.conn.execute("SELECT pg_prewarm(%s::regclass, %s)",
                                          (rel, mode)).fetchone()[0]
    return {"prewarm_s": time.monotonic() - t0, "prewarm_blocks": blocks}


# -- wait events ---------------------------------------------------------------------------
class WaitSampler:
    """Samples pg_stat_activity for active client backends at ~10 Hz in a thread, and
    once a second the checkpoint counters: ``checkpoint_s`` holds the seconds (since the
    sampler started) by which a checkpoint that wrote buffers, or one that was requested,
    had ended (the counters change when a checkpoint completes)."""

    def __init__(self, target: Target, interval: float = 0.1):
        self.target, self.interval = target, interval
        self.counts: Counter[str] = Counter()
        self.samples = 0
        self.checkpoint_s: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "WaitSampler":
        try:
            self._conn = self.target.connect(BENCH_DB)
        except Exception:
            self._conn = None
            return self
        self._db = Database(self._conn)
        self._t0 = time.monotonic()
        self._ckpt = self._checkpoints()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _checkpoints(self) -> tuple | None:
        """(requested, buffers written) now, or None where unknown."""
        if self._conn is None:
            return None
        try:
            row = self._db.checkpoint_counts()
        except psycopg.Error:
            return None
        return (row["requested"], row["buffers_written"]) if row else None

    def _loop(self) -> None:
        assert self._conn is not None
        next_ckpt = self._t0 + 1.0
        while not self._stop.wait(self.interval):
            try:
                rows = self._db.active_waits()
            except psycopg.Error:
                return
            self.samples += 1
            for etype, event in rows:
                self.counts[f"{etype}:{event}" if etype != "CPU" else "CPU"] += 1
            now = time.monotonic()
            if now >= next_ckpt:
                next_ckpt = now + 1.0
                ck = self._checkpoints()
                if ck is not None and self._ckpt is not None and ck != self._ckpt:
                    self.checkpoint_s.append(round(now - self._t0, 1))
                self._ckpt = ck if ck is not None else self._ckpt

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
            self.pg_before = Database(conn).counters()
        self.tree = sysmetrics.TreeWatcher(self.pid) if self.pid else None
        self.tree_before = self.tree.start() if self.tree else None
        # a server on another machine named with --server-host: its host's counters over SSH
        self.remote = getattr(target, "server_host", None)
        if self.remote is not None:
            from .serverhost import server_snapshot
            self.remote_before = server_snapshot(self.remote, target.server_pm)
            self._remote_t0 = time.monotonic()
        self.sys_before = sysmetrics.system_snapshot()
        self.sampler = WaitSampler(target) if self.sample_waits else None
        if self.sampler:
            self.sampler.__enter__()
        self.probe = SpeedProbe().__enter__()
        self.started = time.time()
        return self

    def __exit__(self, *exc) -> None:
        self.probe.__exit__(*exc)
        if self.sampler:
            self.sampler.__exit__(*exc)
        self.sys_after = sysmetrics.system_snapshot()
        self.tree_before, self.tree_after = (self.tree.stop() if self.tree
                                             else (None, None))
        if self.remote is not None:
            from .serverhost import server_snapshot
            self.remote_after = server_snapshot(self.remote, self.ctx.target.server_pm)
            self._remote_s = time.monotonic() - self._remote_t0
        if exc[0] is None:
            with self.ctx.connect() as conn:
                self.pg_after = Database(conn).counters()

    def metrics(self, ops: int, client: dict[str, Any] | None = None) -> dict[str, Any]:
        m: dict[str, Any] = {
            **(client or {}),
            **sysmetrics.tree_delta(self.tree_before, self.tree_after),
            **sysmetrics.system_delta(self.sys_before, self.sys_after),
            "pg": pg_delta(self.pg_before, self.pg_after),
        }
        if self.remote is not None:
            from .serverhost import snapshot_delta
            m.update(snapshot_delta(self.remote_before, self.remote_after, self._remote_s))
        return with_samples(m, self.sampler, self.probe, ops)


def with_samples(m: dict[str, Any], sampler: "WaitSampler | None", probe: SpeedProbe | None,
                 ops: int) -> dict[str, Any]:
    """A trial's counters ``m`` completed, as every way of measuring records them: the wait
    events and checkpoints the sampler saw, the CPU speed probe's median, and the costs per
    operation (:func:`per_op_costs`)."""
    if sampler:
        m["waits"] = sampler.top()
        m["wait_samples"] = sampler.samples
        m["checkpoint_s"] = list(sampler.checkpoint_s)
    m["cpu_probe_us"] = probe.median_us() if probe is not None else None
    if probe is not None:
        m["cpu_probe_cpu"] = probe.cpu
    m.update(per_op_costs(m, ops))
    return m
