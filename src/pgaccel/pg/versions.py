"""What pgaccel knows about each PostgreSQL parameter it proposes, per major version.

This table is the fallback when no real binary or server is available (planning another
machine, ``--pg-version`` differing from the installed one).  When a catalog from a real
binary is available (``gucs.GucCatalog``), that catalog wins for context, unit and bounds.

Sources: the "Server Configuration" chapter of the PostgreSQL documentation for each
major version (13..18) and the release notes that changed a default:
hash_mem_multiplier 1.0 -> 2.0 (15), checkpoint_completion_target 0.5 -> 0.9 (14),
wal_compression boolean -> enum with pglz/lz4/zstd (15), io_method/io_workers (18),
autovacuum_max_workers postmaster -> sighup with autovacuum_worker_slots (18),
effective_io_concurrency 1 -> 16 and maintenance_io_concurrency 10 -> 16 (18).
The PG15 rows were checked against ``postgres --describe-config`` and pg_settings of the
15 binary (tests/test_tune_real.py keeps them honest).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import UsageError

SUPPORTED = range(13, 19)          # 13..18


@dataclass(frozen=True)
class GucSpec:
    context: str                   # pg_settings.context
    vartype: str                   # bool | integer | real | enum | string
    unit: str | None = None        # pg_settings.unit: 8kB, kB, MB, s, ms
    default: str | None = None     # value as pg_settings.setting shows it (in unit)
    min_major: int = 0
    max_major: int = 99
    # per-major overrides of context / default / vartype: {major_from: {...}}
    since: dict[int, dict[str, str]] = field(default_factory=dict)

    def at(self, major: int) -> "GucSpec":
        over: dict[str, str] = {}
        for v in sorted(self.since):
            if major >= v:
                over.update(self.since[v])
        if not over:
            return self
        return GucSpec(over.get("context", self.context), over.get("vartype", self.vartype),
                       over.get("unit", self.unit), over.get("default", self.default),
                       self.min_major, self.max_major)


G = GucSpec
GUCS: dict[str, GucSpec] = {
    # memory
    "shared_buffers": G("postmaster", "integer", "8kB", "16384"),
    "huge_pages": G("postmaster", "enum", None, "try"),
    "effective_cache_size": G("user", "integer", "8kB", "524288"),
    "work_mem": G("user", "integer", "kB", "4096"),
    "hash_mem_multiplier": G("user", "real", None, "1", min_major=13, since={15: {"default": "2"}}),
    "maintenance_work_mem": G("user", "integer", "kB", "65536"),
    "autovacuum_work_mem": G("sighup", "integer", "kB", "-1"),
    "max_connections": G("postmaster", "integer", None, "100"),
    # WAL and checkpoints
    "wal_buffers": G("postmaster", "integer", "8kB", "-1"),
    "min_wal_size": G("sighup", "integer", "MB", "80"),
    "max_wal_size": G("sighup", "integer", "MB", "1024"),
    "checkpoint_timeout": G("sighup", "integer", "s", "300"),
    "checkpoint_completion_target": G("sighup", "real", None, "0.5",
                                      since={14: {"default": "0.9"}}),
    "wal_compression": G("superuser", "bool", None, "off", since={15: {"vartype": "enum"}}),
    # planner and I/O
    "random_page_cost": G("user", "real", None, "4"),
    "effective_io_concurrency": G("user", "integer", None, "1", since={18: {"default": "16"}}),
    "maintenance_io_concurrency": G("user", "integer", None, "10", min_major=13,
                                    since={18: {"default": "16"}}),
    "io_method": G("postmaster", "enum", None, "worker", min_major=18),
    "io_workers": G("sighup", "integer", None, "3", min_major=18),
    "default_statistics_target": G("user", "integer", None, "100"),
    "jit": G("user", "bool", None, "on"),
    # parallelism
    "max_worker_processes": G("postmaster", "integer", None, "8"),
    "max_parallel_workers": G("user", "integer", None, "8"),
    "max_parallel_workers_per_gather": G("user", "integer", None, "2"),
    "max_parallel_maintenance_workers": G("user", "integer", None, "2"),
    # background writer
    "bgwriter_delay": G("sighup", "integer", "ms", "200"),
    "bgwriter_lru_maxpages": G("sighup", "integer", None, "100"),
    "bgwriter_lru_multiplier": G("sighup", "real", None, "2"),
    # autovacuum
    "autovacuum_max_workers": G("postmaster", "integer", None, "3",
                                since={18: {"context": "sighup"}}),
    "autovacuum_worker_slots": G("postmaster", "integer", None, "16", min_major=18),
    "autovacuum_vacuum_cost_limit": G("sighup", "integer", None, "-1"),
    "autovacuum_vacuum_scale_factor": G("sighup", "real", None, "0.2"),
    "autovacuum_analyze_scale_factor": G("sighup", "real", None, "0.1"),
    "autovacuum_vacuum_insert_scale_factor": G("sighup", "real", None, "0.2", min_major=13),
    # removed long ago; listed so gating has a negative example (replaced by max_wal_size, 9.5)
    "checkpoint_segments": G("sighup", "integer", None, "3", max_major=9),
}

# Enum values per version where the server's catalog is not at hand.
ENUMS: dict[str, dict[int, tuple[str, ...]]] = {
    "huge_pages": {0: ("off", "on", "try")},
    "wal_compression": {15: ("pglz", "lz4", "zstd", "on", "off")},
    "io_method": {18: ("sync", "worker", "io_uring")},
}


def check_version(major: int) -> int:
    if major not in SUPPORTED:
        raise UsageError(f"PostgreSQL {major} is not supported by pgaccel's tuner.",
                         f"Supported major versions: {SUPPORTED.start} to {SUPPORTED.stop - 1}.")
    return major


def known(name: str, major: int) -> bool:
    """Whether ``name`` exists in PostgreSQL ``major`` (per the table above)."""
    spec = GUCS.get(name)
    return spec is not None and spec.min_major <= major <= spec.max_major


def spec(name: str, major: int) -> GucSpec | None:
    s = GUCS.get(name)
    return s.at(major) if s and known(name, major) else None


def default(name: str, major: int) -> str | None:
    s = spec(name, major)
    return s.default if s else None


def enum_values(name: str, major: int) -> tuple[str, ...] | None:
    table = ENUMS.get(name)
    if not table:
        return None
    best = [v for v in table if v <= major]
    return table[max(best)] if best else None


def needs_restart(name: str, major: int) -> bool:
    s = spec(name, major)
    return bool(s and s.context == "postmaster")


VERSION_RE = re.compile(r"\(PostgreSQL\)\s+(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> tuple[str, int] | None:
    """``postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)`` -> ("15.18", 15)."""
    m = VERSION_RE.search(text)
    if not m:
        return None
    major = int(m.group(1))
    minor = m.group(2)
    return (f"{major}.{minor}" if minor is not None else str(major)), major


# -- initdb choices that change what is measured -------------------------------------------
# PostgreSQL 18's initdb turns data checksums on unless told --no-data-checksums; 13-17's
# leave them off unless told --data-checksums (-k).  pgaccel names the choice on every
# throwaway cluster, so two versions compared side by side pay the same checksum cost.
NO_CHECKSUMS_FLAG_SINCE = 18


def checksum_initdb_args(major: int, on: bool) -> list[str]:
    """initdb's arguments for data checksums ``on`` or off on a ``major`` server, the
    choice explicit where the version's default differs."""
    if on:
        return ["--data-checksums"]
    return ["--no-data-checksums"] if major >= NO_CHECKSUMS_FLAG_SINCE else []
