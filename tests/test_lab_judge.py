"""Judging (decide/judge.py) on hand-made trials: known throughputs give known medians,
comparisons and geometric means; the typed results write the JSON run.json has always
carried (plus the schema) and read it back."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from pgaccel.decide import effect, judge, results, stats
from pgaccel.decide.model import WorkloadSpec
from pgaccel.decide.model import Trial
from pgaccel.workloads.base import RunParams, get_workload
from pgaccel.report.format import duration as fmt_duration
from pgaccel.report.stepview import step_matrices
from pgaccel.workloads.steps import params_for

SO = WorkloadSpec(get_workload("select-only"), RunParams(clients=2))
TP = WorkloadSpec(get_workload("tpcb-like"), RunParams(clients=2))


def tr(variant, workload, rnd, tps, clients=2, unit="tps", **metrics):
    return Trial(variant, workload, rnd, clients, 0.0, float(tps), unit, dict(metrics))


def trials_for(workload, per_variant, **metrics):
    return [tr(v, workload, i, x, **metrics) for v, xs in per_variant.items()
            for i, x in enumerate(xs)]


def judge_geo(xs) -> float:
    """The geometric mean, by hand."""
    return math.prod(xs) ** (1 / len(xs))


# -- values, medians, comparisons ----------------------------------------------------------
def test_values_filter_by_clients_and_leave_out_invalid_trials():
    ts = [tr("A", "select-only", 0, 100), tr("A", "select-only", 1, 110),
          tr("A", "select-only", 2, 999, valid=False), tr("A", "select-only", 0, 50, clients=8),
          tr("B", "select-only", 0, 120)]
    assert judge.values(ts, "select-only", "A", 2) == [100.0, 110.0]
    assert judge.values(ts, "select-only", "A") == [100.0, 110.0, 50.0]
    assert judge.values(ts, "select-only", "B", 2) == [120.0]
    assert judge.values(ts, "tpcb-like", "A", 2) == []


@pytest.mark.parametrize("base,other,median_b,median_o,n", [
    ([100, 102, 98], [110, 112, 108], 100.0, 110.0, 3),
    ([100, 104, 96, 100], [90, 94, 86, 90], 100.0, 90.0, 4),
    ([1000, 1010, 990, 1005, 995], [1200, 1210, 1190, 1205, 1195], 1000.0, 1200.0, 5),
    # skewed: the median (101, 121) is not the mean (110.3, 114.3), and the even count's
    # median is the mean of the middle two ((90 + 94) / 2 = 92), not either of them
    ([100, 101, 130], [121, 122, 100], 101.0, 121.0, 3),
    ([100, 140, 96, 101], [90, 94, 60, 120], 100.5, 92.0, 4),
])
def test_summary_medians_and_comparison(base, other, median_b, median_o, n):
    ts = trials_for("select-only", {"A": base, "B": other})
    s = judge.summarize(ts, "A", ["A", "B"], [SO])
    (w,) = s.workloads
    assert (w.workload, w.name, w.key, w.step, w.clients, w.unit) == (
        "select-only", "select-only", "select-only", None, 2, "tps")
    assert w.variants["A"].median == median_b and w.variants["B"].median == median_o
    assert w.variants["A"].n == w.variants["B"].n == n
    assert w.variants["B"].values == [float(x) for x in other]
    assert set(w.comparisons) == {"B"}                  # the base is not compared with itself
    c = w.comparisons["B"]
    geo = math.exp(sum(map(math.log, other)) / n - sum(map(math.log, base)) / n)
    assert c.ratio == pytest.approx(geo)                # ratio of geometric means
    r = list(range(n))                                  # paired by round (>= 3 rounds)
    assert c == effect.compare(base, other, base_rounds=r, other_rounds=r)
    assert c.method == "paired-log-t" and c.n_pairs == n
    # a single comparison's geometric mean is itself (on the log scale)
    assert s.overall["B"].geomean_ratio == pytest.approx(c.ratio)
    assert s.overall["B"].workloads == 1


def test_geometric_mean_over_two_workloads():
    ts = (trials_for("select-only", {"A": [100, 101, 99], "B": [120, 121, 119]})
          + trials_for("tpcb-like", {"A": [100, 101, 99], "B": [90, 91, 89]}))
    s = judge.summarize(ts, "A", ["A", "B"], [SO, TP])
    r1 = s.workloads[0].comparisons["B"].ratio
    r2 = s.workloads[1].comparisons["B"].ratio
    g = judge_geo                                   # ratios of geometric means
    assert (r1, r2) == (pytest.approx(g([120, 121, 119]) / g([100, 101, 99])),
                        pytest.approx(g([90, 91, 89]) / g([100, 101, 99])))
    o = s.overall["B"]
    assert o.geomean_ratio == pytest.approx(math.sqrt(r1 * r2))
    assert o.ci_low < o.geomean_ratio < o.ci_high and o.workloads == 2


def test_costs_latency_and_invalid_trials():
    ts = [tr("A", "select-only", i, x, latency_ms={"p95": p95}, server_cpu_us_per_op=us,
             wal_bytes_per_op=wal)
          for i, (x, p95, us, wal) in enumerate([(100, 2.0, 50, 10), (110, 3.0, 70, 30),
                                                 (105, 4.0, 60, 20)])]
    ts.append(tr("A", "select-only", 3, 1, valid=False, note="step did not finish",
                 server_cpu_us_per_op=1000))
    # invalid trials with a latency: left out of the p95 too (median 3.0 of the valid
    # 2, 3, 4 ms; with them it would be the median of 2, 3, 4, 500, 600 = 4.0, and of 2, 3,
    # 500, 600 = 251.5 with the 4 ms trial gone)
    ts += [tr("A", "select-only", 4 + i, 1, valid=False, latency_ms={"p95": p95})
           for i, p95 in enumerate([500.0, 600.0])]
    v = judge.summarize(ts, "A", ["A"], [SO]).workloads[0].variants["A"]
    assert (v.n, v.median, v.min, v.max) == (3, 105.0, 100.0, 110.0)
    assert v.invalid == 3 and v.note == "step did not finish"
    assert v.latency_p95_ms == 3.0                   # median of the valid trials' p95
    assert v.server_cpu_us_per_op == 60.0            # invalid trials' costs left out
    assert v.wal_bytes_per_op == 20.0 and v.client_cpu_share is None
    assert v.cv == pytest.approx(stats.summarize([100, 110, 105]).cv)


def test_refused_variant_is_left_out_and_reported():
    ts = trials_for("select-only", {"A": [100, 101, 99], "B": [110, 111, 112],
                                    "C": [5, 6, 7]})
    s = judge.summarize(ts, "A", ["A", "B"], [SO], refused={"C": "work_mem is 4MB"},
                        stop_reasons={"select-only c=2": "2 rounds done"})
    assert set(s.workloads[0].variants) == {"A", "B"} and set(s.overall) == {"B"}
    assert s.refused == {"C": "work_mem is 4MB"}
    assert s.stop_reasons == {"select-only c=2": "2 rounds done"}


def test_a_round_takes_the_wall_time_of_its_trials_of_every_config():
    """Two configs, three rounds: a round is both configs' trials (8 + 9 s, and one that
    was slower); another workload's and another client count's trials are not counted."""
    ts = [tr(v, "tpcb-like", r, 100, trial_wall_s=w)
          for r, (a, b) in enumerate([(8.0, 9.0), (8.5, 9.5), (8.0, 11.0)])
          for v, w in (("A", a), ("B", b))]
    ts += [tr("A", "select-only", 0, 100, trial_wall_s=60.0),
           tr("A", "tpcb-like", 0, 100, clients=8, trial_wall_s=60.0)]
    assert judge.round_seconds(ts, "tpcb-like", 2) == pytest.approx(54.0 / 3)
    assert judge.round_seconds(ts, "tpcb-like", 4) is None
    s = judge.summarize(ts, "A", ["A", "B"], [TP])
    assert s.workloads[0].round_s == pytest.approx(18.0)
    assert results.Summary.from_dict(json.loads(json.dumps(s.to_dict()))) == s


def test_comparisons_are_keyed_for_adaptive_rounds():
    ts = trials_for("select-only", {"A": [100, 101, 99], "B": [110, 111, 109], "C": [1, 2]})
    comps = judge.comparisons(ts, SO, "A", ["B", "C", "D"], confidence=0.9)
    assert set(comps) == {"select-only c=2 B", "select-only c=2 C"}   # D has no trials
    assert comps["select-only c=2 B"].confidence == 0.9
    assert comps["select-only c=2 B"].ratio == pytest.approx(
        judge_geo([110, 111, 109]) / judge_geo([100, 101, 99]))
    assert judge.comparisons([], SO, "A", ["B"]) == {}


def test_steps_in_step_order_with_rqps():
    ps = get_workload("parallel-scan")
    ws = WorkloadSpec(ps, params_for(ps, {"clients": 2}), key="scan")
    ts = []
    for v, qps in (("one", (10.0, 20.0)), ("two", (15.0, 10.0))):
        for rnd in range(3):         # 3 rounds: the fewest a paired interval has
            # step 1 is written first: the order comes from step_index, not from the trials
            for i in (1, 0):
                ts.append(tr(v, f"scan/count@{i}", rnd, qps[i] + rnd, unit="queries/s",
                             step_index=i))
    assert judge.measures(ts, ws) == [("scan/count@0", "count@0", "queries/s"),
                                      ("scan/count@1", "count@1", "queries/s")]
    s = judge.summarize(ts, "one", ["one", "two"], [ws])
    assert [w.step for w in s.workloads] == ["count@0", "count@1"]
    assert [w.key for w in s.workloads] == ["scan", "scan"] and s.steps == s.workloads
    assert s.single == []
    (table,) = s.rqps
    assert (table.workload, table.clients) == ("scan", 2)
    rows = {r.variant: r for r in table.rows}
    assert rows["one"].rqps == {"count@0": 1.0, "count@1": 1.0}
    # the geometric mean of the trials, the level the effect compares (one estimator)
    g = lambda *xs: math.prod(xs) ** (1 / len(xs))    # noqa: E731
    assert rows["two"].qps == {"count@0": pytest.approx(g(15, 16, 17)),
                               "count@1": pytest.approx(g(10, 11, 12))}
    assert rows["two"].rqps == {"count@0": pytest.approx(g(15, 16, 17) / g(10, 11, 12)),
                                "count@1": pytest.approx(g(10, 11, 12) / g(20, 21, 22))}
    for w in s.workloads:                     # rQPS is the effect the step's row prints
        assert rows["two"].rqps[w.step] == pytest.approx(w.comparisons["two"].ratio)
    assert s.overall["two"].workloads == 2


def test_head_to_head():
    ts = trials_for("select-only", {"pgtune": [100, 101, 99], "tuned": [105, 106, 104]})
    (row,) = judge.head_to_head(ts, [SO, TP], "pgtune", "tuned", confidence=0.9)
    assert (row.workload, row.clients, row.base, row.other) == (
        "select-only", 2, "pgtune", "tuned")
    assert row.comparison.ratio == pytest.approx(
        judge_geo([105, 106, 104]) / judge_geo([100, 101, 99]))
    assert row.comparison.confidence == 0.9
    d = row.to_dict()
    assert d["workload"] == "select-only" and d["ratio"] == row.comparison.ratio
    assert results.HeadToHead.from_dict(json.loads(json.dumps(d))) == row


def test_trial_row_medians_per_client_count():
    ts = [tr("current", "select-only", i, x, latency_ms={"p50": p50, "p95": 2 * p50},
             client_cpu_share=share, waits=[{"event": "IO:DataFileRead", "share": w},
                                            {"event": "Lock:tuple", "share": 0.1}])
          for i, (x, p50, share, w) in enumerate([(100, 1.0, 0.2, 0.5), (300, 3.0, 0.4, 0.3),
                                                  (200, 2.0, 0.3, 0.1)])]
    # an invalid trial counts as a trial but not in the medians or the wait shares
    ts.append(tr("current", "select-only", 3, 900, valid=False,
                 latency_ms={"p50": 90.0, "p95": 95.0},
                 waits=[{"event": "Lock:tuple", "share": 1.0}]))
    row = judge.trial_row(ts)
    assert (row.trials, row.throughput, row.lat_p50, row.lat_p95) == (4, 200.0, 2.0, 4.0)
    assert row.client_share == pytest.approx(0.3)
    assert row.lat_p99 is None and row.server_us is None
    assert row.top_waits == "IO:DataFileRead 30%, Lock:tuple 10%"
    assert set(row.to_dict()) == {
        "trials", "throughput", "lat_mean", "lat_p50", "lat_p95", "lat_p99", "server_us",
        "client_us", "client_share", "ctx", "read_kb", "write_kb", "wal_b", "top_waits"}



def test_trial_row_takes_each_cost_from_its_own_metric():
    # every metric a distinct scale, so a field read from the wrong key shows
    keys = {"server_cpu_us_per_op": "server_us", "client_cpu_us_per_op": "client_us",
            "ctx_switches_per_op": "ctx", "read_kb_per_op": "read_kb",
            "write_kb_per_op": "write_kb", "wal_bytes_per_op": "wal_b"}
    ts = [tr("current", "select-only", i, 100.0 + i,
             latency_ms={"mean": 0.5 * k, "p99": 9.0 * k},
             **{m: (j + 2) * 10.0 ** j * k for j, m in enumerate(keys)})
          for i, k in enumerate([1.0, 3.0, 2.0])]          # medians at k = 2
    row = judge.trial_row(ts).to_dict()
    assert (row["lat_mean"], row["lat_p99"]) == (1.0, 18.0)
    for j, (m, field) in enumerate(keys.items()):
        assert row[field] == (j + 2) * 10.0 ** j * 2.0, field
    # a metric some trials lack: the median of those that have it
    ts[0].metrics["server_cpu_us_per_op"] = None
    assert judge.trial_row(ts).server_us == pytest.approx((6.0 + 4.0) / 2)

# -- the JSON form ---------------------------------------------------------------------------
LEGACY_SUMMARY_KEYS = ["base", "min_effect", "confidence", "workloads", "rqps", "refused",
                       "stop_reasons", "overall"]
LEGACY_VARIANT_KEYS = {"n", "median", "cv", "min", "max", "values", "latency_p95_ms",
                       "invalid", "note", "server_cpu_us_per_op", "client_cpu_us_per_op",
                       "client_cpu_share", "ctx_switches_per_op", "wal_bytes_per_op",
                       # added with the noise checks (docs/formats.md)
                       "noisy_trials", "noise_why", "drift_per_round", "drift_total",
                       "drift_p", "drifting",
                       # added with the stall check (November 27)
                       "stalled_trials", "stall_why",
                       # and the load generator's drift (November 27)
                       "client_cpu_drift_total", "client_cpu_drift_p"}


def test_summary_to_dict_keeps_the_stored_keys_and_adds_the_schema():
    ts = trials_for("select-only", {"A": [100, 101, 99], "B": [120, 121, 119]})
    s = judge.summarize(ts, "A", ["A", "B"], [SO], min_effect=0.05, confidence=0.9)
    d = s.to_dict()
    assert list(d) == ["schema"] + LEGACY_SUMMARY_KEYS and d["schema"] == 1
    assert (d["base"], d["min_effect"], d["confidence"]) == ("A", 0.05, 0.9)
    (w,) = d["workloads"]
    assert set(w) == {"workload", "name", "key", "step", "clients", "unit", "variants",
                      "comparisons", "cpu_comparisons", "drift_per_round", "drift_total",
                      "drift_p", "drifting", "round_s", "slow_rounds", "states",
                      "client_cpu_drift_total", "client_cpu_drift_p"}
    assert w["round_s"] is None             # these trials recorded no wall time
    assert w["slow_rounds"] == {}           # nor a CPU speed probe
    assert set(w["variants"]["B"]) == LEGACY_VARIANT_KEYS
    assert w["comparisons"]["B"] == s.workloads[0].comparisons["B"].to_dict()
    assert d["overall"]["B"].keys() == {"geomean_ratio", "ci_low", "ci_high", "workloads"}
    assert "tuned_vs_pgtune" not in d and "calibration" not in d
    back = results.Summary.from_dict(json.loads(json.dumps(d)))
    assert back == s


def test_summary_from_an_older_document():
    """Documents written before the schema key (and before confidence, rQPS, refusals and
    stop reasons were kept) still read."""
    old = {"base": "baseline", "min_effect": 0.02,
           "workloads": [{"workload": "select-only", "clients": 4, "unit": "tps",
                          "variants": {"baseline": {"n": 2, "median": 10.0, "cv": 0.1,
                                                    "min": 9.0, "max": 11.0}},
                          "comparisons": {}}],
           "overall": {}}
    s = results.Summary.from_dict(old)
    assert s.confidence == 0.95 and s.rqps == [] and s.refused == {} and s.calibration is None
    w = s.workloads[0]
    assert (w.name, w.key, w.step) == ("select-only", "select-only", None)
    assert w.variants["baseline"].values == [] and w.variants["baseline"].invalid == 0


def test_calibration_and_extras_round_trip():
    cal = judge.calibration([100.0, 104.0, 96.0], [102.0, 98.0, 100.0], 20.0, 600.0)
    d = cal.to_dict()
    assert set(d) == {"cv_a", "cv_b", "noise_floor_cv", "aa", "trial_s", "budget_s",
                      "trials_per_variant", "min_detectable_effect", "trials_needed",
                      "pair_sd", "setup_s"}
    assert d["aa"]["verdict"] == cal.aa.verdict and d["trials_per_variant"] == 15
    assert results.Calibration.from_dict(json.loads(json.dumps(d))) == cal
    s = results.Summary("A", calibration=cal, tuned_vs_pgtune=[])
    d = s.to_dict()
    assert d["calibration"]["trials_needed"] == cal.trials_needed and d["tuned_vs_pgtune"] == []
    assert results.Summary.from_dict(json.loads(json.dumps(d))) == s


# -- edges the mutation run found unguarded (tools/mutation.sh) ----------------------------
def test_server_cpu_per_operation_is_judged_lower_is_better_on_the_same_trials():
    cpu = {"A": [10.0, 10.2, 9.8], "B": [8.0, 8.16, 7.84]}      # B costs 20% less
    ts = [tr(v, "select-only", i, 100 + i, server_cpu_us_per_op=x)
          for v, xs in cpu.items() for i, x in enumerate(xs)]
    # other client counts and invalid trials must not count
    ts += [tr("B", "select-only", 0, 1.0, clients=8, server_cpu_us_per_op=500.0),
           tr("B", "select-only", 1, 1.0, valid=False, server_cpu_us_per_op=500.0)]
    s = judge.summarize(ts, "A", ["A", "missing", "B"], [SO])
    (w,) = s.workloads
    c = w.cpu_comparisons["B"]
    assert c.ratio == pytest.approx(0.8) and c.higher_is_better is False
    assert c.verdict == effect.FASTER and c.method == "paired-log-t"
    assert list(w.variants) == ["A", "B"]        # a variant without trials is skipped, not
    assert w.comparisons["B"].ratio == pytest.approx(1.0)   # the end of the list
    assert w.variants["B"].n == 3 and w.variants["B"].invalid == 1


def test_calibration_by_hand():
    # pooled: mean 100, squares 0+16+16+4+4+0 = 40 over 5 -> sd 2.828, CV 2.83%;
    # A alone sd 4 (CV 4%), B alone sd 2 (CV 2%); 600 s of 20 s trials: 15 per side
    a, b = [100.0, 104.0, 96.0], [102.0, 98.0, 100.0]
    cal = judge.calibration(a, b, 20.0, 600.0, min_effect=0.05, rounds_a=[0, 1, 2],
                            rounds_b=[0, 1, 2])
    cv = math.sqrt(8) / 100
    assert (cal.cv_a, cal.cv_b, cal.noise_floor_cv) == (pytest.approx(0.04),
                                                        pytest.approx(0.02), pytest.approx(cv))
    assert (cal.trial_s, cal.budget_s, cal.trials_per_variant) == (20.0, 600.0, 15)
    from scipy import stats as st
    # paired by round, as the verdicts are: the rounds' log ratios are ln(102/100),
    # ln(98/104), ln(100/96); 15 rounds, df 14, delta = q * sd / sqrt(15)
    sd = statistics.stdev([math.log(102 / 100), math.log(98 / 104), math.log(100 / 96)])
    assert cal.pair_sd == pytest.approx(sd)
    # sd = 0.052864; (t(0.975, 14) + t(0.8, 14)) * sd / sqrt(15) = (2.1448 + 0.8681)
    # * 0.013650 = 0.041124 -> +4.20%; the unpaired formula on the pooled CV would say
    # +3.04% (below), and the exact power of the paired test there is 80%
    assert cal.min_detectable_effect == pytest.approx(0.04198, abs=5e-5)
    ncp = math.log1p(cal.min_detectable_effect) / (sd / math.sqrt(15))
    power = st.nct.sf(st.t.ppf(0.975, 14), 14, ncp)
    assert power == pytest.approx(0.80, abs=0.01)
    assert cal.trials_needed == {k: stats.trials_needed(cv, e, pair_sd=sd)
                                 for k, e in (("2%", 0.02), ("5%", 0.05), ("10%", 0.1))}
    assert cal.trials_needed["2%"] > cal.trials_needed["5%"] >= cal.trials_needed["10%"]
    assert cal.aa.method == "paired-log-t" and cal.aa.min_effect == 0.05
    # without the rounds: unpaired, from the pooled CV, df 28, delta = q * sigma * sqrt(2/15)
    un = judge.calibration(a, b, 20.0, 600.0, min_effect=0.05)
    assert un.pair_sd is None and un.aa.method == "welch-log-t"
    # (t(0.975, 28) + t(0.8, 28)) * sqrt(ln(1 + 0.02828^2)) * sqrt(2/15) = 2.9031 * 0.028279
    # * 0.36515 = 0.029977 -> +3.04%
    assert un.min_detectable_effect == pytest.approx(0.03043, abs=5e-5)
    assert un.trials_needed == {k: stats.trials_needed(cv, e)
                                for k, e in (("2%", 0.02), ("5%", 0.05), ("10%", 0.1))}
    assert judge.calibration(a, b, 0.0, 600.0).trials_per_variant == 0
    assert judge.calibration(a, b, 0.5, 600.0).trials_per_variant == 600
    # the budget's data and burn-in come first: 600 s less 100 s of 20 s trials, 12 a side
    with_setup = judge.calibration(a, b, 20.0, 600.0, setup_s=100.0)
    assert (with_setup.trials_per_variant, with_setup.setup_s) == (12, 100.0)
    assert with_setup.min_detectable_effect > un.min_detectable_effect
    assert judge.calibration(a, b, 20.0, 600.0, setup_s=700.0).trials_per_variant == 0


def test_overall_leaves_out_ratios_that_are_not_finite_and_positive():
    good = effect.compare([100.0, 101.0, 99.0], [110.0, 111.0, 109.0])
    bad = [dataclasses_replace(good, ratio=r) for r in (math.inf, 0.0, math.nan)]
    o = judge.overall({"B": [good, *bad]})["B"]
    assert o.workloads == 1 and o.geomean_ratio == pytest.approx(good.ratio)
    wide = judge.overall({"B": [good, good]}, confidence=0.5)["B"]
    assert wide.ci_high - wide.ci_low < judge.overall({"B": [good, good]})["B"].ci_high - \
        judge.overall({"B": [good, good]})["B"].ci_low


def dataclasses_replace(obj, **kw):
    import dataclasses
    return dataclasses.replace(obj, **kw)


def test_overall_leaves_out_a_workload_with_too_few_rounds():
    good = effect.compare([100.0, 101.0, 99.0], [110.0, 111.0, 109.0], base_rounds=[0, 1, 2],
                          other_rounds=[0, 1, 2])
    short = effect.compare([100.0, 101.0], [150.0, 151.0], base_rounds=[0, 1],
                           other_rounds=[0, 1])
    assert math.isfinite(short.ratio) and math.isnan(short.ci_low)
    o = judge.overall({"B": [good, short]})["B"]
    assert o.workloads == 1 and o.geomean_ratio == pytest.approx(good.ratio)
    assert judge.overall({"B": [short]}) == {}


def test_a_workload_the_budget_stopped_short_says_so_and_is_never_judged_unpaired():
    """Issue 41 item 2: `run --quick --with-pgtune --budget 4m` on 16 CPUs gave select-only
    2 rounds of its 3 and judged them with Welch's test on 2 against 2 trials.  Its verdicts
    now say that the budget ended first; tpcb-like, with 3 rounds, is judged paired; the
    stop reason is the one the runner's stop rule gives."""
    from pgaccel.decide.schedule import should_continue
    names = ["baseline", "pgtune", "tuned"]
    so = trials_for("select-only", {"baseline": [100, 104], "pgtune": [112, 115],
                                    "tuned": [118, 121]}, server_cpu_us_per_op=40.0)
    tp = trials_for("tpcb-like", {"baseline": [50, 52, 51], "pgtune": [55, 56, 57],
                                  "tuned": [60, 61, 62]}, server_cpu_us_per_op=40.0)
    # 2 rounds of 45 s done, 30 s of select-only's 120 s share left: the budget stops it
    go, why = should_continue({}, None, 90.0, 120.0, 45.0, 2, min_rounds=3,
                              until_decided=True)
    assert not go and why == ("time budget: 30s left, a round takes about 45s (only 2 of "
                              "the minimum 3 rounds ran; 3 need about 1 min more)")
    s = judge.summarize(so + tp, "baseline", names, [SO, TP],
                        stop_reasons={"select-only c=2": why,
                                      "tpcb-like c=2": "every comparison is decided after "
                                                       "3 rounds"})
    w_so, w_tp = s.workloads
    for v, gm in (("pgtune", judge_geo([112, 115]) / judge_geo([100, 104])),
                  ("tuned", judge_geo([118, 121]) / judge_geo([100, 104]))):
        c = w_so.comparisons[v]
        assert (c.method, c.verdict, c.n_pairs, c.n_base, c.n_other) == (
            "none", effect.NOT_ENOUGH, 2, 2, 2)
        assert c.ratio == pytest.approx(gm) and math.isnan(c.ci_low)
        assert c.explain.startswith("not enough evidence: only 2 of the minimum 3 paired "
                                    "rounds ran before the budget ended (")
        assert v not in w_so.cpu_comparisons           # nor its CPU cost, unpaired
        # what it used to be: Welch's t on 2 against 2 trials, with an interval
        assert effect.compare([100, 104], judge.values(so, "select-only", v, 2)).method == \
            "welch-log-t"
        p = w_tp.comparisons[v]
        assert (p.method, p.n_pairs) == ("paired-log-t", 3) and v in w_tp.cpu_comparisons
    # the overall figure is tpcb-like's alone
    assert {v: o.workloads for v, o in s.overall.items()} == {"pgtune": 1, "tuned": 1}
    assert s.overall["tuned"].geomean_ratio == pytest.approx(w_tp.comparisons["tuned"].ratio)
    # stored and read back alike
    back = results.Summary.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back.workloads[0].comparisons["tuned"].explain == w_so.comparisons["tuned"].explain
    # a run of 2 rounds asked for (no budget stop) says how many, not why
    s2 = judge.summarize(so, "baseline", names, [SO],
                         stop_reasons={"select-only c=2": "2 rounds done"})
    assert s2.workloads[0].comparisons["tuned"].explain.startswith(
        "not enough evidence: only 2 of the minimum 3 paired rounds ran (")


