"""Judging measured trials (pure): what the trials of an experiment say, as the typed
results of ``results.py``.

Every function here reads trials (``trial.Trial``: variant, workload, round, clients,
throughput, metrics) and workload specs (``model.WorkloadSpec``) and returns values;
nothing runs a server, writes a file or keeps state.  The runner (``experiment.py``) calls
:func:`comparisons` between rounds to decide whether to go on, and :func:`summarize` for
run.json; the commands call :func:`head_to_head`, :func:`calibration` and
:func:`trial_row`.

* A trial whose ``metrics["valid"]`` is False (a step that did not do what it claims) is
  counted as invalid and left out of medians and comparisons.
* A comparison is ``effect.compare(base, other)``: the ratio of geometric means with its
  t interval, paired by round (the experiment's interleaved rounds), and the verdict;
  never unpaired: fewer than ``effect.MIN_PAIRS`` rounds with both configs' trials are "not
  enough evidence", "before the budget ended" where the budget stopped the workload.
* Beside throughput, the server's CPU time per operation gets its own comparison (lower is
  better): on a shared host it is often the steadier signal.
* The overall figure per variant is the geometric mean of its ratios over every workload
  (and step), ``effect.geometric_mean_ratio``.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..metrics.noise import (cross_cpu, round_rise, shared_slow_rounds, slow_cpu, slow_probe,
                             stalled)
from ..metrics.registry import JUDGED_COST, ROW_COSTS, SUMMARY_COSTS
from .states import buffer_accesses_per_op, split_states
from . import effect, stats
from .effect import Comparison
from .model import Trial, WorkloadSpec
from .schedule import ended_by_budget
from .results import (BenchRow, Calibration, HeadToHead, Overall, RqpsRow, RqpsTable,
                      Summary, VariantSummary, WorkloadResult)


# per-operation costs whose medians a variant's summary carries (metrics/registry.py)
COST_KEYS = tuple(c.key for c in SUMMARY_COSTS)


# -- judging -------------------------------------------------------------------------------
def _valid(t: Trial) -> bool:
    return t.metrics.get("valid", True) is not False


Level = float | Callable[[int], float]     # a confidence, or one per number of rounds


def rounds_of(trials: Iterable[Trial], workload: str, clients: int) -> int:
    """How many rounds (distinct round numbers) the valid trials of a measure span."""
    return len({t.round for t in trials
                if t.workload == workload and t.clients == clients and _valid(t)})


def round_seconds(trials: Iterable[Trial], workload: str, clients: int) -> float | None:
    """The wall time of one round of a measure: its trials' ``trial_wall_s`` (restart, data
    and caches, warm-up, measuring; every config's) over the rounds they span; None when
    its trials did not record it."""
    ts = [t for t in trials if t.workload == workload and t.clients == clients
          and t.metrics.get("trial_wall_s")]
    rounds = len({t.round for t in ts})
    return sum(float(t.metrics["trial_wall_s"]) for t in ts) / rounds if rounds else None


def level_for(confidence: Level, rounds: int) -> float:
    return float(confidence(rounds)) if callable(confidence) else float(confidence)


def values(trials: Iterable[Trial], workload: str, variant: str,
           clients: int | None = None) -> list[float]:
    """Throughputs of the valid trials of (workload, variant[, clients]), in trial order."""
    return samples(trials, workload, variant, clients)[0]


def samples(trials: Iterable[Trial], workload: str, variant: str, clients: int | None = None,
            metric: str | None = None) -> tuple[list[float], list[int]]:
    """(values, rounds) of the valid trials of (workload, variant[, clients]) in trial
    order: the throughput, or ``metrics[metric]`` where a trial has it."""
    vals, rounds = [], []
    for t in trials:
        if t.workload == workload and t.variant == variant and _valid(t) and \
                (clients is None or t.clients == clients):
            v = t.throughput if metric is None else t.metrics.get(metric)
            if v is not None:
                vals.append(float(v))
                rounds.append(int(t.round))
    return vals, rounds


def judge_pair(trials: Sequence[Trial], workload: str, base: str, other: str,
               clients: int | None, *, min_effect: float, confidence: float,
               metric: str | None = None, higher_is_better: bool = True,
               short_note: str = "") -> Comparison | None:
    """``other`` against ``base`` on one measure, paired by round: never unpaired, fewer
    than ``effect.MIN_PAIRS`` rounds are "not enough evidence" (``short_note``: why they
    are so few).  None: a side has no trials."""
    b, br = samples(trials, workload, base, clients, metric)
    o, orr = samples(trials, workload, other, clients, metric)
    if not b or not o:
        return None
    return effect.compare(b, o, higher_is_better=higher_is_better, min_effect=min_effect,
                          confidence=confidence, base_rounds=br, other_rounds=orr,
                          short_note=short_note)


def measures(trials: Iterable[Trial], ws: WorkloadSpec) -> list[tuple[str, str | None, str]]:
    """(store workload name, step or None, unit) of what ``ws`` measures: itself, or for a
    multi-step workload every step seen in the trials, in step order."""
    if not ws.is_steps:
        return [(ws.name, None, ws.workload.unit)]
    seen: dict[str, tuple[int, str]] = {}
    for t in trials:
        if t.workload.startswith(ws.name + "/") and t.clients == ws.params.clients:
            seen.setdefault(t.workload, (int(t.metrics.get("step_index", 0)), t.unit))
    return [(w, w.split("/", 1)[1], u) for w, (_, u) in
            sorted(seen.items(), key=lambda kv: kv[1][0])]


def comparisons(trials: Sequence[Trial], ws: WorkloadSpec, base: str, others: Iterable[str],
                *, min_effect: float = 0.02, confidence: Level = 0.95
                ) -> dict[str, Comparison]:
    """Every other variant against ``base`` on each measure of ``ws`` that both have
    trials of; keyed ``"WORKLOAD c=CLIENTS VARIANT"`` (the names adaptive rounds report)."""
    out = {}
    c = ws.params.clients
    others = list(others)
    for wname, _step, _unit in measures(trials, ws):
        level = level_for(confidence, rounds_of(trials, wname, c))
        for v in others:
            cmp = judge_pair(trials, wname, base, v, c, min_effect=min_effect,
                             confidence=level)
            if cmp is not None:
                out[f"{wname} c={c} {v}"] = cmp
    return out


def median_costs(trials: Iterable[Trial]) -> dict[str, float | None]:
    """Median of each of :data:`COST_KEYS` over the trials that have it (None: none has)."""
    ts = list(trials)
    return {k: stats.median_of([t.metrics.get(k) for t in ts if t.metrics.get(k) is not None])
            for k in COST_KEYS}


def _by_round(trials: Mapping[str, Sequence[Trial]], metric: str
              ) -> dict[str, list[tuple[int, float | None]]]:
    """Per variant, (round, ``metric``) of its valid trials: what the round checks read."""
    return {v: [(t.round, t.metrics.get(metric)) for t in ts if _valid(t)]
            for v, ts in trials.items() if ts}


def variant_summary(trials: Sequence[Trial], slow_rounds: Iterable[int] = (),
                    rises: Mapping[str, Mapping[int, float]] | None = None
                    ) -> VariantSummary:
    """One variant's trials on one measure (invalid ones counted, not measured).  A trial
    of one of ``slow_rounds`` (every config's CPUs ran slow in it: ``shared_slow_rounds``)
    is not called noisy for its slow CPUs: that is said once for the round.  ``rises``: per
    metric (``cpu_probe_us``, ``client_cpu_us_per_op``), this variant's
    :func:`~pgaccel.metrics.noise.round_rise`: a trial is then called slow only for what
    its round's other configs did not share."""
    invalid = [t for t in trials if not _valid(t)]
    valid = [t for t in trials if _valid(t)]
    vals = [t.throughput for t in valid]
    s = stats.summarize(vals)
    lat = [(t.metrics.get("latency_ms") or {}).get("p95") for t in valid]
    host = [t.metrics.get("noise") or {} for t in valid]
    shared = set(slow_rounds)
    def rise(metric: str) -> list[float | None] | None:
        by_round = (rises or {}).get(metric)
        return None if by_round is None else [by_round.get(t.round) for t in valid]

    probe = [("" if t.round in shared else why) for t, why in zip(
        valid, slow_probe([t.metrics.get("cpu_probe_us") for t in valid],
                          rise=rise("cpu_probe_us")))]
    cross = cross_cpu([t.metrics.get("resched_ipis_per_op") for t in valid])
    slow = [("" if t.round in shared else why) for t, why in zip(
        valid, slow_cpu([t.metrics.get("client_cpu_us_per_op") for t in valid],
                        rise=rise("client_cpu_us_per_op")))]
    noisy = [w for w in (h["why"] if h.get("noisy") else (p or x or s)
                         for h, p, x, s in zip(host, probe, cross, slow)) if w]
    stalls = [_stall_text(t) for t in valid]
    stalls = [x for x in stalls if x]
    d = stats.drift(vals, [t.round for t in valid])
    dc = stats.drift(*_cli_series(valid))
    return VariantSummary(
        n=s.n, median=s.median, cv=s.cv, min=s.min, max=s.max, values=vals,
        latency_p95_ms=stats.median_of([x for x in lat if x is not None]),
        invalid=len(invalid),
        note=invalid[0].metrics.get("note", "") if invalid else "",
        noisy_trials=len(noisy), noise_why=_noise_why(host, noisy),
        stalled_trials=len(stalls), stall_why=stalls[0] if stalls else "",
        drift_per_round=d.per_round if d else None, drift_total=d.total if d else None,
        drift_p=d.p_value if d else None, drifting=bool(d and d.significant),
        client_cpu_drift_total=dc.total if dc else None,
        client_cpu_drift_p=dc.p_value if dc else None,
        **median_costs(valid))


def _noise_why(host: Sequence[Mapping[str, Any]], noisy: Sequence[str]) -> str:
    """The reason a variant's noisy trials give: where the host's counters flagged some, the
    one whose CPU others (processes or the hypervisor) took the most of, said as the worst
    of several (a steal of 5% in one trial and 32% in another is not "5%"); else the first
    trial's reason."""
    flagged = [h for h in host if h.get("noisy") and h.get("why")]
    if not flagged:
        return noisy[0] if noisy else ""
    worst = max(flagged, key=lambda h: max(h.get("steal_share") or 0.0,
                                           h.get("other_cpu_share") or 0.0))
    return worst["why"] + (" in the worst of them" if len(noisy) > 1 else "")


def _cli_series(trials: Iterable[Trial]) -> tuple[list[float], list[int]]:
    """The load generator's CPU per operation of the valid ``trials`` that know it, and
    their rounds (for a drift: that work per operation does not change)."""
    known = [t for t in trials if _valid(t) and isinstance(
        t.metrics.get("client_cpu_us_per_op"), (int, float))
        and t.metrics["client_cpu_us_per_op"] > 0]
    return [t.metrics["client_cpu_us_per_op"] for t in known], [t.round for t in known]


def _stall_text(t: Trial) -> str:
    """Where trial ``t`` stopped (``metrics/noise.stalled``), or "": its series is per slice
    when measured side by side, else per second."""
    slice_s = float(t.metrics.get("slice_s") or 1.0)
    n, secs = stalled(t.series, slice_s, float(t.metrics.get("log_sampling") or 1.0))
    if not n:
        return ""
    unit = "slices" if t.metrics.get("slice_s") else "seconds"
    return (f"round {t.round + 1}: no operation completed in {n} of its {len(t.series)} "
            f"{unit} ({secs:.2g} s)")


def overall(comps_by_variant: Mapping[str, Iterable[Comparison]],
            confidence: float = 0.95) -> dict[str, Overall]:
    """Per variant, the geometric mean of its ratios: those with a finite positive ratio
    and interval (``effect.geometric_mean_ratio`` leaves the others out, so the count of
    workloads is of those it used; a workload with too few rounds has no interval)."""
    out = {}
    for vname, comps in comps_by_variant.items():
        good = [x for x in comps
                if all(math.isfinite(v) and v > 0 for v in (x.ratio, x.ci_low, x.ci_high))]
        if good:
            r, lo, hi = effect.geometric_mean_ratio(good, confidence)
            out[vname] = Overall(r, lo, hi, len(good))
    return out


def summarize(trials: Sequence[Trial], base: str, variants: Sequence[str],
              workloads: Sequence[WorkloadSpec], *, min_effect: float = 0.02,
              confidence: Level = 0.95, levels: Mapping[str, Level] | None = None,
              refused: Mapping[str, str] | None = None,
              stop_reasons: Mapping[str, str] | None = None) -> Summary:
    """The summary of an experiment: for each measure of each workload spec, a
    :class:`VariantSummary` per variant of ``variants`` (those still in the running, in
    order) that has trials, each compared with ``base``; rQPS tables of multi-step
    workloads; the geometric mean per variant.

    ``confidence`` may be a function of the number of rounds a measure has (a run that
    looked after every round judges each measure at the level of its last look,
    decide/sequential.py); ``levels`` gives a workload (by label) its own, where its looks
    had their own last round.  The summary's own ``confidence`` is then the level of the
    measure with the most rounds."""
    results: list[WorkloadResult] = []
    rqps: list[RqpsTable] = []
    comps_by_variant: dict[str, list[Comparison]] = {}
    deepest, top = 0, level_for(confidence, 0)
    for ws in workloads:
        c = ws.params.clients
        ws_level = (levels or {}).get(ws.label, confidence)
        # a workload the budget stopped short of the rounds a paired interval needs says so
        short = ("before the budget ended"
                 if ended_by_budget((stop_reasons or {}).get(ws.label)) else "")
        step_qps: dict[str, dict[str, float]] = {}
        # a further round of one step is a round of them all: every step's, every config's
        stepped = [wname for wname, step, _ in measures(trials, ws) if step is not None]
        paces = [round_seconds(trials, wname, c) for wname in stepped]
        steps_round_s = (sum(p for p in paces if p) if stepped and all(paces) else None)
        for wname, step, unit in measures(trials, ws):
            n_rounds = rounds_of(trials, wname, c)
            level = level_for(ws_level, n_rounds)
            if n_rounds >= deepest:
                deepest, top = n_rounds, level
            per_variant: dict[str, VariantSummary] = {}
            comps: dict[str, Comparison] = {}
            cpu: dict[str, Comparison] = {}
            base_vals = values(trials, wname, base, c)
            mine = {v: [t for t in trials if t.workload == wname and t.variant == v
                        and t.clients == c] for v in variants}
            slow_rounds = shared_slow_rounds(_by_round(mine, "cpu_probe_us"))
            rises = {k: round_rise(_by_round(mine, k))
                     for k in ("cpu_probe_us", "client_cpu_us_per_op")}
            for v in variants:
                ts = mine[v]
                if not ts:
                    continue
                vs = variant_summary(ts, slow_rounds, {k: r.get(v, {}) for k, r in rises.items()})
                per_variant[v] = vs
                if not vs.values:
                    continue
                if step is not None:    # the level the effect compares (decide/effect.py)
                    step_qps.setdefault(v, {})[step] = stats.geometric_mean(vs.values)
                if v != base and base_vals:
                    kw = dict(min_effect=min_effect, confidence=level, short_note=short)
                    cmp = judge_pair(trials, wname, base, v, c, **kw)
                    comps[v] = cmp
                    comps_by_variant.setdefault(v, []).append(cmp)
                    cost = judge_pair(trials, wname, base, v, c, metric=JUDGED_COST.key,
                                      higher_is_better=JUDGED_COST.better == "higher", **kw)
                    if cost is not None and cost.method != "none":
                        cpu[v] = cost
            shared = stats.shared_drift([(v.values, [t.round for t in trials
                                                      if t.workload == wname and t.variant == n
                                                      and t.clients == c and _valid(t)])
                                         for n, v in per_variant.items()])
            cli = stats.shared_drift([_cli_series(ts) for ts in mine.values()])
            results.append(WorkloadResult(
                wname, ws.workload.name, ws.name, step, c, unit, per_variant, comps, cpu,
                drift_per_round=shared.per_round if shared else None,
                drift_total=shared.total if shared else None,
                drift_p=shared.p_value if shared else None,
                drifting=bool(shared and shared.significant),
                round_s=round_seconds(trials, wname, c) if step is None else steps_round_s,
                slow_rounds=slow_rounds,
                states=split_states({(t.variant, t.round): buffer_accesses_per_op(t.metrics)
                                     for ts in mine.values() for t in ts if _valid(t)}),
                client_cpu_drift_total=cli.total if cli else None,
                client_cpu_drift_p=cli.p_value if cli else None))
        if ws.is_steps and base in step_qps:
            rows = [RqpsRow(r["variant"], r["qps"], r["rqps"])
                    for r in stats.rqps_table(step_qps, base)]
            # from the geometric means the rQPS table's QPS column shows, so the sentence
            # and the numbers beside it agree
            said = {v: getattr(ws.workload, "conclusion", lambda q: None)(q)
                    for v, q in step_qps.items()}
            rqps.append(RqpsTable(ws.name, c, rows, {v: t for v, t in said.items() if t}))
    return Summary(base=base, min_effect=min_effect, confidence=top,
                   workloads=results, rqps=rqps, refused=dict(refused or {}),
                   stop_reasons=dict(stop_reasons or {}),
                   overall=overall(comps_by_variant, top))


def head_to_head(trials: Sequence[Trial], workloads: Iterable[WorkloadSpec], base: str,
                 other: str, min_effect: float = 0.02, confidence: float = 0.95
                 ) -> list[HeadToHead]:
    """``other`` judged directly against ``base`` on every (single-interval) workload."""
    rows = []
    for ws in workloads:
        c = judge_pair(trials, ws.workload.name, base, other, ws.params.clients,
                       min_effect=min_effect, confidence=confidence)
        if c is not None:
            rows.append(HeadToHead(ws.workload.name, ws.params.clients, base, other, c))
    return rows


def calibration(a: list[float], b: list[float], trial_s: float, budget_s: float,
                min_effect: float = 0.02, rounds_a: list[int] | None = None,
                rounds_b: list[int] | None = None, setup_s: float = 0.0) -> Calibration:
    """The noise floor of an A/A experiment and what a budget can detect (pure).  With the
    rounds of both sides the detectable effect is the paired analysis's, from the spread of
    the rounds' log ratios, as the verdicts are made (``effect.compare``); without, the
    unpaired one from the pooled CV.  ``setup_s``: what the budget spends before its first
    round (the data on the servers, the burn-in: ``decide/budget.need_of``), not on trials."""
    sa, sb, pooled = stats.summarize(a), stats.summarize(b), stats.summarize(a + b)
    aa = effect.compare(a, b, min_effect=min_effect, base_rounds=rounds_a,
                        other_rounds=rounds_b)
    per_side = int(max(0.0, budget_s - setup_s) // (2 * trial_s)) if trial_s > 0 else 0
    cv = pooled.cv
    pair_sd = None
    if aa.method == "paired-log-t" and rounds_a is not None and rounds_b is not None:
        pair_sd = statistics.stdev(effect.pair_by_round(a, rounds_a, b, rounds_b))
    return Calibration(
        cv_a=sa.cv, cv_b=sb.cv, noise_floor_cv=cv, aa=aa, trial_s=trial_s,
        budget_s=budget_s, trials_per_variant=per_side,
        min_detectable_effect=stats.min_detectable_effect(cv, per_side, pair_sd=pair_sd),
        trials_needed={f"{e:.0%}": stats.trials_needed(cv, e, pair_sd=pair_sd)
                       for e in (0.02, 0.05, 0.1)},
        pair_sd=pair_sd, setup_s=setup_s)


def trial_row(trials: Sequence[Trial]) -> BenchRow:
    """Median of each headline metric over one client count's valid trials (``trials``
    counts them all); the three wait events with the largest mean share of samples."""
    valid = [t for t in trials if _valid(t)]

    def med(key: str, sub: str | None = None) -> float | None:
        vals = [(t.metrics.get(key) or {}).get(sub) if sub else t.metrics.get(key)
                for t in valid]
        return stats.median_of([v for v in vals if isinstance(v, (int, float))])
    waits: dict[str, float] = {}
    for t in valid:
        for w in t.metrics.get("waits", []):
            waits[w["event"]] = waits.get(w["event"], 0) + w["share"] / len(valid)
    top = sorted(waits.items(), key=lambda kv: -kv[1])[:3]
    return BenchRow(
        trials=len(trials), throughput=stats.median_of([t.throughput for t in valid]),
        lat_mean=med("latency_ms", "mean"), lat_p50=med("latency_ms", "p50"),
        lat_p95=med("latency_ms", "p95"), lat_p99=med("latency_ms", "p99"),
        **{c.field: med(c.key) for c in ROW_COSTS},
        top_waits=", ".join(f"{k} {v:.0%}" for k, v in top))
