"""A plan's PostgreSQL settings in the groups a DBA reasons in (pure): memory, parallelism,
JIT, planner costs, WAL and checkpoints, background writer, autovacuum, connections.

``run --explain`` measures each group's share of a verdict by leaving it out of the plan
(``without-GROUP`` configs beside the whole plan); ``run --without GROUP`` proves a plan
without groups that made it slower.
"""

from __future__ import annotations

from typing import Iterable, Mapping

GROUPS: dict[str, tuple[str, ...]] = {
    "memory": ("shared_buffers", "huge_pages", "work_mem", "hash_mem_multiplier",
               "maintenance_work_mem", "autovacuum_work_mem", "effective_cache_size",
               "logical_decoding_work_mem", "temp_buffers"),
    "parallelism": ("max_worker_processes", "max_parallel_workers",
                    "max_parallel_workers_per_gather", "max_parallel_maintenance_workers",
                    "parallel_setup_cost", "parallel_tuple_cost",
                    "min_parallel_table_scan_size", "min_parallel_index_scan_size"),
    "jit": ("jit", "jit_above_cost", "jit_inline_above_cost", "jit_optimize_above_cost"),
    "planner": ("random_page_cost", "seq_page_cost", "cpu_tuple_cost",
                "cpu_index_tuple_cost", "cpu_operator_cost", "default_statistics_target",
                "effective_io_concurrency", "maintenance_io_concurrency", "io_method",
                "io_workers", "io_combine_limit"),
    "wal": ("wal_buffers", "max_wal_size", "min_wal_size", "checkpoint_timeout",
            "checkpoint_completion_target", "wal_compression", "wal_writer_delay",
            "wal_writer_flush_after", "commit_delay", "commit_siblings", "wal_level",
            "full_page_writes", "synchronous_commit"),
    "bgwriter": ("bgwriter_delay", "bgwriter_lru_maxpages", "bgwriter_lru_multiplier",
                 "bgwriter_flush_after", "backend_flush_after", "checkpoint_flush_after"),
    "autovacuum": ("autovacuum_max_workers", "autovacuum_naptime",
                   "autovacuum_vacuum_cost_limit", "autovacuum_vacuum_cost_delay",
                   "autovacuum_vacuum_scale_factor", "autovacuum_analyze_scale_factor",
                   "autovacuum_vacuum_insert_scale_factor", "autovacuum_vacuum_threshold",
                   "autovacuum_analyze_threshold"),
    "connections": ("max_connections", "superuser_reserved_connections"),
}
ORDER = tuple(GROUPS)
_OF = {name: g for g, names in GROUPS.items() for name in names}


def group_of(name: str) -> str:
    """The group of a setting; "other" for one no group names."""
    return _OF.get(name.lower(), "other")


def plan_groups(settings: Mapping[str, object] | Iterable[str]) -> dict[str, list[str]]:
    """The groups the settings fall in, in :data:`ORDER` ("other" last), each with its
    settings in the order given."""
    names = list(settings)
    out: dict[str, list[str]] = {}
    for g in (*ORDER, "other"):
        inside = [n for n in names if group_of(n) == g]
        if inside:
            out[g] = inside
    return out


def without(settings: Mapping[str, object], groups: Iterable[str]) -> dict[str, object]:
    """The settings less those of ``groups``."""
    drop = set(groups)
    return {k: v for k, v in settings.items() if group_of(k) not in drop}


def check_groups(names: Iterable[str]) -> list[str]:
    """Group names that do not exist (for a one-paragraph error)."""
    known = set(GROUPS) | {"other"}
    return [n for n in names if n not in known]
