"""Experiments side by side (lab/paired.py, lab/paired_rounds.py) on real throwaway
clusters: a config refused mid-run is dropped and its round runs again without it, the
servers rotate over the configs, a workload that cannot go side by side runs every config
on the first server, and the studies' step workloads take turns step by step."""

from __future__ import annotations

import os
from contextlib import ExitStack

from pgaccel.lab.experiment import Experiment
from pgaccel.decide.model import Variant, WorkloadSpec
from pgaccel.server.discovery import find_client
from pgaccel.server.target import open_target
from pgaccel.workloads.base import BenchContext, RunParams, get_workload


def _contexts(stack: ExitStack, n: int) -> list[BenchContext]:
    out = []
    for _ in range(n):
        t = stack.enter_context(open_target())
        out.append(BenchContext(t, find_client("pgbench", t.inst)))
    return out


def test_a_refused_config_is_dropped_and_its_round_runs_again_without_it():
    """'bad' asks for work_mem = 64MB, but on its server an ALTER ROLE gives every session
    4MB: the burn-in round's check of its settings meets it, 'bad' is refused, and base and
    good go on side by side, every round, on the two servers still in use, swapping them
    from round to round.
    It takes long (about 27 s on a 2-core VM: three throwaway servers started and loaded at
    scale 1, a burn-in round, then 2 rounds of 2-s select-only trials side by side, no warm-ups:
    nothing here is timed)."""
    params = RunParams(clients=2, duration=2, warmup=0, scale=1)
    with ExitStack() as stack:
        ctxs = _contexts(stack, 3)
        ctxs[1].target.start()
        with ctxs[1].target.connect() as conn:
            conn.execute("ALTER ROLE CURRENT_USER SET work_mem = '4MB'")
        variants = [Variant("base", {}), Variant("bad", {"work_mem": "64MB"}),
                    Variant("good", {"work_mem": "8MB"})]
        exp = Experiment(ctxs[0], variants, [WorkloadSpec(get_workload("select-only"), params)],
                         rounds=2, side_by_side=True,
                         contexts={v.name: c for v, c in zip(variants, ctxs)})
        s = exp.run().to_dict()
        assert set(exp.failed_variants) == {"bad"}
        assert "work_mem" in exp.failed_variants["bad"]
        by_round = {}
        for t in exp.trials:
            assert t.metrics["design"] == "side by side" and t.metrics["with"] != ["bad"]
            by_round.setdefault(t.round, set()).add(t.variant)
        assert by_round == {0: {"base", "good"}, 1: {"base", "good"}}
        w = s["workloads"][0]
        assert w["variants"]["base"]["n"] == 2 and w["variants"]["good"]["n"] == 2
        # the two servers still in use swap configs from round to round: base ran on its own
        # server in one round and on good's in the other, never on bad's
        servers = {(t.variant, t.round): t.metrics["server"] for t in exp.trials}
        homes = {ctxs[0].target.describe(), ctxs[2].target.describe()}
        assert {servers["base", 0], servers["base", 1]} == homes
        assert {servers["good", 0], servers["good", 1]} == homes
        assert servers["base", 0] != servers["good", 0]


