"""Every cost per operation a trial records, as data (pure): its key in a trial's metrics,
how it is computed from the trial's raw counters, its unit, which direction is better, how
trials aggregate it, where it is shown and how it is formatted.

The measuring code fills the raw counters (``system.py``, ``serverhost.py``, ``pg.py``,
the load generator's CPU); :func:`per_op_costs` turns them into these figures; the judge
(``decide/judge.py``: medians per config, the server CPU comparison), ``pgaccel bench``'s
tables, the terminal summary and the HTML and Markdown reports read this registry for the
list, the headers and the formats.  A new figure is one entry here plus the place that
measures its counter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

Raw = Mapping[str, Any]


@dataclass(frozen=True)
class Cost:
    key: str              # in a trial's metrics ("server_cpu_us_per_op")
    field: str            # in the bench and report rows ("server_us")
    header: str           # a table's column ("srv µs/op")
    title: str            # in words ("server CPU per operation")
    unit: str             # "µs", "KB", "B", "" (a count or a share)
    format: str           # the report/format.py function that prints it
    compute: Callable[[Raw, int], float | None]
    better: str = "lower"         # "lower" | "higher"
    aggregate: str = "median"     # over a config's trials (and its rounds)
    in_summary: bool = True       # a config's summary carries its median (VariantSummary)
    in_rows: bool = True          # `bench` and the report's cost table show it


# Each ``compute`` raises KeyError when the trial lacks the counters (the figure is then
# absent) and returns None when they are there but define nothing (no CPU used at all).
def _per_op(raw_key: str, scale: float = 1.0) -> Callable[[Raw, int], float | None]:
    def compute(m: Raw, ops: int) -> float | None:
        return m[raw_key] * scale / ops
    return compute


def _client_share(m: Raw, ops: int) -> float | None:
    """The load generator's share of the CPU both sides used: client / (client + server)."""
    total = m["server_cpu_s"] + m["client_cpu_s"]
    return m["client_cpu_s"] / total if total else None


def _wal(m: Raw, ops: int) -> float | None:
    wal = (m.get("pg") or {}).get("wal_bytes")
    if wal is None:
        raise KeyError("wal_bytes")
    return wal / ops


COSTS: tuple[Cost, ...] = (
    Cost("server_cpu_us_per_op", "server_us", "srv µs/op", "server CPU per operation", "µs",
         "us", _per_op("server_cpu_s", 1e6)),
    Cost("client_cpu_us_per_op", "client_us", "cli µs/op", "load generator CPU per operation",
         "µs", "us", _per_op("client_cpu_s", 1e6)),
    Cost("client_cpu_share", "client_share", "client CPU", "the load generator's share of "
         "the CPU used", "", "share", _client_share),
    Cost("ctx_switches_per_op", "ctx", "ctx/op", "context switches per operation", "",
         "count", _per_op("host_ctx_switches")),
    Cost("resched_ipis_per_op", "resched", "resched/op", "reschedule interrupts per "
         "operation (a client and its backend on different CPUs)", "", "count",
         _per_op("host_resched_ipis"), in_summary=False, in_rows=False),
    Cost("read_kb_per_op", "read_kb", "read KB/op", "KB read from the disks per operation",
         "KB", "kb", _per_op("disk_read_bytes", 1 / 1024), in_summary=False),
    Cost("write_kb_per_op", "write_kb", "write KB/op", "KB written to the disks per "
         "operation", "KB", "kb", _per_op("disk_write_bytes", 1 / 1024), in_summary=False),
    Cost("wal_bytes_per_op", "wal_b", "WAL B/op", "WAL bytes per operation", "B", "nbytes",
         _wal),
)
BY_KEY = {c.key: c for c in COSTS}
SUMMARY_COSTS = tuple(c for c in COSTS if c.in_summary)
ROW_COSTS = tuple(c for c in COSTS if c.in_rows)
# the cost a config is also judged on, beside throughput (lower is better)
JUDGED_COST = BY_KEY["server_cpu_us_per_op"]


def per_op_costs(m: Raw, ops: int) -> dict[str, Any]:
    """Each cost of :data:`COSTS` whose raw counters the trial has; none without
    operations."""
    if ops <= 0:
        return {}
    out: dict[str, Any] = {}
    for c in COSTS:
        try:
            out[c.key] = c.compute(m, ops)
        except KeyError:
            continue
    return out
