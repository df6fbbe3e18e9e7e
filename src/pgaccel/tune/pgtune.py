"""PGTune's published formulas (pgtune.leopard.in.ua, le0pard/pgtune as of its commit 7caef27,
July 2026), for ``pgaccel tune --compare pgtune`` and for benchmarking pgaccel against PGTune.

Filled in as its user would: the DB type from the workload class (which a measured
profile chooses: oltp/web/mixed -> same, analytics -> dw, ingest -> oltp; PGTune's desktop
type is for a developer's machine, which pgaccel does not plan); storage virtual/unknown
-> ssd (PGTune has no such class); "Total Data Size" from the database's measured size
against the memory (less than RAM, 1x-3x, more; "1x-3x", PGTune's default, when the size
is unknown); OS Linux.  PGTune sizes are in kB and printed in the largest unit that
divides them exactly.
"""

from __future__ import annotations

import math
from typing import Any

from ..pg.catalog import GucCatalog, check_value
from ..pg.values import to_unit
from .inputs import TuneInputs
from .plan import Plan
from ..pg import versions

KB_MB, KB_GB = 1024, 1024 * 1024
DB_TYPE = {"oltp": "oltp", "web": "web", "mixed": "mixed", "analytics": "dw", "ingest": "oltp"}
DB_SIZES = ("less_ram", "mid_ram", "greater_ram")
# PGTune's own values where the server refuses its first choice
FALLBACK = {("io_method", "io_uring"): "worker", ("wal_compression", "lz4"): "on"}


def db_size(inp: TuneInputs) -> str:
    """PGTune's "Total Data Size" answer: the database's size against the memory."""
    if inp.data_bytes is None:
        return "mid_ram"
    if inp.data_bytes < inp.memory_bytes:
        return "less_ram"
    return "mid_ram" if inp.data_bytes <= 3 * inp.memory_bytes else "greater_ram"
HD_TYPE = {"nvme": "nvme", "ssd": "ssd", "hdd": "hdd", "san": "san", "virtual": "ssd",
           "unknown": "ssd"}


def fmt_kb(kb: int) -> str:
    if kb % KB_GB == 0:
        return f"{kb // KB_GB}GB"
    if kb % KB_MB == 0:
        return f"{kb // KB_MB}MB"
    return f"{kb}kB"


def pgtune_settings(inp: TuneInputs) -> dict[str, str]:
    """PGTune's output for the same machine, in PGTune's order."""
    db, hd, v = DB_TYPE[inp.workload], HD_TYPE[inp.storage], inp.pg_version
    size = db_size(inp)
    mem = inp.memory_bytes / 1024                        # kB
    cpu = inp.ncpus
    conns = inp.connections
    out: dict[str, str] = {"max_connections": str(conns)}
    sb = math.floor(mem / 4)
    out["shared_buffers"] = fmt_kb(sb)
    out["effective_cache_size"] = fmt_kb(math.floor(mem * 3 / 4))
    mwm = min(math.floor(mem / (8 if db == "dw" else 16)), 8 * KB_GB)
    out["maintenance_work_mem"] = fmt_kb(mwm)
    out["checkpoint_completion_target"] = "0.9"
    wb = min(math.floor(3 * sb / 100), 16 * KB_MB)
    if 14 * KB_MB < wb < 16 * KB_MB:
        wb = 16 * KB_MB
    out["wal_buffers"] = fmt_kb(max(wb, 32))
    out["default_statistics_target"] = "500" if db == "dw" else "100"
    out["random_page_cost"] = ("1.1" if size == "less_ram" else
                               "4" if hd == "hdd" or db == "dw" else "1.1")
    out["effective_io_concurrency"] = str({"hdd": 2, "ssd": 200, "san": 300, "nvme": 1000}[hd])
    parallel = cpu >= 4
    workers = cpu if parallel else 8
    wm = (mem - sb) / ((conns + workers) * 3)
    wm = math.floor({"web": wm, "oltp": wm, "dw": wm / 2, "mixed": wm / 2}[db])
    if size == "less_ram":
        wm = math.floor(wm * 1.3)
    elif size == "greater_ram":
        wm = math.floor(wm * 0.9)
    out["work_mem"] = fmt_kb(max(wm, 4 * KB_MB))
    out["huge_pages"] = "try" if sb >= 2 * KB_GB else "off"
    if db in ("web", "oltp", "mixed"):
        out["jit"] = "off"
    out["wal_compression"] = "lz4" if v >= 15 else "on"
    if cpu >= 16:
        out["autovacuum_max_workers"] = "5" if cpu >= 32 else "4"
    if mwm >= 2 * KB_GB:
        out["autovacuum_work_mem"] = fmt_kb(2 * KB_GB)
    if v >= 18:
        out["io_method"] = "io_uring"      # no io_workers: PGTune sets those only for "worker"
    walsize = {"web": (1, 4), "oltp": (2, 8), "dw": (4, 16), "mixed": (1, 4)}[db]
    out["min_wal_size"] = f"{walsize[0]}GB"
    out["max_wal_size"] = f"{walsize[1]}GB"
    if parallel:
        gather = math.ceil(cpu / 2)
        out["max_worker_processes"] = str(cpu)
        out["max_parallel_workers_per_gather"] = str(gather if db == "dw" else min(gather, 4))
        out["max_parallel_workers"] = str(cpu)
        out["max_parallel_maintenance_workers"] = str(min(math.ceil(cpu / 2), 4))
    return out


