"""PGTune's published formulas, checked against the expectations in PGTune's own test suite
(le0pard/pgtune configurationSlice tests) and against whole outputs worked out by hand from
upstream's selectors (configurationSlice.js, commit 830d3bb) at several memory sizes, CPU
counts, versions, workloads and storage kinds, on both sides of each threshold; and the
comparison table."""

from __future__ import annotations

import pytest

from pgaccel.tune.inputs import TuneInputs
from pgaccel.tune.pgtune import compare, fmt_kb, pgtune_settings, runnable
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
    cat.gucs["work_mem"] = GucInfo("work_mem", "user", "integer", "kB", 64, 2147483647)
    cat.gucs["wal_compression"] = GucInfo("wal_compression", "superuser", "enum",
                                          enumvals=("pglz", "zstd", "on", "off"))
    cat.gucs["huge_pages"] = GucInfo("huge_pages", "postmaster", "enum",
                                     enumvals=("off", "on"))
    ok, dropped = runnable({"io_method": "io_uring", "work_mem": "4MB",
                            "wal_compression": "lz4", "huge_pages": "try"}, cat)
    # PGTune's own fallbacks where the server refuses its first choice; the rest left out
    assert ok == {"io_method": "worker", "work_mem": "4MB", "wal_compression": "on"}
    assert dropped == [
        "io_method: 'io_uring' is not one of sync, worker: PGTune's fallback "
        "io_method = worker instead",
        "wal_compression: 'lz4' is not one of pglz, zstd, on, off: PGTune's fallback "
        "wal_compression = on instead",
        "huge_pages: 'try' is not one of off, on"]
    # a fallback the server refuses too is no fallback
    cat.gucs["io_method"] = GucInfo("io_method", "postmaster", "enum", enumvals=("sync",))
    assert runnable({"io_method": "io_uring"}, cat) == (
        {}, ["io_method: 'io_uring' is not one of sync"])
    # no catalog (planning for a version that is not installed): everything, nothing dropped
    assert runnable({"io_method": "io_uring"}, None) == ({"io_method": "io_uring"}, [])


# -- PGTune's whole output at several machines, worked out by hand -------------------------
# From le0pard/pgtune src/features/configuration/configurationSlice.js (commit 830d3bb), OS
# Linux, database size "mid", everything in kB (M = total memory in kB):
#   shared_buffers = floor(M/4); effective_cache_size = floor(3M/4)
#   maintenance_work_mem = floor(M/16) (dw: M/8), at most 8GB
#   wal_buffers = floor(3 sb/100), at most 16MB, raised to 16MB above 14MB, at least 32kB
#   work_mem = (M - sb) / ((connections + W) x 3), W = CPUs from 4 CPUs up, else 8;
#              halved for dw and mixed; floored; at least 4MB
#   huge_pages try from sb >= 2GB; autovacuum_work_mem 2GB from maintenance_work_mem >= 2GB
#   parallel settings from 4 CPUs: per gather ceil(C/2) (at most 4 unless dw),
#   maintenance ceil(C/2) at most 4
# Values print in the largest unit that divides them (formatValue in configurationView).

KB = 1024


def tune(memory_kb, cpus, workload, version, connections, storage):
    return pgtune_settings(TuneInputs(memory_bytes=memory_kb * KB, cpus=cpus,
                                      pg_version=version, storage=storage,
                                      connections=connections, workload=workload))


PAR4 = {"max_worker_processes": "4", "max_parallel_workers_per_gather": "2",
        "max_parallel_workers": "4", "max_parallel_maintenance_workers": "2"}