def test_a_workload_that_cannot_go_side_by_side_runs_every_config_on_one_server():
    """data-size-sweep (a step workload whose steps follow each server's shared_buffers)
    cannot go side by side: in a run whose pgbench workload does, its trials run one at a
    time on the first server (no `design`).
    It takes long (about 28 s on a 2-core VM: two throwaway servers loaded at scale 1, a burn-in
    round and 2 rounds of 2-s select-only trials side by side, then 2 rounds of
    data-size-sweep's trials of both configs one at a time; no warm-ups: nothing is timed)."""
    with ExitStack() as stack:
        ctxs = _contexts(stack, 2)
        variants = [Variant("base", {}), Variant("other", {"work_mem": "8MB"})]
        specs = [WorkloadSpec(get_workload("select-only"),
                              RunParams(clients=2, duration=2, warmup=0, scale=1)),
                 WorkloadSpec(get_workload("data-size-sweep"),
                              RunParams(clients=2, duration=1, warmup=0, scale=1,
                                        options={"scales": "1"}))]
        exp = Experiment(ctxs[0], variants, specs, rounds=2, side_by_side=True,
                         contexts={"base": ctxs[0], "other": ctxs[1]})
        exp.run()
        side = [t for t in exp.trials if t.workload == "select-only"]
        alone = [t for t in exp.trials if t.workload.startswith("data-size-sweep/")]
        assert len(side) == 4 and all(t.metrics["design"] == "side by side" for t in side)
        assert {t.variant for t in alone} == {"base", "other"} and len(alone) == 4
        assert all("design" not in t.metrics for t in alone)
        [sweep] = [v for k, v in exp.info["prepared"].items()
                   if k.startswith("data-size-sweep")]
        # prepared once, on the first server, for both configs
        assert {p["server"] for p in sweep.values()} == {ctxs[0].target.describe()}


