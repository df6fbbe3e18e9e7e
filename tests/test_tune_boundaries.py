"""The tuning rules at the edges of their branches, each value computed by hand from
docs/tuning-rules.md: a threshold moved by one (C <= 8 -> C <= 9), a cap or a rounding
step changed, or the memory budget computed differently fails here.  Written after the
mutation run (tools/mutation.sh) showed which edges no test stood on.

Hand computations (M memory, C CPUs, N connections, F per-query factor):

256MB, 2 CPUs, oltp, N = 100:
  shared_buffers M/4 = 64MB; effective_cache_size 192MB; maintenance_work_mem M/16 = 16MB;
  autovacuum_work_mem 16MB; work_mem 192MB x 0.5 / 200 = 491.52kB -> 64kB steps: 448kB;
  wal_buffers 64MB/32 = 2MB; max_wal_size max(1GB, 2M rounded down to GB = 0) = 1GB,
  min 256MB; budget 64 + 100x448kBx2 (87.5) + 2x448kBx2 (1.75) + 3x16 + 16 = 217.25MB
  < 0.9 x 256 = 230.4MB: nothing lowered.
256MB, 2 CPUs, oltp, N = 800 (work_mem's floor):
  share 96MB / 1600 = 61.44kB -> 0 -> the 64kB floor; budget 64 + 800x64kBx2 (100)
  + 0.25 + 48 + 16 = 228.25MB < 230.4MB: kept at 64kB.  800 > max(4C, 50): pooler advice.
264MB, oltp (the 16MB step edge): maintenance_work_mem 264/16 = 16.5MB -> 1MB steps: 16MB.
1400MB, oltp (the 1GB step edge): effective_cache_size 1050MB -> 64MB steps: 1GB.
8GB, 4 CPUs, analytics, N = 100 (the budget lowers work_mem):
  shared_buffers 2GB; maintenance_work_mem 1GB; autovacuum_work_mem 1GB, 3 workers;
  work_mem 6GB x 0.5 / 600 = 5.12MB -> 5184kB; budget 2048 + 600 x 5184kB (3037.5)
  + 4x2x5184kB (40.5) + 3072 + 1024 = 9222MB > 0.9 x 8GB = 7372.8MB.
  Room for work_mem: (7,730,941,132 - 1 - 6,442,450,944) / (600 + 8) = 2,119,227 bytes
  -> below 16MB, 64kB steps -> 2MB; then 2048 + 1200 + 16 + 3072 + 1024 = 7360MB fits.
"""

from __future__ import annotations

import pytest

from pgaccel.pg.catalog import GucCatalog, GucInfo
from pgaccel.tune.inputs import TuneInputs
from pgaccel.tune.rules import memory_budget, make_plan

MB, GB = 1024**2, 1024**3
DEBIAN = {"with_lz4": True, "with_zstd": True, "with_liburing": False, "with_llvm": True}


def _plan(mem, cpus=2, workload="oltp", storage="ssd", version=15, conns=100,
          build=DEBIAN, io_uring="unknown", gucs=None):
    return make_plan(TuneInputs(memory_bytes=mem, cpus=cpus, pg_version=version,
                                storage=storage, connections=conns, workload=workload,
                                build=build, io_uring=io_uring), gucs=gucs)


def _s(plan) -> dict[str, str]:
    return {k: str(v) for k, v in plan.postgres_settings().items()}


def _change(plan, name):
    return next(c for c in plan.changes if c.name == name)


def test_the_smallest_machine_by_hand():
    p = _plan(256 * MB)
    s = _s(p)
    assert {k: s[k] for k in ("shared_buffers", "effective_cache_size", "maintenance_work_mem",
                              "autovacuum_work_mem", "work_mem", "wal_buffers",
                              "max_wal_size", "min_wal_size")} == {
        "shared_buffers": "64MB", "effective_cache_size": "192MB",
        "maintenance_work_mem": "16MB", "autovacuum_work_mem": "16MB", "work_mem": "448kB",
        "wal_buffers": "2MB", "max_wal_size": "1GB", "min_wal_size": "256MB"}
    assert not any("lowered" in c.reason for c in p.changes)
    used, limit, bd = memory_budget(p, p_inputs(256 * MB))
    assert bd == {"shared_buffers": 64 * MB, "work_mem": 100 * 448 * 1024 * 2,
                  "parallel_workers": 2 * 448 * 1024 * 2, "autovacuum": 3 * 16 * MB,
                  "maintenance_work_mem": 16 * MB}
    assert used == sum(bd.values()) and limit == int(256 * MB * 0.9)


