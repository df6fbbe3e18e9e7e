"""What a server ran in a capture window, from two pg_stat_statements snapshots (pure).

pg_stat_statements keeps, per statement, the calls, the total time, the mean and the
population standard deviation since its entry was made.  The window's own calls, mean and
spread follow exactly from the two snapshots: the sum of the times is calls x mean, the sum
of their squares calls x (sd^2 + mean^2), and both subtract.  An entry whose calls went down
was evicted and made again inside the window: its later snapshot alone is the window's.

Statement texts are pg_stat_statements' normalised ones (constants as $1, $2, ...).  Utility
statements (ALTER ROLE ... PASSWORD, SET, VACUUM ...) keep their constants before
PostgreSQL 16, so they are never kept as text: they count as "utility" in the time shares.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, replace
from typing import Any, Iterable, Mapping

# the statements a replay can run: anything else is a utility statement
_PLANNABLE = re.compile(r"^(\s*(/\*.*?\*/|--[^\n]*\n))*\s*(\(\s*)*"
                        r"(select|insert|update|delete|with|merge|values|table)\b", re.I | re.S)
UTILITY = "(utility statements)"
TRANSACTION = "(transaction control)"
_TX = re.compile(r"^\s*(begin|commit|rollback|start\s+transaction|end|abort|savepoint|"
                 r"release)\b", re.I)


@dataclass(frozen=True)
class Snapshot:
    """One pg_stat_statements row (times in ms)."""
    dbid: int
    userid: int
    queryid: int
    query: str
    calls: int
    total_ms: float
    mean_ms: float
    stddev_ms: float
    rows: int
    blks_hit: int = 0
    blks_read: int = 0
    temp_blks: int | None = None     # temp_blks_written: sorts and hashes that spilled
    wal_bytes: int | None = None
    jit_ms: float | None = None      # JIT's generation, inlining, optimization, emission (15+)
    par_workers: int | None = None   # parallel workers launched (18+)

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.dbid, self.userid, self.queryid)

    @classmethod
    def from_row(cls, r: Mapping[str, Any] | tuple) -> "Snapshot | None":
        """A row of pg_stat_statements; None for one whose queryid (and text) the role may
        not see (another user's statement without pg_read_all_stats): such rows cannot be
        told apart, so they are counted, not kept."""
        if not isinstance(r, Mapping):
            r = dict(zip(("dbid", "userid", "queryid", "query", "calls", "total_ms",
                          "mean_ms", "stddev_ms", "rows", "blks_hit", "blks_read",
                          "temp_blks", "wal_bytes", "jit_ms", "par_workers"), r))
        if r["queryid"] is None:
            return None

        def opt(k, kind):
            return None if r.get(k) is None else kind(r[k])
        return cls(int(r["dbid"]), int(r["userid"]), int(r["queryid"]),
                   str(r["query"] or ""), int(r["calls"]), float(r["total_ms"]),
                   float(r["mean_ms"]), float(r["stddev_ms"]), int(r["rows"]),
                   int(r.get("blks_hit") or 0), int(r.get("blks_read") or 0),
                   opt("temp_blks", int), opt("wal_bytes", int), opt("jit_ms", float),
                   opt("par_workers", int))


@dataclass(frozen=True)
class Statement:
    """A statement's window: its calls, the time they took and its share of the window."""
    queryid: int
    query: str               # normalised text; UTILITY for utility statements
    calls: int
    total_ms: float
    mean_ms: float
    stddev_ms: float
    rows: int
    share_calls: float = 0.0
    share_time: float = 0.0
    blocks: int | None = None   # shared blocks hit and read: the cost, whatever the host
    blks_read: int | None = None    # of those, read from outside shared buffers
    temp_blks: int | None = None    # temp blocks written: sorts and hashes that spilled
    wal_bytes: int | None = None
    jit_ms: float | None = None     # JIT compilation (15+)
    par_workers: int | None = None  # parallel workers launched (18+)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (a merged row's unknown spread as null, not NaN)."""
        return {k: (None if isinstance(v, float) and math.isnan(v) else v)
                for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Statement":
        """The inverse of :meth:`to_dict`: a merged row's unknown spread is NaN again; an
        unknown count (a column the server's version lacks) stays None."""
        return cls(**{k: (math.nan if d[k] is None and k == "stddev_ms" else d[k])
                      for k in cls.__dataclass_fields__ if k in d})


_COUNTS = ("blks_read", "temp_blks", "wal_bytes", "jit_ms", "par_workers")


def _sum(values: Iterable[Any]) -> Any:
    """A merged row's count: None when a member's is unknown (a column this version
    lacks)."""
    vals = list(values)
    return None if any(v is None for v in vals) else sum(vals)


def is_plannable(query: str) -> bool:
    return bool(_PLANNABLE.match(query or ""))


def window_of(before: Snapshot | None, after: Snapshot) -> Statement | None:
    """The window between two snapshots of one statement (None: not run in it)."""
    if before is not None and after.calls < before.calls:
        before = None                         # evicted and made again in the window
    n0 = before.calls if before else 0
    calls = after.calls - n0
    if calls <= 0:
        return None
    s1 = after.calls * after.mean_ms - (n0 * before.mean_ms if before else 0.0)
    q1 = after.calls * (after.stddev_ms ** 2 + after.mean_ms ** 2) - (
        n0 * (before.stddev_ms ** 2 + before.mean_ms ** 2) if before else 0.0)
    mean = s1 / calls
    var = max(0.0, q1 / calls - mean * mean)
    rows = after.rows - (before.rows if before else 0)
    blocks = (after.blks_hit + after.blks_read
              - ((before.blks_hit + before.blks_read) if before else 0))

    def delta(name: str):
        a, b = getattr(after, name), getattr(before, name) if before else 0
        if a is None or b is None:
            return None
        return max(0, a - b)
    return Statement(after.queryid, after.query, calls, s1, mean, math.sqrt(var), rows,
                     blocks=max(0, blocks), blks_read=delta("blks_read"),
                     temp_blks=delta("temp_blks"), wal_bytes=delta("wal_bytes"),
                     jit_ms=delta("jit_ms"), par_workers=delta("par_workers"))


def window(before: Iterable[Snapshot], after: Iterable[Snapshot], top: int = 50
           ) -> tuple[list[Statement], dict[str, float]]:
    """The window's statements, most time first: the ``top`` plannable ones, the rest of the
    plannable ones merged as one "(other statements)" row, BEGIN, COMMIT and the like as one
    :data:`TRANSACTION` row, other utility statements as one :data:`UTILITY` row without
    text; and the totals (calls, time in ms)."""
    b = {s.key: s for s in before}
    rows = [w for a in after if (w := window_of(b.get(a.key), a)) is not None]
    total_calls = sum(w.calls for w in rows)
    total_ms = sum(w.total_ms for w in rows)
    plan = sorted((w for w in rows if is_plannable(w.query)), key=lambda w: -w.total_ms)
    util = [w for w in rows if not is_plannable(w.query) and not _TX.match(w.query)]
    tx = [w for w in rows if not is_plannable(w.query) and _TX.match(w.query)]
    out = plan[:top]
    for label, group in (("(other statements)", plan[top:]), (TRANSACTION, tx),
                         (UTILITY, util)):
        if group:
            n = sum(w.calls for w in group)
            t = sum(w.total_ms for w in group)
            out.append(Statement(0, label, n, t, t / n, math.nan,
                                 sum(w.rows for w in group),
                                 blocks=sum(w.blocks or 0 for w in group),
                                 **{k: _sum(getattr(w, k) for w in group) for k in _COUNTS}))

    def shared(w: Statement) -> Statement:
        return replace(w, share_calls=w.calls / total_calls if total_calls else 0.0,
                       share_time=w.total_ms / total_ms if total_ms else 0.0)
    return [shared(w) for w in out], {"calls": total_calls, "time_ms": total_ms}
