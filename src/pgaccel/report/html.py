"""A self-contained HTML report of a run (inline CSS, charts as embedded PNG) and the same
content as Markdown.  Input: the ``run.json`` document the experiment writes."""

from __future__ import annotations

import base64
import html
import os
from typing import Any

from ..lab.results import Summary
from ..lab.model import Trial
from ..util import atomic_write
from . import charts
from . import format as fmt
from .profile import profiles_html, profiles_markdown
from .terminal import state_warnings

CSS = """
body{font-family:-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif;margin:2rem auto;
max-width:1100px;color:#222;line-height:1.45;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
.sub{color:#666;margin-top:0}table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem}
td,th{border-bottom:1px solid #e5e5e5;padding:.3rem .6rem;text-align:right}
th{background:#f6f6f6}td:first-child,th:first-child{text-align:left}
.faster{color:#17803d;font-weight:600}.slower{color:#b42318;font-weight:600}
.nsd{color:#8a6d00}.eqv{color:#1f6f8b}.nee{color:#7a3e9d}.charts img{max-width:49%;margin-right:1%}
.verdict{font-size:1.1rem;padding:.6rem .9rem;background:#f6f8fa;border-radius:6px;margin:.4rem 0}
code{background:#f2f2f2;padding:0 .25rem;border-radius:3px}.small{font-size:.85rem;color:#555}
.warn{background:#fff6dd;border-left:4px solid #c98a00;padding:.3rem .7rem;font-size:.9rem}
"""

_CLASS = {"faster": "faster", "slower": "slower", "equivalent": "eqv",
          "no significant difference": "nsd",
          "not enough evidence": "nee"}


def _img(png: bytes, alt: str) -> str:
    return (f'<img alt="{html.escape(alt)}" src="data:image/png;base64,'
            f'{base64.b64encode(png).decode()}">')


def _summary(doc: dict[str, Any]) -> Summary:
    return Summary.from_dict(doc.get("summary") or {})


