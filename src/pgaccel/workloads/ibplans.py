"""What one Insert Benchmark step runs, as data (pure): a load step's commits, l.x's index
statements, a q step's writers and queries.  ``insertbench.py`` builds them and runs them
whole; the lab runs every variant's in turns (``lab/paired_lsteps.py``,
``lab/paired_xstep.py``, ``lab/paired_qsteps.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .ibscripts import IBConfig


@dataclass(frozen=True)
class LoadPlan:
    """One load step (l.i0, l.i1, l.i2), ready to run: ``transactions`` commits per client
    of ``script``, each inserting ``rows`` rows (l.i1 and l.i2 also delete as many)."""
    step: str
    cfg: IBConfig
    script: str
    transactions: int                # per client
    rows: int                        # rows inserted per commit
    defines: dict[str, Any] = field(default_factory=dict)
    before: list[int] | None = None  # l.i1, l.i2: the queues' sizes before, when counted
    extra: dict[str, Any] = field(default_factory=dict)   # added to the step's extra


@dataclass(frozen=True)
class QueryPlan:
    """One q step, ready to run: background writers paced to ``target`` rows/s in all,
    queries as fast as they go, for ``seconds``."""
    step: str                        # qr100, qp500, ...
    seconds: float
    cfg: IBConfig
    defines: dict[str, Any]
    wrpc: int                        # rows per writer commit
    target: int                      # rows/s of all writers together
    writer: str                      # the writer's pgbench script
    queries: list[str]               # the query clients' scripts
    extra: dict[str, Any] = field(default_factory=dict)   # added to the step's extra


@dataclass(frozen=True)
class IndexPlan:
    """l.x, ready to run: per table its CREATE INDEX statements in order (each table's own
    connection runs its list), and the rows they index (every table's)."""
    step: str
    statements: list[list[str]]      # per table
    rows: int
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)   # added to the step's extra

    @property
    def indexes(self) -> int:
        """How many indexes the table with the most gets."""
        return max((len(s) for s in self.statements), default=0)
