"""PostgreSQL-layer rules: TuneInputs -> a Plan of PostgreSQL settings.

Every rule is a pure function of the inputs; docs/tuning-rules.md lists each with its
formula, reason, source and version range.  ``make_plan`` then

1. enforces the memory budget (``memory_budget``), shrinking work_mem first;
2. gates by version (never a parameter the target version lacks);
3. validates against a real binary's catalog when one is given, dropping (with a warning)
   anything the server would refuse, and takes the restart flag from its context.
"""

from __future__ import annotations

import math
from typing import Any

from ..util import format_bytes
from ..pg.catalog import GucCatalog, check_value
from ..pg.values import pg_size, setting_bytes
from .inputs import TuneInputs
from .plan import Change, Plan
from .workload import (CACHED, JIT_HEAVY, LONG_MS, SPILL_SHARE, WorkloadProfile,
                       uses_parallel)
from ..pg import versions

KB, MB, GB = 1024, 1024**2, 1024**3
BUDGET_FRACTION = 0.90
# How many work_mem-sized sort/hash nodes one query of the workload runs at once.
PER_QUERY_FACTOR = {"oltp": 1, "web": 1, "ingest": 1, "mixed": 2, "analytics": 3}
WORK_MEM_CAP = {"oltp": 64 * MB, "web": 64 * MB, "ingest": 64 * MB, "mixed": 256 * MB,
                "analytics": 1 * GB}
MAX_WAL = {"web": 4 * GB, "oltp": 8 * GB, "mixed": 8 * GB, "analytics": 16 * GB,
           "ingest": 32 * GB}
RANDOM_PAGE_COST = {"nvme": "1.1", "ssd": "1.1", "san": "1.1", "virtual": "1.1",
                    "hdd": "4", "unknown": "2"}
IO_CONCURRENCY = {"nvme": 256, "ssd": 200, "san": 300, "virtual": 64, "hdd": 2, "unknown": 16}
AV_COST_LIMIT = {"nvme": 2000, "ssd": 2000, "san": 1000, "virtual": 1000, "unknown": 1000}

DOC_MEM = "PostgreSQL docs: Resource Consumption > Memory"
DOC_WAL = "PostgreSQL docs: Write Ahead Log > Checkpoints"
DOC_WALSET = "PostgreSQL docs: Write Ahead Log > Settings"
DOC_COST = "PostgreSQL docs: Query Planning > Planner Cost Constants"
DOC_ASYNC = "PostgreSQL docs: Resource Consumption > Asynchronous Behavior"
DOC_BGW = "PostgreSQL docs: Resource Consumption > Background Writer"
DOC_AV = "PostgreSQL docs: Automatic Vacuuming"
DOC_CONN = "PostgreSQL docs: Connections and Authentication"