CASES = [
    # 8GB = 8388608 kB, 4 CPUs, web, 15, 200 connections, ssd
    # sb 2097152 = 2GB (huge_pages try: exactly 2GB); ecs 6291456 = 6GB; mwm /16 = 512MB
    # wal_buffers floor(3 x 2097152 / 100) = 62914 -> 16MB
    # work_mem (8388608 - 2097152) / ((200 + 4) x 3) = 6291456 / 612 = 10280.16 -> 10280kB
    # parallel: gather ceil(4/2) = 2, maintenance 2
    ((8 * KB * KB, 4, "web", 15, 200, "ssd"), {
        "max_connections": "200", "shared_buffers": "2GB", "effective_cache_size": "6GB",
        "maintenance_work_mem": "512MB", "checkpoint_completion_target": "0.9",
        "wal_buffers": "16MB", "default_statistics_target": "100", "random_page_cost": "1.1",
        "effective_io_concurrency": "200", "work_mem": "10280kB", "huge_pages": "try",
        "jit": "off", "wal_compression": "lz4", "min_wal_size": "1GB", "max_wal_size": "4GB",
        **PAR4}),
    # 2GB = 2097152 kB, 2 CPUs, oltp, 13, 100 connections, hdd
    # sb 524288 = 512MB; ecs 1572864 = 1536MB; mwm 131072 = 128MB
    # wal_buffers floor(3 x 524288 / 100) = 15728 kB: above 14MB -> 16MB
    # work_mem (2097152 - 524288) / ((100 + 8) x 3) = 1572864 / 324 = 4854.5 -> 4854kB
    # hdd: random_page_cost 4, effective_io_concurrency 2; 13: wal_compression on
    ((2 * KB * KB, 2, "oltp", 13, 100, "hdd"), {
        "max_connections": "100", "shared_buffers": "512MB", "effective_cache_size": "1536MB",
        "maintenance_work_mem": "128MB", "checkpoint_completion_target": "0.9",
        "wal_buffers": "16MB", "default_statistics_target": "100", "random_page_cost": "4",
        "effective_io_concurrency": "2", "work_mem": "4854kB", "huge_pages": "off",
        "jit": "off", "wal_compression": "on", "min_wal_size": "2GB", "max_wal_size": "8GB"}),
    # 64GB = 67108864 kB, 16 CPUs, analytics (dw), 17, 40 connections, nvme
    # sb 16777216 = 16GB; ecs 50331648 = 48GB; mwm /8 = 8388608 = 8GB (the cap exactly)
    # work_mem (67108864 - 16777216) / ((40 + 16) x 3) = 50331648 / 168 = 299593.14,
    #          / 2 (dw) = 149796.57 -> 149796kB
    # 16 CPUs: autovacuum_max_workers 4; mwm 8GB >= 2GB: autovacuum_work_mem 2GB
    # gather ceil(16/2) = 8 (dw: no cap of 4), maintenance min(8, 4) = 4; no jit for dw
    ((64 * KB * KB, 16, "analytics", 17, 40, "nvme"), {
        "max_connections": "40", "shared_buffers": "16GB", "effective_cache_size": "48GB",
        "maintenance_work_mem": "8GB", "checkpoint_completion_target": "0.9",
        "wal_buffers": "16MB", "default_statistics_target": "500", "random_page_cost": "4",
        "effective_io_concurrency": "1000", "work_mem": "149796kB", "huge_pages": "try",
        "wal_compression": "lz4", "autovacuum_max_workers": "4",
        "autovacuum_work_mem": "2GB", "min_wal_size": "4GB", "max_wal_size": "16GB",
        "max_worker_processes": "16", "max_parallel_workers_per_gather": "8",
        "max_parallel_workers": "16", "max_parallel_maintenance_workers": "4"}),
    # 256GB = 268435456 kB, 64 CPUs, mixed, 18, 500 connections, san
    # sb 67108864 = 64GB; ecs 201326592 = 192GB; mwm /16 = 16GB -> capped 8GB
    # work_mem (268435456 - 67108864) / ((500 + 64) x 3) = 201326592 / 1692 = 118987.35,
    #          / 2 (mixed) = 59493.67 -> 59493kB
    # 64 CPUs: autovacuum_max_workers 5; 18: io_method io_uring (and no io_workers)
    # gather ceil(64/2) = 32 -> 4 (not dw)
    ((256 * KB * KB, 64, "mixed", 18, 500, "san"), {
        "max_connections": "500", "shared_buffers": "64GB", "effective_cache_size": "192GB",
        "maintenance_work_mem": "8GB", "checkpoint_completion_target": "0.9",
        "wal_buffers": "16MB", "default_statistics_target": "100", "random_page_cost": "1.1",
        "effective_io_concurrency": "300", "work_mem": "59493kB", "huge_pages": "try",
        "jit": "off", "wal_compression": "lz4", "autovacuum_max_workers": "5",
        "autovacuum_work_mem": "2GB", "io_method": "io_uring", "min_wal_size": "1GB",
        "max_wal_size": "4GB", "max_worker_processes": "64",
        "max_parallel_workers_per_gather": "4", "max_parallel_workers": "64",
        "max_parallel_maintenance_workers": "4"}),
    # 32GB = 33554432 kB, 32 CPUs, ingest (-> oltp), 16, 300 connections, virtual (-> ssd)
    # sb 8388608 = 8GB; ecs 25165824 = 24GB; mwm /16 = 2097152 = 2GB: autovacuum_work_mem 2GB
    # work_mem (33554432 - 8388608) / ((300 + 32) x 3) = 25165824 / 996 = 25266.89 -> 25266kB
    ((32 * KB * KB, 32, "ingest", 16, 300, "virtual"), {
        "max_connections": "300", "shared_buffers": "8GB", "effective_cache_size": "24GB",
        "maintenance_work_mem": "2GB", "checkpoint_completion_target": "0.9",
        "wal_buffers": "16MB", "default_statistics_target": "100", "random_page_cost": "1.1",
        "effective_io_concurrency": "200", "work_mem": "25266kB", "huge_pages": "try",
        "jit": "off", "wal_compression": "lz4", "autovacuum_max_workers": "5",
        "autovacuum_work_mem": "2GB", "min_wal_size": "2GB", "max_wal_size": "8GB",
        "max_worker_processes": "32", "max_parallel_workers_per_gather": "4",
        "max_parallel_workers": "32", "max_parallel_maintenance_workers": "4"}),
    # 4GB = 4194304 kB, 3 CPUs, analytics (dw), 14, 20 connections, unknown (-> ssd)
    # sb 1048576 = 1GB; ecs 3145728 = 3GB; mwm /8 = 524288 = 512MB
    # work_mem (4194304 - 1048576) / ((20 + 8) x 3) = 3145728 / 84 = 37449.14, / 2 = 18724.57
    #          -> 18724kB; 3 CPUs: no parallel settings
    ((4 * KB * KB, 3, "analytics", 14, 20, "unknown"), {
        "max_connections": "20", "shared_buffers": "1GB", "effective_cache_size": "3GB",
        "maintenance_work_mem": "512MB", "checkpoint_completion_target": "0.9",
        "wal_buffers": "16MB", "default_statistics_target": "500", "random_page_cost": "4",
        "effective_io_concurrency": "200", "work_mem": "18724kB", "huge_pages": "off",
        "wal_compression": "on", "min_wal_size": "4GB", "max_wal_size": "16GB"}),
    # 1GB = 1048576 kB, 1 CPU, web, 18, 100 connections, ssd
    # sb 262144 = 256MB; ecs 786432 = 768MB; mwm 65536 = 64MB
    # wal_buffers floor(3 x 262144 / 100) = 7864 -> 7864kB (below 14MB: kept)
    # work_mem 786432 / ((100 + 8) x 3) = 2427.3 -> the 4MB floor
    ((KB * KB, 1, "web", 18, 100, "ssd"), {
        "max_connections": "100", "shared_buffers": "256MB", "effective_cache_size": "768MB",
        "maintenance_work_mem": "64MB", "checkpoint_completion_target": "0.9",
        "wal_buffers": "7864kB", "default_statistics_target": "100", "random_page_cost": "1.1",
        "effective_io_concurrency": "200", "work_mem": "4MB", "huge_pages": "off",
        "jit": "off", "wal_compression": "lz4", "io_method": "io_uring", "min_wal_size": "1GB",
        "max_wal_size": "4GB"}),
]


