"""A throwaway server for every config of a run, so rounds run side by side
(``lab/paired.py``), or the reason they cannot."""

from __future__ import annotations

from contextlib import ExitStack

import psutil

from ..errors import PgaccelError
from ..decide.limits import disk_needed, side_by_side_problem
from ..decide.model import Variant, WorkloadSpec
from ..pg.values import setting_bytes
from ..probe.facts import HostFacts
from ..server.target import open_target
from ..workloads.base import BenchContext
from .preflight import host_limits

DEFAULT_SHARED_BUFFERS = "128MB"


def side_by_side_contexts(stack: ExitStack, ctx: BenchContext, variants: list[Variant],
                          specs: list[WorkloadSpec], facts: HostFacts, *, pg_bin: str | None,
                          run_as: str | None, workdir: str | None, keep: bool
                          ) -> tuple[dict[str, BenchContext], str | None]:
    """Contexts by variant name (the first variant keeps ``ctx``; each other gets a new
    throwaway cluster of the same installation, removed when ``stack`` closes), or ``({},
    why not)``: a server the user named, load from client hosts, no pgbench workload, huge
    pages reserved, not enough memory or disk for all at once (``limits.side_by_side_problem``),
    or a server that could not be created."""
    target = ctx.target
    if target.kind != "throwaway":
        return {}, "the server was named (--dsn or --pgdata), and there is one of it"
    if ctx.client_hosts:
        return {}, "the load comes from client hosts (--client-host)"
    if not any(ws.workload.pgbench_kw(ctx, ws.params) is not None for ws in specs):
        turns = [t for t in (getattr(ws.workload, "turns", lambda: None)() for ws in specs)
                 if t]
        return {}, turns[0] if turns else "no workload of this run is a pgbench script"
    problem = room_problem([v.settings for v in variants], specs, facts,
                           workdir or target.cluster.base)
    if problem:
        return {}, problem
    out = {variants[0].name: ctx}
    inst = getattr(target, "inst", None)
    with ExitStack() as opened:
        try:
            for v in variants[1:]:
                t = opened.enter_context(open_target(pg_bin=pg_bin, inst=inst, run_as=run_as,
                                                     workdir=workdir, keep=keep))
                out[v.name] = BenchContext(t, ctx.pgbench, workdir=workdir)
        except PgaccelError as e:
            return {}, f"a second server could not be created ({e.message})"
        stack.enter_context(opened.pop_all())
    return out, None


def room_problem(settings: list[dict[str, object]], specs: list[WorkloadSpec],
                 facts: HostFacts, where: str) -> str | None:
    """Why a server per config would not fit on this host at once (memory for every
    server's shared_buffers and the data's page cache, disk under ``where`` for every copy
    of the data: ``limits.side_by_side_problem``), or None."""
    disk = disk_needed([(ws.workload, ws.params) for ws in specs])
    groups: dict[str, int] = {}        # workloads sharing data (pgbench's) count it once
    for ws in specs:
        size = ws.workload.data_bytes(ws.params) or 0
        groups[ws.workload.data_group()] = max(groups.get(ws.workload.data_group(), 0), size)
    data = sum(groups.values()) or None
    sb = [setting_bytes(s.get("shared_buffers", DEFAULT_SHARED_BUFFERS), "8kB")
          for s in settings]
    return side_by_side_problem(
        sb, psutil.virtual_memory().available, disk, host_limits(where).free_bytes,
        data_bytes=data, hugepages_reserved=sum(h.total for h in facts.hugepages),
        strict_overcommit=facts.sysctls.get("vm.overcommit_memory") == "2")
