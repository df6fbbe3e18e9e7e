"""Where pgaccel finds PostgreSQL: the distributions' layouts under a search root, the order
and deduplication of what it finds, and the builds of `pgaccel build` as servers of last
resort (`pgaccel probe` and `pgaccel run` on a machine with only a build).

The layout tests run discovery's own code (``root``, the same glob production uses under
``/``) on a tree built under tmp_path, whose programs are small shell scripts answering
``--version`` as the real ones do ("postgres (PostgreSQL) 17.2").  Fakes stand in here only
because a PGDG RPM layout (/usr/pgsql-17/bin) or an upstream ``make install`` in
/usr/local/pgsql cannot exist on this Debian machine beside its own packages; everything
about builds runs a real PostgreSQL."""

from __future__ import annotations

import json
import os
import re

import pytest

from helpers import pgaccel
from pgaccel.server import buildcache as cache
from pgaccel.errors import NotFound
from pgaccel.server.discovery import (BUILD_FOUND_BY, choose_server, find_client,
                                      find_installations, layout_dirs)

DEBIAN, RPM, SOURCE = ("/usr/lib/postgresql (Debian/Ubuntu)", "/usr/pgsql-N (PGDG RPM)",
                       "/usr/local/pgsql (source build)")
SERVER = ("postgres", "initdb", "pg_ctl", "pgbench", "pg_config")
CLIENT = ("pgbench", "psql")


def fake_bin(bindir, version: str, programs=SERVER) -> str:
    """``bindir`` with a script per program that answers --version like PostgreSQL's (and
    pg_config --bindir like pg_config)."""
    os.makedirs(bindir)
    for p in programs:
        word = "PostgreSQL" if p == "pg_config" else f"{p} (PostgreSQL)"
        path = os.path.join(bindir, p)
        with open(path, "w") as f:
            f.write(f'#!/bin/sh\ncase "$1" in\n  --bindir) echo "{bindir}" ;;\n'
                    f'  *) echo "{word} {version}" ;;\nesac\n')
        os.chmod(path, 0o755)
    return str(bindir)


