"""The state store: one directory per apply, so every apply can be undone exactly.

``<state dir>/<id>/manifest.json`` records the target, every file pgaccel touches (path,
mode, owner, SHA-256 before and after, the timestamped backup in ``files/``), each
setting's previous value, the Linux items and the plan; ``status`` moves from ``applying``
to ``applied`` or ``failed``, and to ``rolled-back``.  ``StateStore`` lists and finds the
states and the chain a rollback has to undo; the byte-level file helpers (``read_bytes``,
``put_bytes``, ``sha``) are the ones both the apply and the restore use.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time

from .. import __version__
from ..errors import UsageError
from ..util import atomic_write_json


# -- files, byte for byte ----------------------------------------------------------------

def sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def put_bytes(path: str, data: bytes, like: dict | None = None) -> None:
    """Write ``data`` to ``path`` in place when it exists (same inode, owner, mode, labels),
    else create it with ``like``'s mode and owner."""
    if os.path.exists(path):
        with open(path, "r+b") as f:
            f.write(data)
            f.truncate()
            f.flush()
            os.fsync(f.fileno())
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, (like or {}).get("mode", 0o600))
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if like:
        os.chmod(path, like["mode"])
        if os.geteuid() == 0:
            os.chown(path, like["uid"], like["gid"])


def file_mode(path: str) -> dict:
    """Mode and owner of ``path`` (``like`` for ``put_bytes``)."""
    st = os.stat(path)
    return {"mode": st.st_mode & 0o7777, "uid": st.st_uid, "gid": st.st_gid}


# -- states ------------------------------------------------------------------------------

def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def new_state_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def default_state_dir() -> str:
    env = os.environ.get("PGACCEL_STATE_DIR")
    if env:
        return env
    import platformdirs
    return os.path.join(platformdirs.user_state_dir("pgaccel"), "tune-states")


class State:
    """One apply: ``<store>/<id>/manifest.json`` plus timestamped backups in ``files/``."""

    def __init__(self, path: str, data: dict):
        self.dir, self.data = path, data

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def status(self) -> str:
        return self.data.get("status", "?")

    @property
    def keys(self) -> list[str]:
        return self.data.get("keys", [])

    def save(self) -> None:
        atomic_write_json(os.path.join(self.dir, "manifest.json"), self.data)

    def finish(self, status: str) -> None:
        """Set the status; after an apply (or a failed one) record the files' checksums."""
        self.data["status"] = status
        if status in ("applied", "failed"):
            for rec in self.data.get("files", []):
                rec["sha256_after"] = sha(read_bytes(rec["path"]))
        self.save()

    def _copy(self, name: str, data: bytes) -> str:
        d = os.path.join(self.dir, "files")
        os.makedirs(d, mode=0o700, exist_ok=True)
        rel = os.path.join("files", f"{name}.{time.strftime('%Y%m%dT%H%M%S')}")
        with open(os.path.join(self.dir, rel), "wb") as f:
            f.write(data)
        os.chmod(os.path.join(self.dir, rel), 0o600)
        return rel

    def backup(self, path: str, touched: bool = True) -> dict:
        """Save ``path`` as it is now (before pgaccel touches it)."""
        path = os.path.realpath(path)
        data = read_bytes(path)
        rec = {"path": path, "existed": data is not None, "touched": touched,
               "sha256_before": sha(data), "backup": None, "sha256_after": None}
        if data is not None:
            rec.update(file_mode(path))
            rec["backup"] = self._copy(os.path.basename(path), data)
        self.data.setdefault("files", []).append(rec)
        return rec

    def watch(self, path: str) -> dict:
        """Record a file pgaccel does not touch (checksums before and after)."""
        return self.backup(path, touched=False)

    def backup_bytes(self, name: str, data: bytes) -> None:
        self.data.setdefault("remote_files", []).append(
            {"name": name, "sha256_before": sha(data), "backup": self._copy(name, data)})

    def save_copy(self, path: str, tag: str) -> None:
        data = read_bytes(path)
        if data is not None:
            self._copy(f"{os.path.basename(path)}.{tag}", data)

    def has(self, path: str) -> bool:
        return any(r["path"] == path and r.get("touched", True)
                   for r in self.data.get("files", []))

    def after_sha(self, path: str) -> str | None:
        return next((r["sha256_after"] for r in self.data.get("files", [])
                     if r["path"] == path), None)

    def restore_files(self) -> list[str]:
        """Put every touched file back as it was before (remove ones that did not exist);
        check the bytes.  Returns problems."""
        problems = []
        for rec in self.data.get("files", []):
            if not rec.get("touched", True):
                continue
            p = rec["path"]
            try:
                if rec["existed"]:
                    with open(os.path.join(self.dir, rec["backup"]), "rb") as f:
                        data = f.read()
                    put_bytes(p, data, rec)
                elif os.path.exists(p):
                    os.unlink(p)
            except OSError as e:
                problems.append(f"{p}: {e.strerror or e}")
                continue
            if sha(read_bytes(p)) != rec["sha256_before"]:
                problems.append(f"{p} does not match its backup")
        return problems


