"""A workload bundle on disk: a directory with ``manifest.json`` (its schema version, what was
captured and from which server) beside the files it names.  Written whole or not at all (a
temporary directory renamed into place), readable by its owner only (0700, files 0600):
statement texts and the schema are the user's data."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any, Callable, Mapping

from ..errors import UsageError

SCHEMA = 1
KIND = "pgaccel-capture"


def check_destination(path: str | None) -> None:
    """Before a window is spent: ``path`` (``--out``; None: a new directory in the current
    one) must be new, and its parent a directory this process can create entries in
    (tried by making and removing a temporary one, which also sees a read-only mount)."""
    target = os.path.abspath(path) if path else None
    parent = os.path.dirname(target) if target else os.getcwd()
    where = "--out" if path else "the current directory (the default --out)"
    if target and os.path.exists(target):
        raise UsageError(f"--out {target} exists.", "Give --out a new directory (a capture "
                         "never replaces another); nothing was captured.")
    try:
        os.makedirs(parent, exist_ok=True)
        os.rmdir(tempfile.mkdtemp(prefix=".capture-check-", dir=parent))
    except OSError as e:
        raise UsageError(f"The bundle cannot be written: {where} is under {parent}, where "
                         f"a directory cannot be created ({e.strerror or e}).",
                         "Give --out a directory on a writable file system you can write "
                         "to; nothing was captured and the server was not touched.") from None


def write_bundle(path: str, manifest: Mapping[str, Any], files: Mapping[str, str | bytes],
                 produce: Callable[[str], None] | None = None) -> str:
    """Write ``files`` (name -> text or bytes) and the manifest into a new directory
    ``path``; ``produce(tmp)`` adds more (a data dump) before it is renamed into place.
    Refuses an existing ``path`` (a capture never overwrites another)."""
    path = os.path.abspath(path)
    if os.path.exists(path):
        raise UsageError(f"{path} exists.", "Give --out a new directory (a capture never "
                         "replaces another).")
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".capture-", dir=parent)      # 0700
    try:
        for name, data in {**files, "manifest.json": json.dumps(
                {**manifest, "schema": SCHEMA, "kind": KIND,
                 "files": sorted(files)}, indent=2) + "\n"}.items():
            fd = os.open(os.path.join(tmp, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data.encode() if isinstance(data, str) else data)
        if produce is not None:
            produce(tmp)
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def read_manifest(path: str) -> dict[str, Any]:
    """A bundle's manifest, checked for its kind and schema version."""
    try:
        with open(os.path.join(path, "manifest.json")) as f:
            m = json.load(f)
    except FileNotFoundError:
        raise UsageError(f"{path} is not a capture (no manifest.json).",
                         "Give the directory `pgaccel capture` wrote.") from None
    except ValueError as e:
        raise UsageError(f"{path}/manifest.json cannot be read ({e}).",
                         "Capture again.") from None
    if not isinstance(m, dict) or m.get("kind") != KIND or not isinstance(m.get("schema"),
                                                                            int):
        raise UsageError(f"{path} is not a pgaccel capture.",
                         "Give the directory `pgaccel capture` wrote.")
    if m["schema"] > SCHEMA:
        raise UsageError(f"{path} was written by a newer pgaccel (bundle schema "
                         f"{m['schema']}; this one reads {SCHEMA}).", "Upgrade pgaccel.")
    return m
