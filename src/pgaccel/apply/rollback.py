"""``pgaccel rollback``: return every target of a saved state to how it was before it.

The state and every later applied state sharing a target with it (``StateStore.chain``)
are undone newest first: each PostgreSQL target by its own path (``apply.rollback_local``
restores a local cluster's files; ``apply_dsn.rollback_dsn`` resets ALTER SYSTEM entries),
then the Linux values (``ossettings.restore_os``).
"""

from __future__ import annotations

from . import ossettings
from .local import check_os_allowed, rollback_local
from .dsn import rollback_dsn
from .reports import RollbackReport
from .state import State, StateStore, mark_rolled_back


def rollback(store: StateStore, ref: str | None = None, *, dsn: str | None = None,
             force: bool = False, is_root: bool | None = None) -> RollbackReport:
    """Return the target(s) of state ``ref`` (default: the latest applied) to how they were
    before it: undo it and every later applied state on the same target, newest first
    (PostgreSQL first, then the Linux values)."""
    target = store.find(ref)
    chain = store.chain(target)
    report = RollbackReport(target.id, undone=[s.id for s in chain])
    os_items = [ossettings.OsItem.from_dict(d) for s in chain
                for d in s.data.get("os", {}).get("items", [])]
    if os_items:
        check_os_allowed(is_root)
    groups: dict[str, list[State]] = {}
    for s in chain:
        if s.data["target"].get("kind") in ("pgdata", "throwaway", "dsn"):
            groups.setdefault(s.data["target"]["key"], []).append(s)
    for states in groups.values():
        if states[0].data["target"]["kind"] == "dsn":
            rollback_dsn(states, report, dsn, force)
        else:
            rollback_local(states, report, force)
    if os_items:
        ossettings.restore_os(os_items, is_root=is_root)
        report.os_restored = ossettings.describe(os_items)
    mark_rolled_back(chain, target.id)
    return report
