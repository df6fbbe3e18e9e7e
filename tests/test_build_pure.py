"""The build lab's pure parts: source selection, flag assembly per flavor, cache keys and
names, finding a build by name, and lab specs that name builds."""

import json
import os

import pytest

from pgaccel.server import buildcache as cache
from pgaccel.buildlab.flavors import DEBIAN_CFLAGS, configure_args, configure_env, recipe
from pgaccel.buildlab.sources import (SourcePackage, choose_package, debian_mirrors, debsrc_lines,
                                   dsc_sha256, orig_tarball, parse_request, parse_showsrc,
                                   upstream_version)
from pgaccel.specs.parse import SpecError, parse_spec

DEB822 = """Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example.org/debian/
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
"""
ONELINE = """# deb http://commented.example/debian bookworm main
deb [arch=amd64 signed-by=/k.gpg] http://ftp.de.debian.org/debian bookworm main
deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main
"""


def test_mirrors_from_both_formats_skip_security_and_third_party():
    assert debian_mirrors([DEB822, ONELINE]) == ["http://mirror.example.org/debian",
                                                 "http://ftp.de.debian.org/debian"]
    assert debian_mirrors([]) == []


def test_debsrc_lines_use_first_mirror_or_deb_debian_org():
    text = debsrc_lines(["http://m.example/debian"], ("bookworm", "sid"), keyring="/k.gpg")
    assert text == ("deb-src [signed-by=/k.gpg] http://m.example/debian bookworm main\n"
                    "deb-src [signed-by=/k.gpg] http://m.example/debian sid main\n")
    assert "http://deb.debian.org/debian trixie main" in debsrc_lines([])
    assert "security" not in debsrc_lines([])


def test_security_suites_for_stable_releases_only():
    assert debian_mirrors([DEB822, ONELINE], "debian-security") == [
        "http://deb.debian.org/debian-security"]
    text = debsrc_lines(["http://m.example/debian"], ("bookworm", "trixie", "sid"),
                        keyring="/k.gpg", security=["http://s.example/debian-security"])
    assert text.splitlines()[3:] == [
        "deb-src [signed-by=/k.gpg] http://s.example/debian-security bookworm-security main",
        "deb-src [signed-by=/k.gpg] http://s.example/debian-security trixie-security main"]


@pytest.mark.parametrize("line,suite", [
    ("http://deb.debian.org/debian-security bookworm-security/main Sources", "bookworm-security"),
    ("http://deb.debian.org/debian bookworm/main Sources", "bookworm"),
    ("http://deb.debian.org/debian sid/main Sources", "sid"),
    ("http://elsewhere.example/x other/main Sources", "?"),
])
def test_suite_of_an_archive_line(line, suite):
    from pgaccel.buildlab.sources import suite_in
    assert suite_in(line) == suite


@pytest.mark.parametrize("deb,up", [("18.6-3", "18.6"), ("17.11-0+deb13u1", "17.11"),
                                    ("1:15.4-1", "15.4"), ("16.2", "16.2")])
def test_upstream_version(deb, up):
    assert upstream_version(deb) == up


@pytest.mark.parametrize("text,want", [("18", (18, None)), ("17.4", (17, "17.4")),
                                       (" 15 ", (15, None)), ("18.0", (18, "18.0"))])
def test_parse_request(text, want):
    assert parse_request(text) == want


@pytest.mark.parametrize("bad", ["14", "9.6", "eighteen", "18.x", "", "180"])
def test_parse_request_refuses(bad):
    with pytest.raises(ValueError):
        parse_request(bad)


@pytest.mark.parametrize("text", ["19", "19.1", "99"])
def test_a_major_newer_than_pgaccel_knows_is_refused_before_any_download(text):
    """`build 99` asked the download site and Debian's indexes, then failed naming both;
    18 is the newest major pg/versions.SUPPORTED holds."""
    with pytest.raises(ValueError) as e:
        parse_request(text)
    assert str(e.value).startswith(f"PostgreSQL {text.split('.')[0]} is newer than this "
                                   "pgaccel knows (it builds 15 to 18")
    assert "nothing was downloaded" in str(e.value)


def test_parse_showsrc_records():
    text = ("Package: postgresql-17\nBinary: x\nVersion: 17.11-0+deb13u1\n\n"
            "Package: postgresql-17\nVersion: 17.12-1\nFiles:\n a b c\n")
    assert parse_showsrc(text) == [("postgresql-17", "17.11-0+deb13u1"),
                                   ("postgresql-17", "17.12-1")]


