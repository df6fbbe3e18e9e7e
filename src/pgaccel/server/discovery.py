"""Find PostgreSQL installations on this host.

Search order (first hit wins when several name the same directory):
``--pg-bin DIR``, ``$PGACCEL_PG_BIN``, ``pg_config --bindir`` (the pg_config on PATH), the
distributions' layouts (LAYOUTS: ``/usr/lib/postgresql/*/bin`` of Debian/Ubuntu,
``/usr/pgsql-*/bin`` of PGDG's RPMs on RHEL/Rocky/Alma/Fedora, ``/usr/local/pgsql/bin`` of
an upstream ``make install``), PATH, then the builds of ``pgaccel build`` (the build cache,
``$PGACCEL_BUILDS``).  A build is a server of last resort: :func:`choose_server` takes one
only when no other server is found.

The layouts are looked for under a root directory, ``/`` unless ``root`` or
``$PGACCEL_DISCOVERY_ROOT`` says otherwise (a system image mounted elsewhere; the tests'
constructed trees).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import buildcache as cache
from ..errors import NotFound
from ..pg.versions import parse_version

SERVER_PROGRAMS = ("postgres", "initdb", "pg_ctl")

# the distributions' bin directories under the root, in search order: (glob, found_by)
LAYOUTS = (
    ("usr/lib/postgresql/*/bin", "/usr/lib/postgresql (Debian/Ubuntu)"),
    ("usr/pgsql-*/bin", "/usr/pgsql-N (PGDG RPM)"),
    ("usr/local/pgsql/bin", "/usr/local/pgsql (source build)"),
)
ROOT_ENV = "PGACCEL_DISCOVERY_ROOT"
BUILD_FOUND_BY = "pgaccel build"
# the flavors of a plain build, first among builds of the same version
PLAIN_BUILD_FLAVORS = ("debian", "o2")

INSTALL_HINT = (
    "Install the PostgreSQL server and client (Debian/Ubuntu: "
    "`sudo apt-get install postgresql postgresql-contrib`; RHEL, Rocky, Alma, Fedora: PGDG's "
    "postgresqlNN-server and postgresqlNN-contrib, found in /usr/pgsql-NN/bin), build one "
    "with `pgaccel build VERSION`, or point pgaccel at an installation with --pg-bin DIR or "
    "PGACCEL_PG_BIN=DIR (the directory holding postgres, initdb, pg_ctl and pgbench)."
)


@dataclass(frozen=True)
class Installation:
    bindir: str
    version: str  # e.g. "15.18"
    major: int
    found_by: str
    programs: tuple[str, ...] = field(default_factory=tuple)
    build: str | None = None  # the name of the `pgaccel build` it is, found in the cache

    @property
    def is_server(self) -> bool:
        return all(p in self.programs for p in SERVER_PROGRAMS)

    def path(self, program: str) -> str:
        p = Path(self.bindir) / program
        if not p.exists():
            raise NotFound(
                f"{program} is not in {self.bindir}.",
                "Install the package that provides it (Debian: postgresql-contrib / "
                "postgresql-client) or choose another installation with --pg-bin.",
            )
        return str(p)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["programs"] = list(self.programs)
        d["is_server"] = self.is_server
        return d


# an installation's prefix may carry environment its server runs with (a `pgaccel build
# --jemalloc` preloads libjemalloc); only these names are honoured
SERVER_ENV_FILE = "pgaccel-server.env"
SERVER_ENV_NAMES = ("LD_PRELOAD", "MALLOC_CONF")


def server_env(bindir: str) -> dict[str, str]:
    """``KEY=VALUE`` lines of ``<prefix>/pgaccel-server.env`` beside ``bindir`` (names in
    SERVER_ENV_NAMES only); {} when there is none."""
    try:
        with open(os.path.join(bindir, os.pardir, SERVER_ENV_FILE)) as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        k, eq, v = line.partition("=")
        if eq and k.strip() in SERVER_ENV_NAMES:
            out[k.strip()] = v.strip()
    return out


def probe_dir(bindir: str, found_by: str, build: str | None = None) -> Installation | None:
    """The installation in ``bindir`` (its programs and version), or None."""
    d = Path(bindir)
    if not d.is_dir():
        return None
    progs = tuple(
        p for p in ("postgres", "initdb", "pg_ctl", "pgbench", "psql", "pg_config")
        if os.access(d / p, os.X_OK)
    )
    probe = next((p for p in ("postgres", "pg_config", "pgbench", "psql") if p in progs), None)
    if probe is None:
        return None
    arg = "--version"
    try:
        out = subprocess.run([str(d / probe), arg], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    parsed = parse_version(out.stdout + out.stderr)
    if not parsed:
        return None
    version, major = parsed
    return Installation(str(d.resolve()), version, major, found_by, progs, build)


def _vkey(version: str) -> tuple[int, ...]:
    """"15.18" -> (15, 18): versions compared as numbers (15.18 is newer than 15.9)."""
    return tuple(int(x) for x in re.findall(r"\d+", version))


def search_root(root: str | None = None) -> str:
    return root or os.environ.get(ROOT_ENV) or "/"


def layout_dirs(root: str | None = None) -> list[tuple[str, str]]:
    """The distributions' bin directories that exist under ``root`` (LAYOUTS' order; within
    a layout, by version number)."""
    base = search_root(root)
    out = []
    for pattern, how in LAYOUTS:
        for d in sorted(glob.glob(os.path.join(base, pattern)), key=_vkey):
            out.append((d, how))
    return out


def build_dirs(builds_root: str | None = None) -> list[tuple[str, str, str]]:
    """The bin directories of the cached builds, (bindir, found_by, name): newest version
    first, a plain flavor first among builds of one version."""
    builds = sorted(cache.list_builds(builds_root),
                    key=lambda b: (tuple(-x for x in _vkey(b.version)),
                                   b.flavor not in PLAIN_BUILD_FLAVORS, b.name))
    return [(b.bindir, f"{BUILD_FOUND_BY} {b.name}", b.name) for b in builds]


def candidate_dirs(pg_bin: str | None = None, root: str | None = None
                   ) -> list[tuple[str, str]]:
    cands: list[tuple[str, str]] = []
    if pg_bin:
        cands.append((pg_bin, "--pg-bin"))
    env = os.environ.get("PGACCEL_PG_BIN")
    if env:
        cands.append((env, "PGACCEL_PG_BIN"))
    pgc = shutil.which("pg_config")
    if pgc:
        try:
            out = subprocess.run([pgc, "--bindir"], capture_output=True, text=True, timeout=20)
            if out.returncode == 0 and out.stdout.strip():
                cands.append((out.stdout.strip(), "pg_config --bindir"))
        except (OSError, subprocess.TimeoutExpired):
            pass
    cands += layout_dirs(root)
    for prog in ("postgres", "pgbench", "psql"):
        w = shutil.which(prog)
        if w:
            cands.append((str(Path(w).resolve().parent), "PATH"))
    return cands


def find_installations(pg_bin: str | None = None, root: str | None = None,
                       builds: bool = True) -> list[Installation]:
    """Every distinct installation found, in search order; the cached builds last
    (``builds=False``: none of them, unless found another way)."""
    seen: set[str] = set()
    found: list[Installation] = []
    cands = [(d, how, None) for d, how in candidate_dirs(pg_bin, root)]
    if builds:
        cands += build_dirs()
    for d, how, name in cands:
        try:
            key = str(Path(d).resolve())
        except OSError:
            continue
        if key in seen:
            continue
        seen.add(key)
        inst = probe_dir(d, how, name)
        if inst:
            found.append(inst)
    return found


def choose_server(pg_bin: str | None = None, major: int | None = None,
                  root: str | None = None) -> Installation:
    """The installation to run a server from.

    An explicit --pg-bin/PGACCEL_PG_BIN must hold a server; otherwise the newest server
    found (or the newest of the requested major version), a cached build only when no other
    server is found.
    """
    insts = find_installations(pg_bin, root)
    explicit = [i for i in insts if i.found_by in ("--pg-bin", "PGACCEL_PG_BIN")]
    if pg_bin and not any(i.found_by == "--pg-bin" for i in insts):
        raise NotFound(f"--pg-bin {pg_bin}: no PostgreSQL programs found there.", INSTALL_HINT)
    if explicit:
        inst = explicit[0]
        if not inst.is_server:
            missing = [p for p in SERVER_PROGRAMS if p not in inst.programs]
            raise NotFound(
                f"{inst.bindir} ({inst.found_by}) has no {', '.join(missing)}: it is not a "
                "PostgreSQL server installation.", INSTALL_HINT)
        return inst
    servers = [i for i in insts if i.is_server and (major is None or i.major == major)]
    installed = [i for i in servers if i.build is None]
    if not servers:
        what = f"PostgreSQL {major} server" if major else "PostgreSQL server"
        raise NotFound(f"No {what} was found on this machine.", INSTALL_HINT)
    # max() keeps the first of equals: a plain build before other flavors (build_dirs)
    return max(installed or servers, key=lambda i: _vkey(i.version))


def find_client(program: str, prefer: Installation | None = None) -> str:
    """A client program (pgbench, psql): from ``prefer`` first, then any installation (the
    newest first, cached builds after the others)."""
    if prefer and program in prefer.programs:
        return prefer.path(program)
    for inst in sorted(find_installations(), key=lambda i: (i.build is not None, -i.major)):
        if program in inst.programs:
            return inst.path(program)
    w = shutil.which(program)
    if w:
        return w
    raise NotFound(
        f"{program} was not found.",
        "Install the PostgreSQL client programs (Debian/Ubuntu: "
        "`sudo apt-get install postgresql-client postgresql-contrib`) or use --pg-bin DIR.",
    )
