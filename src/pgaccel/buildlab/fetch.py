"""Where a build's sources come from, tried in order until one works:

1. ``--source DIR|TARBALL`` (the user's own; nothing else is tried);
2. the release tarball from PostgreSQL's download site, verified against its published
   SHA-256 (``--source-url URL`` names a mirror laid out like it; then nothing else is
   tried, and a failure is the build's error);
3. Debian's source package of the major, every release the indexes list, newest first.

A source that fails is said in one line and the next is tried; when none works, one error
names each source tried and why it failed.  A tarball whose SHA-256 does not match is never
built, and nothing else is tried after it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Callable

from ..errors import UsageError
from . import upstream
from .apt import BuildError, PrivateApt, sha256_file
from .sources import SourcePackage, parse_request, ranked_packages


@dataclass(frozen=True)
class Source:
    tarball: str | None          # an upstream tarball, or
    tree: str | None             # a source tree (git checkout)
    version: str
    sha256: str                  # the tarball's, or "git:<commit>"
    origin: dict

    def describe(self) -> str:
        o = self.origin
        if o.get("kind") == "debian":
            return (f"Debian source package {o['package']} {o['debian_version']} "
                    f"({o['suite']}), sha256 {self.sha256[:12]}…")
        if o.get("kind") == "upstream":
            return f"{o['url']}, sha256 {self.sha256[:12]}… (matches its .sha256)"
        return f"{o.get('kind')} {o.get('path')}"


def version_of_tree(tree: str) -> str | None:
    try:
        with open(os.path.join(tree, "configure")) as f:
            m = re.search(r"^PACKAGE_VERSION='([\d.]+)'", f.read(), re.M)
        return m.group(1) if m else None
    except OSError:
        return None


def debian_attempts(ranked: list[SourcePackage]) -> list[tuple[SourcePackage, list[str]]]:
    """One download attempt per Debian release (``apt-get source pkg=version`` takes it from
    whichever suite lists it: trying it again for the second suite would fetch the same
    files), newest first, with every suite that lists it."""
    out: dict[str, tuple[SourcePackage, list[str]]] = {}
    for p in ranked:
        if p.version in out:
            out[p.version][1].append(p.suite)
        else:
            out[p.version] = (p, [p.suite])
    return list(out.values())


def failure_paragraph(what: str, tried: list[tuple[str, str]]) -> str:
    """The error when no source worked: each source tried and why it failed."""
    lines = "; ".join(f"{src}: {why}" for src, why in tried)
    return f"No source of {what} could be fetched. Tried {len(tried)}: {lines}."


NO_SOURCE_HINT = ("Download the release tarball (postgresql-X.Y.tar.bz2, from "
                  "https://www.postgresql.org/ftp/source/ or a mirror) and pass --source "
                  "TARBALL, or --source-url URL for a mirror laid out like "
                  f"{upstream.DEFAULT_URL}/.")


def find_source(req, root: str, log: Callable[[str], None],
                progress: Callable[[float], None] = lambda f: None) -> Source:
    """The sources for ``req`` (a :class:`pgaccel.buildlab.make.Request`)."""
    try:
        major, exact = parse_request(req.version)
    except ValueError as e:
        raise UsageError(f"pgaccel build {req.version}: {e}.", None) from None
    if req.source:
        return _local(req.source, major, exact, req.version)
    what = f"PostgreSQL {exact or major}"
    tried: list[tuple[str, str]] = []
    base = req.source_url or upstream.DEFAULT_URL
    try:
        f = upstream.fetch_release(base, major, exact, os.path.join(root, ".sources",
                                   "upstream"), log=log, progress=progress)
        return Source(f.path, None, f.version, f.sha256,
                      {"kind": "upstream", "url": f.url, "path": f.path})
    except upstream.Corrupt as e:
        raise BuildError(f"{what}: {e.reason}. A tarball that does not match its published "
                         "checksum is never built.",
                         "Run the build again (a download damaged on the way) or use another "
                         "mirror with --source-url; if it persists, tell the mirror's "
                         "operator.") from None
    except upstream.Unavailable as e:
        if req.source_url:
            raise BuildError(f"--source-url {base}: {e.reason}.",
                             "Check the URL (a directory laid out like "
                             f"{upstream.DEFAULT_URL}/: vX.Y/postgresql-X.Y.tar.bz2 and its "
                             ".sha256), or leave --source-url out to try the default site "
                             "and Debian's source packages.") from None
        tried.append((f"upstream {base}", e.reason))
        log(f"upstream {base}: {e.reason}; trying Debian's source packages")
    return _debian(root, major, exact, what, tried, log)


def _local(path: str, major: int, exact: str | None, asked: str) -> Source:
    p = os.path.abspath(path)
    if os.path.isdir(p):
        v = version_of_tree(p)
        if not v:
            raise UsageError(f"--source {p}: no PostgreSQL configure script there.",
                             "Give the top of a PostgreSQL source tree or a release tarball.")
        r = subprocess.run(["git", "-C", p, "rev-parse", "HEAD"], capture_output=True,
                           text=True)
        sha = f"git:{r.stdout.strip()}" if r.returncode == 0 else f"tree:{p}"
        src = Source(None, p, v, sha, {"kind": "tree", "path": p})
    elif os.path.isfile(p):
        m = re.search(r"postgresql-(\d+\.\d+)", os.path.basename(p))
        if not m:
            raise UsageError(f"--source {p}: not a PostgreSQL release tarball "
                             "(postgresql-X.Y.tar.*).", None)
        src = Source(p, None, m.group(1), sha256_file(p), {"kind": "tarball", "path": p})
    else:
        raise UsageError(f"--source {p} does not exist.", None)
    if int(src.version.split(".")[0]) != major or (exact and src.version != exact):
        raise UsageError(f"--source {p} holds PostgreSQL {src.version}, not {asked}.", None)
    return src


def _debian(root: str, major: int, exact: str | None, what: str,
            tried: list[tuple[str, str]], log: Callable[[str], None]) -> Source:
    if not shutil.which("apt-get"):
        tried.append(("Debian source packages", "apt-get is not on this machine"))
        raise BuildError(failure_paragraph(what, tried), NO_SOURCE_HINT)
    apt = PrivateApt(os.path.join(root, ".sources", "apt"))
    log("fetching the Debian source indexes (private apt state, the machine's sources "
        "unchanged)")
    try:
        apt.update()
    except BuildError as e:
        tried.append(("Debian source indexes", _first_line(e.message)))
        raise BuildError(failure_paragraph(what, tried), NO_SOURCE_HINT) from None
    cands = apt.candidates(major)
    attempts = debian_attempts(ranked_packages(cands, major, exact))
    if not attempts:
        have = ", ".join(sorted({f"{c.upstream} ({c.suite})" for c in cands})) or "none"
        tried.append(("Debian source packages", f"no suite holds {what} (found: {have})"))
        raise BuildError(failure_paragraph(what, tried), NO_SOURCE_HINT)
    for i, (pkg, suites) in enumerate(attempts):
        dest = os.path.join(root, ".sources", f"{pkg.package}_{pkg.version}")
        label = f"Debian {pkg.package} {pkg.version} ({', '.join(suites)})"
        try:
            tar, sha = apt.download(pkg, dest)
        except BuildError as e:
            shutil.rmtree(dest, ignore_errors=True)
            tried.append((label, _first_line(e.message)))
            if i + 1 < len(attempts):
                nxt = attempts[i + 1][0]
                log(f"{label} could not be downloaded ({tried[-1][1]}); trying "
                    f"{nxt.version} ({nxt.suite})")
            continue
        return Source(tar, None, pkg.upstream, sha,
                      {"kind": "debian", "package": pkg.package, "debian_version": pkg.version,
                       "suite": ", ".join(suites), "path": tar})
    raise BuildError(failure_paragraph(what, tried), NO_SOURCE_HINT)


def _first_line(message: str) -> str:
    """A failure's gist: apt's error lines mention the 404 ("E: Failed to fetch … 404 Not
    Found"), kept; the command line before it is shortened."""
    lines = [x.strip() for x in message.splitlines() if x.strip()]
    err = next((x for x in lines if x.startswith("E:") or "404" in x), lines[0] if lines else "")
    return err[:240]