@pytest.fixture
def bare(tmp_path, monkeypatch):
    """No PostgreSQL on PATH, no PGACCEL_PG_BIN, an empty build cache: discovery sees only
    what a test puts under its root."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("PGACCEL_PG_BIN", raising=False)
    monkeypatch.delenv("PGACCEL_DISCOVERY_ROOT", raising=False)
    monkeypatch.setenv("PGACCEL_BUILDS", str(tmp_path / "no-builds"))
    return tmp_path


def test_each_layout_is_found_with_its_version(bare, monkeypatch):
    root = bare / "root"
    deb = fake_bin(root / "usr/lib/postgresql/17/bin", "17.9")
    rpm16 = fake_bin(root / "usr/pgsql-16/bin", "16.6")
    rpm17 = fake_bin(root / "usr/pgsql-17/bin", "17.10")
    src = fake_bin(root / "usr/local/pgsql/bin", "18.1")
    assert layout_dirs(str(root)) == [(deb, DEBIAN), (rpm16, RPM), (rpm17, RPM), (src, SOURCE)]
    found = [(i.bindir, i.version, i.major, i.found_by, i.is_server, i.build)
             for i in find_installations(root=str(root))]
    assert found == [(deb, "17.9", 17, DEBIAN, True, None), (rpm16, "16.6", 16, RPM, True, None),
                     (rpm17, "17.10", 17, RPM, True, None), (src, "18.1", 18, SOURCE, True, None)]
    # the newest server; within a major by number (17.10 is newer than 17.9)
    assert choose_server(root=str(root)).bindir == src
    assert choose_server(root=str(root), major=17).bindir == rpm17
    assert choose_server(root=str(root), major=16).version == "16.6"
    # the environment names the same root when no argument does (a subprocess's way)
    monkeypatch.setenv("PGACCEL_DISCOVERY_ROOT", str(root))
    assert [i.bindir for i in find_installations()] == [deb, rpm16, rpm17, src]


def test_a_directory_reached_twice_is_listed_once_by_its_first_way(bare, monkeypatch):
    root = bare / "root"
    rpm = fake_bin(root / "usr/pgsql-17/bin", "17.2")
    os.makedirs(root / "usr/local")
    os.symlink(root / "usr/pgsql-17", root / "usr/local/pgsql")   # the source layout's name
    found = find_installations(root=str(root))
    assert [(i.bindir, i.found_by) for i in found] == [(rpm, RPM)]
    # pg_config on PATH comes before the layouts, and PATH after them
    monkeypatch.setenv("PATH", rpm)
    found = find_installations(root=str(root))
    assert [(i.bindir, i.found_by) for i in found] == [(rpm, "pg_config --bindir")]
    monkeypatch.setenv("PGACCEL_PG_BIN", str(root / "usr/local/pgsql/bin"))
    found = find_installations(root=str(root))
    assert [(i.bindir, i.found_by) for i in found] == [(rpm, "PGACCEL_PG_BIN")]


def test_a_layout_with_client_programs_only_is_not_a_server(bare, monkeypatch):
    root = bare / "root"
    client = fake_bin(root / "usr/pgsql-96/bin", "96.1", programs=CLIENT)
    [inst] = find_installations(root=str(root))
    assert (inst.bindir, inst.major, inst.programs, inst.is_server) == \
        (client, 96, CLIENT, False)
    with pytest.raises(NotFound, match="No PostgreSQL 96 server was found"):
        choose_server(root=str(root), major=96)
    monkeypatch.setenv("PGACCEL_DISCOVERY_ROOT", str(root))       # find_client takes no root
    assert find_client("pgbench") == os.path.join(client, "pgbench")


# -- builds of `pgaccel build` ------------------------------------------------------------
def real_build(cache_dir) -> cache.Build:
    """A build cache holding a real PostgreSQL: a build of this machine's cache
    (/var/lib/pgaccel/builds, linked), else one made of the installed server's bin
    directory and a manifest."""
    os.makedirs(cache_dir)
    have = cache.list_builds("/var/lib/pgaccel/builds")
    if have:
        os.symlink(have[0].path, os.path.join(cache_dir, have[0].name))
        return cache.load(str(cache_dir), have[0].name)
    inst = choose_server()
    name = f"{inst.version}-test"
    os.makedirs(os.path.join(cache_dir, name))
    os.symlink(inst.bindir, os.path.join(cache_dir, name, "bin"))
    recipe = {"version": inst.version, "flavor": "test", "cflags": "", "ldflags": "",
              "liburing": False}
    with open(os.path.join(cache_dir, name, cache.MANIFEST), "w") as f:
        json.dump({"key": "0", "recipe": recipe}, f)
    return cache.load(str(cache_dir), name)


def test_a_build_is_a_server_after_the_installed_ones(bare, monkeypatch):
    b = real_build(bare / "builds")
    monkeypatch.setenv("PGACCEL_BUILDS", str(bare / "builds"))
    root = bare / "root"
    root.mkdir()
    [inst] = find_installations(root=str(root))
    assert (inst.bindir, inst.found_by, inst.build, inst.is_server) == \
        (os.path.realpath(b.bindir), f"{BUILD_FOUND_BY} {b.name}", b.name, True)
    assert inst.version == b.version
    assert choose_server(root=str(root)) == inst
    assert find_installations(root=str(root), builds=False) == []
    # an installed server, older than the build, still comes first (another major than the
    # build's: on Ubuntu 22.04 the build here is made of the installed 14)
    old = 13 if inst.major != 13 else 12
    rpm = fake_bin(bare / f"root/usr/pgsql-{old}/bin", f"{old}.1")
    found = find_installations(root=str(root))
    assert [i.bindir for i in found] == [rpm, inst.bindir]
    assert choose_server(root=str(root)).bindir == rpm
    assert choose_server(root=str(root), major=inst.major) == inst
    monkeypatch.setenv("PGACCEL_DISCOVERY_ROOT", str(root))  # find_client takes no root
    assert find_client("pgbench") == os.path.join(rpm, "pgbench")


def _no_distribution(tmp_path) -> tuple[cache.Build, dict]:
    """A real build in a cache of its own, and the environment of a machine that has no
    other PostgreSQL: an empty search root, a PATH without PostgreSQL."""
    b = real_build(tmp_path / "builds")
    (tmp_path / "root").mkdir()
    (tmp_path / "path").mkdir()
    return b, {"PGACCEL_DISCOVERY_ROOT": str(tmp_path / "root"), "PATH": str(tmp_path / "path"),
               "PGACCEL_BUILDS": str(tmp_path / "builds"), "PGACCEL_PG_BIN": ""}


def test_probe_lists_the_build_when_nothing_else_is_installed(tmp_path):
    b, env = _no_distribution(tmp_path)
    r = pgaccel("probe", "--no-server", "--json", env=env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(i["found_by"], i["build"], i["version"], i["is_server"])
            for i in doc["installations"]] == [(f"pgaccel build {b.name}", b.name, b.version,
                                                True)]
    assert doc["installation"]["bindir"] == os.path.realpath(b.bindir)
    assert [x["name"] for x in doc["builds"]] == [b.name]
    r = pgaccel("probe", "--no-server", env={**env, "COLUMNS": "250"})
    row = next(x for x in r.stdout.splitlines() if f"pgaccel build {b.name}" in x)
    assert "yes (chosen)" in row and "No PostgreSQL" not in r.stderr
    # without the build it is the one-paragraph error naming every way to get a server
    r = pgaccel("probe", "--no-server", env={**env, "PGACCEL_BUILDS": str(tmp_path / "none")})
    assert r.returncode == 3
    assert "No PostgreSQL server was found on this machine" in r.stderr
    assert "/usr/pgsql-NN/bin" in r.stderr and "pgaccel build VERSION" in r.stderr


@pytest.mark.slow
def test_probe_and_run_start_the_build(tmp_path):
    """With only a build on the machine, `probe` and `run` start a server of the build.  It
    takes long (about 23 s on a 2-core VM: `probe` starts a throwaway server of the build, then
    a real `run --quick` on throwaway servers: scale-1 data, a burn-in round and one round of
    2-s trials)."""
    b, env = _no_distribution(tmp_path)
    r = pgaccel("probe", "--json", env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    server = json.loads(r.stdout)["server"]
    assert server["version"].startswith(b.version)
    assert server["target"].endswith(f"of the pgaccel build {b.name}")
    out = tmp_path / "run"
    r = pgaccel("run", "--quick", "--workloads", "select-only", "--scale", "1", "--duration",
                "2", "--warmup", "0", "--rounds", "1", "--clients", "1", "--json", "--out",
                str(out), env={**env, "PGACCEL_STORE": str(tmp_path / "store.sqlite")},
                timeout=600)
    assert r.returncode == 0, r.stderr
    said = re.search(r"pgaccel run on throwaway PostgreSQL (\S+) cluster in \S+ of the "
                     r"pgaccel build (\S+)", r.stderr)
    assert said and said.groups() == (b.version, b.name)
    doc = json.loads((out / "run.json").read_text())
    assert doc["server"]["version"].startswith(b.version)
    assert doc["target"].endswith(f"of the pgaccel build {b.name}")
    assert [t["throughput"] > 0 for t in doc["trials"]] == [True, True]
