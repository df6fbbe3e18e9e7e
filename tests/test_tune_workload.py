"""tune/workload.py and the rules that read a measured workload profile: the shares worked
out by hand from pg_stat_statements-shaped rows of four workloads (an order-management
application whose reporting joins take the time while lookups take the calls, an analytic
mix, an ingest, a pgbench-like OLTP), the class each gets, and what the plan does with it
on this VM's shape (2 CPUs, 24 GB)."""

from __future__ import annotations

import pytest

from pgaccel.tune.pgtune import db_size, pgtune_settings, warnings
from pgaccel.tune.rules import make_plan
from pgaccel.tune.workload import (StatementCost, WorkloadProfile, classify, lines,
                                   profile_of, uses_parallel)

from pgaccel.tune.inputs import inputs_from_facts

from test_tune_profiles import BUILD_DEBIAN, PROFILES


def inputs_for(machine: str, version: int = 15, **kw):
    return inputs_from_facts(PROFILES[machine], pg_version=version, build=BUILD_DEBIAN, **kw)

MB, GB = 1024**2, 1024**3

# The order-management application over a 120-s window.
REPORT_A = StatementCost(
    "SELECT c.region, sum(oi.qty * oi.price) FROM orders o JOIN order_items oi ON oi.order_id "
    "= o.id JOIN customers c ON c.id = o.customer_id WHERE o.created_at > now() - $1 * "
    "interval '1 hour' GROUP BY c.region", 60, 78000.0, 600, False, 3_000_000, 0, 0, 0,
    1200.0)
REPORT_B = StatementCost(
    "SELECT p.id, p.name, sum(oi.qty) FROM order_items oi JOIN products p ON p.id = "
    "oi.product_id GROUP BY p.id, p.name ORDER BY 3 DESC LIMIT $1", 40, 54000.0, 800, False,
    2_000_000, 0, 102_400, 0, 800.0)     # 2,560 temp blocks (20 MiB) per call
LOOKUP = StatementCost('SELECT "customers"."id", "customers"."email" FROM "customers" WHERE '
                       '"customers"."id" = $1 LIMIT $2', 40_000, 2400.0, 40_000, False,
                       160_000, 0, 0, 0, 0.0)
DETAILS = StatementCost("SELECT * FROM order_items WHERE order_id = $1", 20_000, 3000.0,
                        100_000, False, 200_000, 0, 0, 0, 0.0)
CHECKOUT_INSERT = StatementCost("INSERT INTO orders (customer_id, status) VALUES ($1, $2) "
                                "RETURNING id", 5000, 1500.0, 5000, True, 40_000, 0, 0,
                                2_500_000, 0.0)
STOCK_UPDATE = StatementCost("UPDATE products SET stock = stock - $1 WHERE id = $2", 5000,
                             1000.0, 5000, True, 20_000, 0, 0, 2_000_000, 0.0)
MIXED_APP = [REPORT_A, REPORT_B, LOOKUP, DETAILS, CHECKOUT_INSERT, STOCK_UPDATE]


def mixed_app() -> WorkloadProfile:
    return profile_of(MIXED_APP, "capture bundle /tmp/shop", 120.0, connections=12)


def test_the_mixed_applications_numbers_by_hand():
    p = mixed_app()
    # 78000 + 54000 + 2400 + 3000 + 1500 + 1000 ms; 60 + 40 + 40000 + 20000 + 5000 + 5000
    assert (p.statements, p.calls, p.time_ms) == (6, 70_100, 139_900.0)
    # means 1300, 1350, 0.06, 0.15, 0.3, 0.2 ms: the two reports long, the rest short
    assert p.time_share == pytest.approx({"short": 7900 / 139900, "medium": 0.0,
                                          "long": 132000 / 139900})
    assert p.call_share == pytest.approx({"short": 70000 / 70100, "medium": 0.0,
                                          "long": 100 / 70100})
    assert p.write_time_share == pytest.approx(2500 / 139900)
    assert p.write_call_share == pytest.approx(10000 / 70100)
    assert p.rows_per_call == pytest.approx(151_400 / 70_100)
    assert p.temp_bytes == 102_400 * 8192
    assert p.spill_time_share == pytest.approx(54000 / 139900)       # report B's time
    assert p.spill_bytes_per_call == 20 * MB
    assert p.jit_share == pytest.approx(2000 / 139900)
    assert p.hit_ratio == 1.0
    assert p.wal_bytes_per_s == pytest.approx(4_500_000 / 120)
    assert p.parallel_share is None                                  # before 18: unknown
    assert [t["statement"][:30] for t in p.top] == [
        "SELECT c.region, sum(oi.qty * ", "SELECT p.id, p.name, sum(oi.qt",
        "SELECT * FROM order_items WHER", 'SELECT "customers"."id", "cust',
        "INSERT INTO orders (customer_i"]
    assert len(p.top[0]["statement"]) == 72
    assert p.top[1]["temp_bytes_per_call"] == 20 * MB
    assert WorkloadProfile.from_dict(p.to_dict()) == p