def test_a_step_workloads_conclusion_is_in_its_rqps_table_and_round_trips():
    """Study 003 in the lab: in-server-loop's steps say how much of a client-driven query
    is the client and the network, per variant, from the QPS the rQPS table shows beside
    it: the geometric mean of the trials, as rQPS's terms (the loop in C against pgbench's
    select-only)."""
    isl = get_workload("in-server-loop")
    ws = WorkloadSpec(isl, params_for(isl, {"clients": 2}), key="loop")
    ts = []
    rates = {"default": {"select-only": (80.0, 110.0, 121.0), "loop-plpgsql": (390.0,) * 3,
                         "loop-c": (400.0, 400.0, 400.0)},
             "big": {"select-only": (300.0,) * 3, "loop-plpgsql": (250.0,) * 3,
                     "loop-c": (250.0,) * 3}}
    for v, steps in rates.items():
        for i, (step, xs) in enumerate(steps.items()):
            ts += [tr(v, f"loop/{step}", rnd, x, unit="queries/s", step_index=i)
                   for rnd, x in enumerate(xs)]
    s = judge.summarize(ts, "default", ["default", "big"], [ws])
    (table,) = s.rqps
    # from the geometric mean the rQPS table shows (102.1; the median is 110): 1 - 102.1/400
    assert table.conclusions["default"] == (
        "the client and the network took 74% of each query's time: pgbench's select-only "
        "ran 102 queries/s, the same query looped inside the server in C 400/s (in "
        "PL/pgSQL 390/s, 0.97× C's)")
    assert table.conclusions["big"].startswith(
        "the loop inside the server was no faster than the client: pgbench's select-only "
        "ran 300 queries/s")
    # the rQPS table shows that number, and a variant's QPS over the base's is its rQPS
    # (a median, 110, beside an rQPS from geometric means disagreed with it)
    (m,) = step_matrices(s, [])
    so_d, so_b = m.cell("default", "select-only"), m.cell("big", "select-only")
    assert so_d.qps == pytest.approx((80.0 * 110.0 * 121.0) ** (1 / 3))
    assert so_b.qps / so_d.qps == pytest.approx(so_b.rqps)
    back = results.Summary.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back.rqps[0].conclusions == table.conclusions
    # a workload with nothing to conclude writes no key (older readers, smaller files)
    ib = get_workload("insert-benchmark")
    ibs = WorkloadSpec(ib, params_for(ib, {"clients": 2}), key="ib")
    other = judge.summarize([tr(v, "ib/l.i0", r, 10.0 + r, unit="inserts/s",
                                step_index=0) for v in ("default", "big") for r in range(3)],
                            "default", ["default", "big"], [ibs])
    assert other.rqps and "conclusions" not in other.rqps[0].to_dict()


