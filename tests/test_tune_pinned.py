"""Every PostgreSQL setting of the plan, pinned to values computed by hand from
docs/tuning-rules.md (not from the code's formulas), for machines that exercise different
branches: a change to any formula, cap, rounding rule or storage table fails here.

Hand computations (M memory, C CPUs, N = 100 connections, F per-query factor):

8c-32g, oltp, ssd, PostgreSQL 15 (F = 1):
  shared_buffers  M/4 = 8 GB;  effective_cache_size 3M/4 = 24 GB
  maintenance_work_mem  M/16 = 2 GB (cap 2 GB);  autovacuum_work_mem min(2 GB, 1 GB)
  work_mem  (32 GB - 8 GB) x 0.5 / (100 x 2 x 1) = 61.44 MB -> rounded down to 61 MB;
            budget 8192 + 100x61x2 + 8x61x2 + 3x1024 + 2048 = 26,488 MB < 0.9 x 32,768
  wal_buffers  8 GB/32 capped at 16 MB (C < 16, not ingest)
  max_wal_size 8 GB (oltp), min_wal_size 2 GB; per_gather min(4, 8/4) = 2
48c-128g, analytics, nvme, PostgreSQL 15 (F = 3):
  shared_buffers 32 GB; effective_cache_size 96 GB; maintenance_work_mem M/8 = 16 GB -> cap 4 GB
  work_mem  96 GB x 0.5 / (100 x 2 x 3) = 81.92 MB -> 81 MB;
            budget 32768 + 100x81x2x3 + 48x81x2 + 6x1024 + 4096 = 99,384 MB < 117,964
  wal_buffers 64 MB (shared_buffers >= 4 GB and C >= 16); max_wal_size 16 GB, min 4 GB
  autovacuum_max_workers 6 (C > 32); max_worker_processes max(8, 52); per_gather
  min(16, 24) = 16; maintenance workers min(8, 24) = 8; statistics 500, jit on
"""

from __future__ import annotations

import pytest

from pgaccel.tune.rules import make_plan

from test_tune_profiles import inputs_for

COMMON = {"huge_pages": "try", "hash_mem_multiplier": "2", "max_connections": "100",
          "checkpoint_timeout": "15min", "checkpoint_completion_target": "0.9",
          "wal_compression": "lz4", "bgwriter_delay": "100ms",
          "bgwriter_lru_maxpages": "1000", "bgwriter_lru_multiplier": "4"}

PINNED = {
    ("8c-32g", "oltp", None): {
        **COMMON, "shared_buffers": "8GB", "effective_cache_size": "24GB",
        "maintenance_work_mem": "2GB", "autovacuum_work_mem": "1GB",
        "autovacuum_max_workers": "3", "work_mem": "61MB", "wal_buffers": "16MB",
        "max_wal_size": "8GB", "min_wal_size": "2GB", "random_page_cost": "1.1",
        "effective_io_concurrency": "200", "maintenance_io_concurrency": "200",
        "max_worker_processes": "12", "max_parallel_workers": "8",
        "max_parallel_workers_per_gather": "2", "max_parallel_maintenance_workers": "4",
        "jit": "off", "default_statistics_target": "100",
        "autovacuum_vacuum_cost_limit": "2000", "autovacuum_vacuum_scale_factor": "0.05",
        "autovacuum_analyze_scale_factor": "0.02"},
    ("48c-128g", "analytics", None): {
        **COMMON, "shared_buffers": "32GB", "effective_cache_size": "96GB",
        "maintenance_work_mem": "4GB", "autovacuum_work_mem": "1GB",
        "autovacuum_max_workers": "6", "work_mem": "81MB", "wal_buffers": "64MB",
        "max_wal_size": "16GB", "min_wal_size": "4GB", "random_page_cost": "1.1",
        "effective_io_concurrency": "256", "maintenance_io_concurrency": "256",
        "max_worker_processes": "52", "max_parallel_workers": "48",
        "max_parallel_workers_per_gather": "16", "max_parallel_maintenance_workers": "8",
        "jit": "on", "default_statistics_target": "500",
        "autovacuum_vacuum_cost_limit": "2000"},
}


def _settings(profile: str, workload: str, storage: str | None) -> dict[str, str]:
    plan = make_plan(inputs_for(profile, workload=workload, storage=storage))
    return {k: str(v) for k, v in plan.postgres_settings().items()}


@pytest.mark.parametrize("profile, workload, storage", list(PINNED))
def test_every_setting_by_hand(profile, workload, storage):
    got = _settings(profile, workload, storage)
    want = PINNED[(profile, workload, storage)]
    assert {k: got.get(k) for k in want} == want
    assert set(got) - set(want) == set()          # nothing proposed that is not pinned


@pytest.mark.parametrize("storage, rpc, eic, cost_limit", [
    ("hdd", "4", "2", None), ("nvme", "1.1", "256", "2000"), ("san", "1.1", "300", "1000"),
    ("virtual", "1.1", "64", "1000"), ("unknown", "2", "16", "1000")])
def test_storage_table_by_hand(storage, rpc, eic, cost_limit):
    got = _settings("8c-32g", "oltp", storage)
    assert got["random_page_cost"] == rpc and got["effective_io_concurrency"] == eic
    assert got.get("autovacuum_vacuum_cost_limit") == cost_limit
    assert ("bgwriter_delay" in got) == (storage != "hdd")     # not on hdd


@pytest.mark.parametrize("workload, max_wal, stats", [
    ("web", "4GB", "100"), ("oltp", "8GB", "100"), ("mixed", "8GB", "100"),
    ("analytics", "16GB", "500"), ("ingest", "32GB", "100")])
def test_wal_size_and_statistics_by_workload(workload, max_wal, stats):
    got = _settings("8c-32g", workload, None)        # 2M = 64 GB: no cap reached
    assert got["max_wal_size"] == max_wal and got["default_statistics_target"] == stats


def test_reasons_name_the_rule():
    plan = make_plan(inputs_for("8c-32g", workload="oltp"))
    by = {c.name: c for c in plan.changes}
    assert by["shared_buffers"].rule == "mem.shared_buffers"
    assert "OS page cache holds the rest" in by["shared_buffers"].reason
    assert by["random_page_cost"].rule == "io.random_page_cost"
    assert by["random_page_cost"].reason.startswith("ssd storage: a random page costs")
