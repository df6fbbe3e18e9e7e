"""What the report shows (report/view.py), table-tested on run documents built from the
lab's own result types: the verdict lines, the fact sheet, the per-config medians of what
the trials recorded, sweeps, and the Insert Benchmark's colouring."""

from __future__ import annotations

import dataclasses
import io
import re

import pytest
from rich.console import Console

from pgaccel.decide.effect import Comparison
from pgaccel.decide.model import Trial
from pgaccel.decide.results import (Calibration, RqpsRow, RqpsTable, Summary, VariantSummary,
                                 WorkloadResult)
from pgaccel.report import facts, view
from pgaccel.report.curves import curves
from pgaccel.report.html import method, render_html, render_markdown
from pgaccel.report.terminal import render_summary


def cmp(ratio, lo, hi, verdict):
    return Comparison(ratio, lo, hi, "paired-log-t", verdict, 3, 3, 0.01, "why")


def vs(median, n=3, noisy=0, values=None):
    return VariantSummary(n=n, median=median, cv=0.05, min=median, max=median,
                          values=values or [median] * n, noisy_trials=noisy,
                          noise_why="other processes used 30% of the machine's CPU" if noisy
                          else "")


def result(workload="select-only", clients=4, step=None, variants=None, comparisons=None):
    return WorkloadResult(workload=workload, name=workload.split("/")[0],
                          key=workload.split("/")[0], step=step, clients=clients, unit="tps",
                          variants=variants or {}, comparisons=comparisons or {})


def trial(variant, workload="select-only", clients=4, tps=100.0, **metrics):
    m = {"latency_ms": {"p50": 1.0, "p95": 2.0, "p99": 3.0, "max": 9.0, "mean": 1.2},
         "server_cpu_us_per_op": 30.0, "client_cpu_us_per_op": 10.0,
         "pg": {"db_size_bytes": 200 * 2**20, "buffer_hit_ratio": 0.9, "checkpoints": 1},
         "waits": [{"event": "CPU", "share": 0.6}, {"event": "IO:DataFileRead", "share": 0.4}]}
    m.update(metrics)
    return Trial(variant, workload, 0, clients, 0.0, tps, "tps", metrics=m,
                 series=[tps] * 3, latency_series=[1.0] * 3, warmup_s=5.0).to_dict()


def doc(summary: Summary, trials=(), **extra):
    return {"run_id": "20261122-101500-abcd", "kind": "lab", "status": "finished",
            "summary": summary.to_dict(), "trials": list(trials),
            "variants": [{"name": "base", "settings": {}},
                         {"name": "tuned", "settings": {"shared_buffers": "1GB"}}],
            "host": {"cpu_model": "EPYC", "logical_cpus": 2, "cpu_flags": ["hypervisor"],
                     "memory_total_bytes": 2**34, "arch": "x86_64", "kernel": "6.1",
                     "thp_enabled": "madvise"},
            **extra}


@pytest.mark.parametrize("verdict,lo,hi,thin", [
    ("faster", 1.05, 1.2, False),
    ("not enough evidence", 0.8, 1.4, True),
    ("equivalent", 0.99, 1.01, False),
])
def test_a_comparison_gives_one_line_with_its_verdict_and_interval(verdict, lo, hi, thin):
    w = result(variants={"base": vs(100), "tuned": vs(110)},
               comparisons={"tuned": cmp(1.1, lo, hi, verdict)})
    [h] = view.headlines(doc(Summary(base="base", workloads=[w])))
    assert (h.subject, h.compared, h.verdict) == ("select-only, 4 clients", "tuned vs base",
                                                  verdict)
    assert h.effect == "+10.0%" and h.interval == f"95% CI {view.fmt.interval(lo, hi)}"
    assert any("thin evidence" in x for x in h.warnings) == thin
    assert h.css == view.CSS_CLASS[verdict]


def test_noise_is_said_once_per_measure_with_every_configs_count():
    w = result(variants={"base": vs(100, noisy=1), "a": vs(110, noisy=2), "b": vs(90)},
               comparisons={"a": cmp(1.1, 1.05, 1.2, "faster"),
                            "b": cmp(0.9, 0.85, 0.95, "slower")})
    hs = view.headlines(doc(Summary(base="base", workloads=[w])))
    assert [len(h.warnings) for h in hs] == [1, 0]
    assert hs[0].warnings[0] == ("Noisy host in 3 of 9 trials (base 1, a 2): other processes "
                                 "used 30% of the machine's CPU.")     # one reason, said once
    # configs whose trials were noisy for different reasons: each config's reason
    probe = "the CPU speed probe ran 47% slower than the run's fastest trial"
    w.variants["b"] = dataclasses.replace(vs(90, noisy=1), noise_why=probe)
    w.variants["c"] = dataclasses.replace(vs(95, noisy=1), noise_why=probe)
    hs = view.headlines(doc(Summary(base="base", workloads=[w])))
    assert hs[0].warnings[0] == (
        "Noisy host in 5 of 12 trials (base 1, a 2, b 1, c 1): base, a: other processes used "
        f"30% of the machine's CPU; b, c: {probe}.")


def test_a_single_config_gives_its_median_and_a_calibration_its_noise_floor():
    cal = Calibration(cv_a=0.04, cv_b=0.05, noise_floor_cv=0.045,
                      aa=cmp(1.01, 0.97, 1.05, "no significant difference"), trial_s=10.0,
                      budget_s=600.0, trials_per_variant=30, min_detectable_effect=0.031,
                      trials_needed={"2%": 60, "10%": 5})
    w = result(clients=1, variants={"current": vs(12345.6)})
    hs = view.headlines(doc(Summary(base="current", workloads=[w], calibration=cal)))
    assert hs[0].effect == "smallest detectable difference 3.1%"
    assert hs[0].verdict == "no significant difference" and "10 min" in hs[0].interval
    assert hs[1].text() == "select-only, 1 client: 12,346 tps (median of 3 trials, CV 5.0%)"


@pytest.mark.parametrize("verdicts,word", [
    (["faster", "faster"], "faster"),
    (["faster", "not enough evidence"], ""),          # mixed: no single word
    (["not enough evidence"] * 2, "not enough evidence"),
])
def test_insert_benchmark_line_takes_its_word_from_the_steps_verdicts(verdicts, word):
    steps = [result(f"ib/l.i{i}", 2, f"l.i{i}", {"base": vs(100), "new": vs(120)},
                    {"new": cmp(1.2, 0.9, 1.5, v)}) for i, v in enumerate(verdicts)]
    rq = RqpsTable("ib", 2, [RqpsRow("base", {"l.i0": 100, "l.i1": 100},
                                     {"l.i0": 1.0, "l.i1": 1.0}),
                             RqpsRow("new", {"l.i0": 120, "l.i1": 90},
                                     {"l.i0": 1.2, "l.i1": 0.9})])
    [h] = view.headlines(doc(Summary(base="base", workloads=steps, rqps=[rq])))
    assert h.verdict == word and h.effect == "rQPS 0.90 … 1.20"
    assert "1 below 0.95, 1 above 1.05" in h.interval


@pytest.mark.parametrize("x,cls", [(0.94, "slower"), (0.95, ""), (1.05, ""), (1.06, "faster"),
                                   (None, ""), (float("nan"), "")])
def test_rqps_colouring_follows_the_insert_benchmark(x, cls):
    assert view.rqps_class(x) == cls


def test_config_rows_are_medians_and_say_whether_the_data_fits():
    ts = [trial("base", tps=t, latency_ms={"p99": p}) for t, p in ((1, 3.0), (2, 5.0), (3, 4.0))]
    ts += [trial("tuned")]
    w = result(variants={"base": vs(2), "tuned": vs(100, n=1)},
               comparisons={"tuned": cmp(50, 40, 60, "faster")})
    [m] = view.measures(doc(Summary(base="base", workloads=[w]), ts))
    base, tuned = m.rows
    assert base.latency["p99"] == 4.0 and base.trials == 3
    assert (base.shared_buffers, base.fits) == ("128.0 MB", False)   # 200 MB of data
    assert (tuned.shared_buffers, tuned.fits) == ("1.0 GB", True)
    assert list(base.waits) == ["CPU", "IO:DataFileRead"] and base.waits["CPU"] == 0.6
    assert m.series["base"] == [[1.0] * 3, [2.0] * 3, [3.0] * 3]