# -- chains of states (what a rollback undoes) -------------------------------------------

def touched_paths(chain: list[State]) -> list[str]:
    """Every file the states in ``chain`` touched, each once."""
    seen: list[str] = []
    for s in chain:
        for rec in s.data.get("files", []):
            if rec["path"] not in seen and rec.get("touched", True):
                seen.append(rec["path"])
    return seen


def edited_since(chain: list[State]) -> list[str]:
    """Touched files whose bytes are no longer what the newest state touching them left."""
    return [p for p in touched_paths(chain)
            if sha(read_bytes(p)) != next(s.after_sha(p) for s in chain if s.has(p))]


def mark_rolled_back(states: list[State], to: str) -> None:
    for s in states:
        if s.status != "rolled-back":
            s.data["rolled_back"] = {"at": _now(), "to": to}
            s.finish("rolled-back")


class StateStore:
    def __init__(self, root: str | None = None):
        self.root = root or default_state_dir()

    def new(self, target: dict, plan: dict | None, sid: str | None = None) -> State:
        """A new state directory (mode 0700) with its manifest saved as 'applying'."""
        sid = sid or new_state_id()
        path = os.path.join(self.root, sid)
        os.makedirs(path, mode=0o700)
        os.chmod(self.root, 0o700)
        st = State(path, {"format": 1, "id": sid, "created": _now(),
                          "created_ns": time.time_ns(), "pgaccel": __version__,
                          "status": "applying", "keys": [target["key"]], "target": target,
                          "files": [], "plan": plan})
        st.save()
        return st

    def add_os_key(self, state: State, root: str) -> None:
        k = f"os:{os.path.realpath(root)}"
        if k not in state.data["keys"]:
            state.data["keys"].append(k)

    def states(self) -> list[State]:
        out = []
        try:
            names = sorted(os.listdir(self.root))
        except FileNotFoundError:
            return []
        for n in names:
            try:
                with open(os.path.join(self.root, n, "manifest.json")) as f:
                    out.append(State(os.path.join(self.root, n), json.load(f)))
            except (OSError, ValueError):
                continue
        return sorted(out, key=lambda st: (st.data.get("created_ns", 0), st.id))

    def find(self, ref: str | None) -> State:
        states = self.states()
        if ref in (None, "latest"):
            active = [s for s in states if s.status == "applied"]
            if not active:
                raise UsageError("There is no applied state to roll back.",
                                 f"`pgaccel rollback --list` shows the states in {self.root}.")
            return active[-1]
        hits = [s for s in states if s.id.startswith(ref)]
        if len(hits) != 1:
            raise UsageError(f"No state {ref!r}" if not hits else
                             f"{ref!r} matches {len(hits)} states",
                             f"`pgaccel rollback --list` shows the states in {self.root}.")
        if hits[0].status != "applied":
            raise UsageError(f"State {hits[0].id} is {hits[0].status}: nothing to roll back.",
                             "Choose an applied state (pgaccel rollback --list).")
        return hits[0]

    def chain(self, state: State) -> list[State]:
        """``state`` and every later applied state sharing a target with it, newest first."""
        keys = set(state.keys)
        states = self.states()
        later = states[next(i for i, s in enumerate(states) if s.id == state.id):]
        return [s for s in reversed(later) if s.status == "applied" and keys & set(s.keys)]

    def owned_auto_entries(self, key: str) -> dict[str, str]:
        """ALTER SYSTEM entries pgaccel set on ``key`` in states still applied."""
        out: dict[str, str] = {}
        for s in self.states():
            if s.status == "applied" and key in s.keys:
                for d in s.data.get("postgres", {}).get("applied", []):
                    out[d["name"]] = d["value"]
        return out
