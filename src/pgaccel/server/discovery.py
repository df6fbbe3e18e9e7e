"""Find PostgreSQL installations on this host.

Search order (first hit wins when several name the same directory):
``--pg-bin DIR``, ``$PGACCEL_PG_BIN``, ``pg_config --bindir`` (the pg_config on PATH),
``/usr/lib/postgresql/*/bin`` (Debian/Ubuntu), then PATH.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import NotFound
from ..pg.versions import parse_version

SERVER_PROGRAMS = ("postgres", "initdb", "pg_ctl")

INSTALL_HINT = (
    "Install the PostgreSQL server and client (Debian/Ubuntu: "
    "`sudo apt-get install postgresql postgresql-contrib`), or point pgaccel at an "
    "installation with --pg-bin DIR or PGACCEL_PG_BIN=DIR (the directory holding postgres, "
    "initdb, pg_ctl and pgbench)."
)


@dataclass(frozen=True)
class Installation:
    bindir: str
    version: str  # e.g. "15.18"
    major: int
    found_by: str
    programs: tuple[str, ...] = field(default_factory=tuple)

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


def probe_dir(bindir: str, found_by: str) -> Installation | None:
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
    return Installation(str(d.resolve()), version, major, found_by, progs)


def candidate_dirs(pg_bin: str | None = None) -> list[tuple[str, str]]:
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
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin")):
        cands.append((d, "/usr/lib/postgresql"))
    for prog in ("postgres", "pgbench", "psql"):
        w = shutil.which(prog)
        if w:
            cands.append((str(Path(w).resolve().parent), "PATH"))
    return cands


def find_installations(pg_bin: str | None = None) -> list[Installation]:
    """Every distinct installation found, in search order."""
    seen: set[str] = set()
    found: list[Installation] = []
    for d, how in candidate_dirs(pg_bin):
        try:
            key = str(Path(d).resolve())
        except OSError:
            continue
        if key in seen:
            continue
        seen.add(key)
        inst = probe_dir(d, how)
        if inst:
            found.append(inst)
    return found


def choose_server(pg_bin: str | None = None, major: int | None = None) -> Installation:
    """The installation to run a server from.

    An explicit --pg-bin/PGACCEL_PG_BIN must hold a server; otherwise the newest server
    found (or the newest of the requested major version).
    """
    insts = find_installations(pg_bin)
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
    if not servers:
        what = f"PostgreSQL {major} server" if major else "PostgreSQL server"
        raise NotFound(f"No {what} was found on this machine.", INSTALL_HINT)
    return max(servers, key=lambda i: (i.major, i.version))


def find_client(program: str, prefer: Installation | None = None) -> str:
    """A client program (pgbench, psql): from ``prefer`` first, then any installation."""
    if prefer and program in prefer.programs:
        return prefer.path(program)
    for inst in sorted(find_installations(), key=lambda i: -i.major):
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