def test_facts_merge_a_sweeps_client_counts_and_sweeps_are_found():
    ws = [result(clients=c, variants={"base": vs(100 * c)}) for c in (1, 2, 4)]
    params = {"duration": 5.0, "warmup": 2.0, "scale": 10, "protocol": "prepared"}
    d = doc(Summary(base="base", workloads=ws),
            workloads=[{"workload": "select-only", "key": "select-only",
                        "params": {**params, "clients": c}} for c in (1, 2, 4)])
    f = dict(facts.facts(d))
    assert f["workload select-only"].startswith("1, 2, 4 clients, 5 s measured")
    assert "a load-generator thread per client" in f["workload select-only"]
    one = doc(Summary(base="base", workloads=ws[:1]),
              workloads=[{"workload": "select-only", "key": "select-only",
                          "params": {**params, "clients": 4, "threads": 2}}])
    assert "4 clients, 5 s measured, 2 s warm-up at most, 2 load-generator threads" in \
        dict(facts.facts(one))["workload select-only"]
    assert f["host"].startswith("EPYC (virtual machine), 2 logical CPUs")
    assert view.sweeps(d) == {"select-only": {"base": [(1, 100), (2, 200), (4, 400)]}}


@pytest.mark.parametrize("kind,measurement,slices,want", [
    ("run", {"design": "side by side", "servers": 2}, (32, 0.25),
     "side by side: a throwaway server per config (2), each round 32 slices of 0.25 s per "
     "config taking turns (ABBA), the idle config's pgbench stopped; servers rotate over the "
     "configs every round"),
    # runs before November 27: 1-second slices, not always recorded
    ("run", {"design": "side by side", "servers": 2}, (5, None),
     "side by side: a throwaway server per config (2), each round 5 slices of 1 s per "
     "config taking turns"),
    ("run", {"design": "one at a time", "why": "the server was named (--dsn or --pgdata)"},
     None, "one config at a time on one server (the server was named (--dsn or --pgdata))"),
    ("run", None, None, None),
    ("lab", {"design": "side by side", "servers": 2}, (5, 1.0),
     "side by side: a throwaway server per variant (2), each round 5 slices of 1 s per "
     "variant taking turns (ABBA), the idle variant's pgbench stopped; servers of one "
     "installation rotate over its variants"),
    # three or more since November 28: rotated turns (lab.paired.turn_order)
    ("lab", {"design": "side by side", "servers": 4, "turns": "rotated"}, (40, 0.1),
     "side by side: a throwaway server per variant (4), each round 40 slices of 0.1 s per "
     "variant taking turns (rotated: A B C, B C A, ...), the idle variant's pgbench stopped; "
     "servers of one installation rotate over its variants"),
    ("lab", {"design": "one at a time", "why": "the variants set the host's vm.swappiness "
                                               "differently"}, None,
     "one variant at a time (the variants set the host's vm.swappiness differently)"),
])
def test_facts_say_how_the_trials_were_taken(kind, measurement, slices, want):
    extra = {"design": "side by side", "slices": slices[0]} if slices else {}
    if slices and slices[1]:
        extra["slice_s"] = slices[1]
    ts = [trial("base", tps=100, **extra), trial("tuned", tps=120, **extra)]
    w = result(variants={"base": vs(100), "tuned": vs(120)})
    d = doc(Summary(base="base", workloads=[w]), ts, kind=kind)
    if measurement:
        d["measurement"] = measurement
    got = dict(facts.facts(d)).get("measured")
    assert (got is None) if want is None else got.startswith(want)


ON = {"on": True, "cpus": {"0": 2, "1": 2}}
WRITES = {"on": False, "why": "it writes"}
PLACED = ("each pgbench on one CPU with its connections' backends (CPU 0: 2 clients, "
          "CPU 1: 2 clients)")


@pytest.mark.parametrize("pins,want", [
    ({"select-only": [ON, ON]}, "; " + PLACED),
    ({"select-only": [ON, {"on": False, "cpus": {"0": 2, "1": 2},
                           "problem": "3 of pgbench's 4 connections open after 5 s"}]},
     f"; {PLACED}, except in 1 of 2 trials (3 of pgbench's 4 connections open after 5 s)"),
    ({"select-only": [ON, ON], "tpcb-like": [WRITES, WRITES]},
     f"; select-only: {PLACED}; tpcb-like: pgbench and the backends placed by the scheduler "
     "(it writes)"),
    ({"select-only": [{"on": False}], "tpcb-like": [{"on": False}]},
     "; pgbench and the backends placed by the scheduler (--no-pin)"),
    ({"select-only": [None, None]}, ""),                # runs from before placement was kept
])
def test_facts_say_where_the_side_by_side_load_ran(pins, want):
    ts = [trial(v, workload=w, tps=100, design="side by side", slices=5,
                **({"pinned": p} if p else {}))
          for w, ps in pins.items() for v, p in zip(("base", "tuned"), ps)]
    w = result(variants={"base": vs(100), "tuned": vs(100)})
    d = doc(Summary(base="base", workloads=[w]), ts, kind="run")
    d["measurement"] = {"design": "side by side", "servers": 2}
    got = dict(facts.facts(d))["measured"]
    assert got.endswith("every round" + want)


