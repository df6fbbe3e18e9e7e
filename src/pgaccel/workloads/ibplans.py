"""What one Insert Benchmark step runs, as data (pure): a load step's commits, l.x's index
statements, a q step's writers and queries.  ``insertbench.py`` builds them and runs them
whole; the lab runs every variant's in turns (``lab/paired_lsteps.py``,
``lab/paired_xstep.py``, ``lab/paired_qsteps.py``)."""

from __future__ import annotations

import re
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
    connection runs its list), and the rows they index (every table's).  With ``passes``
    above 1 the indexes are built that many times, each pass but the last dropped after it
    (``drops``, per table, unmeasured): the same builds measured longer."""
    step: str
    statements: list[list[str]]      # per table
    rows: int
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)   # added to the step's extra
    passes: int = 1
    drops: list[list[str]] = field(default_factory=list)  # per table: its DROP INDEXes

    @property
    def ops(self) -> int:
        """Rows indexed over all passes (every index counts a table's rows once)."""
        return self.rows * self.passes

    @property
    def indexes(self) -> int:
        """How many indexes the table with the most gets."""
        return max((len(s) for s in self.statements), default=0)


_CREATE_INDEX = re.compile(r"^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+(\w+)\s+ON\s", re.I)


def drop_statements(creates: list[str]) -> list[str]:
    """The DROP INDEX of every CREATE INDEX in ``creates``, in reverse order."""
    out = []
    for stmt in reversed(creates):
        m = _CREATE_INDEX.match(stmt)
        if not m:
            raise ValueError(f"not a named CREATE INDEX: {stmt!r}")
        out.append(f"DROP INDEX {m.group(1)}")
    return out