@pytest.mark.parametrize("qps, said", [
    ({"select-only": 100.0, "loop-plpgsql": 200.0}, "the client and the network took 50% "
     "of each query's time: pgbench's select-only ran 100 queries/s, the same query looped "
     "inside the server in PL/pgSQL 200/s"),
    ({"select-only": 100.0, "loop-c": None, "loop-plpgsql": None}, None),
    ({"loop-c": 400.0, "loop-plpgsql": 300.0}, None),
])
def test_in_server_loops_conclusion_needs_select_only_and_a_loop(qps, said):
    assert get_workload("in-server-loop").conclusion(qps) == said


@pytest.mark.parametrize("qps, said", [
    ({"count@0": 10.0, "count@1": 18.0, "count@2": 25.0, "bitand@0": 5.0, "bitand@1": 4.0,
      "bitand@2": None},
     "count fastest at degree 2, 2.50× the serial scan's rate; bitand fastest serial"),
    # no serial step measured (its trials invalid): the best degree without a speed-up
    ({"count@0": None, "count@2": 25.0, "count@4": 20.0}, "count fastest at degree 2"),
    # degrees within 2% of the best are not told apart
    ({"count@0": 40.0, "count@1": 44.4, "count@2": 44.8, "count@4": 43.8},
     "count fastest at degree 2, 1.12× the serial scan's rate (within 2%: degree 1)"),
    ({"count@0": 50.0, "count@1": 49.5}, "count fastest serial (within 2%: degree 1)"),
    ({"count@0": None}, None),
])
def test_parallel_scans_conclusion_names_each_querys_fastest_degree(qps, said):
    assert get_workload("parallel-scan").conclusion(qps) == said