def test_rendered_report_is_self_contained_and_starts_with_the_verdicts():
    ts = [trial("base", tps=100), trial("tuned", tps=120)]
    w = result(variants={"base": vs(100), "tuned": vs(120)},
               comparisons={"tuned": cmp(1.2, 1.1, 1.3, "faster")})
    d = doc(Summary(base="base", workloads=[w]), ts)
    html = render_html(d)
    assert html.index('id="verdicts"') < html.index("<h2")
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:|url\(\s*["']?https?:|@import""",
                         html)
    assert html.count("<svg") == 7 and "<img" not in html   # the 6 before + rounds chart
    assert "select-only: each round against base" in html
    assert "faster</span>" in html and "tuned vs base" in html
    assert render_html(d) == html                                   # deterministic
    md = render_markdown(d)
    assert md.splitlines()[2].startswith("- **select-only, 4 clients**: tuned vs base "
                                         "**faster**, +20.0%")


def test_parallel_steps_become_a_speedup_curve_and_size_steps_a_size_curve():
    deg = [result(f"ps/count@{d}", 1, f"count@{d}", {"base": vs(10.0 * (1 + 0.8 * d))})
           for d in (0, 1, 2)]
    size = [result(f"ds/scale={n}", 2, f"scale={n}", {"base": vs(1000.0 / n)}) for n in (1, 4)]
    trials = [Trial("base", f"ds/scale={n}", 0, 2, 0.0, 1000.0 / n, "tps",
                    metrics={"extra": {"db_size_bytes": n * 16 * 2**20, "buffer_hit_ratio": 1 / n,
                                       "size_over_shared_buffers": n * 16 / 128}}).to_dict()
              for n in (1, 4)]
    c_deg, c_size = curves(doc(Summary(base="base", workloads=deg + size), trials))
    assert (c_deg.kind, c_deg.workload) == ("degree", "ps count")
    assert c_deg.speedup("base") == [(0, 1.0), (1, 1.8), (2, pytest.approx(2.6))]
    assert c_size.kind == "size" and [p[0] for p in c_size.points["base"]] == \
        [16 * 2**20, 64 * 2**20]
    assert c_size.shared_buffers["base"] == 128 * 2**20      # from the step's own ratio
    assert c_size.points["base"][1][2]["hit_ratio"] == 0.25


def test_latency_distribution_is_the_median_of_each_quantile_over_the_trials():
    cdf = lambda k: [[0.0, 0.1 * k], [0.5, 1.0 * k], [0.99, 5.0 * k], [1.0, 9.0 * k]]  # noqa
    ts = [trial("base", latency_ms={"p50": 1.0, "cdf": cdf(k)}) for k in (1, 2, 4)]
    w = result(variants={"base": vs(100)})
    [m] = view.measures(doc(Summary(base="base", workloads=[w]), ts))
    assert m.rows[0].cdf == [(0.0, 0.2), (0.5, 2.0), (0.99, 10.0), (1.0, 18.0)]
    html = render_html(doc(Summary(base="base", workloads=[w]), ts))
    assert "latency distribution" in html and ">99%<" in html       # the nines axis


@pytest.mark.parametrize("more,says", [(3, "about 3 more rounds would probably decide"),
                                       (1, "about 1 more round would probably decide"),
                                       (400, "more rounds would probably not decide"),
                                       (None, "more rounds would probably not decide")])
def test_thin_evidence_says_whether_more_rounds_would_help(more, says):
    c = Comparison(1.05, 0.9, 1.2, "paired-log-t", "not enough evidence", 3, 3, 0.3, "why",
                   more_rounds=more)
    w = result(variants={"base": vs(100), "new": vs(105)}, comparisons={"new": c})
    [h] = view.headlines(doc(Summary(base="base", workloads=[w])))
    assert says in h.warnings[0] and "-10.0% … +20.0%" in h.warnings[0]


@pytest.mark.parametrize("more,round_s,says,terminal", [
    (13, 17.2, "about 13 more rounds would probably decide, about 4 minutes at 17 s a round "
               "(--rounds", "new: those 13 rounds would take about 4 minutes at 17 s a round (a "
               "--budget that much longer"),
    (3, 9.0, "about 3 more rounds would probably decide, about 27 s at 9 s a round (--rounds",
     "new: those 3 rounds would take about 27 s at 9 s a round"),
    (3, None, "about 3 more rounds would probably decide (--rounds", None),
    (400, 17.2, "more rounds would probably not decide", None),
])
def test_thin_evidence_says_how_long_the_rounds_it_needs_take(more, round_s, says, terminal):
    c = Comparison(1.05, 0.9, 1.2, "paired-log-t", "not enough evidence", 3, 3, 0.3, "why",
                   more_rounds=more)
    w = dataclasses.replace(result(variants={"base": vs(100), "new": vs(105)},
                                   comparisons={"new": c}), round_s=round_s)
    [h] = view.headlines(doc(Summary(base="base", workloads=[w])))
    assert says in h.warnings[0]
    out = io.StringIO()
    render_summary(Console(file=out, width=200), Summary(base="base", workloads=[w]))
    text = out.getvalue()
    assert (terminal in text) if terminal else ("rounds would take" not in text)


def test_checkpoints_inside_trials_are_drawn_on_the_throughput_chart():
    ts = [trial("base", checkpoint_s=[2.1]), trial("base"), trial("tuned", checkpoint_s=[])]
    w = result(variants={"base": vs(100, n=2), "tuned": vs(100, n=1)},
               comparisons={"tuned": cmp(1.0, 0.9, 1.1, "not enough evidence")})
    d = doc(Summary(base="base", workloads=[w]), ts)
    [m] = view.measures(d)
    assert m.checkpoints == {"base": [2.1], "tuned": []}
    assert "base: checkpoint ended (±1 s)" in render_html(d)
    assert "checkpoint ended" not in render_html(doc(Summary(base="base", workloads=[w]),
                                                     [trial("base"), trial("tuned")]))


@pytest.mark.parametrize("sliced,axis,title", [
    (True, "slice of the trial (1 s each, configs taking turns; after a 5 s warm-up",
     "select-only: throughput per slice, every trial"),
    (False, "second of the measured interval (after a 5 s warm-up",
     "select-only: throughput per second, every trial"),
])
def test_the_series_chart_says_whether_its_points_are_seconds_or_slices(sliced, axis, title):
    extra = {"design": "side by side", "slice_s": 1.0} if sliced else {}
    ts = [trial("base", **extra), trial("tuned", **extra)]
    w = result(variants={"base": vs(100), "tuned": vs(100)})
    d = doc(Summary(base="base", workloads=[w]), ts)
    [m] = view.measures(d)
    assert m.slice_s == (1.0 if sliced else None)
    html = render_html(d)
    assert axis in html and title in html
    assert ("slice of the trial" in html) == sliced


@pytest.mark.parametrize("method,drawn", [("paired-log-t", True), ("welch-log-t", False)])
def test_a_paired_verdict_shows_the_ratio_of_each_round_it_was_built_from(method, drawn):
    ts = []
    for r, (b, t) in enumerate([(100, 110), (80, 90), (120, 126)]):
        ts += [dict(trial("base", tps=b), round=r), dict(trial("tuned", tps=t), round=r)]
    c = dataclasses.replace(cmp(1.09, 1.02, 1.16, "faster"), method=method)
    w = result(variants={"base": vs(100, values=[100, 80, 120]),
                         "tuned": vs(110, values=[110, 90, 126])},
               comparisons={"tuned": c})
    d = doc(Summary(base="base", workloads=[w]), ts)
    [m] = view.measures(d)
    if drawn:
        assert m.round_ratios["tuned"] == pytest.approx({0: 1.1, 1: 1.125, 2: 1.05})
    else:
        assert m.round_ratios == {}
    assert ("select-only: each round against base" in render_html(d)) == drawn


# -- each number from its own field, each line's words (fast: no HTML) ----------------------
def test_config_rows_take_each_cost_from_its_own_field_and_skip_missing_values():
    """Four trials, one missing every value: each median is over the other three, and
    each field's values differ so that a field read from another's key shows."""
    keys = ("server_cpu_us_per_op", "client_cpu_us_per_op", "ctx_switches_per_op",
            "read_kb_per_op", "write_kb_per_op", "wal_bytes_per_op")
    per = {k: (10.0 * (i + 1), 30.0 * (i + 1), 20.0 * (i + 1)) for i, k in enumerate(keys)}
    pg = [{"buffer_hit_ratio": h, "checkpoints": c, "db_size_bytes": b}
          for h, c, b in ((0.9, 4, 10), (0.5, 1, 30), (0.7, 2, 20))]
    ts = [dict(trial("base", latency_ms={"p50": i + 1.0, "p95": 2 * i + 5, "p99": 9.0 - i},
                     pg=pg[i], **{k: v[i] for k, v in per.items()}), warmup_s=3.0 + i)
          for i in range(3)]
    ts.append(dict(trial("base", latency_ms={"p99": None}, pg={}, waits=[],
                         **{k: None for k in keys}), warmup_s=None))
    w = result(variants={"base": vs(100, n=4)})
    [m] = view.measures(doc(Summary(base="base", workloads=[w]), ts))
    [r] = m.rows
    assert (r.name, r.trials) == ("base", 4)
    assert r.costs == {"server_us": 20.0, "client_us": 40.0, "client_share": None,
                       "ctx": 60.0, "read_kb": 80.0, "write_kb": 100.0, "wal_b": 120.0}
    assert r.latency["p50"] == 2.0 and r.latency["p95"] == 7.0 and r.latency["p99"] == 8.0
    assert (r.hit_ratio, r.checkpoints, r.db_bytes, r.warmup_s) == (0.7, 2.0, 20.0, 4.0)
    assert m.title == "select-only — 4 clients"


def test_wait_events_are_mean_shares_over_all_trials_largest_first():
    ts = [trial("base", waits=[{"event": "CPU", "share": 0.6}, {"event": "IO", "share": 0.4}]),
          trial("base", waits=[{"event": "CPU", "share": 0.3}, {"event": "Lock", "share": 0.7},
                               {"event": "Idle"}]),
          trial("base", waits=[])]
    [m] = view.measures(doc(Summary(base="base", workloads=[result(variants={"base": vs(1)})]),
                            ts))
    waits = m.rows[0].waits
    assert list(waits) == ["CPU", "Lock", "IO", "Idle"]
    assert waits == pytest.approx({"CPU": 0.3, "Lock": 0.7 / 3, "IO": 0.4 / 3, "Idle": 0.0})


def test_a_config_without_trials_gets_an_empty_row():
    w = result(variants={"base": vs(1), "gone": vs(1, n=0)})
    [m] = view.measures(doc(Summary(base="base", workloads=[w]), [trial("base")]))
    gone = m.rows[1]
    assert (gone.name, gone.trials, gone.cdf, gone.waits, gone.fits) == ("gone", 0, [], {}, None)
    assert set(gone.costs.values()) == {None} and set(gone.latency.values()) == {None}
    assert m.series["gone"] == [] and m.checkpoints["gone"] == []


@pytest.mark.parametrize("db,sb,shown,fits", [
    (2**30, "1GB", "1.0 GB", True),          # exactly full still fits
    (2**30 + 1, "1GB", "1.0 GB", False),
    (None, "1GB", "1.0 GB", None),
    (2**20, "lots", "lots", None),           # an unreadable setting is shown as it is
])
def test_whether_the_data_fits_in_shared_buffers(db, sb, shown, fits):
    d = doc(Summary(base="base", workloads=[result(variants={"base": vs(1)})]),
            [trial("base", pg={"db_size_bytes": db})])
    d["variants"] = [{"name": "base", "settings": {"shared_buffers": sb}}]
    [m] = view.measures(d)
    assert (m.rows[0].shared_buffers, m.rows[0].fits) == (shown, fits)


def test_shared_buffers_default_to_postgres_own_for_a_config_that_does_not_set_them():
    d = {"variants": [{"name": "a", "settings": {"work_mem": "4MB"}}, {"name": "b"},
                      {"name": "c", "settings": {"shared_buffers": "2GB"}}, "junk", {}]}
    assert view.shared_buffers_by_config(d) == {"a": "128MB", "b": "128MB", "c": "2GB"}


def test_the_latency_distribution_keeps_only_the_quantiles_every_trial_has():
    ts = [trial("base", latency_ms={"cdf": [[0.5, 1.0], [0.9, 3.0], [0.99, 8.0]]}),
          trial("base", latency_ms={"cdf": [[0.5, 2.0], [0.99, 6.0]]}),
          trial("base", latency_ms={"cdf": [[0.5, 4.0], [0.9, 5.0], [0.99, 7.0]]})]
    w = result(variants={"base": vs(1)})
    [m] = view.measures(doc(Summary(base="base", workloads=[w]), ts))
    assert m.rows[0].cdf == [(0.5, 2.0), (0.99, 7.0)]
    [m] = view.measures(doc(Summary(base="base", workloads=[w]), ts + [trial("base")]))
    assert m.rows[0].cdf == []                 # a trial without one: no distribution


def test_side_by_side_slices_and_checkpoints_are_gathered_per_config():
    side = {"design": "side by side", "slice_s": 0.5}
    ts = [trial("base", checkpoint_s=[1.5, 4.0], **side), trial("base", **side),
          trial("tuned", checkpoint_s=[2.5], **side),
          trial("tuned", workload="tpcb-like", checkpoint_s=[9.0], **side)]
    w = result(variants={"base": vs(1, n=2), "tuned": vs(1, n=1)})
    [m] = view.measures(doc(Summary(base="base", workloads=[w]), ts))
    assert m.slice_s == 0.5 and m.checkpoints == {"base": [1.5, 4.0], "tuned": [2.5]}
    ts[1] = trial("base", design="side by side", slice_s=1.0)   # two lengths: none said
    [m] = view.measures(doc(Summary(base="base", workloads=[w]), ts))
    assert m.slice_s is None


def test_round_ratios_are_other_over_base_per_round():
    ts = []
    for r, (b, t) in enumerate([(100, 125), (80, 90), (120, 96)]):
        ts += [dict(trial("base", tps=b), round=r), dict(trial("tuned", tps=t), round=r)]
    w = result(variants={"base": vs(100), "tuned": vs(110)},
               comparisons={"tuned": cmp(1.02, 0.7, 1.4, "not enough evidence")})
    for r, (b, t) in enumerate([(10, 50), (10, 50), (10, 50)]):      # 8 clients: not these
        ts += [dict(trial("base", clients=8, tps=b), round=r),
               dict(trial("tuned", clients=8, tps=t), round=r)]
    got = view.round_ratios([view.Trial.from_dict(t) for t in ts], w, "base")
    assert got == {"tuned": pytest.approx({0: 1.25, 1: 1.125, 2: 0.8})}
    assert view.round_ratios([view.Trial.from_dict(t) for t in ts], w, None) == {}


def test_headline_text_joins_subject_comparison_verdict_effect_and_interval():
    h = view.Headline("select-only, 4 clients", "tuned vs base", "slower", "-7.5%",
                      "95% CI -9.0% … -6.0%")
    assert h.text() == "select-only, 4 clients: tuned vs base slower, -7.5% (95% CI -9.0% … " \
                       "-6.0%)"
    assert (h.css, view.Headline("s", "", "", "1 tps", "i").css) == ("slower", "")
    assert view.Headline("s", "", "", "1 tps", "i").text() == "s: 1 tps (i)"


def test_the_interval_level_and_the_trial_count_of_thin_evidence_are_the_measures_own():
    c = dataclasses.replace(cmp(0.96, 0.88, 1.05, "not enough evidence"), confidence=0.99,
                            more_rounds=5)
    w = result(variants={"base": vs(100, n=5), "new": vs(96, n=3)}, comparisons={"new": c})
    s = Summary(base="base", confidence=0.9, workloads=[w])
    [h] = view.headlines(doc(s))
    assert (h.verdict, h.effect, h.interval) == ("not enough evidence", "-4.0%",
                                                 "99% CI -12.0% … +5.0%")
    assert h.warnings == ("new: thin evidence after 3 trials per config (the interval spans "
                          "-12.0% … +5.0%); about 5 more rounds would probably decide "
                          "(--rounds, --budget).",)
    assert view.ci_label(s) == "90% CI" and view.ci_label(s, w) == "99% CI"
    assert view.ci_label(s, result(variants={"base": vs(1)})) == "90% CI"   # no comparison
    w = dataclasses.replace(w, comparisons={"new": dataclasses.replace(c, more_rounds=None)})
    [h] = view.headlines(doc(dataclasses.replace(s, workloads=[w])))
    assert h.warnings == ("new: thin evidence after 3 trials per config (the interval spans "
                          "-12.0% … +5.0%); more rounds would probably not decide: any "
                          "difference is small against this machine's noise.",)


def test_rounds_cut_short_by_the_budget_say_so_instead_of_thin_evidence():
    """A comparison with too few rounds for a paired interval (decide/effect.py) has no
    interval to quote, and more rounds are what it lacks: the report says what the verdict
    says, not "more rounds would probably not decide"."""
    from pgaccel.decide.effect import compare
    c = compare([100.0, 104.0], [118.0, 121.0], base_rounds=[0, 1], other_rounds=[0, 1],
                short_note="before the budget ended")
    w = result(variants={"base": vs(102, n=2), "new": vs(119.5, n=2)}, comparisons={"new": c})
    s = Summary(base="base", workloads=[w], stop_reasons={
        "select-only c=4": "time budget: 30s left, a round takes about 45s (only 2 of the "
                           "minimum 3 rounds ran)"})
    [h] = view.headlines(doc(s))
    # the ratio of geometric means so far: sqrt(118 x 121 / (100 x 104)) = 1.1717
    assert (h.verdict, h.effect) == ("not enough evidence", "+17.2%")
    assert h.warnings == (
        "new: not enough evidence: only 2 of the minimum 3 paired rounds ran before the "
        "budget ended (+17.2% so far; a paired interval needs 3 rounds with both configs' "
        "trials).",
        "Stopped: time budget: 30s left, a round takes about 45s (only 2 of the minimum 3 "
        "rounds ran)")
    out = io.StringIO()
    render_summary(Console(file=out, width=200), s)
    assert "only 2 of the minimum 3 paired rounds ran before the budget ended" in \
        out.getvalue()
    assert "those" not in out.getvalue()       # no "+N rounds would take"


def test_why_a_run_stopped_is_said_once_per_measure_beside_thin_evidence():
    thin = cmp(1.01, 0.9, 1.12, "not enough evidence")
    w = result(variants={"base": vs(100), "a": vs(101), "b": vs(102), "c": vs(120)},
               comparisons={"c": cmp(1.2, 1.1, 1.3, "faster"), "a": thin, "b": thin})
    s = Summary(base="base", workloads=[w], stop_reasons={"select-only c=4": "budget spent",
                                                         "select-only c=8": "other"})
    hs = view.headlines(doc(s))
    assert [h.compared for h in hs] == ["c vs base", "a vs base", "b vs base"]
    assert [h.warnings[1:] for h in hs] == [(), ("Stopped: budget spent",), ()]
    assert [len(h.warnings) for h in hs] == [0, 2, 1]


def test_configs_without_a_comparison_each_give_their_median_noise_said_once():
    w = result(clients=2, variants={"a": vs(1234.5, n=1, noisy=1), "b": vs(987.0, n=4)})
    other = result("tpcb-like", 8, variants={"a": vs(55.0)})
    hs = view.headlines(doc(Summary(base="a", workloads=[w, other])))
    assert [h.text() for h in hs] == [
        "select-only, 2 clients: a 1,234 tps (median of 1 trial, CV 5.0%)",
        "select-only, 2 clients: b 987 tps (median of 4 trials, CV 5.0%)",
        "tpcb-like, 8 clients: 55 tps (median of 3 trials, CV 5.0%)"]
    assert [h.verdict for h in hs] == ["", "", ""]
    assert [len(h.warnings) for h in hs] == [1, 0, 0]
    assert hs[0].warnings[0] == ("Noisy host in 1 of 5 trials (a 1): other processes used "
                                 "30% of the machine's CPU.")


def test_a_calibration_line_gives_the_noise_floor_and_the_budget():
    cal = Calibration(cv_a=0.04, cv_b=0.05, noise_floor_cv=0.045,
                      aa=cmp(1.01, 0.97, 1.05, "equivalent"), trial_s=10.0, budget_s=2700.0,
                      trials_per_variant=31, min_detectable_effect=0.0312, trials_needed={})
    [h] = view.headlines(doc(Summary(base="current", calibration=cal)))
    assert h.text() == ("this machine's noise: A/A equivalent, smallest detectable difference "
                        "3.1% (trial CV 4.5%, 31 trials per config in 45 min)")


def test_steps_without_a_comparison_give_each_configs_lowest_and_highest_step():
    meds = {"count@0": (30.0, 7.0), "count@1": (10.0, None), "count@2": (20.0, float("nan")),
            "count@3": (25.0, 9.0), "count@4": (26.0, 8.0)}
    steps = [result(f"ps/{s}", 2, s, {"a": vs(x), **({"b": vs(y)} if y else {})})
             for s, (x, y) in meds.items()]          # b has no trials at count@1
    hs = view.headlines(doc(Summary(base="a", workloads=steps)))
    assert [h.text() for h in hs] == [
        "ps, 2 clients: a 10 … 30 tps (5 steps: lowest count@1, highest count@0; medians)",
        "ps, 2 clients: b 7 … 9 tps (3 steps: lowest count@0, highest count@3; medians)"]
    assert {h.verdict for h in hs} == {""}
    one = [result(f"ps/{s}", 1, s, {"a": vs(x)}) for s, (x, _) in meds.items()]
    [h] = view.headlines(doc(Summary(base="a", workloads=one)))
    assert h.text() == ("ps, 1 client: 10 … 30 tps (5 steps: lowest count@1, highest count@0; "
                        "medians)")


def test_drift_is_said_under_the_first_comparison_with_the_noisy_trials():
    w = dataclasses.replace(
        result(variants={"base": vs(100, noisy=1), "a": vs(110), "b": vs(90)},
               comparisons={"a": cmp(1.1, 1.05, 1.2, "faster"),
                            "b": cmp(0.9, 0.85, 0.95, "slower")}),
        drift_per_round=0.02, drift_total=0.08, drift_p=0.01, drifting=True)
    hs = view.headlines(doc(Summary(base="base", workloads=[w])))
    assert [len(h.warnings) for h in hs] == [2, 0]
    assert hs[0].warnings[0].startswith("Noisy host in 1 of 9 trials (base 1)")
    assert hs[0].warnings[1].startswith("Every config's throughput drifted +8.0% over the "
                                        "rounds (+2.0% a round, p=0.01)")


def test_steps_in_different_units_are_not_ranked_together():
    """A single config of the Insert Benchmark: its steps count inserts, rows and queries
    per second; each unit gets its own range."""
    units = {"l.i0": ("inserts/s", 20000.0), "l.x": ("rows/s", 900000.0),
             "l.i1": ("inserts/s", 15000.0), "qr100": ("queries/s", 80.0),
             "qp100": ("queries/s", 95.0)}
    steps = [dataclasses.replace(result(f"ib/{s}", 4, s, {"base": vs(x)}), unit=u)
             for s, (u, x) in units.items()]
    hs = view.headlines(doc(Summary(base="base", workloads=steps)))
    assert [h.text() for h in hs] == [
        "ib, 4 clients: 15,000 … 20,000 inserts/s (2 steps: lowest l.i1, highest l.i0; "
        "medians)",
        "ib, 4 clients: 900,000 … 900,000 rows/s (1 step: lowest l.x, highest l.x; medians)",
        "ib, 4 clients: 80 … 95 queries/s (2 steps: lowest qr100, highest qp100; medians)"]


def test_insert_benchmark_counts_only_steps_beyond_the_bands():
    steps = [result(f"ib/l.i{i}", 2, f"l.i{i}", {"base": vs(100), "new": vs(120)},
                    {"new": cmp(1.2, 0.9, 1.5, v)})
             for i, v in enumerate(["faster", "slower", "faster", "equivalent"])]
    # steps of the same workload at another client count, of another workload, and
    # without this config's comparison do not count
    steps += [result("ib/l.i0", 4, "l.i0", {"base": vs(100), "new": vs(90)},
                     {"new": cmp(0.9, 0.8, 0.95, "slower")}),
              result("ibx/l.i0", 2, "l.i0", {"base": vs(100), "new": vs(90)},
                     {"new": cmp(0.9, 0.8, 0.95, "slower")}),
              result("ib/l.i5", 2, "l.i5", {"base": vs(100), "new": vs(90), "gone": vs(1)},
                     {"gone": cmp(0.9, 0.8, 0.95, "slower")})]
    rq = RqpsTable("ib", 2, [RqpsRow("base", {}, {}), RqpsRow("gone", {}, {"l.i0": None}),
                             RqpsRow("new", {}, {"l.i0": 0.95, "l.i1": 1.05, "l.i2": 0.949,
                                                 "l.i3": 1.2, "l.i4": None})])
    [h] = view.headlines(doc(Summary(base="base", workloads=steps, rqps=[rq])))
    assert (h.subject, h.compared, h.verdict) == ("ib, 2 clients", "new vs base", "")
    assert h.effect == "rQPS 0.95 … 1.20"
    assert h.interval == ("faster: l.i0, l.i2; slower: l.i1; equivalent: l.i3; 1 below "
                          "0.95, 1 above 1.05")


def test_a_sweep_needs_two_client_counts():
    ws = [result(clients=c, variants={"base": vs(100.0 * c), "tuned": vs(90.0 * c)})
          for c in (8, 2)]
    ws.append(result("tpcb-like", 4, variants={"base": vs(50)}))
    ws.append(result("ib/l.i0", 2, "l.i0", {"base": vs(1)}))
    ws.append(result("ib/l.i0", 4, "l.i0", {"base": vs(1)}))
    assert view.sweeps(doc(Summary(base="base", workloads=ws))) == {
        "select-only": {"base": [(8, 800.0), (2, 200.0)], "tuned": [(8, 720.0), (2, 180.0)]}}


def test_the_plan_diff_keeps_postgres_settings_that_change():
    changes = [{"layer": "postgres", "name": "shared_buffers", "current": "128MB",
                "proposed": "4GB"},
               {"layer": "postgres", "name": "max_connections", "current": 100,
                "proposed": "100"},
               {"layer": "postgres", "name": "huge_pages", "current": "try",
                "proposed": "on", "advice_only": True},
               {"layer": "os", "name": "vm.swappiness", "current": 60, "proposed": 1}]
    assert [c["name"] for c in view.plan_diff({"plan": {"changes": changes}})] == \
        ["shared_buffers"]
    assert view.plan_diff({}) == [] and view.plan_diff({"plan": None}) == []


def test_median_of_ignores_what_cannot_be_shown():
    assert view.median_of([3, None, "x", float("nan"), 1, 10, True]) == 3.0
    assert view.median_of([None]) is None and view.clients(1) == "1 client"


def test_a_step_whose_base_has_no_valid_trial_is_said_so_not_ranged():
    """qr500 in study 001 at --size small: every trial of the base was invalid (its writers
    missed their rate); its headline says so instead of "51,515 … 51,515 queries/s"."""
    bad = VariantSummary(n=0, median=float("nan"), cv=float("nan"), min=float("nan"),
                         max=float("nan"), invalid=3, note="writers reached 94% of the rate")
    steps = [result("ib/qr500", 2, "qr500", {"base": bad, "new": vs(51515)}, {}),
             result("ib/l.i0", 2, "l.i0", {"base": vs(100), "new": vs(120)},
                    {"new": cmp(1.2, 1.1, 1.3, "faster")})]
    heads = view.headlines(doc(Summary(base="base", workloads=steps)))
    h = next(h for h in heads if h.compared == "qr500")
    assert (h.subject, h.effect) == ("ib, 2 clients", "not compared")
    assert h.interval == "no valid trial of base (writers reached 94% of the rate)"
    assert not any("51,515" in h.effect for h in heads)


def test_step_matrix_sets_rqps_verdicts_and_costs_per_op_against_the_base():
    from pgaccel.report import stepview
    bad = VariantSummary(n=0, median=float("nan"), cv=float("nan"), min=float("nan"),
                         max=float("nan"), invalid=3, note="writers reached 94%")
    steps = [result("ib/l.i0", 2, "l.i0", {"base": vs(100), "new": vs(104)},
                    {"new": cmp(1.04, 1.01, 1.07, "faster")}),
             result("ib/qr500", 2, "qr500", {"base": bad, "new": vs(500)}, {})]

    def t(variant, step, cpu, ctx, kb, valid=True):
        return {"variant": variant, "workload": f"ib/{step}", "clients": 2,
                "metrics": {"server_cpu_us_per_op": cpu, "ctx_switches_per_op": ctx,
                            "write_kb_per_op": kb, "valid": valid}}
    trials = [t("base", "l.i0", 10.0, 2.0, 4.0), t("base", "l.i0", 12.0, 2.0, 4.0),
              t("new", "l.i0", 11.0, 1.0, 6.0), t("new", "l.i0", 13.0, 1.0, 6.0),
              t("new", "l.i0", 99.0, 9.0, 99.0, valid=False),      # an invalid trial: out
              t("base", "l.i0", 11.0, 2.0, 4.0) | {"clients": 4}]   # another client count
    [m] = stepview.step_matrices(Summary(base="base", workloads=steps), trials,
                                 {"new": {"l.i0": "about +4%"}})
    assert (m.key, m.clients, m.steps, m.variants) == ("ib", 2, ["l.i0", "qr500"],
                                                       ["base", "new"])
    c = m.cell("new", "l.i0")
    assert (c.rqps, c.verdict) == (1.04, "faster")
    # geometric means of the valid trials, as QPS's (the medians' ratio was 12/11 = 1.091)
    assert c.cost_ratios == pytest.approx({"server_cpu_us_per_op": (143 / 120) ** 0.5,
                                           "ctx_switches_per_op": 0.5, "write_kb_per_op": 1.5})
    assert stepview.cost_text(m, "base", "l.i0", "server_cpu_us_per_op") == "11.0"  # √120
    assert stepview.cost_text(m, "new", "l.i0", "ctx_switches_per_op") == "0.50"
    assert c.cpu_verdict is None and stepview.cost_note(m) is None     # CPU not judged
    # CPU per operation judged paired by round: its ratio and verdict, and a note saying so
    judged = [dataclasses.replace(steps[0], cpu_comparisons={
        "new": dataclasses.replace(cmp(0.93, 0.90, 0.96, "faster"), higher_is_better=False)})]
    [mj] = stepview.step_matrices(Summary(base="base", workloads=judged), trials)
    assert mj.cell("new", "l.i0").cost_ratios["server_cpu_us_per_op"] == 0.93
    assert stepview.cost_text(mj, "new", "l.i0", "server_cpu_us_per_op") == "0.93 cheaper"
    assert stepview.cost_text(mj, "new", "l.i0", "ctx_switches_per_op") == "0.50"
    assert "paired by round at 95%" in stepview.cost_note(mj)
    for verdict, said in (("slower", "1.05 costlier"), ("equivalent", "1.05 equivalent"),
                          ("not enough evidence", "1.05")):
        w = [dataclasses.replace(steps[0], cpu_comparisons={"new": dataclasses.replace(
            cmp(1.05, 0.99, 1.11, verdict), higher_is_better=False)})]
        [mv] = stepview.step_matrices(Summary(base="base", workloads=w), trials)
        assert stepview.cost_text(mv, "new", "l.i0", "server_cpu_us_per_op") == said
    assert m.base_missing("l.i0") is None
    assert m.base_missing("qr500") == "no valid trial of base (writers reached 94%)"
    assert m.cell("new", "qr500").verdict is None
    assert m.finding("new", "l.i0") == "about +4%" and m.finding("new", "qr500") == ""
    assert stepview.verdict_counts(m, "new") == {"faster": 1}
    assert stepview.chance_note(m) is None                  # one comparison: nothing to say
    many = [result(f"ib/s{i}", 2, f"s{i}", {"base": vs(100), "new": vs(100)},
                   {"new": cmp(1.0, 0.9, 1.1, "not enough evidence")}) for i in range(8)]
    [m8] = stepview.step_matrices(Summary(base="base", workloads=many), [])
    assert stepview.chance_note(m8).startswith(
        "8 step comparisons, each at 95%: between identical variants about 0.4 of them")


def test_the_terminal_prints_the_step_table_with_verdicts_costs_and_findings():
    from pgaccel.report.lab import render_steps
    steps = [result("ib/l.i0", 2, "l.i0", {"base": vs(100), "new": vs(80)},
                    {"new": cmp(0.8, 0.7, 0.9, "slower")})]
    buf = io.StringIO()
    render_steps(Console(file=buf, width=250, color_system=None),
                 Summary(base="base", workloads=steps), [], {"new": {"l.i0": "about +4%"}})
    line = next(x for x in buf.getvalue().splitlines() if " new " in x and "0.80" in x)
    assert "slower" in line and "about +4%" in line


def test_a_variant_without_a_valid_trial_of_a_step_is_not_called_the_base():
    """parallel-degree's leader-off at degree 1 (every trial invalid) read "base" in the
    per-step table's comparison column."""
    from pgaccel.report.lab import render_steps
    gone = VariantSummary(n=0, median=float("nan"), cv=float("nan"), min=float("nan"),
                          max=float("nan"), invalid=3, note="0 planned")
    steps = [result("ps/count@1", 2, "count@1", {"base": vs(45), "off": gone}, {})]
    buf = io.StringIO()
    render_steps(Console(file=buf, width=250, color_system=None),
                 Summary(base="base", workloads=steps), [], None)
    rows = [x.split("│") for x in buf.getvalue().splitlines() if "count@1 tps" in x]
    cells = {r[2].strip(): r[6].strip() for r in rows}
    assert cells == {"base": "base", "off": "–"}


def test_facts_say_a_step_workload_ran_its_steps_in_turn():
    ts = [trial(v, workload="ib/l.i0", tps=100, design="steps side by side", turn=i)
          for i, v in enumerate(("base", "tuned"))]
    w = result("ib/l.i0", 4, "l.i0", {"base": vs(100), "tuned": vs(100)})
    d = doc(Summary(base="base", workloads=[w]), ts)
    d["measurement"] = {"design": "side by side", "servers": 2}
    got = dict(facts.facts(d))["measured"]
    assert got == ("side by side: a throwaway server per variant (2), every server ready at "
                   "once each round; a step workload ran the same step of every variant in "
                   "turn (A B, then B A), an untimed CHECKPOINT after each")


def test_facts_say_the_insert_benchmarks_steps_took_turns_in_slices_and_by_index():
    """Every Insert Benchmark step has a design of its own (no trial says "steps side by
    side" any more): the facts still say the steps ran in turn, with the slice length."""
    ts = []
    for i, v in enumerate(("base", "tuned")):
        ts += [trial(v, workload="ib/l.i0", design="load step in slices", slice_s=0.25),
               trial(v, workload="ib/l.x", design="index step in turns"),
               trial(v, workload="ib/qr100", design="q step in slices", slice_s=0.25,
                     pinned={"on": True, "cpus": {"0": 1, "1": 1}})]
    w = result("ib/l.i0", 4, "l.i0", {"base": vs(100), "tuned": vs(100)})
    d = doc(Summary(base="base", workloads=[w]), ts)
    d["measurement"] = {"design": "side by side", "servers": 2}
    got = dict(facts.facts(d))["measured"]
    assert got.endswith("a step workload ran the same step of every variant in turn (A B, "
                        "then B A), an untimed CHECKPOINT after each, its load and query "
                        "steps in slices of 0.25 s, l.x index by index, its query steps' "
                        "each pgbench on one CPU with its connections' backends (CPU 0: 1 "
                        "client, CPU 1: 1 client)")
    assert got.startswith("side by side: a throwaway server per variant (2), every server")
    # three or more variants rotate their turns; index_passes above 1 is said
    for t in ts:
        if t["metrics"]["design"] == "index step in turns":
            t["metrics"]["extra"] = {"index_passes": 2}
    d["measurement"] = {"design": "side by side", "servers": 3, "turns": "rotated"}
    got = dict(facts.facts(d))["measured"]
    assert ("a step workload ran the same step of every variant in turn (A B C, then B C "
            "A), an untimed CHECKPOINT after each, its load and query steps in slices of "
            "0.25 s, l.x index by index (every index built 2 times, each but the last "
            "dropped untimed), its query") in got


def test_facts_say_parallel_scans_runs_took_turns_on_one_cpu():
    """parallel-scan's degrees take turns run by run with every backend on one CPU
    (lab/paired_repeats.py): the facts say so, and the CPU only when every step had it."""
    def measured(cpus):
        ts = [trial(v, workload="ps/count@0", design="runs in turns", backend_cpu=c)
              for v in ("base", "tuned") for c in cpus]
        w = result("ps/count@0", 2, "count@0", {"base": vs(100), "tuned": vs(100)})
        d = doc(Summary(base="base", workloads=[w]), ts)
        d["measurement"] = {"design": "side by side", "servers": 2}
        return dict(facts.facts(d))["measured"]
    assert measured([1]).endswith("an untimed CHECKPOINT after each, each step's timed runs "
                                  "in turns run by run, every backend on CPU 1")
    assert measured([None]).endswith("an untimed CHECKPOINT after each, each step's timed "
                                     "runs in turns run by run")
    assert measured([1, None]).endswith("in turns run by run")


def test_facts_say_where_each_client_of_the_loops_ran_and_the_sliced_select_only():
    """in-server-loop in the lab (lab/paired_repeats.py, lab/paired_pgbench.py): its loop
    steps' runs take turns with client i's backend of every variant on one CPU, its
    select-only takes slices; the facts name both, the CPUs client by client."""
    ts = [trial(v, workload="isl/loop-c", design="runs in turns", backend_cpus=[1, 0])
          for v in ("base", "tuned")]
    ts += [trial(v, workload="isl/select-only", design="pgbench step in slices",
                 slice_s=0.25) for v in ("base", "tuned")]
    ws = [result("isl/loop-c", 2, "loop-c", {"base": vs(100), "tuned": vs(100)}),
          result("isl/select-only", 2, "select-only", {"base": vs(100), "tuned": vs(100)})]
    d = doc(Summary(base="base", workloads=ws), ts)
    d["measurement"] = {"design": "side by side", "servers": 2}
    got = dict(facts.facts(d))["measured"]
    assert "an untimed CHECKPOINT after each, its pgbench steps in slices of 0.25 s" in got
    assert got.endswith("each step's timed runs in turns run by run, client 1's backend of "
                        "every variant on CPU 1, client 2's on CPU 0"), got


def test_a_step_workloads_facts_do_not_claim_a_run_length():
    """Study 001's report said "5 s measured, 3 s warm-up at most" for the Insert Benchmark,
    whose steps run to their own end."""
    ts = [trial("base", workload="insert-benchmark/l.i0", tps=100, step="l.i0")]
    w = result("insert-benchmark/l.i0", 2, "l.i0", {"base": vs(100)})
    d = doc(Summary(base="base", workloads=[w]), ts,
            workloads=[{"workload": "insert-benchmark", "key": "insert-benchmark",
                        "params": {"clients": 2, "duration": 5.0, "warmup": 3.0,
                                   "options": {"size": "small"}}}])
    row = dict(facts.facts(d))["workload insert-benchmark"]
    assert row == "2 clients, each step runs to its own end (no fixed length), size=small"


def test_a_workloads_facts_say_only_the_parameters_it_reads():
    """Study 001's facts said "scale 10" for the Insert Benchmark, which has no scale: a run
    that lists what its workload reads (``applies``) shows only those; a step workload whose
    steps last a duration says so."""
    ts = [trial("base", workload="insert-benchmark/l.i0", tps=100, step="l.i0"),
          trial("base", workload="in-server-loop/pgbench", tps=100, step="pgbench")]
    ws = [result("insert-benchmark/l.i0", 2, "l.i0", {"base": vs(100)}),
          result("in-server-loop/pgbench", 2, "pgbench", {"base": vs(100)})]
    params = {"clients": 2, "threads": None, "duration": 20.0, "warmup": 5.0,
              "protocol": "prepared", "rate": None, "scale": 10, "options": {"size": "small"}}
    d = doc(Summary(base="base", workloads=ws), ts, workloads=[
        {"workload": "insert-benchmark", "key": "insert-benchmark", "params": params,
         "applies": ["clients", "protocol", "options"]},
        {"workload": "in-server-loop", "key": "in-server-loop", "params": params,
         "applies": ["clients", "threads", "duration", "warmup", "protocol", "scale",
                     "options"]}])
    got = dict(facts.facts(d))
    assert got["workload insert-benchmark"] == (
        "2 clients, each step runs to its own end (no fixed length), protocol prepared, "
        "size=small")
    assert got["workload in-server-loop"] == (
        "2 clients, 20 s measured per step, 5 s warm-up at most, scale 10, protocol "
        "prepared, size=small")


def test_a_workloads_conclusion_is_said_under_its_rqps_table_everywhere():
    """in-server-loop's share of a query outside the server (``RqpsTable.conclusions``):
    under the rQPS table in the terminal, the Markdown and the HTML report; another
    workload's table (here ib's) says nothing of it."""
    from pgaccel.report import stepview
    from pgaccel.report.lab import render_steps
    said = "the client and the network took 72% of each query's time: pgbench's ..."
    steps = [result("loop/select-only", 2, "select-only", {"base": vs(110), "new": vs(120)},
                    {"new": cmp(1.09, 1.0, 1.2, "not enough evidence")}),
             result("ib/l.i0", 2, "l.i0", {"base": vs(100), "new": vs(100)},
                    {"new": cmp(1.0, 0.99, 1.01, "equivalent")})]
    rq = [RqpsTable("loop", 2, [RqpsRow("base", {"select-only": 110}, {"select-only": 1.0}),
                                RqpsRow("new", {"select-only": 120}, {"select-only": 1.09})],
                    {"base": said, "new": "the loop inside the server was no faster"}),
          RqpsTable("ib", 2, [RqpsRow("base", {"l.i0": 100}, {"l.i0": 1.0}),
                              RqpsRow("new", {"l.i0": 100}, {"l.i0": 1.0})])]
    s = Summary(base="base", workloads=steps, rqps=rq)
    loop, ib = stepview.step_matrices(s, [])
    assert loop.conclusions == {"base": said, "new": "the loop inside the server was no faster"}
    assert ib.conclusions == {}
    buf = io.StringIO()
    render_steps(Console(file=buf, width=250, color_system=None), s, [], None)
    assert f"  base: {said}" in buf.getvalue().splitlines()
    d = doc(s)
    md = render_markdown(d)
    assert f"- **base**: {said}" in md.splitlines()
    assert md.index(f"- **base**: {said}") < md.index("rQPS and costs per operation of ib")
    from markupsafe import escape
    assert f"<b>base</b>: {escape(said)}" in render_html(d)


def test_steps_another_variant_never_ran_validly_are_said_not_compared_with_why():
    """parallel-degree's leader-off cannot run degree 1: its headline read "leader-on 23 …
    45 queries/s (2 steps: ...)" as if leader-on had run alone."""
    gone = VariantSummary(n=0, median=float("nan"), cv=float("nan"), min=float("nan"),
                          max=float("nan"), invalid=3, note="0 planned")
    steps = [result("ps/count@0", 2, "count@0", {"base": vs(40), "off": vs(41)},
                    {"off": cmp(1.02, 0.9, 1.1, "not enough evidence")}),
             result("ps/count@1", 2, "count@1", {"base": vs(45), "off": gone}, {}),
             result("ps/bitand@1", 2, "bitand@1", {"base": vs(23), "off": gone}, {})]
    hs = view.headlines(doc(Summary(base="base", workloads=steps)))
    said = [h for h in hs if h.effect == "not compared"]
    assert [(h.subject, h.compared, h.interval) for h in said] == [
        ("ps, 2 clients", "off vs base in count@1, bitand@1", "no valid trial of off (0 planned)")]
    assert not any("steps: lowest" in h.interval for h in hs)
    # "not compared" is said of those steps only, after the line that compares the others
    # (it opened report.md before it, as if off had not been compared at all)
    rq = [RqpsTable("ps", 2, [RqpsRow("base", {"count@0": 40}, {"count@0": 1.0}),
                              RqpsRow("off", {"count@0": 41}, {"count@0": 1.02})])]
    md = render_markdown(doc(Summary(base="base", workloads=steps, rqps=rq)))
    lines = [x for x in md.splitlines() if x.startswith("- **ps, 2 clients**: off vs base")]
    assert len(lines) == 2 and "rQPS" in lines[0], lines
    assert lines[1] == ("- **ps, 2 clients**: off vs base in count@1, bitand@1 not compared "
                        "(no valid trial of off (0 planned))")


def test_a_cost_the_base_barely_has_gets_no_ratio_and_a_small_one_keeps_its_digits():
    """in-server-loop's loop-c step: its base wrote 0.00015 KB an operation (a few hundred
    KB over two million), the other variant none, and the table said "0.00" with a bar from
    1 to 0; l.x's 0.0011 context switches an operation read "0.0"."""
    from pgaccel.report import stepview
    steps = [result("loop/loop-c", 2, "loop-c", {"base": vs(475000), "new": vs(506667)},
                    {"new": cmp(1.07, 0.9, 1.2, "not enough evidence")})]

    def t(variant, kb, ctx):
        return {"variant": variant, "workload": "loop/loop-c", "clients": 2,
                "metrics": {"server_cpu_us_per_op": 4.1, "ctx_switches_per_op": ctx,
                            "write_kb_per_op": kb}}
    [m] = stepview.step_matrices(Summary(base="base", workloads=steps),
                                 [t("base", 0.00015, 0.0011), t("new", 0.0, 0.0009)])
    assert m.cell("new", "loop-c").cost_ratios["write_kb_per_op"] is None
    assert stepview.cost_text(m, "new", "loop-c", "write_kb_per_op") == "–"
    assert stepview.cost_text(m, "base", "loop-c", "ctx_switches_per_op") == "0.0011"
    assert stepview.cost_text(m, "new", "loop-c", "ctx_switches_per_op") == "0.82"
    assert stepview.cost_text(m, "base", "loop-c", "server_cpu_us_per_op") == "4.1"
    assert stepview.cost_text(m, "base", "loop-c", "write_kb_per_op") == "0.00015"


@pytest.mark.parametrize("measurement, kind, says, not_says", [
    # side by side (run, lab): servers of their own, turns, no claim of restarts per trial
    ({"design": "side by side", "servers": 2}, "run", "Every config ran on a throwaway "
     "server of its own", "Each trial restarts"),
    ({"design": "side by side", "servers": 4}, "lab", "on every variant of a round alike",
     "Each trial restarts"),
    ({"design": "side by side", "servers": 2}, "run", "took turns in short slices, one",
     "step by step"),
    # one after the other, and runs from before run.json said how: the restart per trial
    ({"design": "one at a time", "why": "sysctls"}, "lab", "Each trial restarts the server",
     "throwaway server of its own"),
    (None, "run", "counterbalanced order (abba)", "throwaway server of its own"),
])
def test_the_method_paragraph_says_how_the_run_took_its_trials(measurement, kind, says,
                                                             not_says):
    """Every side-by-side report ended with the one-after-the-other method ("each trial
    restarts the server"), contradicting its own facts' "measured" row."""
    d = {"kind": kind, "order": "abba", **({"measurement": measurement} if measurement else {})}
    text = method(d, Summary(base="base", min_effect=0.02, confidence=0.95))
    assert says in text and not_says not in text
    assert text.endswith("within the minimum effect (2.0%).")
    # a lab of step workloads took its turns step by step
    steps = method({**d, "trials": [{"metrics": {"step": "l.i0"}}]},
                   Summary(base="base", min_effect=0.02, confidence=0.95))
    side = (measurement or {}).get("design") == "side by side"
    assert ("took turns step by step" in steps) == side


def test_cost_bars_show_at_least_five_percent_either_side_of_one():
    """Scaled to the bars alone, an A/A's half-percent CPU differences filled the chart
    (its axis 0.990-1.010) and looked as large as the study's 3-5%; the axis now spans at
    least 0.95-1.05, and a larger ratio still fits."""
    import re as _re
    from pgaccel.report.step_charts import step_costs_chart

    def ticks(svg):
        return {float(t) for t in _re.findall(r">\s*([01]\.\d+)\s*<", svg)}
    small = ticks(step_costs_chart("ib", "A", "CPU µs/op", ["l.i0", "qr100"],
                                   {"A2": {"l.i0": 1.01, "qr100": 0.995}}))
    assert min(small) <= 0.96 and max(small) >= 1.04, small
    big = ticks(step_costs_chart("ib", "A", "KB written/op", ["l.x"], {"A2": {"l.x": 0.54}}))
    assert min(big) <= 0.6, big
    # a ratio far above 1 widens the top only: no axis below 0, no bars squashed into half
    high = step_costs_chart("ib", "A", "KB written/op", ["qr100"], {"A2": {"qr100": 5.0}})
    labels = [float(t) for t in _re.findall(r">\s*(-?\d+(?:\.\d+)?)\s*<", high)]
    assert max(labels) >= 5.0 and min(labels) >= 0.0, labels
