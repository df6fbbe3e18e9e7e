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
from . import charts, facts
from . import format as fmt
from . import view
from .curves import curves as curves_of
from .profile import profiles_html, profiles_markdown
from .terminal import looks_note

METHOD = (
    "Each trial restarts the server with its configuration and checks the settings in "
    "pg_settings, restores the data from a template for writing workloads, runs CHECKPOINT, "
    "prewarms every relation (OS cache, then shared buffers), warms up until the per-second "
    "rate is steady, then measures. Configurations run in a counterbalanced order ({order}). "
    "The effect is the ratio of geometric means, at the centre of its {level} interval: a "
    "paired t interval on the log ratio of each round's trials (drift shared by a round "
    "cancels), Welch's t on log values when trials cannot be paired. Equivalent means the "
    "whole interval lies within the minimum effect ({min_effect}).")


@lru_cache(maxsize=1)
def _env() -> Environment:
    env = Environment(loader=PackageLoader("pgaccel", "report/templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return env


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
        "rqps": [{"workload": r.workload, "clients": r.clients, "rows": r.rows,
                  "steps": list(r.rows[0].rqps) if r.rows else []} for r in s.rqps
                 if len(r.rows) > 1],
        "layers": [{"workload": k[0], "clients": k[1], "rows": v,
                    "chart": Markup(charts.waterfall_chart(k[0], v,
                                                           fmt.level(s.confidence)))}
                   for k, v in layers.items()],
        "stack": doc.get("stack"), "stack_notes": doc.get("stack_notes") or [],
        "profiles": Markup("\n".join(profiles_html(doc.get("profiles") or []))),
        "pgtune": s.tuned_vs_pgtune or [], "plan": view.plan_diff(doc),
        "method": METHOD.format(order=doc.get("order", "?"), level=fmt.level(s.confidence),
                                min_effect=fmt.percent(s.min_effect))
        + (" " + looks_note(s) if looks_note(s) else ""),
        "fmt": fmt, "css_class": view.CSS_CLASS, "rqps_class": view.rqps_class,
        "clients": view.clients, "costs": ROW_COSTS,
    }


def render_html(doc: Mapping[str, Any]) -> str:
    """The report of a run.json document (``doc``)."""
    return _env().get_template("report.html.j2").render(**context(doc))


def render_markdown(doc: Mapping[str, Any]) -> str:
    """The report as Markdown: verdict lines, the main table per measure, the method."""
    doc = view.parsed(doc)
    s = view.summary_of(doc)
    base = s.base or "baseline"
    ci = view.ci_label(s)
    lines = [f"# pgaccel {doc.get('kind') or 'run'} {doc.get('run_id')}", ""]
    for h in view.headlines(doc):
        lines.append(f"- **{h.subject}**: {h.compared + ' ' if h.compared else ''}"
                     f"{'**' + h.verdict + '**, ' if h.verdict else ''}{h.effect} "
                     f"({h.interval})")
        lines += [f"  - ⚠ {w}" for w in h.warnings]
    lines += ["", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in facts.facts(doc)]
    lines.append("")
    for m in view.measures(doc):
        w = m.result
        lines += [f"## {w.workload} ({w.clients} clients, {w.unit})", "",
                  f"| config | trials | median | CV | p95 ms | server µs/op | vs {base} "
                  f"({view.ci_label(s, w)}) "
                  "| verdict |", "|---|---:|---:|---:|---:|---:|---:|---|"]
        for r in m.rows:
            v = w.variants[r.name]
            cmp = w.comparisons.get(r.name)
            ratio = fmt.ratio_ci(cmp.ratio, cmp.ci_low, cmp.ci_high) if cmp else "base"
            lines.append(f"| {r.name} | {v.n} | {fmt.number(v.median)} | {fmt.cv(v.cv)} | "
                         f"{fmt.ms(r.latency.get('p95'))} | {fmt.us(r.costs.get('server_us'))} | {ratio} | "
                         f"{cmp.verdict if cmp else ''} |")
        lines.append("")
        lines += [f"> ⚠ {line}" for line in m.warnings]
        lines += [""] if m.warnings else []
    for r in s.rqps:
        steps = list(r.rows[0].rqps) if r.rows else []
        lines += [f"## rQPS of {r.workload} ({r.clients} clients)", "",
                  "| config | " + " | ".join(steps) + " |", "|---|" + "---:|" * len(steps)]
        for row in r.rows:
            cells = [fmt.number(row.qps[x]) if row.variant == base else fmt.ratio(row.rqps[x])
                     for x in steps]
            lines.append(f"| {row.variant} | " + " | ".join(cells) + " |")
        lines.append("")
    steps_ = doc.get("layers") or []
    if steps_:
        lines += [f"## What each layer is worth (run --stack {doc.get('stack')})", "",
                  f"| workload | layer | vs the layer before ({ci}) | verdict | "
                  f"vs baseline ({ci}) | verdict |", "|---|---|---:|---|---:|---|"]
        for r in steps_:
            cells = []
            for key in ("vs_previous", "vs_baseline"):
                c = r.get(key)
                cells += ([fmt.ratio_ci(c["ratio"], c.get("ci_low"), c.get("ci_high")),
                           str(c.get("verdict", ""))] if c else ["-", ""])
            lines.append(f"| {r['workload']} c={r['clients']} | {r['previous']} → "
                         f"{r['layer']} | " + " | ".join(cells) + " |")
        lines.append("")
    if s.tuned_vs_pgtune:
        lines += [f"## pgaccel's plan vs PGTune's (ratio of geometric means, {ci})", "",
                  "| workload | tuned / pgtune | interval | verdict |", "|---|---:|---:|---|"]
        lines += [f"| {r.workload} c={r.clients} | {fmt.pct_change(r.comparison.ratio)} | "
                  f"{fmt.interval(r.comparison.ci_low, r.comparison.ci_high)} | "
                  f"{r.comparison.verdict} |" for r in s.tuned_vs_pgtune]
        lines.append("")
    lines += profiles_markdown(doc.get("profiles") or [])
    plan = view.plan_diff(doc)
    if plan:
        lines += ["## What the tuned configuration changes", "",
                  "| setting | current | proposed | restart | why |", "|---|---|---|---|---|"]
        lines += [f"| `{c['name']}` | {c.get('current')} | {c['proposed']} | "
                  f"{'yes' if c.get('restart') else ''} | {c.get('reason', '')} |" for c in plan]
        lines.append("")
    lines += ["**Method.** Configs interleaved in a counterbalanced order "
              f"({doc.get('order', '?')}), each trial restarted, restored, checkpointed, "
              "prewarmed and warmed up until steady.",
              f"Effect: ratio of geometric means with a {fmt.level(s.confidence)} paired t "
              "interval on log ratios per round (Welch when unpaired).",
              f"Equivalent: the whole interval within ±{fmt.percent(s.min_effect)}.",
              *([looks_note(s)] if looks_note(s) else []), ""]
    return "\n".join(lines)


def write_reports(run_dir: str, doc: Mapping[str, Any]) -> dict[str, str]:
    paths = {"html": os.path.join(run_dir, "report.html"),
             "markdown": os.path.join(run_dir, "report.md")}
    atomic_write(paths["html"], render_html(doc))
    atomic_write(paths["markdown"], render_markdown(doc))
    return paths
