"""What an experiment is made of, as plain data (pure): the variants compared, the
workloads they run (:class:`WorkloadSpec`), and each measured :class:`Trial`.  The runner
(``experiment.py``, ``trial.py``) makes them; the judge (``judge.py``) and the reports read
them; :func:`trials_from_store` makes them back from the store's rows."""

from __future__ import annotations

import calendar
import time
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from ..workloads.base import RunParams, Workload


@dataclass
class Variant:
    name: str
    settings: dict[str, object] = field(default_factory=dict)
    description: str = ""


@dataclass
class WorkloadSpec:
    workload: Workload
    params: RunParams
    key: str = ""                # the store's workload name (default: the workload's)

    @property
    def name(self) -> str:
        return self.key or self.workload.name

    @property
    def label(self) -> str:
        return f"{self.name} c={self.params.clients}"

    @property
    def is_steps(self) -> bool:
        return self.workload.kind == "steps"


@dataclass
class TrialSpec:
    variant: str
    settings: dict[str, object]
    workload: Workload
    params: RunParams
    round: int = 0


@dataclass
class Trial:
    variant: str
    workload: str
    round: int
    clients: int
    started_at: float
    throughput: float
    unit: str
    metrics: dict[str, Any] = field(default_factory=dict)
    series: list[float] = field(default_factory=list)
    latency_series: list[float] = field(default_factory=list)
    warmup_s: float = 0.0
    not_applied: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Trial":
        """A trial as :meth:`to_dict` wrote it in run.json (unknown keys ignored)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def trials_from_store(rows: list[dict[str, Any]]) -> list[Trial]:
    """Trials as ``Store.trials_for(..., with_series=True)`` returns them, back as
    :class:`Trial` objects (for resuming a run); failed trials are left out."""
    out = []
    for r in rows:
        if r["status"] == "failed" or r["primary_value"] is None:
            continue
        m = dict(r["metrics"] or {})
        try:
            started = calendar.timegm(time.strptime(r["started_at"], "%Y-%m-%dT%H:%M:%SZ"))
        except (TypeError, ValueError):
            started = 0.0
        series = (r.get("series") or {})
        out.append(Trial(variant=r["variant"], workload=r["workload"], round=r["round"],
                         clients=r["clients"], started_at=float(started),
                         throughput=float(r["primary_value"]), unit=m.get("unit", ""),
                         metrics=m, series=list(series.get("throughput", [])),
                         latency_series=list(series.get("latency_p50_ms", []))))
    return out
