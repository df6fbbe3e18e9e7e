"""What an apply or a rollback did, as returned to the CLI and saved in state manifests.

``Applied`` is one setting pgaccel changed (with its previous value, for the undo);
``ApplyReport`` and ``RollbackReport`` are the results the CLI prints (``to_dict`` for
``--json``).  ``first_previous`` reads back, from a chain of saved states, each setting's
value from before the chain.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .state import State


@dataclass
class Applied:
    name: str
    value: str
    restart: bool
    previous: str | None = None        # SHOW form before
    previous_raw: str | None = None    # pg_settings.setting before
    previous_auto: str | None = None   # --dsn: the ALTER SYSTEM entry before (None: none)
    shown: str | None = None           # SHOW form after, verified


@dataclass
class ApplyReport:
    target: str
    state_id: str | None = None
    state_dir: str | None = None
    dry_run: bool = False
    applied: list[Applied] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    listed: list[tuple[str, str, str]] = field(default_factory=list)   # name, value, why
    unchanged: list[str] = field(default_factory=list)     # already at the planned value
    os_applied: list[dict] = field(default_factory=list)
    os_skipped: list[tuple[str, str]] = field(default_factory=list)
    diff: str = ""
    reloaded: bool = False
    restarted: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RollbackReport:
    state_id: str
    undone: list[str] = field(default_factory=list)
    files: list[dict] = field(default_factory=list)      # path, restored: sha ok
    settings: dict[str, str] = field(default_factory=dict)  # name -> value now (verified)
    os_restored: list[str] = field(default_factory=list)
    restarted: bool = False
    reloaded: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def first_previous(chain: list[State]) -> dict[str, Applied]:
    """For every name: the Applied record of the oldest state in the chain (its previous
    value is the one from before the chain)."""
    out: dict[str, Applied] = {}
    for s in chain:                       # newest first: older ones overwrite
        for d in s.data.get("postgres", {}).get("applied", []):
            out[d["name"]] = Applied(**d)
    return out
