"""Files of a machine read through ``root`` (``/``, or a recorded or constructed tree with
the same layout, probe/host.py): a missing or unreadable file is None, never an error."""

from __future__ import annotations

import os


def read_text(root: str, rel: str) -> str | None:
    """The text of ``rel`` under ``root``, or None when it cannot be read."""
    try:
        with open(os.path.join(root, rel.lstrip("/")), errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def read_int(root: str, rel: str) -> int | None:
    """``rel`` under ``root`` as an integer, or None when unreadable or not one."""
    text = read_text(root, rel)
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None