def test_a_steps_round_is_a_round_of_every_step_and_undecided_steps_say_what_would_decide():
    """One more round of one Insert Benchmark step is one more round of all its steps and
    variants: a step's ``round_s`` is that (it had none, so an undecided step could not say
    how long deciding it would take), and the step table's note turns the rounds the
    undecided steps need into time and the --max-rounds that would hold them."""
    ib = get_workload("insert-benchmark")
    ws = WorkloadSpec(ib, params_for(ib, {"clients": 2}), key="ib")
    ts = []
    # l.i0: 3 rounds 0.8% apart around +1% (undecided, a few more would decide); qr100: the
    # same both sides with 6% spread (far from deciding); l.x: +10% (decided)
    rates = {"l.i0": ((100.0, 101.8), (100.0, 100.2), (100.0, 101.0)),
             "l.x": ((100.0, 110.0), (100.0, 110.5), (100.0, 109.5)),
             "qr100": ((100.0, 106.0), (100.0, 94.0), (100.0, 100.0))}
    for i, (step, rounds) in enumerate(rates.items()):
        for rnd, (b, o) in enumerate(rounds):
            ts += [tr("base", f"ib/{step}", rnd, b, unit="inserts/s", step_index=i,
                      trial_wall_s=5.0),
                   tr("new", f"ib/{step}", rnd, o, unit="inserts/s", step_index=i,
                      trial_wall_s=5.0)]
    s = judge.summarize(ts, "base", ["base", "new"], [ws])
    # three steps, two variants, 5 s a step each: 30 s a round for every step
    assert {w.step: w.round_s for w in s.steps} == {"l.i0": 30.0, "l.x": 30.0, "qr100": 30.0}
    (m,) = step_matrices(s, [])
    cmp = {w.step: w.comparisons["new"] for w in s.steps}
    assert cmp["l.x"].verdict == "faster" and cmp["l.i0"].verdict == "not enough evidence"
    more = cmp["l.i0"].more_rounds
    assert more is not None and 1 <= more <= 50
    assert m.rounds == 3 and m.round_s == 30.0
    from pgaccel.report.stepview import undecided_note
    note = undecided_note(m, "new")
    # a new run of 3 + more rounds, all of them priced: 30 s each
    assert note.startswith(f"new: 2 of 3 steps not decided after 3 rounds; about {more} more "
                           f"would probably decide 1 of them (--max-rounds {3 + more} or "
                           "more, with a --budget that holds them; a new run of them all "
                           f"takes about {fmt_duration((3 + more) * 30.0)} at 30 s a round")
    assert note.endswith("more rounds would probably not decide qr100 (any difference is "
                         "small against this host's noise)")
    assert undecided_note(m, "base") is None
    # two rounds: no interval yet, so nothing is projected and noise is not blamed
    s2 = judge.summarize([t for t in ts if t.round < 2], "base", ["base", "new"], [ws])
    (m2,) = step_matrices(s2, [])
    assert undecided_note(m2, "new") == ("new: 3 of 3 steps not decided after 2 rounds; "
                                         "l.i0, l.x, qr100 had too few paired rounds for an "
                                         "interval")