def p_inputs(mem, **kw):
    kw.setdefault("cpus", 2)
    return TuneInputs(memory_bytes=mem, pg_version=kw.pop("version", 15), storage="ssd",
                      build=DEBIAN, **kw)


def test_work_mem_floor_and_the_pooler_advice():
    p = _plan(256 * MB, conns=800)
    assert _s(p)["work_mem"] == "64kB"
    assert not any("lowered" in c.reason for c in p.changes)
    assert any("800 connections for 2 cores" in a and "~10 to 20 server" in a
               for a in p.advice)


@pytest.mark.parametrize("cpus, conns, advice", [
    (2, 50, False), (2, 51, True),            # limit max(4C, 50) = 50
    (16, 64, False), (16, 65, True),          # limit 4C = 64
])
def test_pooler_advice_threshold(cpus, conns, advice):
    p = _plan(32 * GB, cpus=cpus, conns=conns)
    said = [a for a in p.advice if "pooler" in a and "connections for" in a]
    assert bool(said) is advice
    if said and cpus == 16:
        assert "~32 to 64 server connections" in said[0]


@pytest.mark.parametrize("mem, name, want", [
    (264 * MB, "maintenance_work_mem", "16MB"),        # 16.5MB: 1MB steps from 16MB on
    (1400 * MB, "effective_cache_size", "1GB"),        # 1050MB: 64MB steps from 1GB on
])
def test_rounding_steps_at_their_edges(mem, name, want):
    assert _s(_plan(mem))[name] == want


@pytest.mark.parametrize("cpus, workers", [(8, 3), (9, 4), (16, 4), (17, 5), (32, 5), (33, 6)])
def test_autovacuum_workers_at_each_edge(cpus, workers):
    assert _s(_plan(32 * GB, cpus=cpus))["autovacuum_max_workers"] == str(workers)


@pytest.mark.parametrize("workload, mem, mwm", [
    ("analytics", 16 * GB, "2GB"),     # M/8 under the 4GB cap
    ("ingest", 16 * GB, "2GB"),
    ("oltp", 16 * GB, "1GB"),          # M/16
    ("oltp", 64 * GB, "2GB"),          # M/16 = 4GB, capped at 2GB
    ("analytics", 64 * GB, "4GB"),     # M/8 = 8GB, capped at 4GB
])
def test_maintenance_work_mem_divisor_and_cap(workload, mem, mwm):
    s = _s(_plan(mem, cpus=8, workload=workload))
    assert s["maintenance_work_mem"] == mwm
    assert s["autovacuum_work_mem"] == "1GB"


@pytest.mark.parametrize("workload, cpus, gather, maint, mwp", [
    ("oltp", 3, 0, 1, 8), ("oltp", 4, 1, 2, 8), ("oltp", 5, 1, 2, 9), ("oltp", 8, 2, 4, 12),
    ("oltp", 16, 4, 4, 20), ("oltp", 20, 4, 4, 24),
    ("mixed", 2, 1, 1, 8), ("mixed", 3, 1, 1, 8), ("mixed", 8, 4, 4, 12),
    ("mixed", 10, 4, 4, 14),
    ("analytics", 1, 1, 0, 8), ("analytics", 5, 2, 2, 9), ("analytics", 16, 8, 8, 20),
    ("analytics", 40, 16, 8, 44), ("ingest", 20, 4, 8, 24),
])
def test_parallel_workers_by_hand(workload, cpus, gather, maint, mwp):
    p = _plan(64 * GB, cpus=cpus, workload=workload)
    s = _s(p)
    assert (s["max_parallel_workers_per_gather"], s["max_parallel_maintenance_workers"],
            s["max_worker_processes"], s["max_parallel_workers"]) == \
        (str(gather), str(maint), str(mwp), str(cpus))
    why = _change(p, "max_parallel_workers_per_gather").reason
    assert ("gain nothing from parallelism" in why) is (gather == 0)
    assert (f"up to {gather} workers per query" in why) is (gather > 0)


@pytest.mark.parametrize("cpus, io_workers", [(8, 3), (16, 4), (20, 5), (128, 32), (140, 32)])
def test_io_workers_on_18(cpus, io_workers):
    p = _plan(64 * GB, cpus=cpus, version=18)
    assert _s(p)["io_method"] == "worker" and _s(p)["io_workers"] == str(io_workers)
    assert _change(p, "io_method").reason.startswith("worker: io_uring needs")