def test_classes_with_their_numbers():
    # most of the time in long statements, but they are 0.14% of the calls: an application
    assert classify(mixed_app()) == (
        "mixed", "94% of the statements' time in statements over 100 ms (0.14% of the "
                 "calls), 2% in writes")
    assert classify(ANALYTIC) == ("analytics", "100% of the statements' time in statements "
                                               "over 100 ms (100% of the calls), 0% in writes")
    assert classify(INGEST)[0] == "ingest"
    assert classify(OLTP)[0] == "oltp"
    assert classify(None) == (None, "no statement ran in the window")
    assert classify(profile_of([], "x")) == (None, "no statement ran in the window")


# 22 queries of 2-5 s, a quarter of their blocks from storage
ANALYTIC = profile_of([StatementCost(f"SELECT /* q{q} */ count(*) FROM lineitem", 4,
                                     4 * (2000.0 + 150 * q), 4, False, 1_000_000, 1_000_000,
                                     0, 0, 30.0) for q in range(22)], "bundle", 600.0)
INGEST = profile_of([StatementCost("INSERT INTO events VALUES ($1, $2, $3)", 100_000, 30_000.0,
                                   100_000, True, 400_000, 100, 0, 50_000_000, 0.0),
                     StatementCost("SELECT count(*) FROM events WHERE id > $1", 1000, 8000.0,
                                   1000, False, 900_000, 0, 0, 0, 0.0)], "bundle", 60.0)
OLTP = profile_of([StatementCost("SELECT abalance FROM pgbench_accounts WHERE aid = $1",
                                 100_000, 4000.0, 100_000, False, 400_000, 0, 0, 0, 0.0),
                   StatementCost("UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE "
                                 "aid = $2", 100_000, 3000.0, 100_000, True, 500_000, 0, 0,
                                 10_000_000, 0.0)], "bundle", 60.0)


def test_thresholds_at_their_edges():
    def two(long_ms: float, short_ms: float, long_calls=1, short_calls=1000, writes=False):
        return profile_of([StatementCost("long", long_calls, long_ms),
                           StatementCost("short", short_calls, short_ms, writes=writes)], "x")
    assert classify(two(200.0, 800.0))[0] == "mixed"                 # 20% long
    assert classify(two(199.0, 801.0))[0] == "oltp"                  # 19.9%
    assert classify(two(199.0, 801.0, writes=True))[0] == "ingest"   # 80% writes
    # 83% of the time and 25% of the calls long (the others 67 ms): analytics; 24.9% of
    # the calls: mixed; 59.9% of the time (74,688 of 124,688 ms): mixed
    assert classify(two(250_000.0, 50_000.0, 250, 750))[0] == "analytics"
    assert classify(two(249_000.0, 50_000.0, 249, 751))[0] == "mixed"
    assert classify(two(74_688.0, 50_000.0, 250, 750))[0] == "mixed"
    assert classify(two(75_000.0, 50_000.0, 250, 750))[0] == "analytics"     # 60.0%
    # a mean of exactly 100 ms is long, of 99.9 ms medium
    assert profile_of([StatementCost("a", 10, 1000.0)], "x").time_share["long"] == 1.0
    assert profile_of([StatementCost("a", 10, 999.0)], "x").time_share["medium"] == 1.0


def test_parallel_from_18s_counts_or_from_long_statements():
    assert uses_parallel(mixed_app()) and not uses_parallel(OLTP) and not uses_parallel(None)
    # 18 says which statements launched workers: 30% of the time, though none is long
    p18 = profile_of([StatementCost("a", 1000, 300.0, par_workers=2000),
                      StatementCost("b", 1000, 700.0, par_workers=0)], "x")
    assert p18.parallel_share == pytest.approx(0.3) and uses_parallel(p18)


