"""Why a config is faster: the profiles of `pgaccel profile` and `run --stack` in the
terminal, HTML and Markdown.  Input: the JSON rows of session/profiling.py (config,
workload, per_transaction cachegrind counts, instructions_vs_base, live perf window)."""

from __future__ import annotations

import html
from typing import Any

from rich.markup import escape
from rich.table import Table

from ..metrics import perfprof
from . import format as fmt
from .flamegraph import svg as flame_svg

NO_PMU = ("Hardware counters (cycles, instructions, cache and TLB misses) are not available "
          "on this machine (no PMU, as in most VMs): only software events were counted; the "
          "cachegrind counts stand in for them.")


def _pct(x: float | None) -> str:
    return "" if x is None else fmt.pct_change(1 + x)


def object_shares(objects: dict[str, int], n: int = 4) -> list[tuple[str, float]]:
    """Where the CPU was when sampled: (object, share), largest first."""
    total = sum(objects.values())
    if not total:
        return []
    return [(k, v / total) for k, v in sorted(objects.items(), key=lambda kv: -kv[1])[:n]]


def render_live(dest, live: perfprof.LiveProfile, title: str) -> None:
    """perf's counts per transaction, where the CPU time went, the hottest functions."""
    per = live.per_op()
    t = Table(title=title, title_justify="left")
    t.add_column("server, per transaction")
    t.add_column("value", justify="right")
    t.add_row("CPU time (all server processes)", f"{fmt.number(per.get('cpu_us') or 0, 1)} µs")
    for e, label in (("context-switches", "context switches"),
                     ("cpu-migrations", "CPU migrations"), ("page-faults", "page faults")):
        if per.get(e) is not None:
            t.add_row(label, fmt.number(per[e], 2))
    for e in perfprof.HARDWARE_EVENTS:
        if per.get(e) is not None:
            t.add_row(e, fmt.number(per[e]))
    if per.get("ipc") is not None:
        t.add_row("IPC", fmt.ratio(per['ipc']))
    dest.print(t)
    if not live.hardware:
        dest.print(f"[dim]{NO_PMU}[/dim]")
    shares = object_shares(live.objects, 5)
    if shares:
        dest.print("Server CPU samples by where the CPU was: "
                   + ", ".join(f"{escape(k)} {fmt.share(v)}" for k, v in shares)
                   + f" ({fmt.number(live.samples)} samples)")
        t2 = Table(title="Hottest functions (self = on the CPU, total = on the stack)",
                   title_justify="left")
        for col, j in (("function", "left"), ("self", "right"), ("total", "right")):
            t2.add_column(col, justify=j)
        for f, s_, tot in perfprof.top_functions(live.folded, 10):
            t2.add_row(escape(f), fmt.percent(s_ / live.samples), fmt.percent(tot / live.samples))
        dest.print(t2)


def _live(row: dict[str, Any]) -> dict[str, Any]:
    return row.get("live") or {}


def render_profiles(dest, rows: list[dict[str, Any]]) -> None:
    """`run --stack`: every config's CPU cost side by side, per workload."""
    if not rows:
        return
    t = Table(title="Why: CPU cost per transaction of each config (cachegrind: one backend, "
                    "deterministic; perf: all server processes under load)",
              title_justify="left")
    for col in ("workload", "config", "server", "instructions", "vs base", "I1 misses",
                "mispredicts", "CPU µs (perf)", "in postgres"):
        t.add_column(col, justify="left" if col in ("workload", "config", "server")
                     else "right")
    for r in rows:
        pt, live = r["per_transaction"], _live(r)
        shares = dict(object_shares(live.get("objects") or {}, 10))
        cpu = (live.get("per_op") or {}).get("cpu_us")
        t.add_row(r["workload"], r["config"], str(r.get("server_version", "")),
                  fmt.number(pt['instructions']), _pct(r.get("instructions_vs_base")),
                  fmt.number(pt['i1_misses']), fmt.number(pt['mispredicts']),
                  fmt.number(cpu, 1) if cpu else "", fmt.share(shares['postgres'])
                  if "postgres" in shares else "")
    dest.print(t)
    if rows and any(_live(r) for r in rows) and not any(
            _live(r).get("hardware_counters") for r in rows):
        dest.print(f"[dim]{NO_PMU}[/dim]")


