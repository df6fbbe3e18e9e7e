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
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping

# the statements a replay can run: anything else is a utility statement
_PLANNABLE = re.compile(r"^(\s*(/\*.*?\*/|--[^\n]*\n))*\s*(\(\s*)*"
                        r"(select|insert|update|delete|with|merge|values|table)\b", re.I | re.S)
UTILITY = "(utility statements)"


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
                          "mean_ms", "stddev_ms", "rows", "blks_hit", "blks_read"), r))
        if r["queryid"] is None:
            return None
        return cls(int(r["dbid"]), int(r["userid"]), int(r["queryid"]),
                   str(r["query"] or ""), int(r["calls"]), float(r["total_ms"]),
                   float(r["mean_ms"]), float(r["stddev_ms"]), int(r["rows"]),
                   int(r.get("blks_hit") or 0), int(r.get("blks_read") or 0))


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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (a merged row's unknown spread as null, not NaN)."""
        return {k: (None if isinstance(v, float) and math.isnan(v) else v)
                for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Statement":
        return cls(**{k: (math.nan if d[k] is None else d[k])
                      for k in cls.__dataclass_fields__ if k in d})


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
    return Statement(after.queryid, after.query, calls, s1, mean, math.sqrt(var), rows)


def window(before: Iterable[Snapshot], after: Iterable[Snapshot], top: int = 50
           ) -> tuple[list[Statement], dict[str, float]]:
    """The window's statements, most time first: the ``top`` plannable ones, the rest of the
    plannable ones merged as one "(other statements)" row, utility statements as one
    :data:`UTILITY` row without text; and the totals (calls, time in ms)."""
    b = {s.key: s for s in before}
    rows = [w for a in after if (w := window_of(b.get(a.key), a)) is not None]
    total_calls = sum(w.calls for w in rows)
    total_ms = sum(w.total_ms for w in rows)
    plan = sorted((w for w in rows if is_plannable(w.query)), key=lambda w: -w.total_ms)
    util = [w for w in rows if not is_plannable(w.query)]
    out = plan[:top]
    for label, group in (("(other statements)", plan[top:]), (UTILITY, util)):
        if group:
            n = sum(w.calls for w in group)
            t = sum(w.total_ms for w in group)
            out.append(Statement(0, label, n, t, t / n, math.nan,
                                 sum(w.rows for w in group)))

    def shared(w: Statement) -> Statement:
        return Statement(w.queryid, w.query, w.calls, w.total_ms, w.mean_ms, w.stddev_ms,
                         w.rows, w.calls / total_calls if total_calls else 0.0,
                         w.total_ms / total_ms if total_ms else 0.0)
    return [shared(w) for w in out], {"calls": total_calls, "time_ms": total_ms}