def test_the_mixed_application_plans_parallel_query_jit_and_work_mem_from_its_profile():
    inp = inputs_for("2c-24g", connections=40, storage="hdd", profile=mixed_app())
    assert (inp.workload, inp.workload_from) == ("mixed", "profile")
    plan = make_plan(inp)
    s = plan.postgres_settings()
    # mixed on 2 cores would give 1 worker per gather; the reports hold 94% of the time:
    # never below the server's default of 2
    assert s["max_parallel_workers_per_gather"] == "2" and s["max_parallel_workers"] == "2"
    assert plan.get("max_parallel_workers_per_gather").reason == (
        "94% of the statements' time goes to statements over 100 ms, which parallel query "
        "speeds up: up to 2 workers per query")
    assert s["jit"] == "on" and "JIT took 1.4% of the time" in plan.get("jit").reason
    # (24 GB - 6 GB) / 2 / (40 connections x 2 x 2) = 57.6 MB -> 57MB; report B spilled
    # 20 MiB per call: 40 MiB in memory -> 64MB (a power of two), under mixed's 256MB cap;
    # 6 GB + 40 x 64MB x 2 x 2 + 2 x 64MB x 2 + 3 x 1GB + 1.5GB = 20.75 GB < 21.6 GB
    assert s["work_mem"] == "64MB"
    assert "spilled to temp files (up to 20.0 MB per call)" in plan.get("work_mem").reason
    # every block a hit: 1.1 although the storage says hdd (4)
    assert s["random_page_cost"] == "1.1"
    assert plan.get("random_page_cost").reason.startswith("100.0% of the shared blocks")


def test_without_a_profile_the_same_machine_plans_as_before():
    s = make_plan(inputs_for("2c-24g", connections=40, storage="hdd")).postgres_settings()
    assert (s["max_parallel_workers_per_gather"], s["jit"], s["work_mem"],
            s["random_page_cost"]) == ("0", "off", "64MB", "4")    # oltp's cap


def test_the_flag_chooses_the_class_and_the_profile_still_keeps_parallel_query():
    inp = inputs_for("2c-24g", connections=40, workload="oltp", profile=mixed_app())
    assert (inp.workload, inp.workload_from) == ("oltp", "flag")
    s = make_plan(inp).postgres_settings()
    assert s["max_parallel_workers_per_gather"] == "2" and s["jit"] == "on"


def test_jit_off_where_compiling_took_a_tenth_of_the_time():
    heavy = profile_of([StatementCost("r", 100, 20_000.0, jit_ms=2000.0),
                        StatementCost("s", 10_000, 5000.0, jit_ms=0.0)], "x")
    assert heavy.jit_share == pytest.approx(0.08)
    assert make_plan(inputs_for("2c-24g", profile=heavy)).postgres_settings()["jit"] == "on"
    heavy = profile_of([StatementCost("r", 100, 20_000.0, jit_ms=2500.0),
                        StatementCost("s", 10_000, 5000.0, jit_ms=0.0)], "x")
    plan = make_plan(inputs_for("2c-24g", profile=heavy))
    assert plan.postgres_settings()["jit"] == "off"
    assert plan.get("jit").reason == ("JIT compilation took 10% of the statements' time: more "
                                      "than it saved")


def test_an_analytic_mix_read_from_storage_keeps_the_page_costs():
    plan = make_plan(inputs_for("2c-24g", profile=ANALYTIC))
    assert plan.get("random_page_cost") is None
    assert any(a.startswith("random_page_cost is left at the server's value: 50.0% of the "
                            "shared blocks were hits") for a in plan.advice)
    s = plan.postgres_settings()
    assert s["max_parallel_workers_per_gather"] == "2" and s["default_statistics_target"] == "500"


def test_an_oltp_profile_says_why_jit_is_off():
    plan = make_plan(inputs_for("2c-24g", profile=OLTP))
    assert plan.postgres_settings()["max_parallel_workers_per_gather"] == "0"
    assert plan.get("jit").reason == ("100% of the statements' time goes to statements under "
                                      "100 ms: they would pay JIT's compile time and gain "
                                      "nothing")


def test_pgtune_as_its_user_fills_it_in():
    base = dict(memory="16GB", cpus=4, storage="ssd", connections=100)
    # dw on SSD: random_page_cost 4 unless the data fits in memory
    dw = inputs_for("8c-32g", **base, workload="analytics")
    assert db_size(dw) == "mid_ram" and pgtune_settings(dw)["random_page_cost"] == "4"
    small = inputs_for("8c-32g", **base, workload="analytics", data_bytes=2 * GB)
    big = inputs_for("8c-32g", **base, workload="analytics", data_bytes=49 * GB)
    mid = inputs_for("8c-32g", **base, workload="analytics", data_bytes=48 * GB)
    assert (db_size(small), db_size(mid), db_size(big)) == ("less_ram", "mid_ram",
                                                            "greater_ram")
    assert pgtune_settings(small)["random_page_cost"] == "1.1"
    # (16 GiB - 4 GiB) in kB / ((100 + 4) x 3) / 2 = 20164 kB; x 1.3 and x 0.9, floored
    wm = (16 * 1024 * 1024 - 4 * 1024 * 1024) // ((100 + 4) * 3) // 2
    assert pgtune_settings(mid)["work_mem"] == f"{wm}kB"
    assert pgtune_settings(small)["work_mem"] == f"{int(wm * 1.3)}kB"
    assert pgtune_settings(big)["work_mem"] == f"{int(wm * 0.9)}kB"
    assert warnings(dw)[-1].startswith("Cost parameters for data warehouses on SSDs")
    assert not any("Cost parameters" in w for w in warnings(small))
    # the profile's class is PGTune's DB type: the mixed application gets PGTune's mixed
    inp = inputs_for("8c-32g", **base, profile=mixed_app())
    assert pgtune_settings(inp)["jit"] == "off" and \
        pgtune_settings(inp)["min_wal_size"] == "1GB"


