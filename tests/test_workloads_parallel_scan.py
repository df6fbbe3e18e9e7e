"""parallel-scan: forced degrees really launch that many workers; the planner's own choice
and the measured best are reported (real server)."""

from __future__ import annotations

import pytest

from pgaccel.server.discovery import find_client
from pgaccel.server.target import open_target
from pgaccel.workloads.base import BenchContext, RunParams, get_workload
from pgaccel.workloads.parallel_scan import (degree_problem, degrees_for, force_degree_sql,
                                             plan_workers, speedup_table)


def test_plan_workers_sums_gather_nodes():
    plan = [{"Plan": {"Node Type": "Finalize Aggregate", "Plans": [
        {"Node Type": "Gather", "Workers Planned": 3, "Workers Launched": 2,
         "Plans": [{"Node Type": "Partial Aggregate"}]}]}}]
    assert plan_workers(plan) == (3, 2)
    assert plan_workers([{"Plan": {"Node Type": "Seq Scan"}}]) == (0, None)


def test_degrees_speedup_and_forcing():
    assert degrees_for(RunParams(options={"max_workers": 3})) == [0, 1, 2, 3]
    assert degrees_for(RunParams(options={"degrees": "4,2"})) == [0, 2, 4]
    t = speedup_table({0: 1.0, 1: 0.5, 3: 0.4}, leader=True)
    assert t[1] == {"speedup": 2.0, "efficiency": 1.0}
    assert t[3]["speedup"] == 2.5 and t[3]["efficiency"] == pytest.approx(2.5 / 4)
    assert speedup_table({0: 1.0, 2: 0.5}, leader=False)[2]["efficiency"] == 1.0
    assert not any("ALTER TABLE" in s for s in force_degree_sql(0))
    assert "ALTER TABLE pscan SET (parallel_workers = 3)" in force_degree_sql(3)


def test_degree_problem_names_the_real_cause():
    assert degree_problem(2, 2, 2, leader=False, limit=8) is None
    # a serial plan at degree 1 without the leader: the cost model, not worker slots
    note = degree_problem(1, 0, 0, leader=False, limit=8)
    assert "0 planned" in note and "parallel_leader_participation = off" in note
    assert "get_parallel_divisor" in note and "max_parallel_workers=" not in note
    # planned in full, launched fewer: worker slots
    assert "max_parallel_workers=2" in degree_problem(3, 3, 2, leader=True, limit=2)


@pytest.fixture(scope="module")
def ctx():
    with open_target() as tg:
        # two worker slots: degree 3 cannot be launched in full
        tg.apply({"max_parallel_workers": 2, "max_worker_processes": 8})
        tg.ensure_bench_db()
        c = BenchContext(tg, find_client("pgbench", tg.inst))
        yield c


def test_each_degree_launches_that_many_workers(ctx):
    wl = get_workload("parallel-scan")
    params = RunParams(options={"rows": 60_000, "degrees": "1,2,3", "repeats": 1})
    assert wl.required_settings(params)["max_parallel_workers"] == "8"
    wl.prepare(ctx, params)
    results = wl.run_steps(ctx, params)
    assert [r.step for r in results] == ["count@0", "count@1", "count@2", "count@3",
                                         "bitand@0", "bitand@1", "bitand@2", "bitand@3"]
    for r in results:
        d = r.extra["degree"]
        if d <= 2:
            assert r.valid and r.extra["workers_launched"] == d, r.note
            assert r.extra["workers_planned"] == d
        else:                                     # only 2 slots: honestly reported
            assert not r.valid and r.extra["workers_launched"] == 2
            assert "max_parallel_workers=2" in r.note
        assert r.extra["median_s"] > 0 and r.metrics["server_cpu_s"] >= 0
    # every degree computes the same answer
    assert {r.extra["answer"] for r in results if r.extra["query"] == "count"} == {60_000}
    assert len({r.extra["answer"] for r in results if r.extra["query"] == "bitand"}) == 1
    s = wl.summarize(results)
    assert set(s) == {"count", "bitand"}
    best = s["count"]["best_degree"]
    assert best in (0, 1, 2)
    assert s["count"]["pin"].startswith(f"ALTER TABLE pscan SET (parallel_workers = {best})")
    assert isinstance(s["count"]["planner_degree"], int)
    assert s["count"]["size_rule_degree"] >= s["count"]["planner_degree"]
    # the forcing was rolled back: no reloption left on the table
    with ctx.connect() as conn:
        assert conn.execute("SELECT reloptions FROM pg_class WHERE relname = 'pscan'"
                            ).fetchone()[0] is None


def test_leader_off_degree_one_is_flagged_not_blamed_on_slots(ctx):
    """With parallel_leader_participation = off the planner never takes a one-worker parallel
    scan (PostgreSQL divides its CPU cost by 1): the step is invalid, says so, and does not
    blame max_parallel_workers; degree 2 runs in full."""
    wl = get_workload("parallel-scan")
    params = RunParams(options={"rows": 60_000, "degrees": "1,2", "repeats": 1,
                                "queries": "count"})
    wl.prepare(ctx, params)
    ctx.target.apply({"max_parallel_workers": 2, "max_worker_processes": 8,
                      "parallel_leader_participation": "off"})
    try:
        results = {r.step: r for r in wl.run_steps(ctx, params)}
    finally:
        ctx.target.apply({"max_parallel_workers": 2, "max_worker_processes": 8})
    one, two = results["count@1"], results["count@2"]
    assert one.extra["workers_planned"] == 0 and not one.valid
    assert "get_parallel_divisor" in one.note and "max_parallel_workers=" not in one.note
    assert two.valid and two.extra["workers_planned"] == two.extra["workers_launched"] == 2
    assert two.extra["efficiency"] == pytest.approx(two.extra["speedup"] / 2)
    assert wl.summarize(list(results.values()))["count"]["best_degree"] in (0, 2)