@pytest.mark.parametrize("machine, expected", CASES, ids=lambda x: "-".join(map(str, x))
                         if isinstance(x, tuple) else "")
def test_whole_output_by_hand(machine, expected):
    """Every setting, and PGTune's order (max_connections first, parallel settings last)."""
    assert list(tune(*machine).items()) == list(expected.items())


@pytest.mark.parametrize("memory_kb, wal_buffers", [
    (262144, "1966kB"),       # 256MB: sb 65536, floor(196608 / 100) = 1966
    (1835008, "13762kB"),     # 1792MB: sb 458752, floor(1376256 / 100) = 13762
    (1911468, "14MB"),        # sb 477867, floor(1433601 / 100) = 14336 = 14MB: not above
    (1911600, "16MB"),        # sb 477900, floor(1433700 / 100) = 14337 > 14MB: raised
    (1945600, "16MB"),        # 1900MB: sb 486400, 14592 kB (below 15MB): raised
    (2097152, "16MB"),        # 2GB: sb 524288, 15728 kB: raised
    (4194304, "16MB"),        # 4GB: sb 1GB, 31457 kB: capped
])
def test_wal_buffers_on_both_sides_of_14mb(memory_kb, wal_buffers):
    assert tune(memory_kb, 2, "web", 15, 100, "ssd")["wal_buffers"] == wal_buffers


