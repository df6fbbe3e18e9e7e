"""What a run's numbers may be, checked before anything starts (pure).

Every flag and spec value that reaches a load generator is checked here first, so a bad
one is refused in one sentence instead of by pgbench half-way through (``-T/--time must be
in range``), by the OS (``need at least 100003 open files``) or by a full disk hours later:

- ``param_problems``: each RunParams value finite and within what pgbench and sysbench
  accept (durations as whole seconds below a week, clients below ``MAX_CLIENTS``, a scale
  pgbench's integer keys can hold);
- ``host_problems``: what this host allows: open files for the clients (pgbench needs
  ``clients + 3`` descriptors and can raise its soft limit only up to the hard one);
- ``disk_problem``: space for a new cluster and its data (``Workload.data_bytes``: once
  for readers, twice for writers, whose trials restore a template copy; plus the WAL that
  loading writes, up to ``max_wal_size``'s default, and initdb's own files);
- ``LONG_RUN_S``: runs estimated past it ask first (``--yes`` skips the question).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from ..util import format_bytes

if TYPE_CHECKING:
    from ..workloads.base import RunParams, Workload

MAX_CLIENTS = 10_000
MAX_SECONDS = 7 * 24 * 3600          # pgbench -T takes whole seconds; a week is plenty
MAX_SCALE = 100_000                  # pgbench: ~1.5 TB; its aid keys switch to bigint at 20,000
MAX_RATE = 1e9
FILES_PER_CLIENT_EXTRA = 3           # pgbench: stdin, stdout, stderr besides one per client
WAL_HEADROOM = 1024 ** 3             # max_wal_size's default: WAL kept between checkpoints
CLUSTER_BYTES = 40 * 1024 ** 2       # initdb's files (PostgreSQL 15: 39 MB)
LONG_RUN_S = 3600.0


@dataclass(frozen=True)
class HostLimits:
    nofile_hard: int | None          # RLIMIT_NOFILE hard limit (None: unlimited/unknown)
    free_bytes: int | None           # free space where the data will live (None: unknown)
    where: str = ""                  # that directory, for the message


def _finite(name: str, v: float | None, lo: float, hi: float) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"{name} must be a number, not {v!r}"
    if not math.isfinite(v):
        return f"{name} must be a finite number, not {v}"
    if not lo <= v <= hi:
        return f"{name} = {v:g} is out of range ({lo:g} to {hi:g})"
    return None


def param_problems(p: RunParams) -> list[str]:
    """Values no load generator can run with (empty: all fine)."""
    checks = [_finite("clients", p.clients, 1, MAX_CLIENTS),
              _finite("threads", p.threads, 1, MAX_CLIENTS),
              _finite("duration", p.duration, 1, MAX_SECONDS),
              _finite("warmup", p.warmup, 0, MAX_SECONDS),
              _finite("scale", p.scale, 1, MAX_SCALE),
              _finite("rate", p.rate, 1e-6, MAX_RATE)]
    out = [c for c in checks if c]
    if p.threads and isinstance(p.clients, int) and p.threads > p.clients:
        out.append(f"threads = {p.threads} is more than clients = {p.clients} (pgbench "
                   "needs at least one client per thread)")
    return out


def disk_needed(workloads: Iterable[tuple[Workload, RunParams]]) -> int | None:
    """Bytes the prepared data needs (each data group once, at its largest); None when no
    workload can estimate its size."""
    groups: dict[str, int] = {}
    known = False
    for wl, p in workloads:
        size = wl.data_bytes(p)
        if size is None:
            continue
        known = True
        need = size * (2 if wl.writes else 1)
        groups[wl.data_group()] = max(groups.get(wl.data_group(), 0), need)
    if not known:
        return None
    data = sum(groups.values())
    return CLUSTER_BYTES + data + min(data, WAL_HEADROOM)


def host_problems(workloads: list[tuple[Workload, RunParams]],
                  limits: HostLimits) -> list[str]:
    """What this host cannot give the run: open files for the clients."""
    out = []
    clients = max((p.clients for _, p in workloads), default=0)
    if limits.nofile_hard is not None and clients + FILES_PER_CLIENT_EXTRA > limits.nofile_hard:
        out.append(f"{clients} clients need {clients + FILES_PER_CLIENT_EXTRA} open files, and "
                   f"this process may open at most {limits.nofile_hard} (ulimit -Hn); use "
                   "fewer clients or raise the limit (limits.conf, systemd LimitNOFILE)")
    return out


def disk_problem(workloads: list[tuple[Workload, RunParams]],
                 limits: HostLimits) -> str | None:
    """A new cluster with this data would not fit where it is to be created."""
    need = disk_needed(workloads)
    if need is None or limits.free_bytes is None or need <= limits.free_bytes:
        return None
    where = limits.where or "the data directory"
    return (f"the cluster and its data need about {format_bytes(need)} and {where} has "
            f"{format_bytes(limits.free_bytes)} free; use a smaller scale or --workdir on a "
            "larger disk")


CONNECTIONS_HEADROOM = 5     # pgaccel's own sessions beside the clients (admin, sampler, ...)


def connections_problem(max_connections: object, clients: int) -> str | None:
    """Why a server with ``max_connections`` cannot take ``clients`` clients plus pgaccel's
    own sessions (:data:`CONNECTIONS_HEADROOM`); None when it can or the limit is unknown."""
    text = str(max_connections if max_connections is not None else "").strip()
    if not text.isdigit() or clients + CONNECTIONS_HEADROOM <= int(text):
        return None
    return (f"max_connections = {text} is too few for {clients} clients (pgaccel needs "
            f"{CONNECTIONS_HEADROOM} more)")


def format_duration(seconds: float) -> str:
    """'42 s', '12 min', '3.5 h' (for estimates)."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


SIDE_BY_SIDE_MEMORY_SHARE = 0.5


def side_by_side_problem(shared_buffers: list[int], available: int, disk_each: int | None,
                         free: int | None, data_bytes: int | None = None,
                         hugepages_reserved: int = 0, strict_overcommit: bool = False
                         ) -> str | None:
    """Why a server per config at once (``lab/paired.py``) does not fit this host, or None.

    * Huge pages reserved (``hugepages_reserved`` > 0): servers that use them would compete
      for the pool, and which config got them would depend on the order they started.
    * Memory: the shared buffers they will fill together above half of the memory available
      now (the rest is for the page cache that prewarm fills, the backends and the load
      generators).  A server fills at most the data it reads (``data_bytes``), whatever its
      shared_buffers, unless the kernel commits memory strictly (``vm.overcommit_memory =
      2``), which charges all of shared_buffers at start.
    * Disk: a copy of the data (``disk_each``) for each server above the free space."""
    n = len(shared_buffers)
    if hugepages_reserved > 0:
        return (f"{hugepages_reserved} huge pages are reserved, and {n} servers side by side "
                "would compete for them")
    held = ([min(b, data_bytes) for b in shared_buffers]
            if data_bytes and not strict_overcommit else list(shared_buffers))
    if available and sum(held) > SIDE_BY_SIDE_MEMORY_SHARE * available:
        return (f"the {n} servers' shared buffers would hold {format_bytes(sum(held))}, more "
                f"than half of the {format_bytes(available)} of memory available")
    if disk_each is not None and free is not None and disk_each * n > free:
        return (f"{n} clusters with their data need about {format_bytes(disk_each * n)} and "
                f"{format_bytes(free)} is free")
    return None