def render_html(doc: dict[str, Any]) -> str:
    """The report of a run.json document (``doc``)."""
    s = _summary(doc)
    base = s.base or "baseline"
    ci = f"{fmt.level(s.confidence)} CI"
    host = doc.get("host") or {}
    server = doc.get("server") or {}
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>pgaccel run "
             f"{html.escape(str(doc.get('run_id')))}</title><style>{CSS}</style></head><body>",
             f"<h1>pgaccel run {html.escape(str(doc.get('run_id')))}</h1>",
             f"<p class='sub'>{html.escape(str(doc.get('target', '')))} · PostgreSQL "
             f"{html.escape(str(server.get('version', '?')))} · {host.get('logical_cpus', '?')} CPUs, "
             f"{fmt.size(host.get('memory_total_bytes') or 0)} · {host.get('cpu_model', '')}"
             f" · status {html.escape(str(doc.get('status')))}</p>"]
    for vname, o in s.overall.items():
        parts.append(f"<div class='verdict'><b>{html.escape(vname)}</b> vs {html.escape(base)} "
                     f"over {o.workloads} workload(s): geometric mean "
                     f"<b>{fmt.pct_change(o.geomean_ratio)}</b> ({ci} "
                     f"{fmt.interval(o.ci_low, o.ci_high)})</div>")
    trials = [Trial.from_dict(t) for t in doc.get("trials") or []]
    for w in s.workloads:
        name, unit = w.workload, w.unit
        parts.append(f"<h2>{html.escape(name)} — {w.clients} clients</h2>")
        parts.append("<table><tr><th>config</th><th>trials</th><th>median " + html.escape(unit)
                     + "</th><th>CV</th><th>p95 ms</th><th>server µs/op</th><th>client CPU"
                     "</th><th>WAL B/op</th><th>vs " + html.escape(base)
                     + f" ({ci})</th><th>verdict</th></tr>")
        for vn, v in w.variants.items():
            cmp = w.comparisons.get(vn)
            ratio = fmt.ratio_ci(cmp.ratio, cmp.ci_low, cmp.ci_high) if cmp else "baseline"
            verdict = (f"<span class='{_CLASS.get(cmp.verdict, '')}'>"
                       f"{html.escape(cmp.verdict)}</span>" if cmp else "")
            parts.append(
                f"<tr><td>{html.escape(vn)}</td><td>{v.n}</td><td>{fmt.number(v.median)}</td>"
                f"<td>{fmt.cv(v.cv)}</td><td>{fmt.ms(v.latency_p95_ms)}</td>"
                f"<td>{fmt.us(v.server_cpu_us_per_op)}</td>"
                f"<td>{fmt.share(v.client_cpu_share)}</td>"
                f"<td>{fmt.nbytes(v.wal_bytes_per_op)}</td><td>{ratio}</td>"
                f"<td>{verdict}</td></tr>")
        parts.append("</table>")
        for line in state_warnings(w):
            parts.append(f"<p class='warn'>&#9888; {html.escape(line)}</p>")
        for vn, cmp in w.comparisons.items():
            parts.append(f"<p class='small'>{html.escape(vn)}: {html.escape(cmp.explain)}</p>")
        values = {vn: v.values for vn, v in w.variants.items()}
        series: dict[str, list[list[float]]] = {}
        for t in trials:
            if t.workload == name and t.clients == w.clients:
                series.setdefault(t.variant, []).append(t.series or [])
        parts.append("<div class='charts'>"
                     + _img(charts.trials_chart(name, unit, values, w.comparisons),
                            f"{name} trials")
                     + _img(charts.series_chart(name, unit, series), f"{name} series")
                     + "</div>")
    parts += _layers_html(doc, ci)
    parts += profiles_html(doc.get("profiles") or [])
    if s.tuned_vs_pgtune:
        parts.append(f"<h2>pgaccel's plan vs PGTune's (ratio of geometric means, {ci})</h2>"
                     "<table><tr>"
                     f"<th>workload</th><th>tuned / pgtune</th><th>{ci}</th><th>verdict</th></tr>")
        for r in s.tuned_vs_pgtune:
            c = r.comparison
            parts.append(f"<tr><td>{html.escape(r.workload)} c={r.clients}</td>"
                         f"<td>{fmt.pct_change(c.ratio)}</td>"
                         f"<td>{fmt.interval(c.ci_low, c.ci_high)}</td>"
                         f"<td><span class='{_CLASS.get(c.verdict, '')}'>"
                         f"{html.escape(c.verdict)}</span></td></tr>")
        parts.append("</table>")
    plan = (doc.get("plan") or {}).get("changes") or []
    tuned = [c for c in plan if c.get("layer") == "postgres" and not c.get("advice_only")
             and str(c.get("current")) != str(c.get("proposed"))]
    if tuned:
        parts.append("<h2>What the tuned configuration changes</h2><table><tr><th>setting</th>"
                     "<th>default</th><th>tuned</th><th>restart</th><th>why</th></tr>")
        for c in tuned:
            parts.append(f"<tr><td><code>{html.escape(c['name'])}</code></td>"
                         f"<td>{html.escape(str(c.get('current')))}</td>"
                         f"<td>{html.escape(str(c['proposed']))}</td>"
                         f"<td>{'yes' if c.get('restart') else ''}</td>"
                         f"<td style='text-align:left'>{html.escape(c.get('reason', ''))}</td></tr>")
        parts.append("</table>")
    parts.append("<h2>How this was measured</h2><p class='small'>Each trial restarts the server "
                 "with its configuration and checks the settings in pg_settings, restores the "
                 "data from a template for writing workloads, runs CHECKPOINT, prewarms every "
                 "relation (OS cache, then shared buffers), warms up until the per-second rate "
                 "is steady, then measures. Configurations run in a counterbalanced order "
                 f"({html.escape(str(doc.get('order')))}). The effect is the ratio of geometric "
                 f"means, at the centre of its {fmt.level(s.confidence)} interval: a paired t "
                 "interval on the log ratio of each round's trials (drift shared by a round "
                 "cancels), Welch's t on log values when trials cannot be paired. "
                 "Equivalent means the whole interval lies within the minimum effect.</p>"
                 "</body></html>")
    return "\n".join(parts)


def _by_workload(steps: list[dict]) -> dict[tuple[str, int], list[dict]]:
    out: dict[tuple[str, int], list[dict]] = {}
    for st in steps:
        out.setdefault((st["workload"], st["clients"]), []).append(st)
    return out


