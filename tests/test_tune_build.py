"""Build-layer advice from pg_config: the real PG15 build and constructed ones."""

from __future__ import annotations

import pytest

from pgaccel.server.discovery import choose_server
from pgaccel.pg.build import parse_pg_config
from pgaccel.server.binary import pg_config
from pgaccel.tune.build import build_changes, build_features

from test_tune_profiles import inputs_for

ARM_PGCONFIG = """\
CONFIGURE =  '--prefix=/usr/local/pgsql' '--with-lz4' 'CFLAGS=-O2 -moutline-atomics'
CC = gcc
CFLAGS = -Wall -O2 -moutline-atomics
LIBS = -lpgcommon -lpgport -llz4 -lz -lm
VERSION = PostgreSQL 18.1
"""
MESON_PGCONFIG = """\
CONFIGURE =  '-Dlz4=enabled' '-Dzstd=enabled' '-Dliburing=enabled'
CFLAGS = -O3 -march=native -flto
LIBS = -lzstd -llz4 -luring -ljemalloc
VERSION = PostgreSQL 18.0
"""


def by_name(changes):
    return {c.name: c for c in changes}


def test_real_pg15_build():
    inst = choose_server()
    pgc = pg_config(inst)
    f = build_features(pgc)
    assert f["with_lz4"] and f["with_zstd"]          # Debian/PGDG builds have both
    assert f["version"].startswith(f"PostgreSQL {inst.major}")
    ch = by_name(build_changes(inputs_for("2c-24g", inst.major), pgc))
    assert all(c.layer == "build" and c.advice_only for c in ch.values())
    assert ch["build.optimization"].current == "-O2" and not ch["build.optimization"]\
        .changes_value
    assert ch["build.march"].current == "generic" and ch["build.march"].proposed == \
        "-march=native"
    assert ch["build.lto"].current == "off" and ch["build.lz4"].current == "--with-lz4"
    assert "build.atomics" not in ch and "build.liburing" not in ch   # x86, PG15


def test_aarch64_with_lse_gets_atomics_advice():
    pgc = parse_pg_config(ARM_PGCONFIG)
    ch = by_name(build_changes(inputs_for("arm-lse-8c-32g", 18), pgc))
    a = ch["build.atomics"]
    assert a.current == "-moutline-atomics" and "LSE" in a.reason
    assert ch["build.march"].proposed == "-mcpu=native"
    assert ch["build.liburing"].current == "without"
    assert ch["build.zstd"].current == "without"


def test_aarch64_without_lse_says_so():
    ch = by_name(build_changes(inputs_for("arm-nolse-4c-16g", 16),
                               parse_pg_config(ARM_PGCONFIG)))
    assert "no LSE" in ch["build.atomics"].reason
    assert "build.liburing" not in ch                 # io_uring AIO is 18+


def test_meson_build_flags_are_recognised():
    pgc = parse_pg_config(MESON_PGCONFIG)
    f = build_features(pgc)
    assert f["with_liburing"] and f["with_zstd"] and f["jemalloc"]
    ch = by_name(build_changes(inputs_for("48c-128g", 18), pgc))
    assert not any(c.changes_value for c in (ch["build.lto"], ch["build.liburing"],
                                              ch["build.malloc"]))
    assert ch["build.optimization"].current == "-O3"


def test_no_pg_config_no_advice():
    assert build_changes(inputs_for("8c-32g"), {}) == []


@pytest.mark.parametrize("version,has_lz4,has_zstd", [(13, False, False), (14, True, False),
                                                      (15, True, True)])
def test_compression_advice_only_where_the_version_uses_it(version, has_lz4, has_zstd):
    ch = by_name(build_changes(inputs_for("8c-32g", version), parse_pg_config(ARM_PGCONFIG)))
    assert ("build.lz4" in ch) == has_lz4 and ("build.zstd" in ch) == has_zstd
