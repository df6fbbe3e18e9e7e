"""Terminal rendering of experiment summaries (rich tables)."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table

def fmt_pct(r: Any) -> str:
    """A ratio as a signed percentage change (1.07 -> "+7.0%"); "–" when unknown."""
    return "–" if r is None or not math.isfinite(r) else f"{(r - 1) * 100:+.1f}%"


VERDICT_STYLE = {"faster": "bold green", "slower": "bold red",
                 "no significant difference": "yellow", "not enough evidence": "magenta"}


def _num(x: Any, fmt: str = "{:,.0f}") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return fmt.format(x)




def render_summary(console: Console, summary: dict[str, Any], title: str = "") -> None:
    base = summary["base"]
    for w in summary["workloads"]:
        t = Table(title=f"{title}{w['workload']} ({w['clients']} clients, {w['unit']})",
                  title_justify="left")
        t.add_column("config", no_wrap=True)
        t.add_column("n", justify="right")
        t.add_column(f"median {w['unit']}", justify="right", no_wrap=True)
        t.add_column("CV", justify="right")
        t.add_column("p95 ms", justify="right")
        t.add_column("srv µs/op", justify="right")
        t.add_column("client CPU", justify="right")
        conf = summary.get("confidence", 0.95)
        t.add_column(f"vs {base} ({conf:.0%} CI)", justify="right", no_wrap=True)
        t.add_column("verdict", no_wrap=True)
        for name, v in w["variants"].items():
            cmp = w["comparisons"].get(name)
            if cmp:
                ci = (f" ({fmt_pct(cmp['ci_low'])} … {fmt_pct(cmp['ci_high'])})"
                      if math.isfinite(cmp["ci_low"]) else "")
                ratio = f"{fmt_pct(cmp['ratio'])}{ci}"
                verdict = f"[{VERDICT_STYLE.get(cmp['verdict'], '')}]{cmp['verdict']}[/]"
            else:
                ratio, verdict = "baseline", ""
            share = v.get("client_cpu_share")
            t.add_row(name, str(v["n"]), _num(v["median"]),
                      _num(v["cv"] * 100 if v.get("cv") is not None else None, "{:.1f}%"),
                      _num(v.get("latency_p95_ms"), "{:.2f}"),
                      _num(v.get("server_cpu_us_per_op"), "{:.1f}"),
                      _num(share * 100 if share is not None else None, "{:.0f}%"),
                      ratio, verdict)
        console.print(t)
        for name, cmp in w["comparisons"].items():
            console.print(f"  [dim]{name}: {cmp['explain']}[/dim]")
    for name, o in summary.get("overall", {}).items():
        if o["workloads"] > 1:
            console.print(f"[bold]{name}[/bold] over {o['workloads']} workloads: geometric mean "
                          f"{fmt_pct(o['geomean_ratio'])} ({fmt_pct(o['ci_low'])} … "
                          f"{fmt_pct(o['ci_high'])})")


def render_plan_changes(console: Console, changes: list[dict[str, Any]],
                        not_tested: list[str] | None = None) -> None:
    t = Table(title="Tuned configuration (vs server defaults)", title_justify="left")
    for col in ("setting", "default", "tuned", "restart", "why"):
        t.add_column(col, overflow="fold")
    for c in changes:
        t.add_row(c["name"], str(c.get("current") or ""), str(c["proposed"]),
                  "yes" if c.get("restart") else "", c.get("reason", ""))
    console.print(t)
    if not_tested:
        console.print(f"[yellow]Not measured on this target (need a restart or reload): "
                      f"{', '.join(not_tested)}[/yellow]")


def render_head_to_head(dest, rows: list[dict]) -> None:
    from rich.table import Table
    t = Table(title="pgaccel's plan vs PGTune's (ratio of medians, 95% CI)", title_justify="left")
    for col in ("workload", "tuned / pgtune", "95% CI", "verdict"):
        t.add_column(col)
    for r in rows:
        t.add_row(f"{r['workload']} c={r['clients']}", fmt_pct(r["ratio"]),
                  f"{fmt_pct(r['ci_low'])} … {fmt_pct(r['ci_high'])}",
                  f"[{VERDICT_STYLE.get(r['verdict'], '')}]{r['verdict']}[/]")
    dest.print(t)
