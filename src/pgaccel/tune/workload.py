"""The workload a server runs, measured: :class:`WorkloadProfile` (pure).

Built from pg_stat_statements' rows for a window (a capture bundle, two snapshots of a live
server, or everything since the view was last reset): where the statements' time goes by
duration, reads against writes, rows per call, temp blocks written (sorts and hashes that
spilled), JIT's share, shared blocks hit against read, WAL per second, the busiest
statements and connections.  :func:`classify` turns it into the workload class the rules
plan for (``oltp``, ``mixed``, ``analytics``, ``ingest``), with the numbers that decided it;
the rules in ``rules.py`` read the profile itself for parallelism, JIT, work_mem and the
planner's page costs (docs/tuning-rules.md, "Planned from the workload").

A statement's label is pg_stat_statements' normalised text (constants as ``$n``), cut
short: never a value the application sent.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

from ..util import format_bytes

BLOCK = 8192
# (key, label, lower bound ms, upper bound ms) of a statement's mean time per call
BUCKETS = (("short", "under 1 ms", 0.0, 1.0), ("medium", "1-100 ms", 1.0, 100.0),
           ("long", "over 100 ms", 100.0, math.inf))
LONG_MS = 100.0
# classification thresholds (shares of the statements' time)
ANALYTIC_LONG = 0.60        # this much in long statements, little writing: analytics
MIXED_LONG = 0.20           # this much in long statements: mixed (OLTP beside reporting)
INGEST_WRITES = 0.50        # this much in writes, few long statements: ingest
ANALYTIC_MAX_WRITES = 0.30
ANALYTIC_LONG_CALLS = 0.25  # and this much of the calls: not an application's lookups
# what a rule counts as mattering
SPILL_SHARE = 0.05          # statements that spilled hold this much of the time
JIT_HEAVY = 0.10            # JIT compilation took this share of all statement time
CACHED = 0.99               # shared blocks hit: the data is read from memory
TOP = 5                     # busiest statements kept in the profile
LABEL = 72                  # characters of a statement's text kept as its label


@dataclass(frozen=True)
class StatementCost:
    """One statement's window as the profile reads it (times in ms, counts summed)."""
    label: str
    calls: int
    total_ms: float
    rows: int = 0
    writes: bool = False
    blks_hit: int | None = None
    blks_read: int | None = None
    temp_blks: int | None = None
    wal_bytes: int | None = None
    jit_ms: float | None = None
    par_workers: int | None = None

    @property
    def mean_ms(self) -> float:
        return self.total_ms / self.calls if self.calls else 0.0


