"""A self-contained HTML report of a run (inline CSS, charts as embedded PNG) and the same
content as Markdown.  Input: the ``run.json`` document the experiment writes."""

from __future__ import annotations

import base64
import html
import math
import os
from typing import Any

from ..util import atomic_write, format_bytes
from . import charts
from .terminal import fmt_pct

CSS = """
body{font-family:-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif;margin:2rem auto;
max-width:1100px;color:#222;line-height:1.45;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
.sub{color:#666;margin-top:0}table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem}
td,th{border-bottom:1px solid #e5e5e5;padding:.3rem .6rem;text-align:right}
th{background:#f6f6f6}td:first-child,th:first-child{text-align:left}
.faster{color:#17803d;font-weight:600}.slower{color:#b42318;font-weight:600}
.nsd{color:#8a6d00}.nee{color:#7a3e9d}.charts img{max-width:49%;margin-right:1%}
.verdict{font-size:1.1rem;padding:.6rem .9rem;background:#f6f8fa;border-radius:6px;margin:.4rem 0}
code{background:#f2f2f2;padding:0 .25rem;border-radius:3px}.small{font-size:.85rem;color:#555}
"""

_CLASS = {"faster": "faster", "slower": "slower", "no significant difference": "nsd",
          "not enough evidence": "nee"}




def _f(x: Any, fmt: str = "{:,.0f}") -> str:
    return "–" if x is None or (isinstance(x, float) and not math.isfinite(x)) else fmt.format(x)


def _img(png: bytes, alt: str) -> str:
    return (f'<img alt="{html.escape(alt)}" src="data:image/png;base64,'
            f'{base64.b64encode(png).decode()}">')


def render_html(doc: dict[str, Any]) -> str:
    s = doc.get("summary") or {}
    base = s.get("base", "baseline")
    host = doc.get("host") or {}
    server = doc.get("server") or {}
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>pgaccel run "
             f"{html.escape(str(doc.get('run_id')))}</title><style>{CSS}</style></head><body>",
             f"<h1>pgaccel run {html.escape(str(doc.get('run_id')))}</h1>",
             f"<p class='sub'>{html.escape(str(doc.get('target', '')))} · PostgreSQL "
             f"{html.escape(str(server.get('version', '?')))} · {host.get('logical_cpus', '?')} CPUs, "
             f"{format_bytes(host.get('memory_total_bytes') or 0)} · {host.get('cpu_model', '')}"
             f" · status {html.escape(str(doc.get('status')))}</p>"]
    for vname, o in (s.get("overall") or {}).items():
        parts.append(f"<div class='verdict'><b>{html.escape(vname)}</b> vs {html.escape(base)} "
                     f"over {o['workloads']} workload(s): geometric mean "
                     f"<b>{fmt_pct(o['geomean_ratio'])}</b> (95% CI {fmt_pct(o['ci_low'])} … "
                     f"{fmt_pct(o['ci_high'])})</div>")
    trials = doc.get("trials") or []
    for w in s.get("workloads", []):
        name, unit = w["workload"], w["unit"]
        parts.append(f"<h2>{html.escape(name)} — {w['clients']} clients</h2>")
        parts.append("<table><tr><th>config</th><th>trials</th><th>median " + html.escape(unit)
                     + "</th><th>CV</th><th>p95 ms</th><th>server µs/op</th><th>client CPU"
                     "</th><th>WAL B/op</th><th>vs " + html.escape(base)
                     + " (95% CI)</th><th>verdict</th></tr>")
        for vn, v in w["variants"].items():
            cmp = w["comparisons"].get(vn)
            ratio = (f"{fmt_pct(cmp['ratio'])} ({fmt_pct(cmp['ci_low'])} … {fmt_pct(cmp['ci_high'])})"
                     if cmp else "baseline")
            verdict = (f"<span class='{_CLASS.get(cmp['verdict'], '')}'>"
                       f"{html.escape(cmp['verdict'])}</span>" if cmp else "")
            share = v.get("client_cpu_share")
            parts.append(
                f"<tr><td>{html.escape(vn)}</td><td>{v['n']}</td><td>{_f(v['median'])}</td>"
                f"<td>{_f((v.get('cv') or 0) * 100, '{:.1f}%')}</td>"
                f"<td>{_f(v.get('latency_p95_ms'), '{:.2f}')}</td>"
                f"<td>{_f(v.get('server_cpu_us_per_op'), '{:.1f}')}</td>"
                f"<td>{_f(share * 100 if share is not None else None, '{:.0f}%')}</td>"
                f"<td>{_f(v.get('wal_bytes_per_op'))}</td><td>{ratio}</td><td>{verdict}</td></tr>")
        parts.append("</table>")
        for vn, cmp in w["comparisons"].items():
            parts.append(f"<p class='small'>{html.escape(vn)}: {html.escape(cmp['explain'])}</p>")
        values = {vn: v.get("values", []) for vn, v in w["variants"].items()}
        series: dict[str, list[list[float]]] = {}
        for t in trials:
            if t["workload"] == name and t.get("clients") == w["clients"]:
                series.setdefault(t["variant"], []).append(t.get("series") or [])
        parts.append("<div class='charts'>"
                     + _img(charts.trials_chart(name, unit, values, w["comparisons"]),
                            f"{name} trials")
                     + _img(charts.series_chart(name, unit, series), f"{name} series")
                     + "</div>")
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
                 f"({html.escape(str(doc.get('order')))}). The interval is a bootstrap of the "
                 "ratio of medians with 5+ trials per side, Welch's t on log values below that."
                 "</p></body></html>")
    return "\n".join(parts)


def render_markdown(doc: dict[str, Any]) -> str:
    s = doc.get("summary") or {}
    base = s.get("base", "baseline")
    lines = [f"# pgaccel run {doc.get('run_id')}", "",
             f"{doc.get('target', '')}; status {doc.get('status')}", ""]
    for w in s.get("workloads", []):
        lines += [f"## {w['workload']} ({w['clients']} clients, {w['unit']})", "",
                  f"| config | trials | median | CV | vs {base} (95% CI) | verdict |",
                  "|---|---:|---:|---:|---:|---|"]
        for vn, v in w["variants"].items():
            cmp = w["comparisons"].get(vn)
            ratio = (f"{fmt_pct(cmp['ratio'])} ({fmt_pct(cmp['ci_low'])} … {fmt_pct(cmp['ci_high'])})"
                     if cmp else "baseline")
            lines.append(f"| {vn} | {v['n']} | {_f(v['median'])} | "
                         f"{_f((v.get('cv') or 0) * 100, '{:.1f}%')} | {ratio} | "
                         f"{cmp['verdict'] if cmp else ''} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def write_reports(run_dir: str, doc: dict[str, Any]) -> dict[str, str]:
    paths = {"html": os.path.join(run_dir, "report.html"),
             "markdown": os.path.join(run_dir, "report.md")}
    atomic_write(paths["html"], render_html(doc))
    atomic_write(paths["markdown"], render_markdown(doc))
    return paths
