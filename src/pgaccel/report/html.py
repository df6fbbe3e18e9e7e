"""The report of any run as one self-contained HTML file (Jinja2 template, inline CSS,
charts as inline SVG; no external URL) and as Markdown that pastes into a pull request.
Input: the ``run.json`` document the experiment writes; what is shown comes from
:mod:`.view`, the charts from :mod:`.charts`."""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any, Mapping

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from ..util import atomic_write
from ..metrics.registry import ROW_COSTS
from . import charts, facts, step_charts
from . import format as fmt
from . import stepview, view
from .curves import curves as curves_of
from .fidelity import fidelity_of, g3
from .profile import profiles_html, profiles_markdown
from .terminal import looks_note

# how the trials were taken, by run.json's ``measurement.design`` (runs without one took
# their configs one after the other)
ONE_AT_A_TIME = (
    "Each trial restarts the server with its configuration and checks the settings in "
    "pg_settings, restores the data from a template for writing workloads, runs CHECKPOINT, "
    "prewarms every relation (OS cache, then shared buffers), warms up until the per-second "
    "rate is steady, then measures. Configurations run in a counterbalanced order ({order}). ")
SIDE_BY_SIDE = (
    "Every {what} ran on a throwaway server of its own, each brought to the state its trials "
    "start from (its settings checked in pg_settings, fresh data for a workload that writes, "
    "CHECKPOINT; for a workload of a set length also every relation prewarmed and a "
    "warm-up); in each round they took turns {turns}, one running at a time, in an order "
    "that moves every round (the facts' \"measured\" row says how), so a change in the "
    "host's speed falls on every {what} of a round alike. ")
JUDGED = (
    "The effect is the ratio of geometric means, at the centre of its {level} interval: a "
    "paired t interval on the log ratio of each round's trials (drift shared by a round "
    "cancels), Welch's t on log values when trials cannot be paired. Equivalent means the "
    "whole interval lies within the minimum effect ({min_effect}).")


def method(doc: Mapping[str, Any], s: Any) -> str:
    """The method paragraph both reports end with: how the trials were taken (side by side
    or one after the other, as the run did), at the run's level and minimum effect, with the
    note on sequential looks when rounds were added until decided."""
    note = looks_note(s)
    if (doc.get("measurement") or {}).get("design") == "side by side":
        stepped = any((t.get("metrics") or {}).get("step") for t in doc.get("trials") or [])
        how = SIDE_BY_SIDE.format(what="variant" if doc.get("kind") == "lab" else "config",
                                  turns="step by step, each step in short slices or turns"
                                  if stepped else "in short slices")
    else:
        how = ONE_AT_A_TIME.format(order=doc.get("order", "?"))
    return (how + JUDGED.format(level=fmt.level(s.confidence),
                                min_effect=fmt.percent(s.min_effect))
            + (" " + note if note else ""))


@lru_cache(maxsize=1)
def _env() -> Environment:
    """report.html.j2 autoescaped; report.md.j2 as text (Markdown is not HTML)."""
    return Environment(loader=PackageLoader("pgaccel", "report/templates"),
                       autoescape=lambda name: bool(name and name.endswith(".html.j2")),
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                       keep_trailing_newline=True)


def _css() -> Markup:
    loader = _env().loader
    assert loader is not None
    return Markup(loader.get_source(_env(), "report.css")[0])


