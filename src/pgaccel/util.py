"""Small helpers shared by every layer: atomic file writes, the JSON documents' schema
number and text, a human byte size."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Mapping

# The version of every JSON document pgaccel writes (run.json, summary.json, the store's
# summaries, `show --export json`) or prints (`--json`, `--format json`); docs/formats.md
# describes them and what changes bump the number.
JSON_SCHEMA = 1


def with_schema(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` with ``"schema"`` as its first key (an existing one is replaced)."""
    return {"schema": JSON_SCHEMA, **{k: v for k, v in doc.items() if k != "schema"}}


def temp_name(path: str, pid: int | None = None) -> str:
    """The temporary file ``atomic_write`` (of process ``pid``) writes before renaming."""
    d, base = os.path.split(os.path.abspath(path))
    return os.path.join(d, f".{base}.tmp.{pid or os.getpid()}")


def atomic_write(path: str, text: str | bytes,
                 meta: Mapping[str, int] | None = None) -> None:
    """Write a file so readers (and a kill) see either the old or the whole new content:
    a temporary file in the same directory, fsynced, renamed into place, the directory
    fsynced.  ``meta`` (``mode``, ``uid``, ``gid``) is given to the new file first (the
    owner only when running as root)."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = temp_name(path)
    data = text if isinstance(text, bytes) else text.encode()
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if meta:
                os.fchmod(fh.fileno(), meta["mode"])
                if os.geteuid() == 0:
                    os.fchown(fh.fileno(), meta["uid"], meta["gid"])
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
    try:
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _finite(data: Any) -> Any:
    """``data`` with every float that is not finite (NaN, inf) replaced by None."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, Mapping):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(v) for v in data]
    return data


def json_text(data: Any, indent: int | None = 2) -> str:
    """``data`` as strict JSON, the one way every document and store value is written: a
    number that is not finite (the median latency of a slice without a transaction, NaN)
    becomes null, as JSON has no NaN or Infinity and strict readers (JavaScript's
    JSON.parse, jq, Go) refuse them; anything else JSON cannot hold is written as its
    ``str``."""
    try:
        return json.dumps(data, indent=indent, default=str, allow_nan=False)
    except ValueError:          # a NaN or an infinity somewhere: the slower walk, only then
        return json.dumps(_finite(data), indent=indent, default=str, allow_nan=False)


def known_fields(cls: Any, d: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``d`` (a document read back) that are fields of dataclass ``cls``,
    older or newer documents carrying fewer or more: a null where the field is a ``float``
    is NaN again (:func:`json_text` wrote the NaN as null)."""
    kinds = {f.name: f.type for f in dataclasses.fields(cls)}
    return {k: (math.nan if v is None and kinds[k] in ("float", float) else v)
            for k, v in d.items() if k in kinds}


def atomic_write_json(path: str, data: Any) -> None:
    atomic_write(path, json_text(data) + "\n")


def format_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def pid_alive(pid: int | None) -> bool:
    """Whether process ``pid`` exists (one that is not ours counts)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- who owns a file of pgaccel's state (a manifest, an OS journal) ------------------------
def _process_started(pid: int) -> float | None:
    import psutil
    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, OSError):
        return None


def process_owner() -> dict:
    """This process as the owner of a state file: pid, start time and host."""
    import socket
    return {"pid": os.getpid(), "started": _process_started(os.getpid()),
            "host": socket.gethostname()}


def owner_alive(owner: dict | None) -> bool:
    """Whether the process that wrote a state file still runs (same pid and start time on
    this host); an unknown owner counts as gone."""
    import socket
    if not owner:
        return False
    if owner.get("host") != socket.gethostname():
        return True                     # another host's process: cannot tell, assume running
    started = _process_started(int(owner["pid"]))
    return started is not None and abs(started - (owner.get("started") or 0)) < 1.0


def state_subdir(env_var: str, name: str) -> str:
    """``$env_var`` when set, else ``name`` under pgaccel's user state directory."""
    env = os.environ.get(env_var)
    if env:
        return env
    import platformdirs
    return os.path.join(platformdirs.user_state_dir("pgaccel"), name)


class LazyModule:
    """A module imported when an attribute of it is first read: SciPy's statistics take a
    second to import, which every command would pay before it even reads its flags (a
    refused ``--clients abc`` took 2.1 s, 1.1 of them in ``scipy.stats``)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        import importlib
        mod = importlib.import_module(self.__dict__["_name"])
        return getattr(mod, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self.__dict__['_name']!r}>"