def test_lines_show_the_numbers():
    got = dict(lines(mixed_app()))
    assert got["time by duration"] == "under 1 ms 6%, 1-100 ms 0%, over 100 ms 94%"
    assert got["writes"] == "2% of the time, 14% of the calls"
    assert got["spills (temp files)"] == ("800.0 MB written by statements holding 39% of the "
                                          "time (up to 20.0 MB per call)")
    assert got["WAL"] == "36.6 kB/s" and got["busiest connections"] == "12 active at once"
    assert got["window"] == "120 s"


def test_an_analytic_mix_whose_data_fits_in_memory_plans_cheap_random_pages():
    # 11.9 GB is under half of 24 GB: read from the caches whatever shared_buffers held
    plan = make_plan(inputs_for("2c-24g", profile=ANALYTIC, data_bytes=int(11.9 * GB)))
    c = plan.get("random_page_cost")
    assert c.proposed == "1.1" and c.reason.startswith("the data (11.9 GB) fits in memory")
    # 12.1 GB is not: the hits decide, and 50% keeps the server's value
    plan = make_plan(inputs_for("2c-24g", profile=ANALYTIC, data_bytes=int(12.1 * GB)))
    assert plan.get("random_page_cost") is None
    assert any("the data is larger than half the memory" in a for a in plan.advice)


# -- tune/groups.py and what run --explain prints from the judged groups ---------------------

def test_every_setting_the_rules_plan_has_a_group():
    from pgaccel.tune.groups import group_of, plan_groups, without
    inp = inputs_for("48c-128g", version=18, profile=mixed_app())
    s = make_plan(inp).postgres_settings()
    assert [n for n in s if group_of(n) == "other"] == []
    g = plan_groups(s)
    assert list(g)[:3] == ["memory", "parallelism", "jit"]
    assert g["jit"] == ["jit"] and "max_parallel_workers_per_gather" in g["parallelism"]
    assert "random_page_cost" in g["planner"] and "max_wal_size" in g["wal"]
    left = without(s, ["parallelism", "jit"])
    assert set(s) - set(left) == set(g["parallelism"]) | {"jit"}
    assert plan_groups(["fsync", "work_mem"]) == {"memory": ["work_mem"], "other": ["fsync"]}


def test_group_effects_multiply_and_are_checked_against_the_whole_plans_interval():
    from pgaccel.decide.effect import Comparison
    from pgaccel.decide.results import HeadToHead, Summary, WorkloadResult
    from pgaccel.report.view import group_effects_rows, group_settings

    def comp(ratio, lo, hi, verdict):
        return Comparison(ratio, lo, hi, "paired-log-t", verdict, 5, 5, 0.01, "")
    whole = comp(1.30, 1.20, 1.41, "faster")
    s = Summary("baseline", workloads=[WorkloadResult(
        "captured:/b", "captured:/b", "captured:/b", None, 4, "stmt/s",
        comparisons={"tuned": whole})], explained=[
        HeadToHead("captured:/b", 4, "without-parallelism", "tuned",
                   comp(1.25, 1.15, 1.36, "faster")),
        HeadToHead("captured:/b", 4, "without-jit", "tuned", comp(0.94, 0.90, 0.98, "slower")),
        HeadToHead("captured:/b", 4, "without-memory", "tuned", comp(1.10, 1.02, 1.19, "faster"))])
    settings = group_settings([{"name": "tuned", "settings": {"jit": "on", "work_mem": "8MB"}},
                               {"name": "without-jit", "settings": {"work_mem": "8MB"}},
                               {"name": "baseline", "settings": {}}])
    assert settings == {"jit": ["jit"]}
    (row,) = group_effects_rows(s, settings)
    # 1.25 x 0.94 x 1.10 = 1.2925: inside 1.20 ... 1.41
    assert row["product"] == pytest.approx(1.2925) and row["within"]
    assert [g["group"] for g in row["groups"]] == ["parallelism", "jit", "memory"]
    assert row["groups"][1]["settings"] == ["jit"]
    s2 = Summary.from_dict(s.to_dict())
    assert [r.base for r in s2.explained] == ["without-parallelism", "without-jit",
                                             "without-memory"]
    # 0.94 alone is outside 1.20 ... 1.41: what the other groups did is missing
    s3 = Summary("baseline", workloads=s.workloads, explained=s.explained[1:2])
    assert not group_effects_rows(s3, {})[0]["within"]
