"""Build flavors: the compiler flags and configure options of each (pure).

Every flavor shares the same configure features (ssl, icu, lz4, zstd, readline, zlib, and
liburing where the version has it), so two flavors of one version differ only in how the
compiler was asked to build them.  ``debian`` is the reference: the flags Debian's own
postgresql packages are built with (what ``pg_config --cflags --cppflags --ldflags`` of
Debian 12's postgresql-15 reports), without the packaging's optional features (tcl, perl,
python, pam, ldap, gssapi, llvm JIT, dtrace probes) that no benchmark here exercises.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

# Debian 12's postgresql-15: pg_config --cflags / --cppflags / --ldflags
DEBIAN_CFLAGS = ("-g -O2 -fstack-protector-strong -Wformat -Werror=format-security "
                 "-fno-omit-frame-pointer")
DEBIAN_CPPFLAGS = "-Wdate-time -D_FORTIFY_SOURCE=2"
DEBIAN_LDFLAGS = "-Wl,-z,relro -Wl,-z,now"


@dataclass(frozen=True)
class Flavor:
    name: str
    cflags: str
    what: str
    cppflags: str = ""
    ldflags: str = ""
    extra_configure: tuple[str, ...] = ()
    pgo: bool = False            # instrumented build + training run + optimized rebuild
    bolt: bool = False           # post-link layout from an instrumented run (llvm-bolt)


FLAVORS: dict[str, Flavor] = {f.name: f for f in (
    Flavor("debian", DEBIAN_CFLAGS, "Debian's own compiler and linker flags (the reference)",
           DEBIAN_CPPFLAGS, DEBIAN_LDFLAGS, ("--enable-debug",)),
    Flavor("o2", "-O2", "upstream's default optimisation, no hardening flags"),
    Flavor("native", "-O3 -march=native", "-O3 and every instruction this CPU has "
           "(the binary may not run on an older CPU)"),
    Flavor("lto", "-O2 -flto=auto", "link-time optimisation across all of the server's files",
           ldflags="-flto=auto"),
    Flavor("pgo", "-O2", "profile-guided: an instrumented build runs the training workload, "
           "then the server is rebuilt with the profile", pgo=True),
    Flavor("lto+pgo", "-O2 -flto=auto", "link-time and profile-guided optimisation together",
           ldflags="-flto=auto", pgo=True),
    Flavor("bolt", "-O2 -fno-reorder-blocks-and-partition",
           "post-link code layout by llvm-bolt from an instrumented training run",
           ldflags="-Wl,--emit-relocs", bolt=True),
)}

# features every flavor is configured with; pgaccel's workloads need pg_prewarm and
# pg_stat_statements (contrib, installed beside the server)
COMMON_CONFIGURE = ("--with-openssl", "--with-icu", "--with-lz4", "--with-zstd")


def supports_liburing(major: int) -> bool:
    """io_method=io_uring (and configure --with-liburing) exist from PostgreSQL 18."""
    return major >= 18


@dataclass(frozen=True)
class BuildRecipe:
    """Everything that decides what a build produces: its cache key is a hash of this."""
    version: str                  # upstream release, 18.6
    flavor: str
    cflags: str
    cppflags: str
    ldflags: str
    configure: tuple[str, ...]
    source_sha256: str
    compiler: str                 # `cc --version` first line
    liburing: bool
    pgo: bool = False
    bolt: bool = False
    extras: tuple[str, ...] = field(default_factory=tuple)

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def key(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    @property
    def name(self) -> str:
        """18.6-lto; a build of 18+ without liburing says so (18.6-o2-nouring), one whose
        server runs with jemalloc too (18.6-lto-jemalloc)."""
        suffix = "-nouring" if supports_liburing(self.major) and not self.liburing else ""
        suffix += "".join(f"-{x}" for x in self.extras)
        return f"{self.version}-{self.flavor}{suffix}"


def recipe(version: str, flavor: str, *, source_sha256: str, compiler: str,
           liburing: bool | None = None, jemalloc: bool = False) -> BuildRecipe:
    """The recipe for ``flavor`` of ``version``.  ``liburing`` None means "where the version
    has it"; True on a version without it is refused."""
    if flavor not in FLAVORS:
        raise ValueError(f"unknown flavor {flavor!r}; the flavors are {', '.join(FLAVORS)}")
    f = FLAVORS[flavor]
    major = int(version.split(".")[0])
    uring = supports_liburing(major) if liburing is None else liburing
    if uring and not supports_liburing(major):
        raise ValueError(f"PostgreSQL {major} has no io_uring support (it arrived in 18); "
                         "drop --with-liburing")
    configure = COMMON_CONFIGURE + f.extra_configure + (("--with-liburing",) if uring else ())
    return BuildRecipe(version=version, flavor=flavor, cflags=f.cflags, cppflags=f.cppflags,
                       ldflags=f.ldflags, configure=configure, source_sha256=source_sha256,
                       compiler=compiler, liburing=uring, pgo=f.pgo, bolt=f.bolt,
                       extras=("jemalloc",) if jemalloc else ())


def configure_env(r: BuildRecipe, stage: str = "final", profile_dir: str = "") -> dict[str, str]:
    """CFLAGS/CPPFLAGS/LDFLAGS for configure.  A PGO build is compiled twice: ``instrument``
    writes a profile (one file per object, merged across all backends) into
    ``profile_dir``, ``final`` reads it."""
    cflags, ldflags = r.cflags, r.ldflags
    if r.pgo and stage == "instrument":
        extra = f"-fprofile-generate={profile_dir} -fprofile-update=atomic"
        cflags, ldflags = f"{cflags} {extra}", f"{ldflags} {extra}".strip()
    elif r.pgo and stage == "final":
        extra = (f"-fprofile-use={profile_dir} -fprofile-partial-training "
                 "-Wno-missing-profile -fprofile-correction")
        cflags = f"{cflags} {extra}"
    env = {"CFLAGS": cflags}
    if r.cppflags:
        env["CPPFLAGS"] = r.cppflags
    if ldflags:
        env["LDFLAGS"] = ldflags
    return env


def configure_args(r: BuildRecipe, prefix: str) -> list[str]:
    return [f"--prefix={prefix}", *r.configure]


# build dependencies (Debian packages) by what needs them
BUILD_DEPS = ("gcc", "make", "bison", "flex", "perl", "pkgconf", "libicu-dev", "libssl-dev",
              "liblz4-dev", "libzstd-dev", "libreadline-dev", "zlib1g-dev")


def build_deps(r: BuildRecipe) -> tuple[str, ...]:
    deps = BUILD_DEPS + (("liburing-dev",) if r.liburing else ())
    deps += ("libjemalloc2",) if "jemalloc" in r.extras else ()
    return deps + (("bolt-16",) if r.bolt else ())