@pytest.mark.parametrize("memory_kb, huge_pages", [
    (8388608, "try"),          # sb = 8388608 / 4 = 2097152 kB = 2GB exactly
    (8388604, "off"),          # sb = 2097151 kB, 1kB short
    (12582912, "try"),         # 12GB: sb 3GB
])
def test_huge_pages_threshold(memory_kb, huge_pages):
    assert tune(memory_kb, 2, "web", 15, 100, "ssd")["huge_pages"] == huge_pages


@pytest.mark.parametrize("memory_kb, workload, mwm, avwm", [
    (33554432, "web", "2GB", "2GB"),       # 32GB / 16 = 2097152 kB = 2GB: autovacuum 2GB
    (33554416, "web", "2097151kB", None),  # 16 kB less: / 16 = 2097151 kB, below 2GB
    (16777216, "analytics", "2GB", "2GB"),  # dw: 16GB / 8 = 2GB
    (16777216, "web", "1GB", None),        # web: 16GB / 16 = 1GB
    (16777216, "mixed", "1GB", None),      # mixed: / 16 too
    (50331648, "oltp", "3GB", "2GB"),      # 48GB / 16 = 3GB; autovacuum stays 2GB
    (134217728, "web", "8GB", "2GB"),      # 128GB / 16 = 8GB: the cap exactly
    (142606336, "web", "8GB", "2GB"),      # 136GB / 16 = 8.5GB -> 8GB
    (75497472, "analytics", "8GB", "2GB"),  # 72GB / 8 = 9GB -> 8GB
])
def test_maintenance_and_autovacuum_work_mem(memory_kb, workload, mwm, avwm):
    s = tune(memory_kb, 2, workload, 15, 100, "ssd")
    assert s["maintenance_work_mem"] == mwm and s.get("autovacuum_work_mem") == avwm


@pytest.mark.parametrize("workload, connections, cpus, work_mem", [
    # 16GB = 16777216 kB, sb 4194304: M - sb = 12582912 kB
    ("web", 100, 2, "38836kB"),     # / ((100 + 8) x 3 = 324) = 38836.1
    ("oltp", 100, 2, "38836kB"),
    ("mixed", 100, 2, "19418kB"),   # 38836.1 / 2 = 19418.05
    ("analytics", 100, 2, "19418kB"),
    ("web", 100, 4, "40329kB"),     # / ((100 + 4) x 3 = 312) = 40329.8: 4 CPUs count, not 8
    ("web", 100, 3, "38836kB"),     # 3 CPUs: still the default 8 workers
    ("web", 1019, 4, "4100kB"),     # / ((1019 + 4) x 3 = 3069) = 4100.004: just above 4MB
    ("web", 1020, 4, "4MB"),        # / ((1020 + 4) x 3 = 3072) = 4096 = 4MB exactly
    ("web", 2000, 8, "4MB"),        # / 6024 = 2088.8 -> the 4MB floor
])
def test_work_mem(workload, connections, cpus, work_mem):
    assert tune(16777216, cpus, workload, 15, connections, "ssd")["work_mem"] == work_mem


@pytest.mark.parametrize("cpus, expected", [
    (3, None),
    (4, ("4", "2", "4", "2")),
    (5, ("5", "3", "5", "3")),       # ceil(5/2) = 3
    (7, ("7", "4", "7", "4")),       # ceil(7/2) = 4
    (9, ("9", "4", "9", "4")),       # ceil(9/2) = 5 -> 4
])
def test_parallel_settings_at_the_edges(cpus, expected):
    s = tune(8388608, cpus, "web", 15, 100, "ssd")
    names = ("max_worker_processes", "max_parallel_workers_per_gather",
             "max_parallel_workers", "max_parallel_maintenance_workers")
    assert tuple(s.get(n) for n in names) == (expected or (None,) * 4)


@pytest.mark.parametrize("cpus, per_gather, maintenance", [
    (5, "3", "3"), (9, "5", "4"), (31, "16", "4"), (64, "32", "4")])
def test_dw_per_gather_is_not_capped(cpus, per_gather, maintenance):
    s = tune(8388608, cpus, "analytics", 15, 100, "ssd")
    assert (s["max_parallel_workers_per_gather"], s["max_parallel_maintenance_workers"]) == \
        (per_gather, maintenance)