def _pkg(v, suite, name=None):
    return SourcePackage(name or f"postgresql-{v.split('.')[0]}", v + "-1", v, suite)


def test_choose_newest_release_of_the_major_or_the_exact_one():
    cands = [_pkg("17.9", "trixie"), _pkg("17.11", "sid"), _pkg("17.10", "forky"),
             _pkg("18.6", "sid"), _pkg("17.12", "sid", name="postgresql-17-jit")]
    assert choose_package(cands, 17, None).upstream == "17.11"       # 11 > 10 > 9, numerically
    assert choose_package(cands, 17, "17.9").suite == "trixie"
    assert choose_package(cands, 17, "17.4") is None
    assert choose_package(cands, 16, None) is None
    assert choose_package(cands, 18, None).suite == "sid"


def test_ranked_packages_newest_first_then_the_fallbacks():
    from pgaccel.buildlab.sources import ranked_packages
    cands = [SourcePackage("postgresql-15", "15.18-0+deb12u1", "15.18", "bookworm"),
             SourcePackage("postgresql-15", "15.20-0+deb12u1", "15.20", "bookworm-security"),
             SourcePackage("postgresql-17", "17.11-0+deb13u1", "17.11", "trixie")]
    assert [c.version for c in ranked_packages(cands, 15, None)] == ["15.20-0+deb12u1",
                                                                    "15.18-0+deb12u1"]
    assert [c.suite for c in ranked_packages(cands, 15, "15.18")] == ["bookworm"]
    assert ranked_packages(cands, 16, None) == []


def test_dsc_checksums_and_the_upstream_tarball():
    dsc = ("Format: 3.0 (quilt)\nChecksums-Sha1:\n a0b6 22632314 p_18.6.orig.tar.bz2\n"
           "Checksums-Sha256:\n " + "5" * 64 + " 22632314 postgresql-18_18.6.orig.tar.bz2\n "
           + "e" * 64 + " 34488 postgresql-18_18.6-3.debian.tar.xz\nFiles:\n x y z\n")
    sums = dsc_sha256(dsc)
    assert sums == {"postgresql-18_18.6.orig.tar.bz2": "5" * 64,
                    "postgresql-18_18.6-3.debian.tar.xz": "e" * 64}
    assert orig_tarball(sums) == "postgresql-18_18.6.orig.tar.bz2"
    assert orig_tarball({"a.debian.tar.xz": "0"}) is None


def R(version="18.6", flavor="o2", **kw):
    return recipe(version, flavor, source_sha256=kw.pop("sha", "ab" * 32),
                  compiler=kw.pop("cc", "gcc (Debian 12.2.0-14) 12.2.0"), **kw)


@pytest.mark.parametrize("flavor,cflags,ldflags", [
    ("debian", DEBIAN_CFLAGS, "-Wl,-z,relro -Wl,-z,now"),
    ("o2", "-O2", ""),
    ("native", "-O3 -march=native", ""),
    ("lto", "-O2 -flto=auto", "-flto=auto"),
    ("pgo", "-O2", ""),
    ("lto+pgo", "-O2 -flto=auto", "-flto=auto"),
    ("bolt", "-O2 -fno-reorder-blocks-and-partition", "-Wl,--emit-relocs"),
])
def test_flags_per_flavor(flavor, cflags, ldflags):
    r = R(flavor=flavor)
    env = configure_env(r)
    assert env["CFLAGS"].startswith(cflags)
    assert env.get("LDFLAGS", "") == ldflags
    assert ("CPPFLAGS" in env) == (flavor == "debian")
    assert r.pgo == (flavor in ("pgo", "lto+pgo"))


def test_pgo_stages_generate_then_use_one_profile_dir():
    r = R(flavor="lto+pgo")
    gen = configure_env(r, "instrument", "/p")
    use = configure_env(r, "final", "/p")
    assert "-fprofile-generate=/p" in gen["CFLAGS"] and "-fprofile-generate=/p" in gen["LDFLAGS"]
    assert "-fprofile-update=atomic" in gen["CFLAGS"]
    assert "-fprofile-use=/p" in use["CFLAGS"] and "generate" not in use["CFLAGS"]
    assert use["LDFLAGS"] == "-flto=auto"
    assert "profile" not in configure_env(R(flavor="lto"), "final", "/p")["CFLAGS"]