def _measure_charts(m: view.Measure, level: str, base: str, min_effect: float
                    ) -> dict[str, list[Markup]]:
    """A measure's charts by where they go: beside the main table, the latency table and
    the cost table."""
    w = m.result
    name = w.workload
    out: dict[str, list[str]] = {"main": [], "latency": [], "cost": []}
    out["main"].append(charts.trials_chart(name, w.unit, {n: v.values for n, v in
                                                          w.variants.items()}, w.comparisons,
                                              level))
    if m.round_ratios:
        out["main"].append(charts.rounds_chart(name, base, m.round_ratios, w.comparisons,
                                               min_effect, level))
    warm = {r.name: r.warmup_s for r in m.rows}
    if any(m.series.values()):
        out["main"].append(charts.series_chart(name, fmt.unit_label(w.unit), m.series, warm,
                                               checkpoints=m.checkpoints, slice_s=m.slice_s))
    if any(any(r.latency.get(k) for k in ("p50", "p95", "p99", "max")) for r in m.rows):
        out["latency"].append(charts.percentiles_chart(name, {r.name: r.latency
                                                              for r in m.rows}))
    if any(r.cdf for r in m.rows):
        out["latency"].append(charts.cdf_chart(name, {r.name: r.cdf for r in m.rows if r.cdf}))
    if any(m.latency_series.values()):
        out["latency"].append(charts.series_chart(name, "median latency (ms)",
                                                  m.latency_series, warm, what="latency",
                                                  slice_s=m.slice_s))
    if any(r.costs.get("server_us") or r.costs.get("client_us") for r in m.rows):
        out["cost"].append(charts.cost_chart(name, {r.name: r.costs for r in m.rows}))
    if any(r.waits for r in m.rows):
        out["cost"].append(charts.waits_chart(name, {r.name: r.waits for r in m.rows}))
    return {k: [Markup(x) for x in v] for k, v in out.items()}