@pytest.mark.parametrize("cpus, workers", [(15, None), (16, "4"), (31, "4"), (32, "5"),
                                           (1.9, None)])
def test_autovacuum_max_workers(cpus, workers):
    assert tune(8388608, cpus, "web", 15, 100, "ssd").get("autovacuum_max_workers") == workers


@pytest.mark.parametrize("storage, workload, rpc, eic", [
    ("hdd", "web", "4", "2"), ("ssd", "web", "1.1", "200"), ("nvme", "oltp", "1.1", "1000"),
    ("san", "mixed", "1.1", "300"), ("virtual", "web", "1.1", "200"),
    ("unknown", "oltp", "1.1", "200"), ("nvme", "analytics", "4", "1000"),
    ("hdd", "analytics", "4", "2"), ("san", "ingest", "1.1", "300"),
])
def test_storage_kinds(storage, workload, rpc, eic):
    s = tune(8388608, 4, workload, 15, 100, storage)
    assert (s["random_page_cost"], s["effective_io_concurrency"]) == (rpc, eic)


@pytest.mark.parametrize("workload, stats, jit, wal", [
    ("web", "100", "off", ("1GB", "4GB")), ("oltp", "100", "off", ("2GB", "8GB")),
    ("ingest", "100", "off", ("2GB", "8GB")), ("mixed", "100", "off", ("1GB", "4GB")),
    ("analytics", "500", None, ("4GB", "16GB")),
])
def test_db_types(workload, stats, jit, wal):
    s = tune(8388608, 4, workload, 15, 100, "ssd")
    assert (s["default_statistics_target"], s.get("jit"), s["min_wal_size"],
            s["max_wal_size"]) == (stats, jit, *wal)


@pytest.mark.parametrize("version, compression, io_method", [
    (13, "on", None), (14, "on", None), (15, "lz4", None), (17, "lz4", None),
    (18, "lz4", "io_uring")])
def test_versions(version, compression, io_method):
    s = tune(8388608, 64, "web", version, 100, "ssd")
    assert (s["wal_compression"], s.get("io_method"), s.get("io_workers")) == \
        (compression, io_method, None)


@pytest.mark.parametrize("kb, text", [(1048576, "1GB"), (3 * 1048576, "3GB"),
                                      (1536 * 1024, "1536MB"), (1024, "1MB"),
                                      (10280, "10280kB"), (1048577, "1048577kB"),
                                      (32, "32kB")])
def test_fmt_kb(kb, text):
    assert fmt_kb(kb) == text


# -- the comparison table ----------------------------------------------------------------------

def _plan_8g_4cpu_18():
    """A hand-made plan beside PGTune's 8GB / 4 CPUs / web / 18 / 200 connections / ssd (the
    first of CASES, with io_method io_uring)."""
    from pgaccel.tune.plan import Change, Plan

    def ch(name, value, **kw):
        return Change("postgres", name, value, f"ours: {name}", **kw)
    return Plan({}, [
        ch("max_connections", "194"),        # |200 - 194| / 200 = 0.03: not "< 3%"
        ch("shared_buffers", "2048MB"),      # = 2GB
        ch("work_mem", "10MB"),              # |10280 - 10240| / 10280 = 0.4%: rounding
        ch("effective_io_concurrency", "256"),   # |200 - 256| / 256 = 22%
        ch("jit", "OFF"),                    # not a number: compared as words, any case
        ch("io_method", "worker"),           # not a number and not the same word
        ch("checkpoint_timeout", "15min"),   # pgaccel only
        ch("wal_compression", "zstd", advice_only=True),   # advice: not a setting
        Change("linux", "vm.swappiness", "1", "linux layer"),
    ])