def test_configure_features_and_liburing_by_version():
    a18 = configure_args(R("18.6"), "/pfx")
    assert a18[0] == "--prefix=/pfx"
    assert {"--with-openssl", "--with-icu", "--with-lz4", "--with-zstd",
            "--with-liburing"} <= set(a18)
    assert "--with-liburing" not in configure_args(R("17.11"), "/pfx")
    assert "--with-liburing" not in configure_args(R("18.6", liburing=False), "/pfx")
    assert "--enable-debug" in configure_args(R(flavor="debian"), "/pfx")
    with pytest.raises(ValueError, match="arrived in 18"):
        R("17.11", liburing=True)
    with pytest.raises(ValueError, match="unknown flavor"):
        R(flavor="O3")


def test_names():
    assert R("18.6", "lto").name == "18.6-lto"
    assert R("18.6", "o2", liburing=False).name == "18.6-o2-nouring"
    assert R("17.11", "lto+pgo").name == "17.11-lto+pgo"


def test_cache_key_changes_with_anything_that_changes_the_binary():
    base = R().key()
    assert R().key() == base
    for other in (R(sha="cd" * 32), R(cc="gcc 14"), R(flavor="lto"), R("18.7"),
                  R(liburing=False)):
        assert other.key() != base
    assert len(base) == 16


def _fake_build(root, name, version, flavor):
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, "bin"))
    with open(os.path.join(d, cache.MANIFEST), "w") as f:
        json.dump({"key": "k", "recipe": {"version": version, "flavor": flavor, "cflags": "",
                                          "ldflags": "", "liburing": True}}, f)


def test_cache_lists_manifested_builds_and_matches_by_major(tmp_path):
    root = str(tmp_path)
    _fake_build(root, "18.6-lto", "18.6", "lto")
    _fake_build(root, "18.10-lto", "18.10", "lto")
    _fake_build(root, "17.11-lto", "17.11", "lto")
    os.makedirs(os.path.join(root, "18.7-o2", "bin"))         # no manifest: half-built
    os.makedirs(os.path.join(root, ".work-18.7-o2-999999"))   # a work dir
    bs = cache.list_builds(root)
    assert [b.name for b in bs] == ["17.11-lto", "18.10-lto", "18.6-lto"]
    assert cache.match(bs, "18-lto").name == "18.10-lto"      # newest 18.x, numerically
    assert cache.match(bs, "18.6-lto").name == "18.6-lto"
    assert cache.match(bs, "18-o2") is None
    assert cache.match(bs, "17-lto").bindir.endswith("17.11-lto/bin")
    with pytest.raises(Exception, match="pgaccel build 18 --flavor o2"):
        cache.resolve("18-o2", root)


def test_sweep_removes_only_dead_work_dirs(tmp_path):
    root = str(tmp_path)
    os.makedirs(os.path.join(root, ".work-18.6-o2-999999"))
    os.makedirs(os.path.join(root, f".work-18.6-lto-{os.getpid()}"))
    assert cache.sweep(root) == [".work-18.6-o2-999999"]
    assert os.path.isdir(os.path.join(root, f".work-18.6-lto-{os.getpid()}"))


SPEC = """name = "b"
[[variant]]
name = "a"
{a}
[[variant]]
name = "b"
base = "a"
{b}
[[workload]]
name = "select-only"
"""


def test_spec_build_and_flavor_keys():
    s = parse_spec(SPEC.format(a='version = 18\nflavor = "lto"', b=""), "x.toml", "small")
    assert [(v.version, v.flavor) for v in s.variants] == [(18, "lto"), (18, "lto")]
    s = parse_spec(SPEC.format(a='version = 18\nflavor = "lto"', b='build = "17-o2"'),
                   "x.toml", "small")
    assert (s.variants[1].build, s.variants[1].version, s.variants[1].flavor) == \
        ("17-o2", None, None)


@pytest.mark.parametrize("a,msg", [
    ('build = "18-o2"\nversion = 18', "one of bin, version or build"),
    ('flavor = "lto"', "flavor goes with version"),
    ('version = 18\nflavor = "O3"', "not one of"),
])
def test_spec_build_keys_refused(a, msg):
    with pytest.raises(SpecError, match=msg):
        parse_spec(SPEC.format(a=a, b=""), "x.toml", "small")


def test_jemalloc_is_a_named_keyed_variant_of_the_same_compile():
    j = R("18.6", "lto", jemalloc=True)
    assert j.name == "18.6-lto-jemalloc" and j.key() != R("18.6", "lto").key()
    assert configure_env(j) == configure_env(R("18.6", "lto"))        # same compile
    from pgaccel.buildlab.flavors import build_deps
    assert "libjemalloc2" in build_deps(j) and "libjemalloc2" not in build_deps(R())


