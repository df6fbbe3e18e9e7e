"""The plan: what the tuner proposes, layer by layer.

A :class:`Plan` is pure data.  Rules (``tune/rules*.py``) produce it from the probe's facts;
renderers turn it into a conf.d snippet, ALTER SYSTEM statements, a sysctl.d file, JSON;
the apply layer (``apply/``) carries it out and can undo it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..pg.catalog import GucCatalog
    from .inputs import TuneInputs

LAYERS = ("postgres", "linux", "build")


@dataclass
class Change:
    layer: str                 # one of LAYERS
    name: str                  # GUC name, sysctl key (vm.swappiness), sysfs key, build option
    proposed: str              # value as the target expects it ("8GB", "on", "madvise")
    reason: str                # one line: why this value
    source: str = ""           # where the rule comes from (docs, study, tool)
    current: str | None = None  # value now, when known
    restart: bool = False      # postgres: needs a server restart (pg_settings.context=postmaster)
    context: str | None = None  # pg_settings.context when known
    advice_only: bool = False  # shown, never applied automatically (e.g. NIC IRQ affinity)
    rule: str = ""             # id of the rule that produced it
    inputs: dict[str, Any] = field(default_factory=dict)  # numbers a measured rule used

    @property
    def changes_value(self) -> bool:
        return self.current is None or str(self.current) != str(self.proposed)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Plan:
    inputs: dict[str, Any]                      # the machine/profile the plan is for
    changes: list[Change] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)  # free-form advice (pooler, build, ...)

    def layer(self, layer: str) -> list[Change]:
        return [c for c in self.changes if c.layer == layer]

    def postgres_settings(self) -> dict[str, str]:
        """GUC name -> proposed value for every applicable PostgreSQL change."""
        return {c.name: c.proposed for c in self.changes
                if c.layer == "postgres" and not c.advice_only}

    def get(self, name: str) -> Change | None:
        return next((c for c in self.changes if c.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "changes": [c.to_dict() for c in self.changes],
                "warnings": list(self.warnings), "advice": list(self.advice)}


@dataclass
class TuneResult:
    """A plan with what it was made from and for: the inputs, the server's parameter catalog
    (None when planning for a version that is not installed), a description of the server,
    and notes for the user."""

    plan: Plan
    inputs: "TuneInputs"
    catalog: "GucCatalog | None"
    target: str
    notes: list[str] = field(default_factory=list)
    profile: Any = None        # the measured workload.WorkloadProfile the plan read, if any