def test_compare_rows_by_hand():
    inp = TuneInputs(memory_bytes=8 * GB, cpus=4, pg_version=18, storage="ssd",
                     connections=200, workload="web")
    rows = compare(_plan_8g_4cpu_18(), inp)
    keep = "pgaccel keeps the server default"
    rounds = "same rule; pgaccel rounds to a whole 64MB/1MB"
    assert [(r["setting"], r["pgtune"], r["pgaccel"], r["same"], r["reason"])
            for r in rows] == [
        ("max_connections", "200", "194", False, "ours: max_connections"),
        ("shared_buffers", "2GB", "2048MB", True, ""),
        ("effective_cache_size", "6GB", None, False, keep),
        ("maintenance_work_mem", "512MB", None, False, keep),
        ("checkpoint_completion_target", "0.9", None, False, keep),
        ("wal_buffers", "16MB", None, False, keep),
        ("default_statistics_target", "100", None, False, keep),
        ("random_page_cost", "1.1", None, False, keep),
        ("effective_io_concurrency", "200", "256", False, "ours: effective_io_concurrency"),
        ("work_mem", "10280kB", "10MB", False, rounds),
        ("huge_pages", "try", None, False, keep),
        ("jit", "off", "OFF", True, ""),
        ("wal_compression", "lz4", None, False, keep),
        ("io_method", "io_uring", "worker", False, "ours: io_method"),
        ("min_wal_size", "1GB", None, False, keep),
        ("max_wal_size", "4GB", None, False, keep),
        ("max_worker_processes", "4", None, False, keep),
        ("max_parallel_workers_per_gather", "2", None, False, keep),
        ("max_parallel_workers", "4", None, False, keep),
        ("max_parallel_maintenance_workers", "2", None, False, keep),
        ("checkpoint_timeout", None, "15min", False, "ours: checkpoint_timeout"),
    ]


def test_compare_says_which_pgtune_values_the_server_refuses():
    """With a catalog, a differing PGTune value the server would refuse gets the reason
    appended; values it takes (string parameters here) get nothing."""
    from pgaccel.pg.catalog import GucCatalog, GucInfo
    inp = TuneInputs(memory_bytes=8 * GB, cpus=4, pg_version=18, storage="ssd",
                     connections=200, workload="web")
    gucs = {n: GucInfo(n, "user", "string") for n in pgtune_settings(inp)}
    gucs["io_method"] = GucInfo("io_method", "postmaster", "enum", enumvals=("sync", "worker"))
    gucs["max_connections"] = GucInfo("max_connections", "postmaster", "integer",
                                      min_val=1, max_val=150)
    gucs["wal_compression"] = GucInfo("wal_compression", "superuser", "enum",
                                      enumvals=("pglz", "lz4", "zstd", "on", "off"))
    del gucs["huge_pages"]
    rows = {r["setting"]: r for r in compare(_plan_8g_4cpu_18(), inp, GucCatalog(gucs, 18))}
    assert rows["io_method"]["reason"] == ("ours: io_method (PGTune's value would be refused: "
                                           "io_method: 'io_uring' is not one of sync, worker)")
    assert rows["max_connections"]["reason"] == (
        "ours: max_connections (PGTune's value would be refused: max_connections: 200 is "
        "above the maximum 150)")
    assert rows["huge_pages"]["reason"] == (
        "pgaccel keeps the server default (PGTune's value would be refused: huge_pages: "
        "unknown parameter for this server)")
    assert rows["wal_buffers"]["reason"] == "pgaccel keeps the server default"
    assert rows["wal_compression"]["reason"] == "pgaccel keeps the server default"  # lz4 ok
    assert rows["shared_buffers"]["reason"] == ""       # the same: nothing to check
    assert rows["checkpoint_timeout"]["reason"] == "ours: checkpoint_timeout"  # no PGTune value


@pytest.mark.parametrize("name, a, b, diff", [
    ("shared_buffers", "8GB", "4GB", 0.5),       # |8 - 4| / max(8, 4): the larger of the two
    ("shared_buffers", "4GB", "8GB", 0.5),
    ("shared_buffers", "2GB", "2048MB", 0.0),
    ("work_mem", "10280kB", "10MB", 40 / 10280),
    ("random_page_cost", "0", "0", 0.0),         # both 0: no division by zero
    ("random_page_cost", "0.5", "0", 1.0),       # |0.5 - 0| / 0.5
    ("not_a_parameter", "1", "4", 0.75),         # no spec: plain numbers, |1 - 4| / 4
    ("jit", "off", "off", 0.0), ("jit", "off", "OFF", 0.0), ("jit", " On", "on ", 0.0),
    ("io_method", "io_uring", "worker", None),   # different words: not comparable
    ("jit", None, None, 0.0),                    # neither sets it
    ("jit", "off", None, None), ("jit", None, "off", None),
])
def test_closeness(name, a, b, diff):
    from pgaccel.tune.pgtune import _closeness
    got = _closeness(name, a, b, 18)
    assert got == (pytest.approx(diff) if diff is not None else None)