def profiles_html(rows: list[dict[str, Any]], notes: list[str] | None = None) -> list[str]:
    """The profile section of the HTML report: the table and one flame graph per config."""
    if not rows:
        return []
    e = html.escape
    parts = ["<h2>Why: CPU cost per transaction</h2>",
             "<p class='small'>Instructions, instruction-cache misses and mispredicted branches "
             "are counted by cachegrind for one backend running a fixed number of transactions "
             "(a simulated CPU: deterministic, so a 2% difference is real). CPU µs and context "
             "switches come from perf over every server process during a short run under "
             "load, with perf sampling (so a little above the trials' server µs/op, which "
             "are measured without it); the flame graphs are perf's cpu-clock samples of "
             "those processes.</p>",
             "<table><tr><th>workload</th><th>config</th><th>server</th><th>instructions</th>"
             "<th>vs base</th><th>I1 misses</th><th>branch mispredicts</th>"
             "<th>CPU µs (perf)</th><th>context switches</th><th>CPU in postgres / kernel</th>"
             "</tr>"]
    for r in rows:
        pt, live = r["per_transaction"], _live(r)
        per = live.get("per_op") or {}
        shares = dict(object_shares(live.get("objects") or {}, 10))
        where = (f"{fmt.share(shares.get('postgres', 0))} / {fmt.share(shares.get('kernel', 0))}"
                 if shares else "")
        cs = per.get("context-switches")
        parts.append(f"<tr><td>{e(r['workload'])}</td><td>{e(r['config'])}</td>"
                     f"<td>{e(str(r.get('server_version', '')))}</td>"
                     f"<td>{fmt.number(pt['instructions'])}</td>"
                     f"<td>{_pct(r.get('instructions_vs_base'))}</td>"
                     f"<td>{fmt.number(pt['i1_misses'])}</td><td>{fmt.number(pt['mispredicts'])}</td>"
                     f"<td>{fmt.number(per.get('cpu_us') or 0, 1)}</td>"
                     f"<td>{'' if cs is None else fmt.ratio(cs)}</td><td>{where}</td></tr>")
    parts.append("</table>")
    if any(_live(r) for r in rows) and not any(_live(r).get("hardware_counters")
                                                  for r in rows):
        parts.append(f"<p class='small'>{e(NO_PMU)}</p>")
    for note in notes or []:
        parts.append(f"<p class='small'>{e(note)}</p>")
    for r in rows:
        live = _live(r)
        if not live.get("folded"):
            continue
        top = ", ".join(f"{e(t['function'])} {fmt.share(t['self'] / max(live['samples'], 1))}"
                        for t in (live.get("top_functions") or [])[:5])
        parts.append(f"<details><summary>Flame graph: {e(r['config'])}, {e(r['workload'])} "
                     f"({fmt.number(live.get('samples', 0))} samples; hottest: {top})</summary>"
                     + flame_svg(live["folded"], title=f"{r['config']}, {r['workload']}, "
                                 f"PostgreSQL {r.get('server_version', '')}", width=1060)
                     + "</details>")
    return parts


def profiles_markdown(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = ["## Why: CPU cost per transaction", "",
             "| workload | config | server | instructions | vs base | I1 misses | "
             "mispredicts | CPU µs (perf) |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        pt, per = r["per_transaction"], _live(r).get("per_op") or {}
        lines.append(f"| {r['workload']} | {r['config']} | {r.get('server_version', '')} | "
                     f"{fmt.number(pt['instructions'])} | {_pct(r.get('instructions_vs_base'))} | "
                     f"{fmt.number(pt['i1_misses'])} | {fmt.number(pt['mispredicts'])} | "
                     f"{fmt.number(per.get('cpu_us') or 0, 1)} |")
    return lines + [""]
