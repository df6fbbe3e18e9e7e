"""Where a PostgreSQL source comes from (pure): the Debian mirrors this machine already uses,
the deb-src lines pgaccel's private apt state gets, which suite's source package to take for
a requested version, and the checksums a ``.dsc`` promises.

Debian keeps one source package per major (``postgresql-17``) whose ``.orig.tar.bz2`` is the
upstream release tarball; newer suites carry newer majors (on a bookworm machine: 15 in
bookworm, 17 in trixie, 18 in sid).  pgaccel reads only the upstream tarball and builds it
with configure/make, never the Debian packaging.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..pg.versions import SUPPORTED

DEBIAN_MAIN = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# the suites whose Sources indexes are searched, oldest first: a stable machine's own suite,
# then the newer ones that hold the newer majors
SUITES = ("bookworm", "trixie", "forky", "sid")


# suites with security updates (a stable release's point fixes land there first: Debian 12's
# postgresql-15 15.20 is in bookworm-security while bookworm itself holds 15.18)
SECURITY_SUITES = ("bookworm", "trixie")


def debian_mirrors(sources_texts: list[str], archive: str = "debian") -> list[str]:
    """The Debian archive URIs named in apt's sources files, deb822 (``URIs: ...``) or
    one-line (``deb [opts] URI suite ...``), in order, unique: the main archive
    (``archive="debian"``, not -security, not third-party) or ``"debian-security"``."""
    out: list[str] = []
    for text in sources_texts:
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("#"):
                continue
            uris: list[str] = []
            m = re.match(r"URIs:\s*(.+)", line, re.I)
            if m:
                uris = m.group(1).split()
            else:
                m = re.match(r"deb(?:-src)?\s+(?:\[[^\]]*\]\s+)?(\S+)\s", line)
                if m:
                    uris = [m.group(1)]
            for u in uris:
                u = u.rstrip("/")
                if u.endswith("/" + archive) and u not in out:
                    out.append(u)
    return out


def debsrc_lines(mirrors: list[str], suites: tuple[str, ...] = SUITES,
                 keyring: str = KEYRING, security: list[str] | None = None) -> str:
    """The private sources.list: one deb-src line per suite on the first Debian mirror the
    machine uses (deb.debian.org when it names none), plus SUITE-security on the first
    security mirror it uses (if any), all checked with Debian's keyring."""
    uri = mirrors[0] if mirrors else DEBIAN_MAIN
    text = "".join(f"deb-src [signed-by={keyring}] {uri} {s} main\n" for s in suites)
    if security:
        text += "".join(f"deb-src [signed-by={keyring}] {security[0]} {s}-security main\n"
                        for s in suites if s in SECURITY_SUITES)
    return text


def suite_in(archive_line: str) -> str:
    """The suite named in an ``apt-cache madison`` archive column
    (``http://deb.debian.org/debian-security bookworm-security/main Sources``)."""
    for s in [f"{x}-security" for x in SECURITY_SUITES] + list(SUITES):
        if f" {s}/" in f" {archive_line}":
            return s
    return "?"


def suites_by_version(madison: str) -> dict[str, list[str]]:
    """``apt-cache madison`` output -> Debian version -> the suites whose Sources list it,
    in madison's order (``17.12-0+deb13u1`` -> ``["trixie-security", "trixie"]``)."""
    out: dict[str, list[str]] = {}
    for line in madison.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) >= 3 and "Sources" in parts[2]:
            out.setdefault(parts[1], []).append(suite_in(parts[2]))
    return out


@dataclass(frozen=True)
class SourcePackage:
    package: str          # postgresql-18
    version: str          # Debian version, 18.6-3
    upstream: str         # 18.6
    suite: str            # where apt found it

    @property
    def major(self) -> int:
        return int(self.upstream.split(".")[0])


def upstream_version(debian_version: str) -> str:
    """18.6-3 -> 18.6; 17.11-0+deb13u1 -> 17.11; 1:15.4-1 -> 15.4."""
    v = debian_version.split(":", 1)[-1]
    return v.rsplit("-", 1)[0] if "-" in v else v


def parse_showsrc(text: str) -> list[tuple[str, str]]:
    """``apt-cache showsrc`` output -> [(package, debian_version)] for every record."""
    out = []
    pkg = None
    for line in text.splitlines():
        if line.startswith("Package:"):
            pkg = line.split(":", 1)[1].strip()
        elif line.startswith("Version:") and pkg:
            out.append((pkg, line.split(":", 1)[1].strip()))
    return out


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def parse_request(text: str) -> tuple[int, str | None]:
    """``18`` -> (18, None); ``17.4`` -> (17, "17.4").  Anything else is refused."""
    m = re.fullmatch(r"\s*(\d{2})(?:\.(\d+))?\s*", str(text))
    if not m:
        raise ValueError(f"{text!r} is not a PostgreSQL version: give a major (15, 16, 17, 18) "
                         "or an exact release (17.4)")
    major = int(m.group(1))
    if major < 15:
        raise ValueError(f"PostgreSQL {major} is not supported: pgaccel builds 15 and newer")
    newest = SUPPORTED.stop - 1
    if major > newest:
        raise ValueError(f"PostgreSQL {major} is newer than this pgaccel knows (it builds 15 "
                         f"to {newest}: its settings, SQL and build flags are checked against "
                         "those); nothing was downloaded. Upgrade pgaccel, or build a known "
                         "major")
    return major, (f"{major}.{m.group(2)}" if m.group(2) is not None else None)


def ranked_packages(candidates: list[SourcePackage], major: int,
                    exact: str | None) -> list[SourcePackage]:
    """The source packages that may be built, best first: the exact release when asked
    (from whichever suite holds it), else the newest release of the major first (the next
    ones are fallbacks when a download fails)."""
    mine = [c for c in candidates if c.major == major and c.package == f"postgresql-{major}"]
    if exact is not None:
        mine = [c for c in mine if c.upstream == exact]
    return sorted(mine, key=lambda c: (_vkey(c.upstream), _vkey(c.version)), reverse=True)


def choose_package(candidates: list[SourcePackage], major: int,
                   exact: str | None) -> SourcePackage | None:
    """The source package to build (the first of :func:`ranked_packages`)."""
    ranked = ranked_packages(candidates, major, exact)
    return ranked[0] if ranked else None


def dsc_sha256(dsc_text: str) -> dict[str, str]:
    """The ``Checksums-Sha256`` section of a ``.dsc``: file name -> sha256."""
    out: dict[str, str] = {}
    inside = False
    for line in dsc_text.splitlines():
        if line.startswith("Checksums-Sha256:"):
            inside = True
            continue
        if inside:
            if not line.startswith(" "):
                break
            parts = line.split()
            if len(parts) == 3 and re.fullmatch(r"[0-9a-f]{64}", parts[0]):
                out[parts[2]] = parts[0]
    return out


def orig_tarball(files: dict[str, str]) -> str | None:
    """The upstream tarball among a .dsc's files (``*.orig.tar.*``)."""
    return next((f for f in sorted(files) if re.search(r"\.orig\.tar\.(bz2|gz|xz)$", f)), None)
