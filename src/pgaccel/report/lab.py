"""Terminal rendering of lab results (rich): lab summaries with step workloads and rQPS
tables, the variants table, and calibration (noise floor) output."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich.table import Table

from ..lab import stats
from .terminal import VERDICT_STYLE, fmt_pct, render_summary  # noqa: F401 (fmt_pct re-exported)

if TYPE_CHECKING:
    from ..lab.variants import LabVariant


def fmt_num(x: Any, fmt: str = "{:,.1f}") -> str:
    return "–" if x is None or (isinstance(x, float) and not math.isfinite(x)) else fmt.format(x)


def render_steps(dest, summary: dict[str, Any]) -> None:
    """Step workloads: one compact table per workload, and the rQPS table."""
    steps = [w for w in summary["workloads"] if w.get("step") is not None]
    by_key: dict[tuple, list[dict]] = {}
    for w in steps:
        by_key.setdefault((w["key"], w["clients"]), []).append(w)
    base = summary["base"]
    conf = summary.get("confidence", 0.95)
    for (key, clients), entries in by_key.items():
        t = Table(title=f"{key} ({clients} clients): per step, medians over rounds",
                  title_justify="left")
        for col in ("step", "variant", "n", "median", "CV", f"vs {base} ({conf:.0%} CI)",
                    "verdict"):
            t.add_column(col, justify="left" if col in ("step", "variant", "verdict")
                         else "right", no_wrap=col != "verdict")
        for w in entries:
            for name, v in w["variants"].items():
                cmp = w["comparisons"].get(name)
                ratio = (f"{fmt_pct(cmp['ratio'])} ({fmt_pct(cmp['ci_low'])} … "
                         f"{fmt_pct(cmp['ci_high'])})" if cmp else "base")
                verdict = (f"[{VERDICT_STYLE.get(cmp['verdict'], '')}]{cmp['verdict']}[/]"
                           if cmp else "")
                inv = f" ({v['invalid']} invalid)" if v.get("invalid") else ""
                t.add_row(f"{w['step']} [dim]{w['unit']}[/dim]", name, f"{v['n']}{inv}",
                          fmt_num(v["median"]),
                          fmt_num((v["cv"] or 0) * 100, "{:.1f}%"), ratio, verdict)
        dest.print(t)
        for w in entries:
            for name, v in w["variants"].items():
                if v.get("invalid"):
                    dest.print(f"  [yellow]{w['step']} {name}: {v['invalid']} invalid "
                               f"trial(s) left out: {v.get('note') or ''}[/yellow]")
    for r in summary.get("rqps", []):
        rows = r["rows"]
        names = list(rows[0]["rqps"]) if rows else []
        t = Table(title=f"rQPS of {r['workload']} ({r['clients']} clients): median QPS / "
                        f"{base}'s", title_justify="left")
        t.add_column("variant", no_wrap=True)
        for s in names:
            t.add_column(s, justify="right")
        for row in rows:
            cells = [fmt_num(row["qps"][s], "{:,.0f}") if row["variant"] == base
                     else fmt_num(row["rqps"][s], "{:.2f}") for s in names]
            t.add_row(row["variant"] + (" (QPS)" if row["variant"] == base else ""), *cells)
        dest.print(t)


def render_lab(dest, summary: dict[str, Any]) -> None:
    has_steps = any(w.get("step") is not None for w in summary["workloads"])
    single = dict(summary, workloads=[w for w in summary["workloads"] if w.get("step") is None])
    if has_steps:
        single["overall"] = {}          # printed below, over steps and workloads together
    if single["workloads"]:
        render_summary(dest, single)
    render_steps(dest, summary)
    if has_steps:
        for name, o in summary.get("overall", {}).items():
            dest.print(f"[bold]{name}[/bold] over {o['workloads']} measures: geometric mean "
                       f"{fmt_pct(o['geomean_ratio'])} ({fmt_pct(o['ci_low'])} … "
                       f"{fmt_pct(o['ci_high'])})")
    for name, why in (summary.get("refused") or {}).items():
        dest.print(f"[bold red]refused[/] {name}: {why} (not reported)")
    for label, why in (summary.get("stop_reasons") or {}).items():
        dest.print(f"[dim]{label}: stopped: {why}[/dim]")


def render_variants(dest, lvs: list[LabVariant], base: str) -> None:
    t = Table(title="Variants", title_justify="left")
    for col in ("variant", "server", "settings", "OS", "verified"):
        t.add_column(col, overflow="fold")
    for lv in lvs:
        v = lv.verified
        ok = ("[green]yes[/]" if v.get("ok") else
              "[red]NO: " + "; ".join(v.get("problems", [])) + "[/]") if v else "–"
        settings = ", ".join(f"{k}={val}" for k, val in lv.settings.items()) or "(defaults)"
        if lv.spec.settings_from:
            settings = f"[{lv.spec.settings_from}] " + settings
        os_txt = ", ".join(f"{k}={val}" for k, val in lv.os_target.items())
        extra = [f"hugetlb {v['hugetlb_kb'] // 1024} MB"] if v.get("hugetlb_kb") else []
        if v.get("io_method"):
            extra.append(f"io_method={v['io_method']}")
        t.add_row(lv.name + (" (base)" if lv.name == base else ""),
                  f"{lv.inst.version} {lv.inst.bindir}", settings,
                  os_txt, ok + ("  " + ", ".join(extra) if extra else ""))
    dest.print(t)



def render_calibration(dest, cal: dict[str, Any], workload: str) -> None:
    aa = cal["aa"]
    dest.print(f"Noise floor ({workload}): CV of trials {cal['noise_floor_cv']:.1%} "
               f"(A {cal['cv_a']:.1%}, A2 {cal['cv_b']:.1%}).")
    dest.print(f"A/A comparison: [{VERDICT_STYLE.get(aa['verdict'], '')}]{aa['verdict']}[/] "
               f"({fmt_pct(aa['ratio'])}, 95% CI {fmt_pct(aa['ci_low'])} … "
               f"{fmt_pct(aa['ci_high'])}).")
    if aa["verdict"] in (stats.FASTER, stats.SLOWER):
        dest.print("[yellow]Two identical configurations differ: this machine drifts or is "
                   "shared; results here need more rounds or a quieter machine.[/yellow]")
    n = cal["trials_per_variant"]
    mde = cal["min_detectable_effect"]
    dest.print(f"A trial takes {cal['trial_s']:.0f} s; a {cal['budget_s'] / 60:.0f}-minute "
               f"budget runs {n} trials per variant (two variants) and detects differences "
               f"of {mde:.1%} or more (80% power, 95% confidence)." if math.isfinite(mde) else
               f"A {cal['budget_s'] / 60:.0f}-minute budget is too short for 2 trials per "
               "variant.")
    need = ", ".join(f"{k}: {v}" for k, v in cal["trials_needed"].items())
    dest.print(f"Trials per variant needed to detect a difference of {need}.")