def runnable(settings: dict[str, str], catalog: GucCatalog | None
             ) -> tuple[dict[str, str], list[str]]:
    """PGTune's settings as the server takes them, with the reasons for what changed: for
    benchmarking PGTune's config on a real server.  Where the server refuses PGTune's
    first choice, PGTune's own fallback (``worker`` for io_uring without liburing, ``on``
    for lz4 without lz4) replaces it; anything else refused is left out."""
    if catalog is None:
        return dict(settings), []
    ok, dropped = {}, []
    for k, v in settings.items():
        problem = check_value(k, v, catalog)
        alt = FALLBACK.get((k, str(v)))
        if problem and alt is not None and not check_value(k, alt, catalog):
            dropped.append(f"{problem}: PGTune's fallback {k} = {alt} instead")
            ok[k] = alt
        elif problem:
            dropped.append(problem)
        else:
            ok[k] = v
    return ok, dropped


def warnings(inp: TuneInputs) -> list[str]:
    """The warnings PGTune prints beside its configuration for these inputs."""
    out = []
    if inp.memory_bytes > 100 * 1024**3:
        out.append("PGTune is not optimal for very high memory systems.")
    if inp.pg_version >= 15:
        out.append("wal_compression = lz4 requires PostgreSQL compiled with --with-lz4.")
    if inp.pg_version >= 18:
        out.append("io_method = io_uring requires PostgreSQL compiled with --with-liburing.")
    if DB_TYPE[inp.workload] == "dw" and HD_TYPE[inp.storage] != "hdd" \
            and db_size(inp) != "less_ram":
        out.append("Cost parameters for data warehouses on SSDs are left at defaults to avoid "
                   "catastrophic index scan selections; monitor the planner and adjust "
                   "random_page_cost if necessary.")
    return out


def _closeness(name: str, a: str | None, b: str | None, major: int) -> float | None:
    """Relative difference of two values of ``name`` (0 = equal); None if not numbers."""
    if a is None or b is None:
        return 0.0 if a == b else None
    spec = versions.spec(name, major)
    try:
        x, y = to_unit(a, spec.unit if spec else None), to_unit(b, spec.unit if spec else None)
    except ValueError:
        return 0.0 if a.strip().lower() == b.strip().lower() else None
    return abs(x - y) / max(abs(x), abs(y), 1e-12)


def compare(plan: Plan, inp: TuneInputs, catalog: GucCatalog | None = None
            ) -> list[dict[str, Any]]:
    """Rows: setting, pgtune, pgaccel, same, reason (pgaccel's, where they differ)."""
    pt = pgtune_settings(inp)
    ours = {c.name: c for c in plan.layer("postgres") if not c.advice_only}
    rows = []
    for name in list(pt) + [n for n in ours if n not in pt]:
        a, ch = pt.get(name), ours.get(name)
        b = ch.proposed if ch else None
        diff = _closeness(name, a, b, inp.pg_version)
        same = diff == 0.0
        reason = ""
        if a is None and ch is not None and ch.current is not None:
            # PGTune leaves it at the server's value: compare pgaccel's with that
            a = f"{ch.current} (default)"
            diff = _closeness(name, ch.current, b, inp.pg_version)
            same = diff == 0.0
        if not same:
            if ch is None:
                reason = "pgaccel keeps the server default"
            elif diff is not None and diff < 0.03:
                reason = "same rule; pgaccel rounds to a whole 64MB/1MB"
            else:
                reason = ch.reason
            if a is not None and catalog is not None and check_value(name, a, catalog):
                reason += f" (PGTune's value would be refused: {check_value(name, a, catalog)})"
        rows.append({"setting": name, "pgtune": a, "pgaccel": b, "same": same,
                     "reason": reason})
    return rows