def context(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the template shows (charts rendered, numbers from :mod:`.view`)."""
    doc = view.parsed(doc)
    s = view.summary_of(doc)
    base = s.base or "baseline"
    ci = view.ci_label(s)
    host = doc.get("host") or {}
    measures = []
    for m in view.measures(doc):
        level = fmt.level(m.result.level(s.confidence))
        measures.append({"result": m.result, "rows": m.rows, "warnings": m.warnings,
                         "title": m.title, "ci": f"{level} CI",
                         "charts": _measure_charts(m, level, base, s.min_effect)})
    sweeps = []
    for wl, points in view.sweeps(doc).items():
        clients = sorted({c for pts in points.values() for c, _ in pts})
        unit = next((w.unit for w in s.single if w.workload == wl), "tps")
        sweeps.append({"workload": wl, "clients": clients,
                       "points": {n: dict(p) for n, p in points.items()},
                       "chart": Markup(charts.sweep_chart(wl, unit, points))})
    curves = []
    for c in curves_of(doc):
        if c.kind == "degree":
            chart = charts.speedup_chart(c.workload, {n: c.speedup(n) for n in c.points})
        else:
            chart = charts.size_chart(c.workload, c.unit,
                                      {n: [(x, y) for x, y, _ in p]
                                       for n, p in c.points.items()}, c.shared_buffers)
        curves.append({"curve": c, "chart": Markup(chart)})
    step_tables: dict[tuple, list] = {}
    for w in s.steps:
        step_tables.setdefault((w.key, w.clients), []).append(w)
    layers: dict[tuple, list] = {}
    for st in doc.get("layers") or []:
        layers.setdefault((st["workload"], st["clients"]), []).append(st)
    overall = [{"name": n, "workloads": o.workloads, "effect": fmt.pct_change(o.geomean_ratio),
                "interval": fmt.interval(o.ci_low, o.ci_high)}
               for n, o in s.overall.items() if o.workloads > 1]
    return {
        "css": _css(), "kind": doc.get("kind") or "run", "run_id": doc.get("run_id", ""),
        "status": doc.get("status", ""),
        "subtitle": " · ".join(x for x in (
            doc.get("target") or "", "PostgreSQL " + (", ".join(facts.server_versions(doc))
                                                      or "?"),
            f"{host.get('logical_cpus', '?')} CPUs, "
            f"{fmt.size(host.get('memory_total_bytes') or 0)}") if x),
        "headlines": view.headlines(doc), "overall": overall, "base": base, "ci": ci,
        "refused": s.refused, "facts": facts.facts(doc), "calibration": s.calibration,
        "measures": measures, "sweeps": sweeps, "curves": curves,
        "step_tables": [{"key": k[0], "clients": k[1], "entries": v,
                         "ci": view.ci_label(s, v[0])} for k, v in step_tables.items()],
        "step_matrices": [step_section(m) for m in
                          stepview.step_matrices(s, doc.get("trials") or [],
                                                 (doc.get("spec") or {}).get("findings"))
                          if len(m.variants) > 1],
        "layers": [{"workload": k[0], "clients": k[1], "rows": v,
                    "chart": Markup(charts.waterfall_chart(k[0], v,
                                                           fmt.level(s.confidence)))}
                   for k, v in layers.items()],
        "stack": doc.get("stack"), "stack_notes": doc.get("stack_notes") or [],
        "profiles": Markup("\n".join(profiles_html(doc.get("profiles") or []))),
        "pgtune": s.tuned_vs_pgtune or [], "plan": view.plan_diff(doc),
        "explained": view.group_effects_rows(s, view.group_settings(doc.get("variants") or [])),
        "method": method(doc, s),
        "fmt": fmt, "css_class": view.CSS_CLASS, "rqps_class": view.rqps_class,
        "step_costs": stepview.STEP_COSTS, "cost_text": stepview.cost_text,
        "clients": view.clients, "costs": ROW_COSTS,
        "fidelity": fidelity_of(doc.get("trials") or []), "g3": g3,
    }


def step_section(m: "stepview.StepMatrix") -> dict[str, Any]:
    """A step workload's rQPS table with its heatmap and the per-operation costs' bars."""
    others = [v for v in m.variants if v != m.base]
    cells = {k: c for k, c in m.cells.items()}
    heat = step_charts.rqps_heatmap(m.key, m.base, m.steps, others,
                               {k: c.rqps for k, c in cells.items()},
                               {k: c.verdict for k, c in cells.items()})
    bars = [step_charts.step_costs_chart(m.key, m.base, label, m.steps,
                                    {v: {s: (m.cell(v, s).cost_ratios.get(key)
                                             if m.cell(v, s) else None) for s in m.steps}
                                     for v in others})
            for key, label in stepview.STEP_COSTS
            if any(fmt.known(c.cost_ratios.get(key)) for c in cells.values())]
    return {"m": m, "heatmap": Markup(heat), "cost_charts": [Markup(b) for b in bars],
            "chance": stepview.chance_note(m), "cost_note": stepview.cost_note(m),
            "undecided": [t for t in (stepview.undecided_note(m, v) for v in others) if t]}


def render_html(doc: Mapping[str, Any]) -> str:
    """The report of a run.json document (``doc``)."""
    return _env().get_template("report.html.j2").render(**context(doc))


def markdown_context(doc: Mapping[str, Any]) -> dict[str, Any]:
    """What the Markdown template shows: the HTML report's numbers without its charts."""
    doc = view.parsed(doc)
    s = view.summary_of(doc)
    return {
        "kind": doc.get("kind") or "run", "run_id": doc.get("run_id"),
        "headlines": view.headlines(doc), "facts": facts.facts(doc),
        "base": s.base or "baseline", "ci": view.ci_label(s),
        "measures": [{"result": m.result, "rows": m.rows, "warnings": m.warnings,
                      "ci": view.ci_label(s, m.result)} for m in view.measures(doc)],
        "step_matrices": [m for m in stepview.step_matrices(
            s, doc.get("trials") or [], (doc.get("spec") or {}).get("findings"))
            if len(m.variants) > 1],
        "step_costs": stepview.STEP_COSTS, "cost_text": stepview.cost_text,
        "cost_note": stepview.cost_note, "undecided_note": stepview.undecided_note,
        "layer_rows": doc.get("layers") or [], "stack": doc.get("stack"),
        "pgtune": s.tuned_vs_pgtune or [], "plan": view.plan_diff(doc),
        "explained": view.group_effects_rows(s, view.group_settings(doc.get("variants") or [])),
        "profiles": "\n".join(profiles_markdown(doc.get("profiles") or [])),
        "method": method(doc, s), "fmt": fmt, "clients": view.clients,
        "fidelity": fidelity_of(doc.get("trials") or []), "g3": g3,
    }


def render_markdown(doc: Mapping[str, Any]) -> str:
    """The report as Markdown (``templates/report.md.j2``): verdict lines, the main table
    per measure, rQPS, layers, the head-to-head with PGTune, the plan, the method."""
    return _env().get_template("report.md.j2").render(**markdown_context(doc))


def write_reports(run_dir: str, doc: Mapping[str, Any]) -> dict[str, str]:
    paths = {"html": os.path.join(run_dir, "report.html"),
             "markdown": os.path.join(run_dir, "report.md")}
    atomic_write(paths["html"], render_html(doc))
    atomic_write(paths["markdown"], render_markdown(doc))
    return paths
