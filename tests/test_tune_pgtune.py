"""PGTune's published formulas, checked against the expectations in PGTune's own test suite
(le0pard/pgtune configurationSlice tests), and the comparison table."""

from __future__ import annotations

from pgaccel.tune.pgtune import compare, pgtune_settings, runnable
from pgaccel.tune.rules import make_plan

from test_tune_profiles import inputs_for

GB = 1024**3


def pt(memory="16GB", cpus=4, workload="web", version=15, connections=None, storage="ssd"):
    kw = {"memory": memory, "cpus": cpus, "workload": workload, "storage": storage}
    if connections:
        kw["connections"] = connections
    return pgtune_settings(inputs_for("8c-32g", version, **kw))


def test_maintenance_work_mem_caps_at_8gb():
    assert pt(memory="256GB")["maintenance_work_mem"] == "8GB"
    assert pt(memory="16GB")["maintenance_work_mem"] == "1GB"


def test_huge_pages_try_from_2gb_of_shared_buffers():
    assert pt(memory="4GB")["huge_pages"] == "off"
    assert pt(memory="16GB")["huge_pages"] == "try"


def test_work_mem_floor_is_4mb():
    assert pt(memory="4GB", connections=9999, cpus=4)["work_mem"] == "4MB"


def test_autovacuum_workers_scale_with_cpus_and_io_uring_has_no_io_workers():
    assert pt(cpus=32)["autovacuum_max_workers"] == "5"
    assert pt(cpus=16)["autovacuum_max_workers"] == "4"
    assert "autovacuum_max_workers" not in pt(cpus=8)
    # PGTune (since 830d3bb, issue #142) sets io_workers only for io_method=worker, which it
    # picks only off Linux: on Linux it is io_uring and no io_workers, at any CPU count
    assert "io_workers" not in pt(cpus=32, version=18)
    assert "io_workers" not in pt(cpus=256, version=18)
    assert "io_method" not in pt(version=17) and pt(version=18)["io_method"] == "io_uring"


def test_parallel_settings():
    s = pt(cpus=12, version=13)
    assert [s[k] for k in ("max_worker_processes", "max_parallel_workers_per_gather",
                           "max_parallel_workers", "max_parallel_maintenance_workers")] == \
        ["12", "4", "12", "4"]
    assert pt(cpus=31, workload="analytics")["max_parallel_workers_per_gather"] == "16"
    assert "max_worker_processes" not in pt(cpus=2)


def test_storage_and_types():
    assert pt(storage="hdd")["random_page_cost"] == "4"
    assert pt(storage="nvme")["effective_io_concurrency"] == "1000"
    assert pt(workload="analytics")["default_statistics_target"] == "500"
    assert pt(workload="analytics")["random_page_cost"] == "4"
    assert pt(version=14)["wal_compression"] == "on" and pt()["wal_compression"] == "lz4"
    assert "jit" not in pt(workload="analytics") and pt(workload="oltp")["jit"] == "off"


def test_the_2core_24gb_example():
    """The formulas by hand for 24GB / 2 CPUs / 100 connections / web."""
    s = pt(memory="24GB", cpus=2, connections=100)
    kb = 24 * 1024 * 1024
    assert s["shared_buffers"] == "6GB" and s["effective_cache_size"] == "18GB"
    assert s["maintenance_work_mem"] == "1536MB" and s["wal_buffers"] == "16MB"
    assert s["work_mem"] == f"{(kb - kb // 4) // ((100 + 8) * 3)}kB"
    assert s["min_wal_size"] == "1GB" and s["max_wal_size"] == "4GB"


def test_compare_rows_explain_differences():
    inp = inputs_for("2c-24g", 15, memory=25276502016)      # this VM's MemTotal
    rows = {r["setting"]: r for r in compare(make_plan(inp), inp)}
    assert rows["checkpoint_completion_target"]["same"]
    assert rows["checkpoint_timeout"]["pgtune"] is None and rows["checkpoint_timeout"]["reason"]
    assert not rows["max_parallel_workers_per_gather"]["same"]
    sb = rows["shared_buffers"]
    assert not sb["same"] and "rounds" in sb["reason"]     # 25% both, rounded differently
    assert all(r["reason"] for r in rows.values() if not r["same"])


def test_runnable_drops_what_the_server_refuses():
    from pgaccel.pg.catalog import GucCatalog, GucInfo
    cat = GucCatalog({"io_method": GucInfo("io_method", "postmaster", "enum",
                                           enumvals=("sync", "worker"))}, 18)
    ok, dropped = runnable({"io_method": "io_uring"}, cat)
    assert ok == {} and "io_uring" in dropped[0]