def _down(n: float, step: int) -> int:
    return max(int(n) // step * step, 0)


def _size_step(n: float) -> int:
    """Rounding step that keeps sizes readable: 64kB below 16MB, 1MB below 1GB, else 64MB."""
    return 64 * KB if n < 16 * MB else (MB if n < GB else 64 * MB)


def _round(n: float) -> int:
    return _down(n, _size_step(n))


class _Rules:
    """Collects the proposed settings; one method per rule family."""

    def __init__(self, inp: TuneInputs, catalog: GucCatalog | None):
        self.inp, self.cat = inp, catalog
        self.prof = WorkloadProfile.from_dict(inp.profile) if inp.profile else None
        self.out: dict[str, Change] = {}
        self.advice: list[str] = []

    def put(self, name: str, value: Any, reason: str, source: str, rule: str) -> None:
        self.out[name] = Change("postgres", name, str(value), reason, source, rule=rule)

    # -- memory ---------------------------------------------------------------------------
    def memory(self) -> None:
        # TuneInputs refuses less than 256 MB, so no size below needs a floor:
        # shared_buffers >= 64MB, maintenance_work_mem >= 16MB, wal_buffers >= 2MB
        i, m = self.inp, self.inp.memory_bytes
        sb = _round(m / 4)
        self.put("shared_buffers", pg_size(sb), "25% of the memory available to the server; "
                 "the OS page cache holds the rest", f"{DOC_MEM}; PGTune", "mem.shared_buffers")
        self.put("huge_pages", "try", "use huge pages when reserved (fewer TLB misses), start "
                 "anyway when not; 'on' would refuse to start without them",
                 f"{DOC_MEM}; study 004", "mem.huge_pages")
        self.put("effective_cache_size", pg_size(_round(m * 3 / 4)),
                 "planner hint: shared_buffers plus the OS cache, 75% of memory",
                 f"{DOC_COST}; PGTune", "mem.effective_cache_size")
        big = i.workload in ("analytics", "ingest")
        mwm = min(_round(m / (8 if big else 16)), (4 if big else 2) * GB)
        self.put("maintenance_work_mem", pg_size(mwm),
                 f"memory/{8 if big else 16} (cap {4 if big else 2}GB): faster VACUUM and "
                 "index builds", DOC_MEM, "mem.maintenance_work_mem")
        self.put("autovacuum_work_mem", pg_size(min(mwm, GB)),
                 "per autovacuum worker; capped at 1GB (vacuum before 17 cannot use more, "
                 "17+ needs far less), keeps workers x memory in the budget",
                 DOC_MEM, "mem.autovacuum_work_mem")
        c = i.ncpus
        avw = 3 if c <= 8 else 4 if c <= 16 else 5 if c <= 32 else 6
        self.put("autovacuum_max_workers", avw, f"{c} cores: {avw} workers keep up with "
                 "many busy tables without starving queries", DOC_AV, "av.max_workers")
        if i.pg_version >= 13:
            self.put("hash_mem_multiplier", "2", "hash tables may use 2x work_mem before "
                     "spilling (the default from 15 on)", DOC_MEM, "mem.hash_mem_multiplier")
        factor = PER_QUERY_FACTOR[i.workload]
        share = (m - sb) * 0.5 / (i.connections * 2.0 * factor)
        wm = min(max(_round(share), 64 * KB), WORK_MEM_CAP[i.workload])
        why = (f"half the memory outside shared_buffers shared by {i.connections} connections "
               f"x {factor} sort/hash node(s) x hash_mem_multiplier, cap "
               f"{pg_size(WORK_MEM_CAP[i.workload])}")
        p = self.prof
        if p and p.spill_bytes_per_call and (p.spill_time_share or 0) >= SPILL_SHARE:
            # a sort or hash needs about twice in memory what it wrote to a temp file
            need = min(2 ** math.ceil(math.log2(2 * p.spill_bytes_per_call)),
                       WORK_MEM_CAP[i.workload])
            if need > wm:
                wm = need
                why = (f"statements holding {p.spill_time_share:.0%} of the time spilled to "
                       f"temp files (up to {format_bytes(p.spill_bytes_per_call)} per call): "
                       f"twice that in memory, cap {pg_size(WORK_MEM_CAP[i.workload])}")
        self.put("work_mem", pg_size(wm), why, DOC_MEM, "mem.work_mem")
        self.put("max_connections", i.connections, "the expected connections (each reserves "
                 "shared memory and may use work_mem)", DOC_CONN, "conn.max_connections")
        limit = max(4 * c, 50)
        if i.connections > limit:
            self.advice.append(
                f"{i.connections} connections for {c} cores: put a connection pooler "
                f"(pgbouncer, transaction mode) in front and keep ~{max(2 * c, 10)} to "
                f"{4 * c if 4 * c > 10 else 20} server connections; more active backends than "
                "about 4x the cores only add contention.")

    # -- WAL and checkpoints --------------------------------------------------------------
    def wal(self) -> None:
        i, m = self.inp, self.inp.memory_bytes
        sb = setting_bytes(self.out["shared_buffers"].proposed)
        auto = min(sb // 32, 16 * MB)
        wb, why = auto, "1/32 of shared_buffers up to one WAL segment (the server's auto value)"
        if sb >= 4 * GB and (i.workload == "ingest" or i.ncpus >= 16):
            wb, why = 64 * MB, "many concurrent writers: a larger WAL buffer avoids WAL writes " \
                               "by backends waiting for space"
        self.put("wal_buffers", pg_size(wb), why, DOC_WALSET, "wal.wal_buffers")
        mx = min(MAX_WAL[i.workload], max(GB, _down(2 * m, GB)))
        self.put("max_wal_size", pg_size(mx), f"{i.workload}: room for "
                 f"checkpoint_timeout's WAL so checkpoints are timed, not forced (the measured "
                 f"rule refines it); capped at 2x memory on small hosts", f"{DOC_WAL}; PGTune",
                 "wal.max_wal_size")
        self.put("min_wal_size", pg_size(mx // 4), "keep 1/4 of max_wal_size of segments "
                 "for reuse instead of creating new files", f"{DOC_WAL}; PGTune",
                 "wal.min_wal_size")
        self.put("checkpoint_timeout", "15min", "fewer checkpoints -> fewer full-page images "
                 "in WAL; crash recovery replays at most ~15 minutes", DOC_WAL,
                 "wal.checkpoint_timeout")
        self.put("checkpoint_completion_target", "0.9", "spread checkpoint writes over 90% of "
                 "the interval (the default from 14 on)", DOC_WAL, "wal.completion_target")
        method = (next((f for f in ("lz4", "zstd") if self._has(f)), None)
                  if i.pg_version >= 15 else None)
        if method:
            why = {"lz4": "lz4: least CPU per byte saved",
                   "zstd": "zstd (no lz4 in this build)"}[method]
            self.put("wal_compression", method, f"compress full-page images in WAL; {why}",
                     DOC_WALSET, "wal.compression")
        else:       # pglz only: measured dearer than the WAL it saves (docs/tuning-rules.md)
            self.advice.append(
                "wal_compression is left off: the only method here is pglz "
                f"({'before 15' if i.pg_version < 15 else 'no lz4 or zstd known in this build'}), "
                "whose CPU cost outweighed the WAL it saved when measured (PostgreSQL 14, "
                "tpcb-like on 2 cores: 5.4% slower, 9.7% more server CPU per transaction). "
                "Where the disk rather than the CPU is the limit, measure `on` against `off` "
                "(pgaccel lab).")

    def _has(self, feature: str) -> bool:
        known = self.inp.built_with(feature)
        if known is not None:
            return known
        g = self.cat.get("wal_compression") if self.cat else None
        return bool(g and g.enumvals and feature in g.enumvals)

    # -- planner, I/O, parallelism --------------------------------------------------------
    def io(self) -> None:
        i, s, p = self.inp, self.inp.storage, self.prof
        fits = i.data_bytes is not None and i.data_bytes < i.memory_bytes / 2
        if p and fits:
            self.put("random_page_cost", "1.1", f"the data ({format_bytes(i.data_bytes)}) "
                     f"fits in memory ({format_bytes(i.memory_bytes)}): pages are read from "
                     "the caches, where a random page costs about what a sequential one does",
                     f"{DOC_COST}; PGTune (data size less than RAM)", "io.random_page_cost")
        elif p and p.hit_ratio is not None and p.hit_ratio >= CACHED:
            self.put("random_page_cost", "1.1", f"{p.hit_ratio:.1%} of the shared blocks the "
                     "statements read were in shared buffers: a random page costs about what "
                     "a sequential one does", f"{DOC_COST}; PGTune", "io.random_page_cost")
        elif p and p.hit_ratio is not None and i.workload == "analytics" and s != "nvme":
            size = ("larger than half the memory" if i.data_bytes is not None
                    else "of unknown size")
            self.advice.append(
                f"random_page_cost is left at the server's value: {p.hit_ratio:.1%} of the "
                f"shared blocks were hits and the data is {size}, so the analytic statements "
                "may read from storage, where a low cost would choose index scans over "
                "sequential ones (PGTune does the same for a data warehouse larger than "
                "memory).")
        else:
            self.put("random_page_cost", RANDOM_PAGE_COST[s], f"{s} storage: a random page "
                     f"costs {'about the same as' if s != 'hdd' else 'much more than'} a "
                     "sequential one", f"{DOC_COST}; PGTune", "io.random_page_cost")
        eic = IO_CONCURRENCY[s]
        self.put("effective_io_concurrency", eic, f"{s} storage serves ~{eic} concurrent reads; "
                 "prefetch that deep", DOC_ASYNC, "io.effective_io_concurrency")
        self.put("maintenance_io_concurrency", eic, "same depth for VACUUM/ANALYZE prefetch",
                 DOC_ASYNC, "io.maintenance_io_concurrency")
        if i.pg_version >= 18:
            uring = i.built_with("liburing") and i.io_uring == "available"
            self.put("io_method", "io_uring" if uring else "worker",
                     "io_uring: fewer context switches, helps write-heavy steps (study 001)"
                     if uring else "worker: io_uring needs --with-liburing and a kernel that "
                     "allows it", f"{DOC_ASYNC}; study 001", "io.io_method")
            if not uring:
                n = max(3, min(32, i.ncpus // 4))
                self.put("io_workers", n, f"{n} I/O workers for {i.ncpus} cores (a quarter, at "
                         "least the default 3)", f"{DOC_ASYNC}; study 001", "io.io_workers")
        c, w = i.ncpus, i.workload
        if w == "analytics":
            gather = min(16, max(1, c // 2))
        elif w == "mixed":
            gather = min(4, c // 2)
        else:
            gather = min(4, c // 4)          # none below 4 cores
        self.put("max_worker_processes", max(8, c + 4), "parallel workers plus a few slots for "
                 "other background workers", DOC_ASYNC, "par.max_worker_processes")
        why = f"{w} on {c} cores: " + ("short queries gain nothing from parallelism and "
                                       "would compete with other sessions" if gather == 0
                                       else f"up to {gather} workers per query")
        if uses_parallel(self.prof):
            # never below the server's default of 2 where the time goes to long statements
            want = max(2, min(16 if w == "analytics" else 4, c // 2))
            if gather < want:
                gather = want
                why = (f"{self.prof.long_share:.0%} of the statements' time goes to "
                       f"statements over {LONG_MS:.0f} ms, which parallel query speeds up: "
                       f"up to {gather} workers per query")
        self.put("max_parallel_workers", max(c, gather),
                 f"at most one parallel worker per core ({c})" if gather <= c else
                 f"as many as one query may use ({gather})",
                 f"{DOC_ASYNC}; study 002", "par.max_parallel_workers")
        self.put("max_parallel_workers_per_gather", gather, why,
                 f"{DOC_ASYNC}; study 002", "par.per_gather")
        maint = min(8 if w in ("analytics", "ingest") else 4, c // 2)
        self.put("max_parallel_maintenance_workers", maint, "parallel index builds and VACUUM, "
                 "half the cores at most", DOC_ASYNC, "par.maintenance")
        jit_off = w in ("oltp", "web", "ingest")
        why = ("short queries pay JIT compile time and gain nothing" if jit_off
               else "long analytical queries benefit from JIT")
        if p and p.jit_share is not None and p.jit_share >= JIT_HEAVY:
            jit_off, why = True, (f"JIT compilation took {p.jit_share:.0%} of the statements' "
                                  "time: more than it saved")
        elif uses_parallel(p):
            jit_off = False
            why = (f"{p.long_share:.0%} of the statements' time goes to statements over "
                   f"{LONG_MS:.0f} ms, where compiled expressions can pay off"
                   + (f"; JIT took {p.jit_share:.1%} of the time" if p.jit_share is not None
                      else ""))
        elif p and w in ("oltp", "web", "ingest"):
            why = (f"{p.time_share.get('short', 0) + p.time_share.get('medium', 0):.0%} of "
                   f"the statements' time goes to statements under {LONG_MS:.0f} ms: "
                   "they would pay JIT's compile time and gain nothing")
        self.put("jit", "off" if jit_off else "on", why,
                 "PostgreSQL docs: JIT > When to JIT?; PGTune", "plan.jit")
        self.put("default_statistics_target", 500 if w == "analytics" else 100,
                 "better estimates for complex analytical queries" if w == "analytics"
                 else "the default suits short queries", f"{DOC_COST}; PGTune", "plan.stats")

    # -- background writer and autovacuum -------------------------------------------------
    def background(self) -> None:
        i, s = self.inp, self.inp.storage
        if s != "hdd":
            self.put("bgwriter_delay", "100ms", "wake the background writer twice as often "
                     "so backends rarely write dirty buffers themselves", DOC_BGW, "bgw.delay")
            self.put("bgwriter_lru_maxpages", 1000, "up to ~80MB/s of cleaning at 100ms; "
                     "flash storage absorbs it", DOC_BGW, "bgw.maxpages")
            self.put("bgwriter_lru_multiplier", "4", "clean ahead of bursts of buffer "
                     "allocations", DOC_BGW, "bgw.multiplier")
            lim = AV_COST_LIMIT[s]
            self.put("autovacuum_vacuum_cost_limit", lim, f"{s} storage sustains more vacuum "
                     f"I/O than the default 200", DOC_AV, "av.cost_limit")
        if i.workload != "analytics":
            self.put("autovacuum_vacuum_scale_factor", "0.05", "vacuum after 5% of a table "
                     "changed (not 20%): less bloat on large, busy tables", DOC_AV,
                     "av.vacuum_scale")
            self.put("autovacuum_analyze_scale_factor", "0.02", "re-analyze after 2% changed: "
                     "fresher statistics", DOC_AV, "av.analyze_scale")
        if i.workload == "ingest":
            self.put("autovacuum_vacuum_insert_scale_factor", "0.05", "append-mostly tables "
                     "get their visibility map set sooner", DOC_AV, "av.insert_scale")


# -- the memory budget -------------------------------------------------------------------

def _setting_bytes(settings: dict[str, str], name: str, major: int) -> int:
    spec = versions.spec(name, major)
    unit = spec.unit if spec else "kB"
    value = settings.get(name, spec.default if spec else None)
    return setting_bytes(str(value), unit) if value is not None else 0


def memory_budget(plan_or_settings: Plan | dict[str, str], inputs: TuneInputs
                  ) -> tuple[int, int, dict[str, int]]:
    """(used_bytes, limit_bytes, breakdown) of the worst-case memory the settings allow:

    shared_buffers + connections x work_mem x hash_mem_multiplier x per-query factor
    + max_parallel_workers x work_mem x hash_mem_multiplier
    + autovacuum_max_workers x (autovacuum_work_mem or maintenance_work_mem)
    + maintenance_work_mem;  limit = 90% of the memory available to the server."""
    s = (plan_or_settings.postgres_settings() if isinstance(plan_or_settings, Plan)
         else dict(plan_or_settings))
    v = inputs.pg_version

    def num(name: str, fallback: str) -> float:
        raw = s.get(name, versions.default(name, v) or fallback)
        return float(raw)

    sb = _setting_bytes(s, "shared_buffers", v)
    wm = _setting_bytes(s, "work_mem", v)
    mwm = _setting_bytes(s, "maintenance_work_mem", v)
    avwm = _setting_bytes(s, "autovacuum_work_mem", v)
    avwm = mwm if avwm <= 0 else avwm
    hmm = num("hash_mem_multiplier", "1")
    conns = int(num("max_connections", str(inputs.connections)))
    workers = int(num("autovacuum_max_workers", "3"))
    parallel = int(num("max_parallel_workers", "8"))
    factor = PER_QUERY_FACTOR[inputs.workload]
    breakdown = {
        "shared_buffers": sb,
        "work_mem": int(conns * wm * hmm * factor),
        "parallel_workers": int(parallel * wm * hmm),
        "autovacuum": workers * avwm,
        "maintenance_work_mem": mwm,
    }
    return sum(breakdown.values()), int(inputs.memory_bytes * BUDGET_FRACTION), breakdown


def _enforce_budget(r: _Rules) -> None:
    """Shrink work_mem, then maintenance memory, then shared_buffers until the budget holds."""
    inp = r.inp

    def budget() -> tuple[int, int, dict[str, int]]:
        return memory_budget({k: c.proposed for k, c in r.out.items()}, inp)

    u, lim, bd = budget()
    if u < lim:
        return
    wm = setting_bytes(r.out["work_mem"].proposed)
    per = (bd["work_mem"] + bd["parallel_workers"]) / max(wm, 1)  # budget bytes per byte
    room = (lim - 1 - (u - bd["work_mem"] - bd["parallel_workers"])) / max(per, 1e-9)
    new = _down(room, 64 * KB) if room < 16 * MB else _down(room, MB)
    c = r.out["work_mem"]
    c.proposed = pg_size(max(new, 64 * KB))
    c.reason += f"; lowered to keep the memory budget under {int(BUDGET_FRACTION * 100)}%"
    for name in ("maintenance_work_mem", "autovacuum_work_mem", "shared_buffers"):
        u, lim, _ = budget()
        lowered = False
        while u >= lim and setting_bytes(r.out[name].proposed) > 2 * MB:
            r.out[name].proposed = pg_size(_round(setting_bytes(r.out[name].proposed) * 3 // 4))
            lowered = True
            u, lim, _ = budget()
        if lowered:
            r.out[name].reason += "; lowered to fit the memory budget"
    if budget()[0] >= budget()[1]:
        r.advice.append("Even minimal memory settings exceed 90% of memory for "
                        f"{inp.connections} connections: lower max_connections and use a pooler.")


# -- the plan ----------------------------------------------------------------------------

def make_plan(inputs: TuneInputs, current: dict[str, str] | None = None,
              gucs: GucCatalog | None = None) -> Plan:
    """The PostgreSQL layer for ``inputs``; ``current`` (SHOW-format values) and ``gucs``
    (a real binary's catalog, same major version) when known."""
    r = _Rules(inputs, gucs)
    r.memory()
    r.wal()
    r.io()
    r.background()
    _enforce_budget(r)
    plan = Plan(inputs=inputs.to_dict(), advice=list(r.advice))
    v = inputs.pg_version
    cat = gucs
    if cat is not None and cat.major is not None and cat.major != v:
        plan.warnings.append(f"The catalog is PostgreSQL {cat.major}'s; the plan for {v} was "
                             "checked against pgaccel's built-in version table only.")
        cat = None
    for name, ch in r.out.items():
        if not versions.known(name, v):
            plan.warnings.append(f"{name} dropped: PostgreSQL {v} does not have it.")
            continue
        if cat is not None:
            problem = check_value(name, ch.proposed, cat)
            if problem:
                plan.warnings.append(f"{name} = {ch.proposed} dropped: {problem}")
                continue
            ch.context = cat.context(name)
            ch.restart = ch.context == "postmaster"
        else:
            spec = versions.spec(name, v)
            ch.context = spec.context if spec else None
            ch.restart = versions.needs_restart(name, v)
        if current is not None:
            ch.current = current.get(name)
        plan.changes.append(ch)
    used, limit, _ = memory_budget(plan, inputs)
    plan.advice.append(f"Memory budget: {format_bytes(used)} worst case of "
                       f"{format_bytes(limit)} allowed (90% of "
                       f"{format_bytes(inputs.memory_bytes)}).")
    return plan
