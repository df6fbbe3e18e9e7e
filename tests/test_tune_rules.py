"""PostgreSQL-layer rules: invariants over machine profiles, versions and workloads (pure)."""

from __future__ import annotations

import itertools

import pytest

from pgaccel.pg import versions
from pgaccel.pg.catalog import GucCatalog, GucInfo
from pgaccel.pg.values import setting_bytes
from pgaccel.tune.inputs import WORKLOADS
from pgaccel.tune.rules import PER_QUERY_FACTOR, make_plan, memory_budget

from test_tune_profiles import GB, PROFILES, inputs_for

MB = 1024**2
ALL = list(itertools.product(PROFILES, range(13, 19), WORKLOADS))


def settings(plan):
    return plan.postgres_settings()


_UNIT = {"kB": 1024, "MB": MB, "GB": GB, "TB": 1024 * GB}


def _bytes(text: str) -> int:
    """A size as a plan writes it ('1920kB', '6GB'), read without pgaccel's parser."""
    num = text.rstrip("kMGTB")
    return int(num) * _UNIT[text[len(num):]]


def worst_case(s: dict[str, str], workload: str, connections: int) -> int:
    """docs/tuning-rules.md's worst case, written from the doc apart from
    ``rules.memory_budget``: F(W) is 1 for oltp/web/ingest, 2 mixed, 3 analytics; every plan
    here sets every term (checked), so no server default is needed."""
    f = {"oltp": 1, "web": 1, "ingest": 1, "mixed": 2, "analytics": 3}[workload]
    wm, hmm = _bytes(s["work_mem"]), float(s["hash_mem_multiplier"])
    mwm = _bytes(s["maintenance_work_mem"])
    avwm = mwm if s["autovacuum_work_mem"] == "-1" else _bytes(s["autovacuum_work_mem"])
    assert int(s["max_connections"]) == connections
    return int(_bytes(s["shared_buffers"]) + connections * wm * hmm * f
               + int(s["max_parallel_workers"]) * wm * hmm
               + int(s["autovacuum_max_workers"]) * avwm + mwm)


@pytest.mark.parametrize("profile,version,workload", ALL)
def test_memory_budget_stays_below_90_percent(profile, version, workload):
    inp = inputs_for(profile, version, workload=workload)
    plan = make_plan(inp)
    worst = worst_case(settings(plan), workload, inp.connections)
    assert worst < 0.9 * inp.memory_bytes
    used, limit, breakdown = memory_budget(plan, inp)
    assert limit == int(0.9 * inp.memory_bytes)
    assert used == pytest.approx(worst, abs=4) and used == sum(breakdown.values())


@pytest.mark.parametrize("profile,connections", list(itertools.product(PROFILES, [20, 500, 2000])))
def test_budget_holds_for_many_connections_by_shrinking_work_mem(profile, connections):
    inp = inputs_for(profile, connections=connections)
    plan = make_plan(inp)
    assert worst_case(settings(plan), "oltp", connections) < 0.9 * inp.memory_bytes
    assert setting_bytes(settings(plan)["work_mem"]) >= 64 * 1024   # PostgreSQL's minimum


def test_more_connections_never_mean_more_work_mem():
    wm = [setting_bytes(settings(make_plan(inputs_for("8c-32g", connections=n)))["work_mem"])
          for n in (50, 100, 400, 1600)]
    assert wm == sorted(wm, reverse=True) and wm[0] > wm[-1]


def test_memory_budget_formula_by_hand():
    inp = inputs_for("8c-32g")
    s = {"shared_buffers": "8GB", "work_mem": "10MB", "hash_mem_multiplier": "2",
         "maintenance_work_mem": "1GB", "autovacuum_work_mem": "-1",
         "autovacuum_max_workers": "3", "max_connections": "100", "max_parallel_workers": "8"}
    used, _, bd = memory_budget(s, inp)
    f = PER_QUERY_FACTOR["oltp"]
    assert bd == {"shared_buffers": 8 * GB, "work_mem": 100 * 10 * MB * 2 * f,
                  "parallel_workers": 8 * 10 * MB * 2, "autovacuum": 3 * GB,
                  "maintenance_work_mem": GB}
    # autovacuum_work_mem, when set, replaces maintenance_work_mem for the workers
    s["autovacuum_work_mem"] = "256MB"
    assert memory_budget(s, inp)[2]["autovacuum"] == 3 * 256 * MB


def test_one_gb_container_gets_a_sane_plan():
    s = settings(make_plan(inputs_for("container-1g")))
    assert s["shared_buffers"] == "256MB"
    assert s["huge_pages"] == "try"
    assert 64 * 1024 <= setting_bytes(s["work_mem"]) < 4 * MB
    assert setting_bytes(s["maintenance_work_mem"]) >= 16 * MB
    assert s["max_parallel_workers_per_gather"] == "0" and s["max_parallel_workers"] == "1"
    assert setting_bytes(s["max_wal_size"], "MB") <= 2 * GB


