"""Where a build's sources come from: the download site's listing and checksum files (pure),
and real downloads over HTTP from a local server laid out like ftp.postgresql.org/pub/source
(a good release, a corrupted one, a missing checksum, a closed port), through the same
``find_source`` the build uses.  The tarballs are small constructed ones: fetching does not
unpack them (tests/test_build_real.py serves a real one and builds from it)."""

from __future__ import annotations

import functools
import hashlib
import io
import os
import socket
import tarfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pgaccel.buildlab import upstream
from pgaccel.buildlab.apt import BuildError
from pgaccel.buildlab.fetch import debian_attempts, failure_paragraph, find_source
from pgaccel.buildlab.make import Request
from pgaccel.buildlab.sources import SourcePackage, ranked_packages

LISTING = """<html><body><h1>Directory listing for /</h1><ul>
<li><a href="v15.20/">v15.20/</a></li><li><a href="v18.10/">v18.10/</a></li>
<li><a href="v18.9/">v18.9/</a></li><li><a href="v18beta1/">v18beta1/</a></li>
<li><a href="v18rc1/">v18rc1/</a></li><li><a href="./v17.12/">v17.12/</a></li>
<li><a href="v1.08/">v1.08/</a></li></ul></body></html>"""


@pytest.mark.parametrize("major, want", [(18, ["18.10", "18.9"]), (17, ["17.12"]),
                                         (15, ["15.20"]), (16, [])])
def test_releases_newest_first_numerically_without_betas(major, want):
    assert upstream.releases(LISTING, major) == want


D = "a" * 64


@pytest.mark.parametrize("text, want", [
    (f"{D}  postgresql-18.6.tar.bz2\n", D),
    (f"{D} *postgresql-18.6.tar.bz2\n", D),
    (f"SHA256 (postgresql-18.6.tar.bz2) = {D.upper()}\n", D),
    (f"{D}\n", D),
    (f"{'b' * 64}  postgresql-18.5.tar.bz2\n", None),      # another file's sum
    ("<html>404 Not Found</html>", None),
    (f"{D[:-1]}  postgresql-18.6.tar.bz2\n", None),         # 63 digits
])
def test_published_sha256(text, want):
    assert upstream.published_sha256(text, "postgresql-18.6.tar.bz2") == want


def test_debian_attempts_one_per_release_with_every_suite():
    """17.12-0+deb13u1 listed in trixie and trixie-security is one download, not two (the
    fallback used to try the same files again)."""
    pk = [SourcePackage("postgresql-17", "17.12-0+deb13u1", "17.12", "trixie"),
          SourcePackage("postgresql-17", "17.12-0+deb13u1", "17.12", "trixie-security"),
          SourcePackage("postgresql-17", "17.11-1", "17.11", "forky"),
          SourcePackage("postgresql-17", "17.11-0+deb13u1", "17.11", "trixie")]
    got = [(p.version, s) for p, s in debian_attempts(ranked_packages(pk, 17, None))]
    assert got == [("17.12-0+deb13u1", ["trixie", "trixie-security"]),
                   ("17.11-1", ["forky"]), ("17.11-0+deb13u1", ["trixie"])]


def test_failure_paragraph_names_each_source_and_why():
    p = failure_paragraph("PostgreSQL 17", [("upstream https://x", "could not reach it"),
                                            ("Debian postgresql-17 17.12-0+deb13u1 (trixie)",
                                             "E: 404 Not Found")])
    assert p == ("No source of PostgreSQL 17 could be fetched. Tried 2: upstream https://x: "
                 "could not reach it; Debian postgresql-17 17.12-0+deb13u1 (trixie): "
                 "E: 404 Not Found.")


# -- a local download site -------------------------------------------------------------------

def _tarball(version: str, payload: bytes = b"#!/bin/sh\n") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:bz2") as t:
        info = tarfile.TarInfo(f"postgresql-{version}/configure")
        info.size = len(payload)
        t.addfile(info, io.BytesIO(payload))
    return buf.getvalue()