@dataclass
class WorkloadProfile:
    """What the statements of a window cost, in shares of their time and calls."""
    source: str                                  # where it was read, in words
    window_s: float | None                       # None: since the view was last reset
    statements: int = 0
    calls: int = 0
    time_ms: float = 0.0
    time_share: dict[str, float] = field(default_factory=dict)   # by BUCKETS key
    call_share: dict[str, float] = field(default_factory=dict)
    write_time_share: float = 0.0
    write_call_share: float = 0.0
    rows_per_call: float = 0.0
    temp_bytes: int | None = None                # temp blocks written, in bytes
    spill_time_share: float | None = None        # time in statements that spilled
    spill_bytes_per_call: int | None = None      # the largest such spill per call
    jit_share: float | None = None               # JIT compilation's share of the time
    hit_ratio: float | None = None               # shared blocks hit / (hit + read)
    wal_bytes_per_s: float | None = None         # a window's WAL from its statements
    parallel_share: float | None = None          # time in statements that launched workers
    connections: int | None = None               # most backends active at once (sampled)
    top: list[dict[str, Any]] = field(default_factory=list)      # the busiest statements

    @property
    def long_share(self) -> float:
        return self.time_share.get("long", 0.0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "WorkloadProfile":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def _share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def _known(rows: list[StatementCost], attr: str) -> list[StatementCost] | None:
    """The rows when every one knows ``attr`` (a column the server's version has)."""
    return rows if rows and all(getattr(r, attr) is not None for r in rows) else None


def profile_of(costs: Iterable[StatementCost], source: str, window_s: float | None = None,
               connections: int | None = None) -> WorkloadProfile:
    """The profile of a window's statements (those that ran at least once)."""
    rows = [c for c in costs if c.calls > 0]
    calls = sum(r.calls for r in rows)
    time_ms = sum(r.total_ms for r in rows)
    p = WorkloadProfile(source, window_s, len(rows), calls, time_ms, connections=connections)
    for key, _, lo, hi in BUCKETS:
        inb = [r for r in rows if lo <= r.mean_ms < hi]
        p.time_share[key] = _share(sum(r.total_ms for r in inb), time_ms)
        p.call_share[key] = _share(sum(r.calls for r in inb), calls)
    p.write_time_share = _share(sum(r.total_ms for r in rows if r.writes), time_ms)
    p.write_call_share = _share(sum(r.calls for r in rows if r.writes), calls)
    p.rows_per_call = _share(sum(r.rows for r in rows), calls)
    if (t := _known(rows, "temp_blks")) is not None:
        p.temp_bytes = sum(r.temp_blks for r in t) * BLOCK
        spilled = [r for r in t if r.temp_blks]
        p.spill_time_share = _share(sum(r.total_ms for r in spilled), time_ms)
        heavy = [r for r in spilled if _share(r.total_ms, time_ms) >= SPILL_SHARE]
        if heavy:
            p.spill_bytes_per_call = max(int(r.temp_blks * BLOCK / r.calls) for r in heavy)
    if (j := _known(rows, "jit_ms")) is not None:
        p.jit_share = _share(sum(r.jit_ms for r in j), time_ms)
    if (h := _known(rows, "blks_hit")) is not None and (_known(rows, "blks_read")):
        hit, read = sum(r.blks_hit for r in h), sum(r.blks_read for r in h)
        p.hit_ratio = _share(hit, hit + read) if hit + read else None
    if window_s and (w := _known(rows, "wal_bytes")) is not None:
        p.wal_bytes_per_s = sum(r.wal_bytes for r in w) / window_s
    if (pw := _known(rows, "par_workers")) is not None:
        p.parallel_share = _share(sum(r.total_ms for r in pw if r.par_workers), time_ms)
    for r in sorted(rows, key=lambda r: -r.total_ms)[:TOP]:
        p.top.append({"statement": r.label[:LABEL], "time_share": _share(r.total_ms, time_ms),
                      "call_share": _share(r.calls, calls), "mean_ms": r.mean_ms,
                      "writes": r.writes,
                      "temp_bytes_per_call": (int(r.temp_blks * BLOCK / r.calls)
                                              if r.temp_blks else 0)})
    return p


def classify(p: WorkloadProfile | None) -> tuple[str | None, str]:
    """The workload class the profile shows, and why in one sentence with its numbers;
    (None, why) when it shows nothing to plan from."""
    if p is None or not p.calls or p.time_ms <= 0:
        return None, "no statement ran in the window"
    long, wr, lc = p.long_share, p.write_time_share, p.call_share.get("long", 0.0)
    said = (f"{long:.0%} of the statements' time in statements over {LONG_MS:.0f} ms "
            f"({_pct(lc)} of the calls), {wr:.0%} in writes")
    if long >= ANALYTIC_LONG and lc >= ANALYTIC_LONG_CALLS and wr < ANALYTIC_MAX_WRITES:
        return "analytics", said
    if long >= MIXED_LONG:
        return "mixed", said
    if wr >= INGEST_WRITES:
        return "ingest", said
    return "oltp", said


def _pct(x: float) -> str:
    """A share for a sentence: 0.14% stays visible, 40% needs no decimals."""
    return f"{x:.0%}" if x >= 0.095 or x == 0 else f"{x * 100:.2g}%"


def uses_parallel(p: WorkloadProfile | None) -> bool:
    """Whether the workload's time goes to statements that parallel query speeds up: long
    ones (or, from PostgreSQL 18, ones that launched workers)."""
    if p is None:
        return False
    if p.parallel_share is not None and p.parallel_share >= MIXED_LONG:
        return True
    return p.long_share >= MIXED_LONG


def lines(p: WorkloadProfile) -> list[tuple[str, str]]:
    """(what, value) rows for a terminal or a report: the numbers the profile came from."""
    out = [("source", p.source),
           ("window", f"{p.window_s:.0f} s" if p.window_s else "since the view was reset"),
           ("statements", f"{p.statements} ({p.calls:,} calls, {p.time_ms / 1000:,.1f} s)")]
    out.append(("time by duration", ", ".join(
        f"{lbl} {p.time_share.get(k, 0):.0%}" for k, lbl, _, _ in BUCKETS)))
    out.append(("calls by duration", ", ".join(
        f"{lbl} {p.call_share.get(k, 0):.0%}" for k, lbl, _, _ in BUCKETS)))
    out.append(("writes", f"{p.write_time_share:.0%} of the time, "
                          f"{p.write_call_share:.0%} of the calls"))
    out.append(("rows per call", f"{p.rows_per_call:,.1f}"))
    if p.temp_bytes is not None:
        spill = "none" if not p.temp_bytes else (
            f"{format_bytes(p.temp_bytes)} written by statements holding "
            f"{p.spill_time_share or 0:.0%} of the time"
            + (f" (up to {format_bytes(p.spill_bytes_per_call)} per call)"
               if p.spill_bytes_per_call else ""))
        out.append(("spills (temp files)", spill))
    if p.jit_share is not None:
        out.append(("JIT compilation", f"{p.jit_share:.1%} of the time"))
    if p.hit_ratio is not None:
        out.append(("shared blocks hit", f"{p.hit_ratio:.2%}"))
    if p.wal_bytes_per_s is not None:
        out.append(("WAL", f"{format_bytes(p.wal_bytes_per_s)}/s"))
    if p.parallel_share is not None:
        out.append(("parallel query", f"{p.parallel_share:.0%} of the time in statements "
                                      "that launched workers"))
    if p.connections is not None:
        out.append(("busiest connections", f"{p.connections} active at once"))
    return out