@pytest.mark.parametrize("profile", PROFILES)
def test_huge_pages_is_never_on(profile):
    for v in range(13, 19):
        assert settings(make_plan(inputs_for(profile, v)))["huge_pages"] == "try"


@pytest.mark.parametrize("profile,version", list(itertools.product(PROFILES, range(13, 19))))
def test_version_gating(profile, version):
    plan = make_plan(inputs_for(profile, version, workload="ingest"))
    names = {c.name for c in plan.changes}
    assert all(versions.known(n, version) for n in names), names
    assert ("io_method" in names) == (version >= 18)
    assert "checkpoint_segments" not in names
    comp = settings(plan).get("wal_compression")      # before 15 only pglz: left off
    assert comp == (None if version < 15 else "lz4")
    for c in plan.changes:
        assert c.restart == versions.needs_restart(c.name, version)


def test_io_uring_only_with_liburing_and_a_kernel_that_allows_it():
    b = {"with_lz4": True, "with_zstd": True, "with_liburing": True}
    assert settings(make_plan(inputs_for("48c-128g", 18, build=b)))["io_method"] == "io_uring"
    s = settings(make_plan(inputs_for("48c-128g", 18)))
    assert s["io_method"] == "worker" and s["io_workers"] == "12"
    facts = PROFILES["48c-128g"]
    facts_off = type(facts)(**{**facts.__dict__, "io_uring": "disabled"})
    from pgaccel.tune.inputs import inputs_from_facts
    inp = inputs_from_facts(facts_off, pg_version=18, build=b)
    assert settings(make_plan(inp))["io_method"] == "worker"


@pytest.mark.parametrize("build,expected", [
    ({"with_lz4": True, "with_zstd": True}, "lz4"),
    ({"with_lz4": False, "with_zstd": True}, "zstd"),
    # pglz only (or a build nothing says about, with no catalog): left off, and said why
    ({"with_lz4": False, "with_zstd": False}, None),
    (None, None),
])
def test_wal_compression_follows_the_build(build, expected):
    inp = inputs_for("8c-32g", 16)
    inp.build = build
    plan = make_plan(inp)
    assert settings(plan).get("wal_compression") == expected
    said = [a for a in plan.advice if a.startswith("wal_compression is left off")]
    assert len(said) == (expected is None)


def test_wal_compression_from_catalog_enum_when_build_unknown():
    inp = inputs_for("8c-32g", 15)
    inp.build = None
    cat = GucCatalog({"wal_compression": GucInfo("wal_compression", "superuser", "enum",
                                                 enumvals=("pglz", "zstd", "on", "off"))}, 15)
    plan = make_plan(inp, gucs=cat)
    assert plan.get("wal_compression").proposed == "zstd"


def test_jit_off_for_short_queries_only():
    for w in WORKLOADS:
        s = settings(make_plan(inputs_for("8c-32g", workload=w)))
        assert s["jit"] == ("off" if w in ("oltp", "web", "ingest") else "on")


def test_parallelism_scales_with_cores_and_workload():
    s2 = settings(make_plan(inputs_for("2c-24g")))
    s96 = settings(make_plan(inputs_for("96c-512g", workload="analytics")))
    assert s2["max_parallel_workers_per_gather"] == "0"
    assert int(s96["max_parallel_workers_per_gather"]) == 16
    assert int(s96["max_parallel_workers"]) <= int(s96["max_worker_processes"])


def test_pooler_advice_beyond_the_threshold():
    assert any("pooler" in a for a in make_plan(inputs_for("8c-32g", connections=500)).advice)
    assert not any("pooler" in a for a in make_plan(inputs_for("48c-128g")).advice)


def test_catalog_validation_drops_refused_values_with_a_warning():
    cat = GucCatalog({"work_mem": GucInfo("work_mem", "user", "integer", "kB", 64, 1024)}, 15)
    plan = make_plan(inputs_for("8c-32g"), gucs=cat)
    assert plan.get("work_mem") is None
    assert any("work_mem" in w and "above the maximum" in w for w in plan.warnings)
    # everything not in this tiny catalog is unknown to it, hence dropped too
    assert any("shared_buffers" in w and "unknown" in w for w in plan.warnings)


def test_catalog_of_another_version_is_not_used():
    cat = GucCatalog({}, 15)
    plan = make_plan(inputs_for("8c-32g", 17), gucs=cat)
    assert plan.get("shared_buffers") is not None
    assert any("built-in version table" in w for w in plan.warnings)


def test_current_values_are_carried():
    plan = make_plan(inputs_for("2c-24g"), current={"shared_buffers": "128MB"})
    c = plan.get("shared_buffers")
    assert c.current == "128MB" and c.changes_value


def test_every_change_has_reason_source_rule():
    for c in make_plan(inputs_for("48c-128g", 18)).changes:
        assert c.reason and c.source and c.rule and c.layer == "postgres"
        assert "\n" not in c.reason
