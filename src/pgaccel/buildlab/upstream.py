"""PostgreSQL release tarballs from the project's download site (or a mirror laid out like
it): ``BASE/vX.Y/postgresql-X.Y.tar.bz2`` beside ``postgresql-X.Y.tar.bz2.sha256``, and
``BASE/`` listing the ``vX.Y/`` directories.

The listing and the checksum files are parsed by pure functions; :func:`fetch_release`
downloads the newest release of a major (or the exact one asked for) into a directory,
streaming it through SHA-256 and renaming it into place only when it matches the published
sum.  The checksum comes from the same site as the tarball: it proves the download is whole
and unchanged since the site published it, and HTTPS (the default site) proves the site.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable

DEFAULT_URL = "https://ftp.postgresql.org/pub/source"
COMPRESSIONS = ("tar.bz2", "tar.gz")
TIMEOUT_S = 30.0
USER_AGENT = "pgaccel-build"


class Unavailable(Exception):
    """The site could not give a release (unreachable, no such release, no checksum): the
    next source may be tried.  ``reason`` is one line."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Corrupt(Exception):
    """The tarball's SHA-256 is not the published one (the file was removed)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Fetched:
    path: str
    sha256: str
    url: str
    version: str


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def releases(listing: str, major: int) -> list[str]:
    """The releases of ``major`` a directory listing links to (``href="v18.6/"``), newest
    first; betas and release candidates (``v18beta1``) are not releases."""
    found = set(re.findall(r'href="(?:\./)?v(\d+\.\d+)/?"', listing))
    return sorted((v for v in found if int(v.split(".")[0]) == major), key=_vkey, reverse=True)


def tarball_name(version: str, compression: str = COMPRESSIONS[0]) -> str:
    return f"postgresql-{version}.{compression}"


def release_url(base: str, version: str, name: str) -> str:
    return f"{base.rstrip('/')}/v{version}/{name}"


def published_sha256(text: str, name: str) -> str | None:
    """The SHA-256 a checksum file gives for ``name``: ``HEX  NAME`` / ``HEX *NAME``
    (sha256sum), ``SHA256 (NAME) = HEX`` (BSD), or a file holding one bare digest."""
    for line in text.splitlines():
        line = line.strip()
        m = (re.fullmatch(r"([0-9a-fA-F]{64})\s+\*?(\S+)", line)
             or re.fullmatch(r"SHA256\s*\((\S+)\)\s*=\s*([0-9a-fA-F]{64})", line))
        if m:
            digest, fname = (m.group(1), m.group(2)) if len(m.group(1)) == 64 \
                else (m.group(2), m.group(1))
            if os.path.basename(fname) == name:
                return digest.lower()
        elif re.fullmatch(r"[0-9a-fA-F]{64}", line):
            return line.lower()
    return None


def _why(e: Exception, url: str) -> str:
    """One line for a failed request."""
    if isinstance(e, urllib.error.HTTPError):
        return f"HTTP {e.code} {e.reason} for {url}"
    if isinstance(e, urllib.error.URLError):
        r = e.reason
        return f"could not reach {url} ({getattr(r, 'strerror', None) or r})"
    if isinstance(e, (socket.timeout, TimeoutError)):
        return f"no answer from {url} within {TIMEOUT_S:.0f} s"
    return f"{url}: {e}"


def _get(url: str, timeout: float):
    return urllib.request.urlopen(urllib.request.Request(url, headers={
        "User-Agent": USER_AGENT}), timeout=timeout)


def _text(url: str, timeout: float, limit: int = 4 << 20) -> str:
    try:
        with _get(url, timeout) as r:
            return r.read(limit).decode("utf-8", "replace")
    except (OSError, ValueError) as e:      # URLError and HTTPError are OSErrors
        raise Unavailable(_why(e, url)) from None


def fetch_release(base: str, major: int, exact: str | None, dest: str,
                  log: Callable[[str], None] = lambda s: None,
                  progress: Callable[[float], None] = lambda f: None,
                  timeout: float = TIMEOUT_S) -> Fetched:
    """Download and verify ``exact`` (``"17.4"``) or the newest release of ``major`` from
    ``base`` into ``dest``.  A tarball already there with the published sum is reused.
    Raises :class:`Unavailable` (nothing usable there; nothing left behind) or
    :class:`Corrupt` (a download that does not match its sum; removed)."""
    base = base.rstrip("/")
    if exact is None:
        versions = releases(_text(base + "/", timeout), major)
        if not versions:
            raise Unavailable(f"{base}/ lists no release of PostgreSQL {major}")
    else:
        versions = [exact]
    version = versions[0]
    misses = []
    for comp in COMPRESSIONS:
        name = tarball_name(version, comp)
        url = release_url(base, version, name)
        try:
            want = published_sha256(_text(url + ".sha256", timeout), name)
        except Unavailable as e:
            misses.append(e.reason)
            continue
        if want is None:
            misses.append(f"{url}.sha256 holds no SHA-256 for {name}")
            continue
        os.makedirs(dest, exist_ok=True)
        path = os.path.join(dest, name)
        if os.path.isfile(path) and _sha256(path) == want:
            log(f"{name}: already downloaded, SHA-256 matches {url}.sha256")
            return Fetched(path, want, url, version)
        log(f"downloading {url}")
        part = path + ".part"
        try:
            got = _download(url, part, timeout, progress)
            if got != want:
                raise Corrupt(f"{url} has SHA-256 {got}, not the {want} published in "
                              f"{name}.sha256; the download was removed")
            os.replace(part, path)
        finally:
            if os.path.exists(part):
                os.unlink(part)
        return Fetched(path, want, url, version)
    raise Unavailable("; ".join(misses))


def _download(url: str, part: str, timeout: float, progress: Callable[[float], None]) -> str:
    """Stream ``url`` to ``part`` and return its SHA-256 (the caller renames or removes it)."""
    h = hashlib.sha256()
    done = 0
    try:
        with _get(url, timeout) as r, open(part, "wb") as f:
            total = int(r.headers.get("Content-Length") or 0)
            for chunk in iter(lambda: r.read(1 << 20), b""):
                f.write(chunk)
                h.update(chunk)
                done += len(chunk)
                if total:
                    progress(min(1.0, done / total))
    except (OSError, ValueError) as e:
        raise Unavailable(_why(e, url)) from None
    if total and done != total:
        raise Unavailable(f"{url} ended after {done:,} of {total:,} bytes")
    return h.hexdigest()


def _sha256(path: str) -> str:
    from .apt import sha256_file
    return sha256_file(path)
