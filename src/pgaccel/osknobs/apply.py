"""Apply and undo the Linux layer of a tuning plan (``tune --apply-os``): sysctls through
/proc/sys, sysfs values (THP, block-device scheduler and read-ahead) by path, all through
``osknobs.knob``'s operations under ``root`` (tests use a constructed tree).

Rules: only as root (``is_root``, checked even for a constructed tree) and only when the
caller was given ``--apply-os``; ``advice_only`` changes are never applied; a key this machine
lacks is skipped with a note.  Each item's previous value is read first and handed to the
caller (the state manifest) *before* anything is written; every write is read back, and a
value the kernel does not keep (e.g. fewer huge pages than asked for) undoes the items
already written and raises.  ``restore_os`` writes previous values back, newest first.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Callable, Iterable

from ..errors import OsApplyError
from ..tune.plan import Change
from .knob import key_path, partner_path, read_value, same, write_back, write_value


@dataclass
class OsItem:
    key: str                  # vm.swappiness, sys/block/vda/queue/scheduler
    path: str                 # the file under root
    previous: str             # value before (normalised, see read_value)
    value: str                # value to write
    rule: str = ""
    partner_previous: str | None = None   # the exclusive partner's value before (see below)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "OsItem":
        return cls(d["key"], d["path"], d["previous"], d["value"], d.get("rule", ""),
                   d.get("partner_previous"))


# -- pure -------------------------------------------------------------------------------

def applicable(changes: Iterable[Change]) -> list[Change]:
    return [c for c in changes if c.layer == "linux" and not c.advice_only]


def check_allowed(is_root: bool, apply_os: bool = True) -> None:
    if not apply_os:
        raise OsApplyError("Linux settings are only changed with --apply-os.",
                           "Add --apply-os (as root), or use --format sysctl/tuned/script to "
                           "apply them yourself.")
    if not is_root:
        raise OsApplyError("Changing Linux settings (sysctls, /sys) needs root.",
                           "Run pgaccel as root with --apply-os, or apply the output of "
                           "`pgaccel tune --format script` yourself.")


def describe(items: Iterable[OsItem]) -> list[str]:
    return [f"{i.key}: {i.previous} -> {i.value}" for i in items]


# -- effects (thin) ---------------------------------------------------------------------

def plan_os(changes: Iterable[Change], root: str = "/") -> tuple[list[OsItem],
                                                                  list[tuple[str, str]]]:
    """(items that would change a value, [(key, why skipped)]); reads, writes nothing."""
    items: list[OsItem] = []
    skipped: list[tuple[str, str]] = []
    for c in changes:
        if c.layer != "linux":
            continue
        if c.advice_only:
            skipped.append((c.name, "advice only, never applied automatically"))
            continue
        path = key_path(c.name, root)
        cur = read_value(path)
        if cur is None:
            skipped.append((c.name, f"{path} does not exist or cannot be read here"))
        elif same(cur, c.proposed):
            skipped.append((c.name, f"already {cur}"))
        else:
            part = partner_path(path)
            items.append(OsItem(c.name, path, cur, str(c.proposed), c.rule,
                                read_value(part) if part else None))
    return items, skipped


def _undo(done: list[OsItem]) -> list[str]:
    """Write previous values back, newest first; what could not be restored.  A *_bytes
    value that was 0 comes back by writing its ratio partner's old value."""
    values = []
    for it in reversed(done):
        values.append((it.path, it.previous))
        part = partner_path(it.path)
        if part and it.partner_previous is not None:
            values.append((part, it.partner_previous))
    return write_back(values)


def apply_os(changes: Iterable[Change], root: str = "/", *, is_root: bool | None = None,
             record: Callable[[list[OsItem]], None] | None = None
             ) -> tuple[list[OsItem], list[tuple[str, str]]]:
    """Apply the plan's applicable Linux changes under ``root``; (applied, skipped).

    ``record(items)`` is called with every item and its previous value before the first
    write (the caller saves them in the state manifest)."""
    check_allowed(os.geteuid() == 0 if is_root is None else is_root)
    items, skipped = plan_os(changes, root)
    if record is not None:
        record(items)
    done: list[OsItem] = []
    for it in items:
        failure = None
        try:
            write_value(it.path, it.value)
        except OSError as e:
            failure = f"the kernel refused {it.value!r}: {e.strerror or e}"
        done.append(it)
        if failure is None:
            now = read_value(it.path)
            if not same(now, it.value):
                failure = f"it reads back as {now!r}"
                if it.key == "vm.nr_hugepages":
                    failure = (f"the kernel reserved only {now} of {it.value} huge pages "
                               "(not enough free contiguous memory)")
        if failure:
            problems = _undo(done)
            restored = ("The values already written were restored." if not problems else
                        "Could not restore: " + "; ".join(problems) + ".")
            raise OsApplyError(f"Setting {it.key} to {it.value} failed: {failure}. {restored}",
                               "Free memory or lower the value (reserve huge pages early, "
                               "e.g. at boot) and try again." if it.key == "vm.nr_hugepages"
                               else "Check that the value is valid on this kernel.")
    return done, skipped


def restore_os(items: Iterable[OsItem], *, is_root: bool | None = None) -> None:
    """Write previous values back (items in the order they were applied; undone newest
    first) and check each reads back exactly."""
    items = list(items)
    if not items:
        return
    check_allowed(os.geteuid() == 0 if is_root is None else is_root)
    problems = _undo(items)
    if problems:
        raise OsApplyError("Some Linux settings could not be restored: " + "; ".join(problems)
                           + ".", "Set them by hand; the previous values are in the state "
                           "manifest (pgaccel rollback --list).")