def _publish(root, version: str, data: bytes, published: bytes | None = None,
             sha: bool = True) -> str:
    d = root / f"v{version}"
    d.mkdir(parents=True, exist_ok=True)
    name = f"postgresql-{version}.tar.bz2"
    (d / name).write_bytes(data)
    digest = hashlib.sha256(published if published is not None else data).hexdigest()
    if sha:
        (d / f"{name}.sha256").write_text(f"{digest}  {name}\n")
    return digest


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet,
                                                                  directory=str(root)))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield root, f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_newest_release_downloaded_and_verified(site, tmp_path):
    root, url = site
    _publish(root, "18.5", _tarball("18.5"))
    want = _publish(root, "18.6", _tarball("18.6"))
    _publish(root, "17.12", _tarball("17.12"))
    said = []
    src = find_source(Request("18", source_url=url), str(tmp_path / "cache"), said.append)
    assert (src.version, src.sha256, src.origin["kind"]) == ("18.6", want, "upstream")
    assert src.origin["url"] == f"{url}/v18.6/postgresql-18.6.tar.bz2"
    with open(src.tarball, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == want
    assert said == [f"downloading {url}/v18.6/postgresql-18.6.tar.bz2"]
    # the same request again reuses the verified file
    said.clear()
    again = find_source(Request("18", source_url=url), str(tmp_path / "cache"), said.append)
    assert again.tarball == src.tarball and said[0].startswith("postgresql-18.6.tar.bz2: "
                                                               "already downloaded")


def test_exact_release_is_fetched_without_the_listing(site, tmp_path):
    root, url = site
    want = _publish(root, "18.5", _tarball("18.5"))
    _publish(root, "18.6", _tarball("18.6"))
    (root / "index.html").write_text("no listing here")
    src = find_source(Request("18.5", source_url=url), str(tmp_path / "c"), lambda s: None)
    assert (src.version, src.sha256) == ("18.5", want)


def test_corrupted_tarball_is_refused_and_removed(site, tmp_path):
    root, url = site
    good = _tarball("18.6")
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0xFF
    _publish(root, "18.6", bytes(bad), published=good)
    with pytest.raises(BuildError) as e:
        find_source(Request("18", source_url=url), str(tmp_path / "c"), lambda s: None)
    msg = e.value.message
    assert hashlib.sha256(good).hexdigest() in msg and hashlib.sha256(bad).hexdigest() in msg
    assert "never built" in msg and e.value.exit_code == 6
    left = [f for _, _, fs in os.walk(tmp_path / "c") for f in fs]
    assert left == []                                # neither the tarball nor a .part


def test_a_named_mirror_without_the_release_is_the_error_not_a_fallback(site, tmp_path):
    root, url = site
    _publish(root, "18.6", _tarball("18.6"), sha=False)     # no checksum published
    with pytest.raises(BuildError) as e:
        find_source(Request("18", source_url=url), str(tmp_path / "c"), lambda s: None)
    msg = e.value.message
    assert msg.startswith(f"--source-url {url}: HTTP 404")
    assert "postgresql-18.6.tar.bz2.sha256" in msg and "postgresql-18.6.tar.gz.sha256" in msg
    with pytest.raises(BuildError) as e:
        find_source(Request("16", source_url=url), str(tmp_path / "c"), lambda s: None)
    assert e.value.message == f"--source-url {url}: {url}/ lists no release of PostgreSQL 16."


def test_a_closed_port_is_unavailable_quickly(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                        # nothing listens there now
    with pytest.raises(upstream.Unavailable) as e:
        upstream.fetch_release(f"http://127.0.0.1:{port}", 18, None, str(tmp_path))
    assert e.value.reason.startswith(f"could not reach http://127.0.0.1:{port}/ (")
    assert "refused" in e.value.reason.lower()


def test_suites_by_version_from_madison():
    """Recorded on this machine (2026-11-26): 17.12 in trixie and trixie-security."""
    from pgaccel.buildlab.sources import suites_by_version
    madison = (
        "postgresql-17 | 17.12-0+deb13u1 | http://deb.debian.org/debian trixie/main Sources\n"
        "postgresql-17 | 17.12-0+deb13u1 | http://deb.debian.org/debian-security "
        "trixie-security/main Sources\n"
        "postgresql-17 | 17.11-1 | http://deb.debian.org/debian sid/main amd64 Packages\n")
    assert suites_by_version(madison) == {"17.12-0+deb13u1": ["trixie", "trixie-security"]}


def test_fetch_only_keeps_the_verified_tarball_and_builds_nothing(site, tmp_path):
    """`pgaccel build --fetch-only` end to end (the command line, one process): the
    newest release downloaded and verified into the cache, described as a build's source
    is, and nothing built; with --source it is refused (exit 2), naming both flags."""
    import json
    import subprocess
    import sys
    root, url = site
    want = _publish(root, "18.6", _tarball("18.6"))
    exe = os.path.join(os.path.dirname(sys.executable), "pgaccel")
    env = {**os.environ, "PGACCEL_BUILDS": str(tmp_path / "builds")}
    r = subprocess.run([exe, "build", "18", "--source-url", url, "--fetch-only", "--json"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    path = str(tmp_path / "builds" / ".sources" / "upstream" / "postgresql-18.6.tar.bz2")
    assert got == {"schema": 1, "path": path, "source": {
        "kind": "upstream", "url": f"{url}/v18.6/postgresql-18.6.tar.bz2", "path": path,
        "sha256": want, "version": "18.6"}}
    assert sorted(os.listdir(tmp_path / "builds")) == [".sources"]
    r = subprocess.run([exe, "build", "18", "--fetch-only", "--source", path],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--fetch-only" in r.stderr and "--source" in r.stderr
