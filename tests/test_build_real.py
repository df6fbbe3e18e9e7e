"""The build lab for real: `pgaccel build 18` from Debian's source package (liburing), built
once per test run into its own cache (``$PGACCEL_TEST_BUILDS``, default
/var/tmp/pgaccel-test-builds, reused by later runs on the same machine), then used through
``--build`` by bench and by a lab experiment that verifies version and io_method=io_uring in
effect.  Failed and killed builds leave nothing that looks installed."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import tarfile
import time

import pytest

from helpers import PGACCEL, pgaccel

BUILDS = os.environ.get("PGACCEL_TEST_BUILDS", "/var/tmp/pgaccel-test-builds")
ENV = {"PGACCEL_BUILDS": BUILDS}


@pytest.fixture(scope="module")
def build18():
    r = pgaccel("build", "18", "--flavor", "o2", "--yes", "--json", timeout=3600, env=ENV)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    return json.loads(r.stdout)


def test_build_18_from_debian_sources(build18):
    b = build18["build"]
    assert b["version"].startswith("18.") and b["flavor"] == "o2" and b["liburing"]
    src = b["source"]
    # the download site first (where this machine reaches it), else Debian's source package
    if src["kind"] == "upstream":
        assert src["url"].startswith("https://ftp.postgresql.org/pub/source/v18.")
    else:
        assert src["kind"] == "debian" and src["package"] == "postgresql-18"
        assert src["suite"].split(",")[0] in ("trixie", "forky", "sid")
    assert len(src["sha256"]) == 64
    out = subprocess.run([os.path.join(b["bindir"], "pg_config"), "--configure", "--cflags"],
                         capture_output=True, text=True).stdout
    assert "--with-liburing" in out and "--with-lz4" in out and "-O2" in out
    assert subprocess.run([os.path.join(b["bindir"], "postgres"), "--version"],
                          capture_output=True, text=True).stdout.strip().endswith(b["version"])
    lib = subprocess.run([os.path.join(b["bindir"], "pg_config"), "--pkglibdir"],
                         capture_output=True, text=True).stdout.strip()
    for mod in ("pg_prewarm.so", "pg_stat_statements.so"):
        assert os.path.exists(os.path.join(lib, mod))
    inc = subprocess.run([os.path.join(b["bindir"], "pg_config"), "--includedir-server"],
                         capture_output=True, text=True).stdout.strip()
    assert os.path.exists(os.path.join(inc, "postgres.h"))   # extensions build against it
    # a second request is a cache hit, and `builds` lists it
    again = pgaccel("build", "18", "--flavor", "o2", "--json", timeout=600, env=ENV)
    assert again.returncode == 0 and json.loads(again.stdout)["built_now"] is False
    listed = json.loads(pgaccel("builds", "--json", env=ENV, check=True).stdout)
    assert b["name"] in [x["name"] for x in listed["builds"]]


def test_bench_runs_the_build(build18, tmp_path):
    name = build18["build"]["name"]
    major_flavor = "18-o2"
    r = pgaccel("bench", "--build", major_flavor, "-w", "select-only", "--duration", "2",
                "--scale", "1", "--json", env=ENV, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert doc["server"]["version"] == build18["build"]["version"], name
    assert doc["server"]["bindir"] == build18["build"]["bindir"]
    bad = pgaccel("bench", "--build", "18-nosuch", "-w", "select-only", env=ENV)
    assert bad.returncode == 3 and "pgaccel build 18 --flavor nosuch" in " ".join(bad.stderr.split())


SPEC = """name = "uring-check"
[run]
rounds = 2
duration = 2
warmup = 1
[[variant]]
name = "sync"
build = "18-o2"
settings = {{ io_method = "sync" }}
[[variant]]
name = "uring"
base = "sync"
settings = {{ io_method = "io_uring" }}
[[workload]]
name = "select-only"
scale = 1
clients = 1
"""


def test_lab_verifies_version_and_io_uring_of_the_build(build18, tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format())
    r = pgaccel("lab", str(spec), "--json", "--yes", "--out", str(tmp_path / "run"), env=ENV,
                timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads((tmp_path / "run" / "run.json").read_text())
    ver = build18["build"]["version"]
    for name, method in (("sync", "sync"), ("uring", "io_uring")):
        v = doc["verified"][name]
        assert v["ok"] and v["server_version"] == ver and v["io_method"] == method, v
    comps = doc["summary"]["workloads"][0]["comparisons"]
    assert "uring" in comps                      # both variants ran and were compared


def _fake_tarball(path, configure: str) -> None:
    with tarfile.open(path, "w:gz") as t:
        data = configure.encode()
        info = tarfile.TarInfo("postgresql-18.99/configure")
        info.size, info.mode = len(data), 0o755
        t.addfile(info, io.BytesIO(data))


def test_failed_build_keeps_the_log_and_installs_nothing(tmp_path):
    root = tmp_path / "builds"
    tar = tmp_path / "postgresql-18.99.tar.gz"
    _fake_tarball(tar, "#!/bin/sh\necho 'checking for cc... no'\n"
                       "echo 'configure: error: no acceptable C compiler found' >&2\nexit 1\n")
    r = pgaccel("build", "18", "--source", str(tar), "--yes", env={"PGACCEL_BUILDS": str(root)})
    assert r.returncode == 6, r.stderr
    msg = " ".join(r.stderr.split())
    assert "no acceptable C compiler" in msg and "Traceback" not in r.stderr
    log = root / "18.99-o2.failed.log"
    assert f"The full log: {log}" in msg and "checking for cc... no" in log.read_text()
    assert sorted(os.listdir(root)) == ["18.99-o2.failed.log"]
    assert json.loads(pgaccel("builds", "--json", env={"PGACCEL_BUILDS": str(root)},
                              check=True).stdout)["builds"] == []


def test_killed_build_is_swept_by_the_next_one(tmp_path):
    root = tmp_path / "builds"
    tar = tmp_path / "postgresql-18.99.tar.gz"
    _fake_tarball(tar, "#!/bin/sh\nsleep 60\n")
    env = {**os.environ, "PGACCEL_BUILDS": str(root)}
    p = subprocess.Popen([*PGACCEL, "build", "18", "--source", str(tar), "--yes"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(
            n.startswith(".work-") for n in (os.listdir(root) if root.exists() else [])):
        time.sleep(0.2)
    work = [n for n in os.listdir(root) if n.startswith(".work-")]
    assert work, "the build never started"
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert not (root / "18.99-o2").exists()
    _fake_tarball(tar, "#!/bin/sh\nexit 1\n")
    pgaccel("build", "18", "--source", str(tar), "--yes", env={"PGACCEL_BUILDS": str(root)})
    assert not any(n.startswith(".work-") for n in os.listdir(root))


def test_jemalloc_build_runs_its_server_with_jemalloc_mapped(build18):
    r = pgaccel("build", "18", "--flavor", "o2", "--jemalloc", "--yes", "--json", env=ENV,
                timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    b = json.loads(r.stdout)["build"]
    assert b["name"] == build18["build"]["name"] + "-jemalloc"
    from pgaccel.server.cluster import Cluster
    from pgaccel.server.discovery import probe_dir
    inst = probe_dir(b["bindir"], "test")
    with Cluster.create_throwaway(inst) as cl:
        cl.start({})
        with open(f"/proc/{cl.postmaster_pid()}/maps") as f:
            assert "libjemalloc.so" in f.read()
    plain = probe_dir(build18["build"]["bindir"], "test")
    with Cluster.create_throwaway(plain) as cl:
        cl.start({})
        with open(f"/proc/{cl.postmaster_pid()}/maps") as f:
            assert "libjemalloc" not in f.read()


def test_tune_plans_against_the_build(build18):
    """io_method=io_uring is proposed for an 18 built with liburing on a host that allows
    io_uring, and the build layer reads that binary's own flags."""
    from pgaccel.probe.host import probe_host
    r = pgaccel("tune", "--build", "18-o2", "--layer", "all", "--format", "json", env=ENV,
                timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    changes = {c["name"]: c for c in json.loads(r.stdout)["changes"]}
    want = "io_uring" if probe_host().io_uring == "available" else "worker"
    assert changes["io_method"]["proposed"] == want
    assert changes["build.liburing"]["current"] == "--with-liburing"
    assert changes["build.optimization"]["current"] == "-O2"


def _serve(root: str):
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=root))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


