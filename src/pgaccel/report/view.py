"""What a report shows, computed from a run.json document (pure: no files, no charts).

:func:`headlines` gives the verdict lines that open every report (the fact sheet is
``facts.py``), :func:`measures` one :class:`Measure` per workload and client count with the medians
over its trials of what the trials recorded (latency percentiles, CPU and I/O per operation,
buffer hit ratio, database size against shared_buffers, checkpoints, wait events), and
:func:`sweeps` the workloads measured at several client counts.  The HTML template, the
charts and the Markdown renderer read these; none of them computes a number of its own."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..decide.effect import log_ratio_by_round
from ..decide.judge import samples
from ..decide.model import Trial
from ..decide.results import Summary, WorkloadResult
from ..metrics.registry import ROW_COSTS
from ..pg.values import parse_size
from . import format as fmt
from .terminal import more_rounds_text, state_warnings

CSS_CLASS = {"faster": "faster", "slower": "slower", "equivalent": "eqv",
             "no significant difference": "nsd", "not enough evidence": "nee"}
DEFAULT_SHARED_BUFFERS = "128MB"


@dataclass(frozen=True)
class Headline:
    """One line at the top: a measure, what is compared, the verdict, effect, interval."""
    subject: str                  # "select-only, 4 clients"
    compared: str                 # "tuned vs baseline" ("" for a single config)
    verdict: str                  # the verdict word, or "" for a single config
    effect: str                   # "+42.4%" or "12,345 tps"
    interval: str                 # "95% CI +30.1% … +55.0%" or "median of 3 trials, CV 3%"
    warnings: tuple[str, ...] = ()

    @property
    def css(self) -> str:
        return CSS_CLASS.get(self.verdict, "")

    def text(self) -> str:
        head = f"{self.subject}: {self.compared + ' ' if self.compared else ''}"
        verdict = f"{self.verdict}, " if self.verdict else ""
        return f"{head}{verdict}{self.effect} ({self.interval})"


@dataclass(frozen=True)
class ConfigRow:
    """Medians over one config's trials of one measure."""
    name: str
    trials: int
    latency: dict[str, float | None]          # mean, p50, p95, p99, max (ms)
    cdf: list[tuple[float, float]]            # (quantile, ms), medians over the trials
    costs: dict[str, float | None]            # field of metrics.registry.ROW_COSTS -> median
    hit_ratio: float | None
    db_bytes: float | None
    shared_buffers: str
    fits: bool | None                         # the database fits in shared_buffers
    checkpoints: float | None
    waits: dict[str, float] = field(default_factory=dict)   # event -> mean share
    warmup_s: float | None = None


@dataclass(frozen=True)
class Measure:
    result: WorkloadResult
    rows: list[ConfigRow]
    series: dict[str, list[list[float]]]          # config -> every trial's per-second rate
    latency_series: dict[str, list[list[float]]]  # config -> per-second median latency (ms)
    warnings: tuple[str, ...]
    checkpoints: dict[str, list[float]] = field(default_factory=dict)  # config -> seconds
    slice_s: float | None = None    # side by side: each series point is a slice this long
    # compared config -> {round: its value over the base's in that round}, where the
    # comparison pairs rounds (the ratios its interval is built from)
    round_ratios: dict[str, dict[int, float]] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return f"{self.result.workload} — {clients(self.result.clients)}"


def clients(n: int) -> str:
    return f"{n} client" if n == 1 else f"{n} clients"


class Parsed(dict):
    """A run.json document whose summary and trials are parsed once, for one rendering
    (:func:`parsed`); every function here takes it or a plain document."""
    summary: Summary
    trials: tuple[Trial, ...]


def parsed(doc: Mapping[str, Any]) -> Parsed:
    """``doc`` with its summary and trials parsed, for a renderer that reads them many
    times (the HTML and Markdown reports)."""
    if isinstance(doc, Parsed):
        return doc
    out = Parsed(doc)
    out.summary = Summary.from_dict(doc.get("summary") or {})
    out.trials = tuple(Trial.from_dict(t) for t in doc.get("trials") or [])
    return out


def summary_of(doc: Mapping[str, Any]) -> Summary:
    if isinstance(doc, Parsed):
        return doc.summary
    return Summary.from_dict(doc.get("summary") or {})


def trials_of(doc: Mapping[str, Any]) -> list[Trial]:
    if isinstance(doc, Parsed):
        return list(doc.trials)
    return [Trial.from_dict(t) for t in doc.get("trials") or []]


def ci_label(s: Summary, w: WorkloadResult | None = None) -> str:
    """"95% CI": the summary's level, or the one measure ``w``'s intervals are at."""
    return f"{fmt.level(w.level(s.confidence) if w is not None else s.confidence)} CI"



