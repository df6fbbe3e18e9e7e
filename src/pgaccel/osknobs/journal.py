"""OS values changed for the length of a run (huge page pools, THP, sysctls), journaled so
that a run killed before it could put them back has them put back at pgaccel's next start.

Before pgaccel first changes a value it records the file and the value it held in
``<journal dir>/os-journal-PID.json`` (written atomically, with the owner's pid and start
time); when the run restores everything, the journal is removed.  :func:`recover` finds
journals whose owner is gone (killed, crashed) and writes their values back through
``osknobs.knob``, the one writer of OS values.
"""

from __future__ import annotations

import glob
import json
import os

from ..util import atomic_write_json, owner_alive, process_owner, state_subdir
from .knob import read_value, write_back

PATTERN = "os-journal-*.json"


def journal_dir() -> str:
    return state_subdir("PGACCEL_OS_JOURNAL_DIR", "os-journal")


class OsJournal:
    """The journal of one process's OS changes (created on the first change)."""

    def __init__(self, directory: str | None = None):
        self.dir = directory or journal_dir()
        self.path = os.path.join(self.dir, f"os-journal-{os.getpid()}.json")
        self.values: dict[str, str] = {}

    def record(self, path: str) -> None:
        """Remember ``path``'s current value before the first change to it (the caller
        records a *_bytes sysctl's ratio partner too: ``osknobs.state.OsState``)."""
        if path in self.values:
            return
        value = read_value(path)
        if value is None:
            return
        self.values[path] = value
        os.makedirs(self.dir, exist_ok=True)
        atomic_write_json(self.path, {"owner": process_owner(), "values": self.values})

    def done(self) -> None:
        """Every value is back: the journal is no longer needed."""
        self.values = {}
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def recover(directory: str | None = None) -> list[str]:
    """Put back the values of every journal whose process is gone; one message per journal
    (what was restored, or what could not be and how to do it by hand)."""
    d = directory or journal_dir()
    out = []
    for f in sorted(glob.glob(os.path.join(d, PATTERN))):
        try:
            with open(f) as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            continue
        owner = data.get("owner") or {}
        if owner_alive(owner):
            continue
        values = data.get("values") or {}
        failed = write_back(list(values.items()))
        restored = [f"{p} = {v}" for p, v in values.items()]
        who = f"pgaccel process {owner.get('pid', '?')}, which ended without restoring them"
        if failed:
            out.append(f"Could not put back all OS values left by {who}: "
                       + "; ".join(failed)
                       + f". Run pgaccel as root to restore them, or write them by hand; "
                       f"the journal is {f}.")
            continue
        os.unlink(f)
        if restored:
            out.append(f"Restored OS values left by {who}: " + "; ".join(restored) + ".")
    return out
