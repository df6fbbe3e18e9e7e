"""Small helpers shared by every layer: atomic file writes, byte sizes."""

from __future__ import annotations

import json
import os
import re
from typing import Any

_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "M": 1024**2, "MB": 1024**2,
          "G": 1024**3, "GB": 1024**3, "T": 1024**4, "TB": 1024**4}


def atomic_write(path: str, text: str | bytes) -> None:
    """Write a file so readers see either the old or the whole new content."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f".{os.path.basename(path)}.tmp.{os.getpid()}")
    mode = "wb" if isinstance(text, bytes) else "w"
    try:
        with open(tmp, mode) as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_json(path: str, data: Any) -> None:
    atomic_write(path, json.dumps(data, indent=2, default=str, sort_keys=False) + "\n")


def parse_bytes(text: str | int) -> int:
    """'24GB', '512MiB', '1.5G', 1024 -> bytes (binary multiples, as PostgreSQL uses)."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(I?B?)\s*", text.upper())
    if not m:
        raise ValueError(f"not a size: {text!r} (examples: 512MB, 24GB, 1TB)")
    return int(float(m.group(1)) * _UNITS[m.group(2) or ""])


def format_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"