def _thin(w: WorkloadResult, name: str) -> str | None:
    cmp = w.comparisons.get(name)
    if cmp is None or cmp.verdict != "not enough evidence":
        return None
    if not (math.isfinite(cmp.ci_low) and math.isfinite(cmp.ci_high)):
        # no interval at all (too few rounds, an invalid side): the comparison's own words
        return f"{name}: {cmp.explain}."
    n = min(v.n for v in w.variants.values()) if w.variants else 0
    more = more_rounds_text(cmp, w.round_s)
    then = (f"{more} (--rounds, --budget)" if more else
            "more rounds would probably not decide: any difference is small against this "
            "machine's noise")
    return (f"{name}: thin evidence after {n} trials per config (the interval spans "
            f"{fmt.interval(cmp.ci_low, cmp.ci_high)}); {then}.")


def _host_warnings(w: WorkloadResult) -> tuple[str, ...]:
    """One line for a measure's noisy trials (all configs: each config's first reason, said
    once where they agree), one per drifting config."""
    out = []
    noisy = {n: v for n, v in w.variants.items() if v.noisy_trials}
    if noisy:
        total = sum(v.n for v in w.variants.values())
        who = ", ".join(f"{n} {v.noisy_trials}" for n, v in noisy.items())
        reasons: dict[str, list[str]] = {}
        for n, v in noisy.items():
            reasons.setdefault(v.noise_why, []).append(n)
        why = (next(iter(reasons)) if len(reasons) == 1 else
               "; ".join(f"{', '.join(names)}: {r}" for r, names in reasons.items()))
        out.append(f"Noisy host in {sum(v.noisy_trials for v in noisy.values())} of {total} "
                   f"trials ({who}): {why}.")
    out += [x for x in state_warnings(w) if "drifted" in x or x.startswith("The CPUs ran")
            or " trials stalled (" in x]
    return tuple(out)


def headlines(doc: Mapping[str, Any]) -> list[Headline]:
    """The verdict lines: one per compared config and measure, or the median throughput
    of a single config; a calibration's noise floor; the layers of `run --stack`."""
    s = summary_of(doc)
    ci = ci_label(s)
    out: list[Headline] = []
    if s.calibration is not None:
        c = s.calibration
        out.append(Headline(
            "this machine's noise", "A/A", c.aa.verdict,
            f"smallest detectable difference {fmt.percent(c.min_detectable_effect)}",
            f"trial CV {fmt.cv(c.noise_floor_cv)}, {c.trials_per_variant} trials per config "
            f"in {fmt.minutes(c.budget_s)}"))
    from .fidelity import fidelity_of
    fids = {f.workload: f for f in fidelity_of(doc.get("trials") or [])}
    off = {k: f.line for k, f in fids.items() if f.attention}
    for w in s.single:
        ci = ci_label(s, w)
        subject = f"{w.workload}, {clients(w.clients)}"
        if w.workload in fids and fids[w.workload].coverage:   # a replay: what share of it
            subject += f" ({fids[w.workload].coverage})"
        host = _host_warnings(w) + ((off.pop(w.workload),) if w.workload in off else ())
        stop = s.stop_reasons.get(f"{w.workload} c={w.clients}")
        if not w.comparisons:
            for name, v in w.variants.items():
                out.append(Headline(subject, name if len(w.variants) > 1 else "", "",
                                    f"{fmt.number(v.median)} {w.unit}",
                                    f"median of {v.n} trial{'s' if v.n != 1 else ''}, "
                                    f"CV {fmt.cv(v.cv)}", host))
                host = ()
            continue
        for name, cmp in w.comparisons.items():
            thin = _thin(w, name)
            warn = [thin] if thin else []
            if stop and thin:
                warn.append(f"Stopped: {stop}")
                stop = None                    # said once per measure
            out.append(Headline(subject, f"{name} vs {s.base}", cmp.verdict,
                                fmt.pct_change(cmp.ratio),
                                f"{ci} {fmt.interval(cmp.ci_low, cmp.ci_high)}",
                                tuple(warn) + host))
            host = ()                  # said once per measure
    lone: dict[tuple, list[WorkloadResult]] = {}
    gone: dict[tuple, list[str]] = {}      # (key, clients, variant, why) -> its steps
    for w in s.steps:
        base = w.variants.get(s.base) if s.base else None
        if len(w.variants) > 1 and (base is None or base.n == 0):
            why = (base.note if base else "") or "no trial"
            out.append(Headline(f"{w.key}, {clients(w.clients)}", w.step or w.workload, "",
                                "not compared", f"no valid trial of {s.base} ({why})"))
        elif not w.comparisons:
            never = [(n, v) for n, v in w.variants.items() if n != s.base and v.n == 0]
            for name, v in never:      # ran, but no valid trial: not compared, and why
                gone.setdefault((w.key, w.clients, name, v.note or "no trial"),
                                []).append(w.step or w.workload)
            if not never:              # a lone config's steps are ranked by unit
                lone.setdefault((w.key, w.clients, w.unit), []).append(w)
    for (key, n, unit), ws in lone.items():
        for name in ws[0].variants:
            meds = [(w.step, w.variants[name].median) for w in ws if name in w.variants
                    and fmt.known(w.variants[name].median)]
            if meds:
                lo, hi = min(meds, key=lambda m: m[1]), max(meds, key=lambda m: m[1])
                out.append(Headline(f"{key}, {clients(n)}", name if len(ws[0].variants) > 1
                                    else "", "", f"{fmt.number(lo[1])} … {fmt.number(hi[1])} "
                                    f"{unit}", f"{len(meds)} step{'s' if len(meds) != 1 else ''}"
                                    f": lowest {lo[0]}, highest {hi[0]}; medians"))
    for r in s.rqps:
        for row in r.rows[1:]:
            vals = {k: v for k, v in row.rqps.items() if fmt.known(v)}
            if not vals:
                continue
            verdicts = [w.comparisons[row.variant].verdict for w in s.steps
                        if w.workload.startswith(r.workload + "/") and w.clients == r.clients
                        and row.variant in w.comparisons]
            counts = {v: verdicts.count(v) for v in dict.fromkeys(verdicts)}
            same = next(iter(counts)) if len(counts) == 1 else ""
            named = {v: [w.step for w in s.steps
                         if w.workload.startswith(r.workload + "/") and w.clients == r.clients
                         and row.variant in w.comparisons
                         and w.comparisons[row.variant].verdict == v]
                     for v in counts}
            out.append(Headline(
                f"{r.workload}, {clients(r.clients)}", f"{row.variant} vs {s.base}", same,
                f"rQPS {fmt.ratio(min(vals.values()))} … {fmt.ratio(max(vals.values()))}",
                "; ".join(f"{v}: {', '.join(named[v])}" for v in counts
                          if v != "not enough evidence")
                + ("; " if any(v != "not enough evidence" for v in counts) else "")
                + (f"{counts['not enough evidence']} not decided; "
                   if "not enough evidence" in counts else "")
                + f"{sum(v < 0.95 for v in vals.values())} below 0.95, "
                  f"{sum(v > 1.05 for v in vals.values())} above 1.05"))
    for (key, n, name, why), steps in gone.items():    # after the steps it was compared in
        out.append(Headline(f"{key}, {clients(n)}", f"{name} vs {s.base} in "
                            f"{', '.join(steps)}", "", "not compared",
                            f"no valid trial of {name} ({why})"))
    return out


