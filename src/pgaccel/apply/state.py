"""The state store: one directory per apply, so every apply can be undone exactly.

``<state dir>/<id>/manifest.json`` records the target, every file pgaccel touches (path,
mode, owner, SHA-256 before and after, the timestamped backup in ``files/``, the SHA-256 of
every content pgaccel is about to write), each setting's previous value, the Linux items
and the plan; ``status`` moves from ``applying`` to ``applied`` or ``failed``, and to
``rolled-back``.  An ``applying`` state whose process (``owner``: pid and start time) is
gone was killed mid-apply: it is *interrupted*, and a rollback undoes it like an applied
one, since the manifest and the backups were saved before any file was written.

Crash safety: every file is written under a temporary name in its own directory (with the
original's mode and owner), fsynced and renamed into place, so a kill leaves each file
either as it was or as pgaccel meant it; the manifest names each content before it is
written.  ``StateStore`` lists and finds the states and the chain a rollback has to undo;
the byte-level file helpers (``read_bytes``, ``put_bytes``, ``sha``) are the ones both the
apply and the restore use.  ``crash_point`` is where the tests kill an apply
(``PGACCEL_TEST_KILL_AT``).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import secrets
import shutil
import signal
import time

from .. import __version__
from ..errors import UsageError
from ..util import (atomic_write, atomic_write_json, owner_alive, process_owner,
                    state_subdir, temp_name)


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
    """Replace ``path`` with ``data`` atomically (``util.atomic_write``), the new file
    getting ``like``'s mode and owner (default: those of the file it replaces).  Where the
    directory is not writable but the file is, the file is rewritten in place (same inode)
    instead."""
    path = os.path.realpath(path)
    meta = like or (file_mode(path) if os.path.exists(path) else None)
    try:
        atomic_write(path, data, meta)
    except PermissionError as e:
        if e.filename != temp_name(path) or not os.path.exists(path):
            raise
        with open(path, "r+b") as f:
            f.write(data)
            f.truncate()
            f.flush()
            os.fsync(f.fileno())


def file_mode(path: str) -> dict:
    """Mode and owner of ``path`` (``like`` for ``put_bytes``)."""
    st = os.stat(path)
    return {"mode": st.st_mode & 0o7777, "uid": st.st_uid, "gid": st.st_gid}


def crash_point(name: str) -> None:
    """Kill this process with SIGKILL here when ``PGACCEL_TEST_KILL_AT`` names this point
    (how the tests prove an apply can be undone from anywhere a kill lands)."""
    if os.environ.get("PGACCEL_TEST_KILL_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


# -- states ------------------------------------------------------------------------------

def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def new_state_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def default_state_dir() -> str:
    return state_subdir("PGACCEL_STATE_DIR", "tune-states")


class State:
    """One apply: ``<store>/<id>/manifest.json`` plus timestamped backups in ``files/``."""

    def __init__(self, path: str, data: dict):
        self.dir, self.data = path, data

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def status(self) -> str:
        """The manifest's status, or 'interrupted' for an apply whose process is gone."""
        st = self.data.get("status", "?")
        if st == "applying" and not owner_alive(self.data.get("owner")):
            return "interrupted"
        return st

    @property
    def undoable(self) -> bool:
        return self.status in ("applied", "interrupted")

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

    def write(self, path: str, data: bytes, like: dict | None = None) -> None:
        """Write a backed-up file: name the new content's checksum in the manifest first,
        then replace the file atomically (``put_bytes``)."""
        path = os.path.realpath(path)
        rec = next(r for r in self.data["files"] if r["path"] == path and r["touched"])
        h = sha(data)
        if h not in rec.setdefault("planned", []):
            rec["planned"].append(h)
            self.save()
        put_bytes(path, data, like)

    def left_by_pgaccel(self, path: str) -> set[str | None]:
        """Checksums ``path`` may have as this state left it: the one recorded at the end,
        or for an interrupted apply the original or any content it was writing."""
        out: set[str | None] = set()
        for r in self.data.get("files", []):
            if r["path"] != path:
                continue
            if self.status == "interrupted":
                out |= {r["sha256_before"], *r.get("planned", [])}
            else:
                out.add(r["sha256_after"])
        return out

    def remove_temp_files(self) -> None:
        """Temporary files a killed apply left beside the files it was replacing."""
        pid = (self.data.get("owner") or {}).get("pid")
        if pid is None:
            return
        for r in self.data.get("files", []):
            for t in glob.glob(glob.escape(temp_name(r["path"], pid))):
                try:
                    os.unlink(t)
                except OSError:
                    pass

    def _copy(self, name: str, data: bytes) -> str:
        d = os.path.join(self.dir, "files")
        os.makedirs(d, mode=0o700, exist_ok=True)
        rel = os.path.join("files", f"{name}.{time.strftime('%Y%m%dT%H%M%S')}")
        fd = os.open(os.path.join(self.dir, rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
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
        self.remove_temp_files()
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
            if sha(read_bytes(p)) not in next(s.left_by_pgaccel(p) for s in chain if s.has(p))]


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
                          "status": "applying", "owner": process_owner(), "keys": [target["key"]],
                          "target": target, "files": [], "plan": plan})
        try:
            st.save()
        except OSError:
            shutil.rmtree(path, ignore_errors=True)
            raise
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
            active = [s for s in states if s.undoable]
            if not active:
                raise UsageError("There is no applied state to roll back.",
                                 f"`pgaccel rollback --list` shows the states in {self.root}.")
            return active[-1]
        hits = [s for s in states if s.id.startswith(ref)]
        if len(hits) != 1:
            raise UsageError(f"No state {ref!r}" if not hits else
                             f"{ref!r} matches {len(hits)} states",
                             f"`pgaccel rollback --list` shows the states in {self.root}.")
        if hits[0].status == "applying":
            raise UsageError(f"State {hits[0].id} is being applied right now (pgaccel pid "
                             f"{hits[0].data['owner']['pid']}).",
                             "Wait for it to finish (or stop it), then roll back.")
        if not hits[0].undoable:
            raise UsageError(f"State {hits[0].id} is {hits[0].status}: nothing to roll back.",
                             "Choose an applied state (pgaccel rollback --list).")
        return hits[0]

    def chain(self, state: State) -> list[State]:
        """``state`` and every later applied state sharing a target with it, newest first."""
        keys = set(state.keys)
        states = self.states()
        later = states[next(i for i, s in enumerate(states) if s.id == state.id):]
        return [s for s in reversed(later) if s.undoable and keys & set(s.keys)]

    def interrupted(self, key: str) -> list[State]:
        """States on ``key`` whose apply was killed before it finished."""
        return [s for s in self.states() if s.status == "interrupted" and key in s.keys]

    def owned_auto_entries(self, key: str) -> dict[str, str]:
        """ALTER SYSTEM entries pgaccel set on ``key`` in states still applied."""
        out: dict[str, str] = {}
        for s in self.states():
            if s.undoable and key in s.keys:
                for d in s.data.get("postgres", {}).get("applied", []):
                    out[d["name"]] = d["value"]
        return out
