"""What an experiment is made of, as plain data (pure): the variants compared, the
workloads they run (:class:`WorkloadSpec`), and each measured :class:`Trial`.  The runner
(``experiment.py``, ``trial.py``) makes them; the judge (``judge.py``) and the reports read
them."""

from __future__ import annotations

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
