"""The operations on one OS value — the only code that opens /proc/sys and /sys files to
read or change them: where a key lives (:func:`key_path`), :func:`read_value`,
:func:`write_value`, verify (:func:`same`) and restore (:func:`write_back`).  ``tune
--apply-os`` (``osknobs.apply``), lab variants and ``run --stack`` (``osknobs.state``) and
the journal's recovery all go through them.

Everything is a path under ``root``: ``"/"`` is this machine; a constructed tree with the
same layout (``proc/sys/vm/swappiness``, ``sys/block/vda/queue/scheduler``) goes through
exactly the same code, which is how the tests cover what this machine may not allow."""

from __future__ import annotations

import os

from ..tune.linux import is_sysctl
from .procfs import parse_bracketed


# The kernel keeps each of these pairs exclusive: writing one sets the other to 0, and the
# *_bytes file refuses 0 (EINVAL).  So the way back from vm.dirty_bytes = N to the default
# vm.dirty_bytes = 0 is writing vm.dirty_ratio's old value, which pgaccel records first.
EXCLUSIVE = (("vm/dirty_bytes", "vm/dirty_ratio"),
             ("vm/dirty_background_bytes", "vm/dirty_background_ratio"))


def partner_path(path: str) -> str | None:
    """The ratio file a *_bytes file is exclusive with (None for any other file)."""
    for b, r in EXCLUSIVE:
        if path.endswith("/" + b):
            return path[: -len(b)] + r
    return None


def write_back(values: list[tuple[str, str]]) -> list[str]:
    """Write old values back in the order given (pairs of path and value); a 0 the kernel
    refuses for a *_bytes file whose ratio partner is in ``values`` too is left to the
    partner's write.  Then every path is read back; returns what is not as it was."""
    paths = {p for p, _ in values}
    problems = []
    for path, value in values:
        try:
            write_value(path, value)
        except OSError as e:
            if value.strip() == "0" and partner_path(path) in paths:
                continue                # refused: the partner's write brings the 0 back
            problems.append(f"{path}: {e.strerror or e}")
    for path, value in values:
        now = read_value(path)
        if not same(now, value):
            problems.append(f"{path} is {now}, expected {value}")
    return problems



# -- pure -------------------------------------------------------------------------------

def key_path(key: str, root: str = "/") -> str:
    """Where ``key`` lives under ``root``: sysctls under proc/sys, other keys are paths."""
    rel = "proc/sys/" + key.replace(".", "/") if is_sysctl(key) else key.lstrip("/")
    return os.path.join(root, rel)


def normalise(text: str) -> str:
    """A sysfs/procfs value as a comparable string: the bracketed choice of a list
    ('always [madvise] never' -> 'madvise'), else the words joined by one space."""
    if "[" in text:
        active, _ = parse_bracketed(text)
        if active is not None:
            return active
    return " ".join(text.split())


def same(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and normalise(str(a)) == normalise(str(b))


# -- effects (thin) ---------------------------------------------------------------------

def read_value(path: str) -> str | None:
    try:
        with open(path, errors="replace") as f:
            return normalise(f.read())
    except OSError:
        return None


def write_value(path: str, value: object) -> None:
    """Write one value to a /proc/sys or /sys file (OSError as the kernel gives it).  The
    one writer of OS values: ``tune --apply-os`` and lab variants (``osknobs.state.OsState``)
    both go through it."""
    with open(path, "w") as f:
        f.write(str(value) + "\n")


def read_text(path: str) -> str:
    """A kernel file's whole text ('' when it is missing or unreadable)."""
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""