def test_build_from_a_locally_served_release_tarball(build18, tmp_path):
    """`--source-url` on a mirror laid out like ftp.postgresql.org: the release tarball the
    fixture built from (Debian's .orig.tar.bz2 is upstream's tarball byte for byte) served
    from 127.0.0.1 with its .sha256.  A corrupted copy is refused (exit 6, nothing kept);
    the good one is fetched, verified and kept (`--fetch-only`), and as its SHA-256 is the
    one the fixture compiled, compiling it again would only repeat the fixture (that took
    205 s here; find_source is the one route both builds take, and
    tests/test_build_sources.py runs it over HTTP)."""
    import hashlib
    import shutil
    b = build18["build"]
    ver, tar = b["source"]["version"], b["source"]["path"]
    name = f"postgresql-{ver}.tar.bz2"
    data = open(tar, "rb").read()
    digest = hashlib.sha256(data).hexdigest()
    assert digest == b["source"]["sha256"]
    for site, body in (("bad", data[:1000] + bytes([data[1000] ^ 1]) + data[1001:]),
                       ("good", data)):
        d = tmp_path / site / f"v{ver}"
        d.mkdir(parents=True)
        (d / name).write_bytes(body)
        (d / f"{name}.sha256").write_text(f"{digest}  {name}\n")
    upstream_dir = os.path.join(BUILDS, ".sources", "upstream")
    shutil.rmtree(upstream_dir, ignore_errors=True)
    srv, url = _serve(str(tmp_path / "bad"))
    try:
        r = pgaccel("build", "18", "--without-liburing", "--source-url", url, "--yes",
                    timeout=600, env=ENV)
    finally:
        srv.shutdown()
        srv.server_close()
    text = r.stdout + r.stderr
    assert r.returncode == 6 and "Traceback" not in text, text[-3000:]
    assert f"{url}/v{ver}/{name} has SHA-256" in " ".join(text.split())
    assert digest in " ".join(text.split()) and "never built" in text
    assert os.listdir(upstream_dir) == []
    before = _build_names()
    srv, url = _serve(str(tmp_path / "good"))
    try:
        r = pgaccel("build", "18", "--source-url", url, "--fetch-only", "--json",
                    timeout=600, env=ENV)
        human = pgaccel("build", "18", "--source-url", url, "--fetch-only", timeout=600,
                        env=ENV)
    finally:
        srv.shutdown()
        srv.server_close()
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    got = json.loads(r.stdout)
    src = got["source"]
    assert src["kind"] == "upstream" and src["sha256"] == digest and src["version"] == ver
    assert src["url"] == f"{url}/v{ver}/{name}"
    assert got["path"] == os.path.join(upstream_dir, name)
    with open(got["path"], "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == digest
    # nothing was built: the cache lists the builds it listed before
    assert _build_names() == before
    # said for a person: where the file is and how to build it without network
    text = " ".join(human.stdout.split())
    assert human.returncode == 0 and "already downloaded" in human.stdout + human.stderr
    assert f"PostgreSQL {ver} sources fetched and verified: {got['path']}" in text
    assert f"pgaccel build {ver} --source PATH" in text


def _build_names() -> set[str]:
    return {x["name"] for x in json.loads(pgaccel("builds", "--json", env=ENV,
                                                  check=True).stdout)["builds"]}