def test_io_uring_when_built_and_allowed():
    p = _plan(64 * GB, cpus=8, version=18, build={**DEBIAN, "with_liburing": True},
              io_uring="available")
    assert _s(p)["io_method"] == "io_uring" and "io_workers" not in _s(p)
    assert _change(p, "io_method").reason.startswith("io_uring: fewer context switches")


@pytest.mark.parametrize("workload, jit_why, stats_why", [
    ("oltp", "short queries pay JIT compile time", "the default suits short queries"),
    ("analytics", "long analytical queries benefit", "better estimates for complex"),
])
def test_planner_reasons_follow_the_workload(workload, jit_why, stats_why):
    p = _plan(16 * GB, cpus=8, workload=workload)
    assert _change(p, "jit").reason.startswith(jit_why)
    assert _change(p, "default_statistics_target").reason.startswith(stats_why)


@pytest.mark.parametrize("mem, cpus, workload, wal_buffers", [
    (16 * GB, 16, "oltp", "64MB"),     # shared_buffers exactly 4GB and C = 16
    (16 * GB, 15, "oltp", "16MB"),     # C below 16: the auto value, 4GB/32 capped at 16MB
    (15 * GB, 16, "oltp", "16MB"),     # shared_buffers 3840MB < 4GB
    (16 * GB, 2, "ingest", "64MB"),    # ingest needs no core count
])
def test_wal_buffers_edges(mem, cpus, workload, wal_buffers):
    assert _s(_plan(mem, cpus=cpus, workload=workload))["wal_buffers"] == wal_buffers


def test_wal_size_on_a_small_host_and_compression_before_15():
    s = _s(_plan(2560 * MB))                   # 2M = 5GB < oltp's 8GB
    assert (s["max_wal_size"], s["min_wal_size"]) == ("5GB", "1280MB")
    # before 15 the only method is pglz, which cost more than it saved when measured
    # (PostgreSQL 14.24, tpcb-like: -5.4%, run 20261127-142809-20d5): left off, and said
    p = _plan(8 * GB, version=14)
    assert "wal_compression" not in _s(p)
    assert any(a.startswith("wal_compression is left off: the only method here is pglz "
                            "(before 15)") for a in p.advice)
    c = _change(_plan(8 * GB), "wal_compression")
    assert (c.proposed, c.rule) == ("lz4", "wal.compression")
    assert "lz4: least CPU" in c.reason and "Write Ahead Log" in c.source


def test_version_13_has_hash_mem_multiplier():
    assert _s(_plan(8 * GB, version=13))["hash_mem_multiplier"] == "2"


def test_ingest_gets_the_insert_scale_factor():
    c = _change(_plan(16 * GB, workload="ingest"), "autovacuum_vacuum_insert_scale_factor")
    assert (c.proposed, c.rule) == ("0.05", "av.insert_scale")
    assert "visibility map" in c.reason and "Automatic Vacuuming" in c.source
    assert "autovacuum_vacuum_insert_scale_factor" not in _s(_plan(16 * GB))


def test_budget_lowers_work_mem_to_the_largest_that_fits():
    p = _plan(8 * GB, cpus=4, workload="analytics")
    s = _s(p)
    assert (s["work_mem"], s["maintenance_work_mem"], s["shared_buffers"]) == \
        ("2MB", "1GB", "2GB")
    wm = _change(p, "work_mem")
    assert wm.reason.startswith("half the memory outside shared_buffers")
    assert wm.reason.endswith("; lowered to keep the memory budget under 90%")
    inp = p_inputs(8 * GB, cpus=4, workload="analytics")
    used, limit, _ = memory_budget(p, inp)
    assert used == (2048 + 1200 + 16 + 3072 + 1024) * MB < limit
    one_step_more = {**s, "work_mem": "2112kB"}            # the next 64kB step
    assert memory_budget(one_step_more, inp)[0] >= limit
    assert not any("Even minimal" in a for a in p.advice)


