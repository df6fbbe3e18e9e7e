"""Measured rules: numbers from a baseline run or a live server's statistics -> Changes.

Pure functions over numbers.  ``stats_from_delta`` reads the dict that
``pgaccel.metrics.pg.delta`` returns (wal_bytes, ckpt_timed, ckpt_requested, db_temp_files,
...); every Change records the numbers it used in ``Change.inputs``.

The WAL and work_mem rules size the *planned* settings (``settings``: the plan's values);
the hit-ratio rule explains what was measured, so it takes the shared_buffers that was in
force while the counters were taken (:class:`InForce`), never the plan's proposal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..pg.values import pg_size, setting_bytes, to_unit
from .inputs import TuneInputs
from .plan import Change, Plan
from .rules import PER_QUERY_FACTOR, memory_budget
from ..pg import versions

MB, GB = 1024**2, 1024**3
WAL_MARGIN = 1.5            # bursts above the measured average rate
SRC_WAL = "PostgreSQL docs: WAL Configuration (checkpoints triggered by max_wal_size)"


@dataclass
class MeasuredStats:
    seconds: float
    wal_bytes: int | None = None
    checkpoints_timed: int | None = None
    checkpoints_req: int | None = None
    temp_files: int | None = None
    temp_bytes: int | None = None
    transactions: int | None = None
    blks_hit: int | None = None
    blks_read: int | None = None
    db_size_bytes: int | None = None

    @property
    def wal_bytes_per_sec(self) -> float | None:
        if self.wal_bytes is None or self.seconds <= 0:
            return None
        return self.wal_bytes / self.seconds


@dataclass(frozen=True)
class InForce:
    """A setting's value while the counters were taken (None: not known) and where that
    value was read, in words (e.g. "the server's current value")."""
    value: str | None
    source: str


def stats_from_delta(d: dict, seconds: float) -> MeasuredStats:
    return MeasuredStats(
        seconds=seconds, wal_bytes=d.get("wal_bytes"), checkpoints_timed=d.get("ckpt_timed"),
        checkpoints_req=d.get("ckpt_requested"), temp_files=d.get("db_temp_files"),
        temp_bytes=d.get("db_temp_bytes"), transactions=d.get("db_xact_commit"),
        blks_hit=d.get("db_blks_hit"), blks_read=d.get("db_blks_read"),
        db_size_bytes=d.get("db_size_bytes"))


def _setting(settings: dict[str, str], name: str, major: int) -> str:
    return str(settings.get(name, versions.default(name, major)))


def _approx_size(n: int) -> str:
    """A measured size for a sentence: 307MB, 12.5GB (not an exact setting value)."""
    if n >= GB:
        return f"{n / GB:.1f}GB"
    return f"{round(n / MB)}MB" if n >= MB else f"{round(n / 1024)}kB"


def _round_up(n: float) -> int:
    step = GB if n >= GB else 64 * MB
    return int(math.ceil(n / step) * step)


def wal_rule(st: MeasuredStats, settings: dict[str, str], inp: TuneInputs) -> Change | None:
    """max_wal_size >= WAL per checkpoint_timeout x (1 + completion target) x margin, so
    checkpoints are started by the timer, not by WAL volume."""
    rate = st.wal_bytes_per_sec
    if rate is None:
        return None
    v = inp.pg_version
    timeout = to_unit(_setting(settings, "checkpoint_timeout", v), "s")
    cct = float(_setting(settings, "checkpoint_completion_target", v))
    cur = setting_bytes(_setting(settings, "max_wal_size", v), "MB")
    need = _round_up(rate * timeout * (1 + cct) * WAL_MARGIN)
    req, timed = st.checkpoints_req or 0, st.checkpoints_timed or 0
    used = {"wal_bytes": st.wal_bytes, "seconds": st.seconds, "wal_bytes_per_sec": round(rate),
            "checkpoint_timeout_s": timeout, "checkpoint_completion_target": cct,
            "checkpoints_timed": timed, "checkpoints_req": req, "margin": WAL_MARGIN,
            "max_wal_size_before": pg_size(cur)}
    if need <= cur:
        if not req:   # enough room already: say so, with the numbers (advice, no change)
            return Change("postgres", "max_wal_size", pg_size(cur),
                          f"measured {pg_size(int(rate))}/s of WAL: {pg_size(cur)} already "
                          f"holds a checkpoint_timeout's worth with margin (needs "
                          f"{pg_size(need)}); no checkpoint was requested",
                          SRC_WAL, rule="measured.max_wal_size", context="sighup",
                          advice_only=True, inputs=used)
        need = _round_up(cur * 2)          # forced checkpoints despite enough room: bursts
    return Change("postgres", "max_wal_size", pg_size(need),
                  f"{pg_size(int(rate))}/s of WAL x {int(timeout)}s x (1 + {cct}) x "
                  f"{WAL_MARGIN}: checkpoints by time, not WAL volume ({req} of {req + timed} "
                  "were requested); needs that much free disk in pg_wal",
                  SRC_WAL, rule="measured.max_wal_size", context="sighup", inputs=used)


def max_work_mem(settings: dict[str, str], inp: TuneInputs) -> int:
    """The largest work_mem that keeps ``memory_budget`` under its limit."""
    s = dict(settings)
    s["work_mem"] = "1MB"
    u1, lim, _ = memory_budget(s, inp)
    s["work_mem"] = "2MB"
    u2, _, _ = memory_budget(s, inp)
    per_mb = u2 - u1
    fixed = u1 - per_mb
    return max(int((lim - 1 - fixed) / per_mb) * MB, 0) if per_mb > 0 else 0


def work_mem_rule(st: MeasuredStats, settings: dict[str, str], inp: TuneInputs
                  ) -> Change | None:
    """Raise work_mem to ~2x the average spill (sorts need more memory than their temp
    file) when temp files appear, within the memory budget."""
    if not st.temp_files or not st.temp_bytes:
        return None
    v = inp.pg_version
    cur = setting_bytes(_setting(settings, "work_mem", v), "kB")
    avg = st.temp_bytes / st.temp_files
    want = max(2 ** math.ceil(math.log2(max(avg * 2, MB))), cur)
    cap = max_work_mem(settings, inp)
    used = {"temp_files": st.temp_files, "temp_bytes": st.temp_bytes,
            "avg_spill_bytes": round(avg), "transactions": st.transactions,
            "temp_files_per_1000_xacts": (round(1000 * st.temp_files / st.transactions, 3)
                                          if st.transactions else None),
            "work_mem_before": pg_size(cur), "budget_max_work_mem": pg_size(cap),
            "per_query_factor": PER_QUERY_FACTOR[inp.workload]}
    new = min(want, cap) // MB * MB
    if new <= cur:
        return Change("postgres", "work_mem", pg_size(want),
                      f"spills average {pg_size(int(avg))} but the memory budget allows "
                      f"work_mem up to {pg_size(cap)} for every connection: raise it only "
                      "for the spilling queries (SET LOCAL work_mem / ALTER ROLE ... SET)",
                      "PostgreSQL docs: Resource Consumption > Memory",
                      rule="measured.work_mem", advice_only=True, inputs=used)
    why = (f"{st.temp_files} temp files averaging {pg_size(int(avg))}: 2x that in memory "
           f"avoids the spill (within the budget, max {pg_size(cap)})")
    if new < want:
        why = (f"{st.temp_files} temp files averaging {pg_size(int(avg))}: raised to the "
               f"memory budget's limit; the larger sorts still spill, so raise work_mem for "
               "those queries only (SET LOCAL work_mem / ALTER ROLE ... SET)")
    return Change("postgres", "work_mem", pg_size(new), why,
                  "PostgreSQL docs: Resource Consumption > Memory", rule="measured.work_mem",
                  context="user", inputs=used)


def hit_ratio_rule(st: MeasuredStats, shared_buffers: InForce, inp: TuneInputs
                   ) -> Change | None:
    """Buffer hit ratio against database size vs the shared_buffers the counters were
    measured with (``shared_buffers``; not the plan's value): advice."""
    if st.blks_hit is None or st.blks_read is None or st.blks_hit + st.blks_read == 0:
        return None
    ratio = st.blks_hit / (st.blks_hit + st.blks_read)
    try:
        sb = (setting_bytes(shared_buffers.value, "8kB")
              if shared_buffers.value is not None else None)
    except ValueError:       # e.g. "(needs superuser or pg_read_all_settings)"
        sb = None
    db = st.db_size_bytes
    used = {"blks_hit": st.blks_hit, "blks_read": st.blks_read, "hit_ratio": round(ratio, 5),
            "db_size_bytes": db, "shared_buffers_bytes": sb,
            "shared_buffers_source": shared_buffers.source, "memory_bytes": inp.memory_bytes}
    size = _approx_size(db) if db is not None else None
    if db is None:
        why = "database size unknown"
    elif sb is None:
        why = f"the database is {size}; it cannot be set against shared_buffers"
    elif db <= sb:
        why = f"the database ({size}) fits in shared_buffers ({pg_size(sb)})"
        if ratio < 0.99:
            why += "; misses are first reads after start"
    elif db <= inp.memory_bytes * 0.5:
        why = (f"the database ({size}) exceeds shared_buffers ({pg_size(sb)}) but fits in "
               "memory: misses are served by the OS cache; a larger shared_buffers (within "
               "the budget) would turn them into hits")
    else:
        why = (f"the database ({size}) is larger than half of memory: reads reach the disk; "
               "storage speed and indexes matter more than shared_buffers")
    sb_text = pg_size(sb) if sb is not None else "unknown"
    why += f" (measured with shared_buffers {sb_text}: {shared_buffers.source})"
    return Change("postgres", "buffer_hit_ratio", f"{ratio:.4f}", why,
                  "pg_stat_database blks_hit/blks_read", rule="measured.hit_ratio",
                  advice_only=True, inputs=used)


def measured_changes(st: MeasuredStats, settings: dict[str, str], inp: TuneInputs,
                     shared_buffers: InForce) -> list[Change]:
    """``settings``: the plan's; ``shared_buffers``: the value in force while measuring."""
    return [c for c in (wal_rule(st, settings, inp), work_mem_rule(st, settings, inp),
                        hit_ratio_rule(st, shared_buffers, inp)) if c is not None]


def apply_measured(plan: Plan, st: MeasuredStats, inp: TuneInputs, *,
                   shared_buffers: InForce) -> Plan:
    """The plan with measured changes replacing the rule-of-thumb ones they refine;
    ``shared_buffers``: the value in force while ``st`` was measured (for the hit ratio)."""
    settings = plan.postgres_settings()
    changes = measured_changes(st, settings, inp, shared_buffers)
    apply_changes(plan, [m for m in changes if not m.advice_only])
    plan.changes.extend(m for m in changes if m.advice_only)
    return plan


# -- storage, from fio (--measure-storage) -------------------------------------------------
SRC_STORAGE = ("PostgreSQL docs: Planner Cost Constants, Asynchronous Behavior; measured "
               "with fio (8 kB O_DIRECT random reads)")
RPC_STEPS = ((0.25, 1.1), (1.0, 1.5), (4.0, 2.0), (8.0, 3.0))   # QD1 latency ms -> cost


def storage_rules(m: dict) -> list[Change]:
    """random_page_cost from the queue-depth-1 read latency (a random page costs about
    what it waits: flash ~0.1 ms -> 1.1, a spinning disk ~8 ms -> 4); the I/O
    concurrencies from how much deeper queues raise throughput (S = IOPS at QD32 / IOPS at
    QD1, the requests the device serves at once): twice S, as a power of two in 2..256."""
    qd1, qd32 = m["qd1"], m["qd32"]
    lat = qd1["lat_ms"]
    rpc = next((cost for limit, cost in RPC_STEPS if lat <= limit), 4.0)
    speedup = qd32["iops"] / qd1["iops"] if qd1["iops"] > 0 else 1.0
    eic = int(min(256, max(2, 2 ** round(math.log2(max(1.0, 2 * speedup))))))
    nums = {"qd1_lat_ms": round(lat, 3), "qd1_iops": round(qd1["iops"]),
            "qd32_iops": round(qd32["iops"]), "speedup": round(speedup, 2)}
    return [
        Change("postgres", "random_page_cost", str(rpc),
               f"measured: a random 8 kB read waits {lat:.2f} ms at queue depth 1",
               SRC_STORAGE, rule="measured.random_page_cost", inputs=nums),
        Change("postgres", "effective_io_concurrency", str(eic),
               f"measured: 32 queued reads give {speedup:.1f}x the IOPS of one "
               f"({qd32['iops']:.0f} vs {qd1['iops']:.0f})", SRC_STORAGE,
               rule="measured.effective_io_concurrency", inputs=nums),
        Change("postgres", "maintenance_io_concurrency", str(eic),
               "same measured depth for VACUUM/ANALYZE prefetch", SRC_STORAGE,
               rule="measured.maintenance_io_concurrency", inputs=nums),
    ]


def apply_changes(plan: Plan, changes: list[Change]) -> Plan:
    """Replace the plan's changes of the same names (keeping current/restart/context)."""
    for m in changes:
        old = next((c for c in plan.changes if c.name == m.name and not c.advice_only), None)
        if old is not None:
            m.current, m.restart, m.context = old.current, old.restart, old.context
            plan.changes[plan.changes.index(old)] = m
        else:
            plan.changes.append(m)
    return plan
