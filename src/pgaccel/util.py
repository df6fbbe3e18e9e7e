"""Small helpers shared by every layer: atomic file writes, the JSON documents' schema
number, a human byte size."""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

# The version of every JSON document pgaccel writes (run.json, summary.json, the store's
# summaries, `show --export json`) or prints (`--json`, `--format json`); docs/formats.md
# describes them and what changes bump the number.
JSON_SCHEMA = 1


def with_schema(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` with ``"schema"`` as its first key (an existing one is replaced)."""
    return {"schema": JSON_SCHEMA, **{k: v for k, v in doc.items() if k != "schema"}}


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
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.filename is None:     # a write error: name the file
            raise OSError(e.errno, e.strerror, path) from None
        raise


def atomic_write_json(path: str, data: Any) -> None:
    atomic_write(path, json.dumps(data, indent=2, default=str, sort_keys=False) + "\n")


def format_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"