def test_the_studies_step_workloads_take_turns_step_by_step():
    """in-server-loop (study 003) and parallel-scan (study 002) measure a step only when
    asked for the next, so each variant runs on its own server and the variants take turns
    step by step (lab/paired_steps.py), the order reversed at every other step; within a
    parallel-scan step, and of an in-server loop step, they take turns run by run, each
    client's backend of every variant on one CPU.
    It takes long (about 41 s on a 2-core VM: two throwaway servers each prepared for both
    workloads, scale-1 data and the in-server loop's functions, the C one built with PGXS unless
    already built, then 2 rounds of the 5 steps taking turns)."""
    with ExitStack() as stack:
        ctxs = _contexts(stack, 2)
        variants = [Variant("base", {}), Variant("other", {"work_mem": "8MB"})]
        specs = [WorkloadSpec(get_workload("in-server-loop"),
                              RunParams(clients=2, duration=1, warmup=0, scale=1,
                                        options={"n": 200})),
                 WorkloadSpec(get_workload("parallel-scan"),
                              RunParams(clients=1, duration=1, warmup=0, scale=1,
                                        options={"rows": 20_000, "degrees": "0,1",
                                                 "repeats": 2, "queries": "count"}))]
        exp = Experiment(ctxs[0], variants, specs, rounds=2, side_by_side=True,
                         contexts={"base": ctxs[0], "other": ctxs[1]})
        exp.run()
        homes = {ctxs[0].target.describe(), ctxs[1].target.describe()}
        designs = {"select-only": "pgbench step in slices", "loop-plpgsql": "runs in turns",
                   "loop-c": "runs in turns", "count@0": "runs in turns",
                   "count@1": "runs in turns"}
        for name, steps in (("in-server-loop", ["select-only", "loop-plpgsql", "loop-c"]),
                            ("parallel-scan", ["count@0", "count@1"])):
            ts = [t for t in exp.trials if t.workload.startswith(name + "/")]
            assert len(ts) == 2 * 2 * len(steps), name
            assert all(t.metrics["design"] == designs[t.metrics["step"]] for t in ts)
            for rnd in (0, 1):
                by_step = {}
                for t in (t for t in ts if t.round == rnd):
                    by_step.setdefault(t.metrics["step"], {})[t.variant] = t
                assert list(by_step) == steps
                # each variant on one server of its own for the whole round ...
                servers = {v: {by_step[s][v].metrics["server"] for s in steps}
                           for v in ("base", "other")}
                assert all(len(x) == 1 for x in servers.values())
                assert servers["base"] | servers["other"] == homes
                # ... and whoever went first at one step goes second at the next
                firsts = [next(v for v, t in by_step[s].items() if t.metrics["turn"] == 0)
                          for s in steps]
                assert all(a != b for a, b in zip(firsts, firsts[1:])), firsts
                assert all(t.metrics["with"] == [o] for s in steps
                           for v, o in (("base", "other"), ("other", "base"))
                           for t in [by_step[s][v]])
        # parallel-scan's runs took turns one by one (lab/paired_repeats.py): each degree's
        # 2 runs of base and of other alternate, A B then B A, inside one step
        for rnd in (0, 1):
            for s in ("count@0", "count@1"):
                w = {t.variant: t.metrics["slice_windows"] for t in exp.trials
                     if t.workload == f"parallel-scan/{s}" and t.round == rnd}
                assert [len(x) for x in w.values()] == [2, 2]
                runs = sorted((a, v) for v, ws in w.items() for a, _ in ws)
                who = [v for _, v in runs]
                assert who[0] != who[1] and who[1] == who[2] and who[2] != who[3], who
                t = next(t for t in exp.trials if t.workload == f"parallel-scan/{s}"
                         and t.round == rnd)
                assert len(t.metrics["extra"]["times_s"]) == 2
                assert t.metrics["extra"]["answer"] == 20_000
                # every variant's backend ran on one CPU, the highest this process may use
                assert t.metrics["backend_cpu"] == max(os.sched_getaffinity(0))
        # in-server-loop's select-only took 0.25 s slices in turns (A B B A ...), each
        # variant's pgbench and its backends placed one per CPU, as `run`'s select-only
        for rnd in (0, 1):
            ts = {t.variant: t for t in exp.trials
                  if t.workload == "in-server-loop/select-only" and t.round == rnd}
            w = {v: t.metrics["slice_windows"] for v, t in ts.items()}
            assert len(w["base"]) == len(w["other"]) == 4          # 1 s in 0.25 s slices
            who = [v for _, v in sorted((a, v) for v, ws in w.items() for a, _ in ws)]
            assert all(who[i] != who[i + 1] for i in range(0, 7, 2)), who
            assert all(who[i] == who[i + 1] for i in range(1, 7, 2)), who
            for t in ts.values():
                assert t.metrics["pinned"]["on"] is True, t.metrics["pinned"]
                assert sum(t.metrics["pinned"]["cpus"].values()) == 2
                assert t.metrics["extra"]["queries_per_call"] == 1
        # the loops' calls took turns too: a run is one call on each of the 2 clients at
        # once; at least 3 runs a variant, as many as fill the step's second; client i's
        # backend of every variant on the i-th CPU from the top
        cpus = sorted(os.sched_getaffinity(0), reverse=True)
        for rnd in (0, 1):
            for s in ("loop-plpgsql", "loop-c"):
                ts = {t.variant: t for t in exp.trials
                      if t.workload == f"in-server-loop/{s}" and t.round == rnd}
                w = {v: t.metrics["slice_windows"] for v, t in ts.items()}
                assert len(w["base"]) == len(w["other"]) >= 3
                assert all(sum(b - a for a, b in x) >= 0.9 for x in w.values()), w
                runs = sorted((a, v) for v, ws in w.items() for a, _ in ws)
                who = [v for _, v in runs]
                assert all(who[i] != who[i + 1] for i in range(0, len(who) - 1, 2))
                assert all(who[i] == who[i + 1] for i in range(1, len(who) - 1, 2)), who
                for t in ts.values():
                    ex = t.metrics["extra"]
                    assert ex["queries_per_call"] == 200
                    assert ex["calls"] == 2 * ex["runs"] == 2 * len(t.metrics["slice_windows"])
                    assert t.metrics["backend_cpus"] == [cpus[i % len(cpus)] for i in (0, 1)]
                    # a run's rate sums its two clients' own rates, each at least 200
                    # queries over the whole run (not one client's, not runs per second);
                    # and it is no sum over runs or calls (hundreds of times more). The
                    # upper bound is 4x two clients at the median run's pace: a client's
                    # own time can be well under its run's wall time when the two are not
                    # scheduled together (2x failed at 202,611 against 197,320 on a loaded
                    # 2-core VM, walls 2-8 ms)
                    walls = [b - a for a, b in t.metrics["slice_windows"]]
                    assert 2 * 200 / max(walls) <= t.throughput <= 8 * 200 / ex["median_s"], (
                        t.throughput, walls)