def test_server_env_file_honours_only_allocator_names(tmp_path):
    from pgaccel.server.discovery import server_env
    (tmp_path / "bin").mkdir()
    assert server_env(str(tmp_path / "bin")) == {}
    (tmp_path / "pgaccel-server.env").write_text(
        "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2\nPATH=/evil\nnot a line\n"
        "MALLOC_CONF = background_thread:true\n")
    assert server_env(str(tmp_path / "bin")) == {
        "LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
        "MALLOC_CONF": "background_thread:true"}


# llvm-bolt-16's report of the 18.6-bolt build made here (excerpt of its build.log)
BOLT_REPORT = """\
BOLT-INFO: 3707 out of 15292 functions in the binary (24.2%) have non-empty execution profile
BOLT-INFO: basic block reordering modified layout of 2815 functions (75.94% of profiled, 17.92% of total)
BOLT-INFO: program-wide dynostats after all optimizations before SCTC and FOP:

        716730194954 : executed instructions
         94554949892 : total branches
         43487986973 : taken branches

        707515827669 : executed instructions (-1.3%)
         94554949892 : total branches (=)
         13820848649 : taken branches (-68.2%)
"""


def test_bolt_report_summary():
    from pgaccel.buildlab.bolt import _dyno_summary
    assert _dyno_summary(BOLT_REPORT) == {"functions_profiled": 3707, "functions_total": 15292,
                                          "taken_branches_change_pct": -68.2}
    assert _dyno_summary("BOLT-ERROR: nothing") == {}


def test_a_substitution_says_why_in_one_line():
    """The line that says a lab variant's version was substituted quotes the build failure's
    first line only (apt's whole answer ran to ten lines of 404s in the example's run)."""
    from pgaccel.session.builds import brief
    msg = ("`apt-get source --download-only -q postgresql-17=17.12-0+deb13u1` failed (exit "
           "100): Err:3 http://deb.debian.org/debian trixie/main postgresql-17 17.12-0+deb13u1"
           " (diff)\n  404  Not Found [IP: 203.0.113.80 80]\nE: Failed to fetch some archives.")
    assert brief(msg) == ("`apt-get source --download-only -q postgresql-17=17.12-0+deb13u1`"
                          " failed (exit 100): …")
    # the example's on a machine without DNS: its first sentence, not "(N…)" mid-word
    msg = ("No source of PostgreSQL 17 could be fetched. Tried 2: upstream https://ftp."
           "postgresql.org/pub/source: could not reach https://ftp.postgresql.org/pub/source/ "
           "(Name or service not known); Debian postgresql-17 17.12-0+deb13u1 (trixie): 404 "
           "Not Found. Download the release tarball and pass --source TARBALL.")
    assert brief(msg) == "No source of PostgreSQL 17 could be fetched. …"
    # no sentence or clause: between words, within the limit
    got = brief("word " * 50)
    assert got.endswith("word …") and len(got) <= 160
    assert brief("no 17 in the indexes") == "no 17 in the indexes"


def test_an_installed_build_is_readable_by_the_servers_user_under_a_strict_umask(tmp_path):
    """Built as root under umask 077 (hardened hosts, CI), the staged tree was root's alone
    and the server's own user could not run it: _install widens every mode, as a package's
    are, and leaves what was already wider and the links as they were."""
    import os
    import stat
    from pgaccel.buildlab.make import _readable_by_all
    top = tmp_path / "stage"
    (top / "bin").mkdir(parents=True)
    (top / "share" / "tz").mkdir(parents=True)
    (top / "bin" / "postgres").write_text("")
    (top / "share" / "tz" / "UTC").write_text("")
    (top / "build.json").write_text("{}")
    (top / "lib.so").write_text("")
    os.symlink("lib.so", top / "lib.so.1")
    for p, m in (("bin/postgres", 0o700), ("share/tz/UTC", 0o600), ("build.json", 0o600),
                 ("lib.so", 0o4711), ("bin", 0o700), ("share", 0o700), ("share/tz", 0o750),
                 (".", 0o700)):
        os.chmod(top / p, m)
    link_before = os.lstat(top / "lib.so.1").st_mode
    _readable_by_all(str(top))
    got = {p: stat.S_IMODE(os.lstat(top / p).st_mode) for p in (
        "bin/postgres", "share/tz/UTC", "build.json", "lib.so", "bin", "share", "share/tz",
        ".")}
    assert got == {"bin/postgres": 0o755, "share/tz/UTC": 0o644, "build.json": 0o644,
                   "lib.so": 0o4755, "bin": 0o755, "share": 0o755, "share/tz": 0o755,
                   ".": 0o755}
    assert os.lstat(top / "lib.so.1").st_mode == link_before
