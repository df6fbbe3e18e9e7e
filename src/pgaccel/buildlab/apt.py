"""apt, used two ways: Debian source packages fetched through a private apt state (its own
sources list, lists and cache under pgaccel's build directory, so the machine's own apt
configuration is read but never changed), and build dependencies installed the usual way."""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass

from ..errors import NotFound, PgaccelError
from .sources import (SUITES, SourcePackage, debian_mirrors, debsrc_lines, dsc_sha256,
                      orig_tarball, parse_showsrc, suites_by_version, upstream_version)


INDEX_MAX_AGE_S = 3600


class BuildError(PgaccelError):
    """A build could not get its sources, dependencies, or failed to compile."""

    exit_code = 6


def _machine_sources() -> list[str]:
    texts = []
    for p in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list")),
              *sorted(glob.glob("/etc/apt/sources.list.d/*.sources"))]:
        try:
            with open(p) as f:
                texts.append(f.read())
        except OSError:
            pass
    return texts


class PrivateApt:
    """apt-get/apt-cache with every state path under ``root``."""

    def __init__(self, root: str):
        self.root = root
        for d in ("etc/sources.list.d", "etc/preferences.d", "state/lists/partial",
                  "cache/archives/partial"):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        self.sources_list = os.path.join(root, "etc", "sources.list")

    def options(self) -> list[str]:
        r = self.root
        return ["-o", f"Dir::Etc::sourcelist={self.sources_list}",
                "-o", f"Dir::Etc::sourceparts={r}/etc/sources.list.d",
                "-o", f"Dir::Etc::preferencesparts={r}/etc/preferences.d",
                "-o", f"Dir::State={r}/state", "-o", f"Dir::Cache={r}/cache",
                "-o", "Debug::NoLocking=1", "-o", "APT::Sandbox::User=root"]

    def _run(self, tool: str, *args: str, cwd: str | None = None,
             timeout: float = 1800) -> str:
        exe = shutil.which(tool)
        if not exe:
            raise NotFound(f"{tool} is not on this machine: pgaccel fetches PostgreSQL sources "
                           "with Debian's apt.",
                           "Give the sources yourself with --source DIR|TARBALL (an upstream "
                           "tarball from postgresql.org or a git checkout).")
        r = subprocess.run([exe, *self.options(), *args], capture_output=True, text=True,
                           cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-6:])
            raise BuildError(f"`{tool} {' '.join(args)}` failed (exit {r.returncode}): {tail}",
                             "Check the network and the Debian mirror in /etc/apt/sources.list*, "
                             "or give the sources with --source DIR|TARBALL.")
        return r.stdout

    def update(self, suites: tuple[str, ...] = SUITES) -> str:
        """Write the private sources list (deb-src for ``suites`` on the machine's Debian
        mirror) and download the signed indexes; returns the sources list text."""
        machine = _machine_sources()
        text = debsrc_lines(debian_mirrors(machine), suites,
                            security=debian_mirrors(machine, "debian-security"))
        stamp = os.path.join(self.root, "state", "updated")
        try:
            with open(self.sources_list) as f:
                same = f.read() == text
            fresh = time.time() - os.path.getmtime(stamp) < INDEX_MAX_AGE_S
        except OSError:
            same = fresh = False
        if same and fresh:
            return text               # indexes fetched within the hour for the same suites
        with open(self.sources_list, "w") as f:
            f.write(text)
        self._run("apt-get", "update", "-q")
        with open(stamp, "w"):
            pass
        return text

    def candidates(self, major: int) -> list[SourcePackage]:
        """Every release of ``postgresql-MAJOR`` the suites hold, one per suite listing it."""
        try:
            out = self._run("apt-cache", "showsrc", f"postgresql-{major}")
            madison = self._run("apt-cache", "madison", f"postgresql-{major}")
        except BuildError:
            return []
        suites = suites_by_version(madison)
        pkgs = []
        for pkg, ver in parse_showsrc(out):
            left = suites.get(ver) or ["?"]
            pkgs.append(SourcePackage(pkg, ver, upstream_version(ver),
                                      left.pop(0) if len(left) > 1 else left[0]))
        return pkgs

    def download(self, pkg: SourcePackage, dest: str) -> tuple[str, str]:
        """``apt-get source --download-only`` into ``dest`` (apt checks every file against the
        signed Sources index); the upstream tarball is checked again against the .dsc.
        Returns (tarball path, its sha256)."""
        os.makedirs(dest, exist_ok=True)
        self._run("apt-get", "source", "--download-only", "-q",
                  f"{pkg.package}={pkg.version}", cwd=dest)
        dsc = os.path.join(dest, f"{pkg.package}_{pkg.version.split(':')[-1]}.dsc")
        with open(dsc) as f:
            sums = dsc_sha256(f.read())
        tar = orig_tarball(sums)
        if tar is None:
            raise BuildError(f"{dsc} names no upstream tarball.", "Use --source TARBALL.")
        path = os.path.join(dest, tar)
        digest = sha256_file(path)
        if digest != sums[tar]:
            os.unlink(path)
            raise BuildError(f"{tar}: sha256 {digest} is not the {sums[tar]} its .dsc promises; "
                             "the file was removed.", "Run the build again.")
        return path, digest


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class Deps:
    missing: tuple[str, ...]

    @property
    def install_line(self) -> str:
        return "apt-get install -y --no-install-recommends " + " ".join(self.missing)


def missing_packages(packages: tuple[str, ...]) -> Deps:
    """The Debian packages of ``packages`` that are not installed (dpkg-query)."""
    missing = []
    for p in packages:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True,
                           text=True)
        if r.returncode != 0 or "install ok installed" not in r.stdout:
            missing.append(p)
    return Deps(tuple(missing))


def install_packages(deps: Deps, log) -> None:
    """Install build dependencies (root only; otherwise the exact line to run)."""
    if not deps.missing:
        return
    if os.geteuid() != 0:
        raise NotFound(f"The build needs Debian packages that are not installed: "
                       f"{', '.join(deps.missing)}.", f"Run `sudo {deps.install_line}`, then the "
                       "build again.")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for args in (["apt-get", "update", "-q"], deps.install_line.split()):
        r = subprocess.run(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                           stdin=subprocess.DEVNULL)
        if r.returncode != 0 and args[1] != "update":
            raise BuildError(f"Installing the build dependencies failed (`{deps.install_line}`, "
                             f"exit {r.returncode}).", "Run that line yourself to see why.")