def median_of(xs: list[Any]) -> float | None:
    vals = [float(x) for x in xs if fmt.known(x)]
    return statistics.median(vals) if vals else None


def shared_buffers_by_config(doc: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for v in doc.get("variants") or []:
        if isinstance(v, dict) and v.get("name"):
            sb = (v.get("settings") or {}).get("shared_buffers")
            out[v["name"]] = str(sb) if sb else DEFAULT_SHARED_BUFFERS
    return out


def _row(name: str, trials: list[Trial], shared_buffers: str) -> ConfigRow:
    m = [t.metrics or {} for t in trials]
    pg = [x.get("pg") or {} for x in m]
    lat = {k: median_of([(x.get("latency_ms") or {}).get(k) for x in m])
           for k in ("mean", "p50", "p95", "p99", "max")}
    cdfs = [dict((q, v) for q, v in (x.get("latency_ms") or {}).get("cdf") or []) for x in m]
    qs = sorted(set.intersection(*(set(c) for c in cdfs))) if cdfs and all(cdfs) else []
    cdf = [(q, statistics.median(c[q] for c in cdfs)) for q in qs]
    waits: dict[str, float] = {}
    for x in m:
        for w in x.get("waits") or []:
            waits[w["event"]] = waits.get(w["event"], 0.0) + w.get("share", 0.0) / len(m)
    db = median_of([p.get("db_size_bytes") for p in pg])
    try:
        sb_bytes = parse_size(shared_buffers)
        shared_buffers = fmt.size(sb_bytes)
    except (ValueError, TypeError):
        sb_bytes = None
    return ConfigRow(
        name=name, trials=len(trials), latency=lat, cdf=cdf,
        costs={c.field: median_of([x.get(c.key) for x in m]) for c in ROW_COSTS},
        hit_ratio=median_of([p.get("buffer_hit_ratio") for p in pg]),
        db_bytes=db, shared_buffers=shared_buffers,
        fits=(db <= sb_bytes) if db is not None and sb_bytes else None,
        checkpoints=median_of([p.get("checkpoints") for p in pg]),
        waits=dict(sorted(waits.items(), key=lambda kv: -kv[1])),
        warmup_s=median_of([t.warmup_s for t in trials]))


def measures(doc: Mapping[str, Any]) -> list[Measure]:
    """Every single-interval measure with its configs' rows and per-second series."""
    s = summary_of(doc)
    trials = trials_of(doc)
    sbs = shared_buffers_by_config(doc)
    out = []
    for w in s.single:
        mine = [t for t in trials if t.workload == w.workload and t.clients == w.clients]
        rows, series, lat = [], {}, {}
        for name in w.variants:
            ts = [t for t in mine if t.variant == name]
            rows.append(_row(name, ts, sbs.get(name, DEFAULT_SHARED_BUFFERS)))
            series[name] = [t.series for t in ts if t.series]
            lat[name] = [t.latency_series for t in ts if t.latency_series]
        ckpts = {name: [x for t in mine if t.variant == name
                        for x in (t.metrics or {}).get("checkpoint_s") or []]
                 for name in w.variants}
        sliced = {(t.metrics or {}).get("slice_s") for t in mine
                  if (t.metrics or {}).get("design") == "side by side"}
        out.append(Measure(w, rows, series, lat, tuple(state_warnings(w)), ckpts,
                           slice_s=sliced.pop() if len(sliced) == 1 else None,
                           round_ratios=round_ratios(mine, w, s.base)))
    return out


def round_ratios(trials: list[Trial], w: WorkloadResult, base: str | None
                 ) -> dict[str, dict[int, float]]:
    """Each paired comparison's per-round ratio, other over ``base``: the pairs its
    interval is built from (decide/judge.py's samples, decide/effect.py's pairing)."""
    out = {}
    b = samples(trials, w.workload, base, w.clients) if base else ([], [])
    for name, c in w.comparisons.items():
        o = samples(trials, w.workload, name, w.clients)
        if c is not None and c.method == "paired-log-t" and b[0] and o[0]:
            out[name] = {r: math.exp(x) for r, x in log_ratio_by_round(*b, *o).items()}
    return out


def sweeps(doc: Mapping[str, Any]) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """Workloads measured at two or more client counts: config -> (clients, median)."""
    by: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for w in summary_of(doc).single:
        for name, v in w.variants.items():
            by.setdefault(w.workload, {}).setdefault(name, []).append((w.clients, v.median))
    return {wl: pts for wl, pts in by.items()
            if len({c for p in pts.values() for c, _ in p}) >= 2}


def plan_diff(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The PostgreSQL settings the tuned config changes (current -> proposed)."""
    plan = (doc.get("plan") or {}).get("changes") or []
    return [c for c in plan if c.get("layer") == "postgres" and not c.get("advice_only")
            and str(c.get("current")) != str(c.get("proposed"))]


def rqps_class(x: Any) -> str:
    """The Insert Benchmark's colouring: below 0.95 and above 1.05 stand out."""
    if not fmt.known(x):
        return ""
    return "slower" if x < 0.95 else "faster" if x > 1.05 else ""


def group_effects_rows(summary, settings_of: dict[str, list[str]]) -> list[dict[str, Any]]:
    """``run --explain``'s numbers per workload (pure): each group's effect (the whole plan
    against the plan without it), and the product of those effects beside the whole plan's
    against the base, with whether it falls in that interval (leave-one-out effects add up
    only where the groups do not interact)."""
    out = []
    whole = {(w.workload, w.clients): w.comparisons.get("tuned") for w in summary.single}
    by: dict[tuple, list] = {}
    for r in summary.explained or []:
        by.setdefault((r.workload, r.clients), []).append(r)
    for key, rows in by.items():
        product = 1.0
        groups = []
        for r in rows:
            g = r.base.removeprefix("without-")
            product *= r.comparison.ratio
            groups.append({"group": g, "settings": settings_of.get(g, []),
                           "comparison": r.comparison})
        w = whole.get(key)
        out.append({"workload": key[0], "clients": key[1], "groups": groups,
                    "product": product, "whole": w,
                    # None: the whole plan has no interval yet to hold the product
                    "within": (None if w is None or not (math.isfinite(w.ci_low)
                                                          and math.isfinite(w.ci_high))
                               else w.ci_low <= product <= w.ci_high)})
    return out



def group_settings(variants) -> dict[str, list[str]]:
    """Each ``without-GROUP`` config's missing settings against ``tuned``: the group's
    settings in the plan (``variants``: dicts or objects with ``name`` and ``settings``)."""
    def get(v, k):
        return v.get(k) if isinstance(v, Mapping) else getattr(v, k)
    by = {get(v, "name"): dict(get(v, "settings") or {}) for v in variants}
    whole = by.get("tuned") or {}
    return {n.removeprefix("without-"): [k for k in whole if k not in st]
            for n, st in by.items() if n.startswith("without-")}