def _step_cell(c: dict | None) -> str:
    if not c:
        return "<td>-</td><td></td>"
    return (f"<td>{fmt.ratio_ci(c['ratio'], c.get('ci_low'), c.get('ci_high'))}</td>"
            f"<td><span class='{_CLASS.get(c.get('verdict', ''), '')}'>"
            f"{html.escape(str(c.get('verdict', '')))}</span></td>")


def _layers_html(doc: dict[str, Any], ci: str) -> list[str]:
    """`run --stack`: a waterfall and a table per workload (each layer vs the one before
    it and vs baseline)."""
    steps = doc.get("layers") or []
    if not steps:
        return []
    parts = [f"<h2>What each layer is worth (run --stack {html.escape(str(doc.get('stack')))})"
             "</h2>"]
    for note in doc.get("stack_notes") or []:
        parts.append(f"<p class='small'>{html.escape(note)}</p>")
    for (wl, clients), rows in _by_workload(steps).items():
        parts.append(f"<h3>{html.escape(wl)} — {clients} clients</h3><table><tr><th>layer</th>"
                     f"<th>vs the layer before ({ci})</th><th>verdict</th>"
                     f"<th>vs baseline ({ci})</th><th>verdict</th></tr>")
        for r in rows:
            parts.append(f"<tr><td>{html.escape(r['previous'])} → {html.escape(r['layer'])}"
                         f"</td>{_step_cell(r.get('vs_previous'))}"
                         f"{_step_cell(r.get('vs_baseline'))}</tr>")
        parts.append("</table><div class='charts'>"
                     + _img(charts.waterfall_chart(wl, rows), f"{wl} layers") + "</div>")
    return parts


def render_markdown(doc: dict[str, Any]) -> str:
    """The same report as Markdown."""
    s = _summary(doc)
    base = s.base or "baseline"
    ci = f"{fmt.level(s.confidence)} CI"
    lines = [f"# pgaccel run {doc.get('run_id')}", "",
             f"{doc.get('target', '')}; status {doc.get('status')}", ""]
    for vname, o in s.overall.items():
        lines += [f"**{vname}** vs {base} over {o.workloads} workload(s): geometric mean "
                  f"**{fmt.pct_change(o.geomean_ratio)}** ({ci} "
                  f"{fmt.interval(o.ci_low, o.ci_high)})", ""]
    for w in s.workloads:
        lines += [f"## {w.workload} ({w.clients} clients, {w.unit})", "",
                  f"| config | trials | median | CV | vs {base} ({ci}) | verdict |",
                  "|---|---:|---:|---:|---:|---|"]
        for vn, v in w.variants.items():
            cmp = w.comparisons.get(vn)
            ratio = fmt.ratio_ci(cmp.ratio, cmp.ci_low, cmp.ci_high) if cmp else "baseline"
            lines.append(f"| {vn} | {v.n} | {fmt.number(v.median)} | {fmt.cv(v.cv)} | "
                         f"{ratio} | {cmp.verdict if cmp else ''} |")
        lines.append("")
        lines += [f"> Warning: {line}" for line in state_warnings(w)]
        if state_warnings(w):
            lines.append("")
    steps = doc.get("layers") or []
    if steps:
        lines += [f"## What each layer is worth (run --stack {doc.get('stack')})", "",
                  f"| workload | layer | vs the layer before ({ci}) | verdict | "
                  f"vs baseline ({ci}) | verdict |", "|---|---|---:|---|---:|---|"]
        for r in steps:
            cells = []
            for key in ("vs_previous", "vs_baseline"):
                c = r.get(key)
                cells += ([fmt.ratio_ci(c["ratio"], c.get("ci_low"), c.get("ci_high")),
                           str(c.get("verdict", ""))] if c else ["-", ""])
            lines.append(f"| {r['workload']} c={r['clients']} | {r['previous']} → "
                         f"{r['layer']} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += profiles_markdown(doc.get("profiles") or [])
    return "\n".join(lines) + "\n"


def write_reports(run_dir: str, doc: dict[str, Any]) -> dict[str, str]:
    paths = {"html": os.path.join(run_dir, "report.html"),
             "markdown": os.path.join(run_dir, "report.md")}
    atomic_write(paths["html"], render_html(doc))
    atomic_write(paths["markdown"], render_markdown(doc))
    return paths
