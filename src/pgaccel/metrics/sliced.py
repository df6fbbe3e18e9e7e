"""Measuring a server that works in slices: what :class:`~pgaccel.metrics.measure.Measure`
counts, added up over the slices only.

Two servers side by side (``lab/paired.py``) take turns: while one works, the other's load
generator is stopped.  Counted over the whole round, each server's host CPU would hold the
other's work as "other processes" (metrics/noise.py would call every trial noisy) and its
load generator's CPU would hold its warm-up.  So the server's process tree, the host and the
load generator's own CPU are read at the edges of each of its slices and the differences
added; PostgreSQL's counters and the wait-event sampler span from the first slice to the last
(between slices the server is idle but for its background work).  The CPU speed probe
samples during the server's own slices only: spanning the round, every config's probe timed
the same seconds and the same round showed slow in all of them alike.

With ``server_spans`` the server's process tree is instead counted from the first slice's
start until the measure is closed (``metrics.system.TreeWatcher``): for a load that leaves background work behind (checkpoints,
autovacuum, WAL writing, while the other servers take their turns) every second of that
server's work is its load's, and counting its own slices only would drop whatever fell in
the others'.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from ..server.database import Database
from .pg import delta as pg_delta
from . import system as sysmetrics
from .hostspeed import SpeedProbe
from .measure import BenchContext, WaitSampler, with_samples


def _add(total: dict[str, Any], part: dict[str, Any]) -> None:
    for k, v in part.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            total[k] = total.get(k, 0) + v


class SlicedMeasure:
    """``with SlicedMeasure(ctx, client_cpu) as m:`` then ``m.begin()`` / ``m.end()`` around
    each slice; ``metrics(ops)`` as ``Measure.metrics``.  ``client_cpu()`` returns the load
    generator's (CPU seconds, context switches) so far."""

    def __init__(self, ctx: BenchContext, client_cpu: Callable[[], tuple[float, int]],
                 speed_probe: bool = True, *, server_spans: bool = False):
        self.ctx, self.client_cpu, self.speed_probe = ctx, client_cpu, speed_probe
        self.server_spans = server_spans
        self._watch: sysmetrics.TreeWatcher | None = None     # server_spans: from slice 1
        self.started = 0.0
        self.slices = 0
        self._tree: dict[str, Any] = {}
        self._sys: dict[str, Any] = {}
        self._client = [0.0, 0]
        self._edge: tuple | None = None

    def __enter__(self) -> "SlicedMeasure":
        self.pid = self.ctx.target.postmaster_pid()
        with self.ctx.connect() as conn:
            self.pg_before = Database(conn).counters()
        self.sampler = WaitSampler(self.ctx.target).__enter__()
        self.probe = SpeedProbe(paused=True).__enter__() if self.speed_probe else None
        self.started = time.time()
        return self

    def begin(self) -> None:
        if self.server_spans and self._watch is None and self.pid:
            # exited backends' context switches too, as Measure counts them
            self._watch = sysmetrics.TreeWatcher(self.pid)
            self._watch.start()
        self._edge = (None if self.server_spans or not self.pid
                      else sysmetrics.tree_snapshot(self.pid),
                      sysmetrics.system_snapshot(), self.client_cpu())
        if self.probe is not None:
            self.probe.resume()

    def end(self) -> None:
        if self.probe is not None:
            self.probe.pause()
        if self._edge is None:
            return
        tree0, sys0, (cpu0, ctx0) = self._edge
        self._edge = None
        tree1 = None if tree0 is None else sysmetrics.tree_snapshot(self.pid)
        sys1 = sysmetrics.system_snapshot()
        cpu1, ctx1 = self.client_cpu()
        if not self.server_spans:
            _add(self._tree, sysmetrics.tree_delta(tree0, tree1))
        _add(self._sys, sysmetrics.system_delta(sys0, sys1))
        self._client[0] += max(0.0, cpu1 - cpu0)
        self._client[1] += max(0, ctx1 - ctx0)
        self.slices += 1

    def __exit__(self, *exc) -> None:
        if getattr(self, "_closed", False):        # ended early by its owner: once only
            return
        self._closed = True
        if self._watch is not None:
            self._tree = {}
            _add(self._tree, sysmetrics.tree_delta(*self._watch.stop()))
        if self.probe is not None:
            self.probe.__exit__(*exc)
        self.sampler.__exit__(*exc)
        self.pg_after = None
        if exc[0] is None:
            with self.ctx.connect() as conn:
                self.pg_after = Database(conn).counters()

    def checkpoints_monotonic(self) -> list[float]:
        """When (time.monotonic()) the wait sampler saw checkpoints end."""
        t0 = getattr(self.sampler, "_t0", None)
        return [] if t0 is None else [t0 + c for c in self.sampler.checkpoint_s]

    def metrics(self, ops: int) -> dict[str, Any]:
        s = dict(self._sys)
        if s.get("host_cpu_total_s"):
            s["host_cpu_util"] = s["host_cpu_busy_s"] / s["host_cpu_total_s"]
        m: dict[str, Any] = {
            "client_cpu_s": self._client[0], "client_ctx_switches": self._client[1],
            **self._tree, **s,
            "pg": (pg_delta(self.pg_before, self.pg_after)
                   if self.pg_after is not None else {}),
        }
        return with_samples(m, self.sampler, self.probe, ops)
