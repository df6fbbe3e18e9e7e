"""The build cache: where builds live, what each one is, and finding one by name.

Layout under the builds directory (``$PGACCEL_BUILDS``; as root ``/var/lib/pgaccel/builds``
so the unprivileged server user can run the binaries; otherwise the user's data directory):

    NAME/                 an installed build (bin, lib, share, include) ...
    NAME/build.json       ... whose manifest is written before the directory gets its name
    NAME/build.log        the full log of the build
    .sources/             downloaded tarballs and the private apt state, shared by builds
    .work-NAME-PID/       a build in progress (removed at its end, or by the next build
                          when its process is gone), so nothing half-built looks installed
    NAME.failed.log       the log of the last failed build of NAME
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from typing import Any

from ..errors import NotFound
from ..util import pid_alive

MANIFEST = "build.json"


def builds_dir() -> str:
    env = os.environ.get("PGACCEL_BUILDS")
    if env:
        return env
    if os.geteuid() == 0:
        return "/var/lib/pgaccel/builds"
    import platformdirs
    return os.path.join(platformdirs.user_data_dir("pgaccel"), "builds")


def ensure_dir(root: str) -> str:
    os.makedirs(root, exist_ok=True)
    # the server user must reach the binaries: traversable by all, writable by the owner
    for d in (root, os.path.dirname(root)):
        try:
            os.chmod(d, os.stat(d).st_mode | 0o755)
        except OSError:
            pass
    return root


@dataclass(frozen=True)
class Build:
    name: str
    path: str
    manifest: dict[str, Any]

    @property
    def bindir(self) -> str:
        return os.path.join(self.path, "bin")

    @property
    def version(self) -> str:
        return self.manifest["recipe"]["version"]

    @property
    def flavor(self) -> str:
        return self.manifest["recipe"]["flavor"]

    @property
    def key(self) -> str:
        return self.manifest["key"]

    def to_dict(self) -> dict[str, Any]:
        r = self.manifest["recipe"]
        return {"name": self.name, "version": r["version"], "flavor": r["flavor"],
                "cflags": r["cflags"], "ldflags": r["ldflags"], "liburing": r["liburing"],
                "key": self.key, "source": self.manifest.get("source"),
                "size_bytes": self.manifest.get("size_bytes"),
                "build_seconds": self.manifest.get("build_seconds"),
                "created": self.manifest.get("created"), "training": self.manifest.get("training"),
                "path": self.path, "bindir": self.bindir}


def load(root: str, name: str) -> Build | None:
    path = os.path.join(root, name)
    try:
        with open(os.path.join(path, MANIFEST)) as f:
            return Build(name, path, json.load(f))
    except (OSError, ValueError):
        return None


def list_builds(root: str | None = None) -> list[Build]:
    root = root or builds_dir()
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    out = [load(root, n) for n in names if not n.startswith(".") and
           os.path.isdir(os.path.join(root, n))]
    return [b for b in out if b is not None]


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def match(builds: list[Build], name: str) -> Build | None:
    """A build by its exact name (18.6-lto), or by major + flavor (18-lto: the newest 18.x
    build of that flavor)."""
    for b in builds:
        if b.name == name:
            return b
    m = re.fullmatch(r"(\d+)-(.+)", name)
    if not m:
        return None
    major, rest = m.groups()
    same = [b for b in builds if b.version.split(".")[0] == major
            and b.name[len(b.version) + 1:] == rest]
    return max(same, key=lambda b: _vkey(b.version)) if same else None


def resolve(name: str, root: str | None = None) -> Build:
    """``--build NAME`` -> the build, or a NotFound that says how to make it."""
    builds = list_builds(root)
    b = match(builds, name)
    if b is None:
        have = ", ".join(x.name for x in builds) or "none yet"
        m = re.fullmatch(r"(\d+(?:\.\d+)?)-(.+)", name)
        how = (f"Build it with `pgaccel build {m.group(1)} --flavor {m.group(2)}`"
               if m else "Build one with `pgaccel build VERSION --flavor FLAVOR`")
        raise NotFound(f"No build named {name!r} (builds here: {have}).",
                       f"{how}; `pgaccel builds` lists them.")
    return b


def remove(name: str, root: str | None = None) -> Build:
    root = root or builds_dir()
    b = resolve(name, root)
    # rename first so a half-removed build never looks installed
    gone = os.path.join(root, f".removing-{b.name}-{os.getpid()}")
    os.rename(b.path, gone)
    shutil.rmtree(gone, ignore_errors=True)
    return b


def dir_size(path: str) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def sweep(root: str) -> list[str]:
    """Remove work and removal directories whose process is gone (an interrupted build)."""
    removed = []
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    for n in names:
        m = re.fullmatch(r"\.(?:work|removing)-.+-(\d+)", n)
        if m and not pid_alive(int(m.group(1))):
            shutil.rmtree(os.path.join(root, n), ignore_errors=True)
            removed.append(n)
    return removed
