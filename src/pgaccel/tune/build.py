"""Build-layer advice: what the binary was built with (pg_config) and what would help here.

Advice only (``advice_only=True``): pgaccel does not build servers yet, so nothing here is
measured.  The pg_config text itself is read by ``server/binary.py``.
Works for autoconf builds (``--with-lz4`` in CONFIGURE) and meson builds (``-Dlz4=enabled``);
the libraries in LIBS (``-llz4``) are checked too.
"""

from __future__ import annotations

import re

from .inputs import TuneInputs
from .plan import Change

STUDY0 = "study 000"


def _has(pgc: dict[str, str], feature: str, lib: str | None = None) -> bool:
    conf = pgc.get("CONFIGURE", "")
    if re.search(rf"--with-{feature}\b|-D{feature}=(enabled|true)", conf):
        return True
    return bool(lib and re.search(rf"(^|\s)-l{lib}(\s|$)", pgc.get("LIBS", "")))


def build_features(pgc: dict[str, str]) -> dict[str, object]:
    """The build facts the tuner uses: with_lz4, with_zstd, with_liburing, with_llvm, ..."""
    cflags = pgc.get("CFLAGS", "")
    return {
        "with_lz4": _has(pgc, "lz4", "lz4"),
        "with_zstd": _has(pgc, "zstd", "zstd"),
        "with_liburing": _has(pgc, "liburing", "uring"),
        "with_llvm": _has(pgc, "llvm"),
        "jemalloc": bool(re.search(r"-ljemalloc", pgc.get("LIBS", "") + pgc.get("LDFLAGS", ""))),
        "cflags": cflags, "cc": pgc.get("CC", ""), "version": pgc.get("VERSION", ""),
    }


def _last(pattern: str, text: str) -> str | None:
    found = re.findall(pattern, text)
    return found[-1] if found else None


def build_changes(inp: TuneInputs, pgc: dict[str, str] | None) -> list[Change]:
    """Advice for the build layer from pg_config output (``parse_pg_config``)."""
    if not pgc:
        return []
    f = build_features(pgc)
    cflags = str(f["cflags"])
    out: list[Change] = []

    def add(name: str, current: str, proposed: str, reason: str, source: str) -> None:
        out.append(Change("build", name, proposed, reason, source, current=current,
                          advice_only=True, rule=f"build.{name.split('.', 1)[1]}"))

    opt = _last(r"-O[0-3sgz]?\b", cflags) or "none"
    add("build.optimization", opt, opt if opt in ("-O2", "-O3") else "-O2",
        "the server is built with optimisation" if opt in ("-O2", "-O3") else
        "an unoptimised server is several times slower", "PostgreSQL docs: Installation")
    arm = inp.arch == "aarch64"
    tune = _last(r"-m(?:arch|cpu|tune)=\S+", cflags) or "generic"
    add("build.march", tune, "-mcpu=native" if arm else "-march=native",
        "code for this host's CPU (newer instructions, better scheduling); the binary then "
        "runs only on this CPU family; measure it: `pgaccel build VERSION --flavor native`",
        STUDY0)
    if arm:
        lse_flag = re.search(r"-moutline-atomics|\+lse|armv8\.[1-9]|armv9|-mcpu=native", cflags)
        if inp.lse_atomics:
            add("build.atomics", lse_flag.group(0) if lse_flag else "LL/SC (armv8.0)",
                "-march=armv8.2-a+lse or -moutline-atomics",
                "this CPU has LSE atomics: CAS/LDADD instead of LL/SC loops in spinlocks and "
                "LWLocks (study 000: +80% on ARM with the full stack)", STUDY0)
        else:
            add("build.atomics", lse_flag.group(0) if lse_flag else "LL/SC (armv8.0)",
                "-moutline-atomics (no gain here)", "this CPU has no LSE atomics: LL/SC loops "
                "remain; -moutline-atomics keeps one binary fast on CPUs that have them",
                STUDY0)
    add("build.lto", "-flto" if "-flto" in cflags else "off", "-flto",
        "link-time optimisation inlines across files (study 000); measure it: `pgaccel build "
        "VERSION --flavor lto` and examples/build-flavors.toml", STUDY0)
    pgo = "-fprofile-use" in cflags
    add("build.pgo", "on" if pgo else "off", "profile-guided (-fprofile-generate, run the "
        "workload, -fprofile-use)", "lays out hot code together: fewer iTLB and branch "
        "misses (study 000: iTLB misses fell 10x with the full stack); measure it: "
        "`pgaccel build VERSION --flavor pgo`", STUDY0)
    add("build.malloc", "jemalloc" if f["jemalloc"] else "glibc malloc", "jemalloc",
        "cheaper allocation for the executor's many small allocations (study 000)", STUDY0)
    if inp.pg_version >= 18:
        add("build.liburing", "--with-liburing" if f["with_liburing"] else "without",
            "--with-liburing", "io_method=io_uring needs it: fewer context switches on "
            "write-heavy steps (study 001)" + ("" if inp.io_uring in ("available", "unknown")
                                               else f"; but io_uring is {inp.io_uring} on "
                                               "this host"), "study 001")
    for lib, why in (("lz4", "wal_compression=lz4 and lz4 TOAST compression: cheap CPU"),
                     ("zstd", "wal_compression=zstd and zstd base backups")):
        if inp.pg_version >= (14 if lib == "lz4" else 15):
            add(f"build.{lib}", f"--with-{lib}" if f[f"with_{lib}"] else "without",
                f"--with-{lib}", why, "PostgreSQL docs: Installation > Configuration")
    if inp.workload in ("analytics", "mixed"):
        add("build.llvm", "--with-llvm" if f["with_llvm"] else "without", "--with-llvm",
            "JIT for long analytical queries", "PostgreSQL docs: JIT")
    return out