def test_budget_then_lowers_maintenance_memory_before_shared_buffers():
    # 256MB, 2 CPUs, 1,500 connections, by hand: work_mem's share 96MB / 3000 = 32.8kB ->
    # the 64kB floor; budget 64 + 1500x64kBx2 (187.5) + 0.25 + 48 + 16 = 315.75MB > 230.4MB.
    # Room for work_mem: (241,591,910 - 1 - 128MB) / 3004 = 35,743 bytes -> still 64kB.
    # maintenance_work_mem by quarters on 64kB steps: 16MB, 12MB, 9MB, 6912kB, 5184kB,
    # 3840kB, 2880kB, 2112kB, 1536kB (<= 2MB: stop; 301.25MB), autovacuum_work_mem the same
    # (257.75MB), then shared_buffers 64MB -> 48MB (241.75MB) -> 36MB: 229.75MB fits.
    p = _plan(256 * MB, conns=1500)
    s = _s(p)
    assert {k: s[k] for k in ("work_mem", "maintenance_work_mem", "autovacuum_work_mem",
                              "shared_buffers")} == {
        "work_mem": "64kB", "maintenance_work_mem": "1536kB",
        "autovacuum_work_mem": "1536kB", "shared_buffers": "36MB"}
    used, limit, _ = memory_budget(p, p_inputs(256 * MB, connections=1500))
    assert used == int(229.75 * MB) < limit
    for name in ("maintenance_work_mem", "autovacuum_work_mem", "shared_buffers"):
        assert _change(p, name).reason.count("; lowered to fit the memory budget") == 1
    assert not any("Even minimal" in a for a in p.advice)


def test_budget_that_cannot_hold_says_so():
    p = _plan(256 * MB, conns=3000)     # 3000 x 64kB x 2 = 375MB of work_mem alone
    s = _s(p)
    # shared_buffers by quarters: 64, 48, 36, 27, 20MB, 15MB, 11520kB, 8640kB, 6464kB,
    # 4800kB, 3584kB, 2688kB, 1984kB (<= 2MB: stop)
    assert (s["maintenance_work_mem"], s["autovacuum_work_mem"], s["shared_buffers"]) == \
        ("1536kB", "1536kB", "1984kB")
    assert any("Even minimal memory settings exceed 90% of memory for 3000 connections" in a
               for a in p.advice)


def test_restart_and_context_from_the_version_table_and_from_a_catalog():
    p = _plan(8 * GB)
    sb, wm = _change(p, "shared_buffers"), _change(p, "work_mem")
    assert (sb.context, sb.restart, wm.context, wm.restart) == \
        ("postmaster", True, "user", False)
    cat = GucCatalog({
        "shared_buffers": GucInfo("shared_buffers", "postmaster", "integer", "8kB", 16,
                                  1073741823),
        "work_mem": GucInfo("work_mem", "user", "integer", "kB", 64, 2147483647)}, 15)
    p = _plan(8 * GB, gucs=cat)
    sb, wm = _change(p, "shared_buffers"), _change(p, "work_mem")
    assert (sb.context, sb.restart, wm.context, wm.restart) == \
        ("postmaster", True, "user", False)
    # what the catalog lacks is dropped with a warning, and the rest goes on
    assert {c.name for c in p.changes} == {"shared_buffers", "work_mem"}
    assert any(w.startswith("effective_cache_size = ") and "dropped" in w for w in p.warnings)


@pytest.mark.parametrize("version, hmm", [(15, 2.0), (13, 1.0)])
def test_budget_of_a_server_left_at_its_defaults(version, hmm):
    # what `tune` computes for a server's current settings: every missing parameter at the
    # version's default -- shared_buffers 128MB, work_mem 4MB, maintenance_work_mem 64MB,
    # autovacuum_work_mem -1 (= maintenance_work_mem), hash_mem_multiplier 2 from 15 (1
    # before), max_connections 100, autovacuum_max_workers 3, max_parallel_workers 8
    inp = p_inputs(8 * GB, version=version)
    used, limit, bd = memory_budget({}, inp)
    assert bd == {"shared_buffers": 128 * MB, "work_mem": int(100 * 4 * MB * hmm),
                  "parallel_workers": int(8 * 4 * MB * hmm), "autovacuum": 3 * 64 * MB,
                  "maintenance_work_mem": 64 * MB}
    # a value given wins over the default, in its own unit (8kB pages for shared_buffers)
    _, _, bd = memory_budget({"shared_buffers": "16384", "max_connections": "10",
                              "autovacuum_work_mem": "32MB"}, inp)
    assert (bd["shared_buffers"], bd["work_mem"], bd["autovacuum"]) == \
        (128 * MB, int(10 * 4 * MB * hmm), 3 * 32 * MB)
