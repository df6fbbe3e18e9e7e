"""Terminal rendering of lab results (rich): lab summaries with step workloads and rQPS
tables, the variants table, and calibration (noise floor) output."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from rich.table import Table

from ..decide.effect import FASTER, SLOWER
from ..decide.results import Calibration, Summary, WorkloadResult
from . import format as fmt
from .terminal import render_summary, verdict

if TYPE_CHECKING:
    from ..lab.variants import LabVariant


def render_steps(dest, summary: Summary) -> None:
    """Step workloads: one compact table per workload, and the rQPS table."""
    by_key: dict[tuple, list[WorkloadResult]] = {}
    for w in summary.steps:
        by_key.setdefault((w.key, w.clients), []).append(w)
    base = summary.base
    for (key, clients), entries in by_key.items():
        ci = f"{fmt.level(entries[0].level(summary.confidence))} CI"
        t = Table(title=f"{key} ({clients} clients): per step, medians over rounds",
                  title_justify="left")
        for col in ("step", "variant", "n", "median", "CV", f"vs {base} ({ci})", "verdict"):
            t.add_column(col, justify="left" if col in ("step", "variant", "verdict")
                         else "right", no_wrap=col != "verdict")
        for w in entries:
            for name, v in w.variants.items():
                cmp = w.comparisons.get(name)
                ratio = fmt.ratio_ci(cmp.ratio, cmp.ci_low, cmp.ci_high) if cmp else "base"
                inv = f" ({v.invalid} invalid)" if v.invalid else ""
                t.add_row(f"{w.step} [dim]{w.unit}[/dim]", name, f"{v.n}{inv}",
                          fmt.number(v.median, 1), fmt.cv(v.cv), ratio, verdict(cmp))
        dest.print(t)
        for w in entries:
            for name, v in w.variants.items():
                if v.invalid:
                    dest.print(f"  [yellow]{w.step} {name}: {v.invalid} invalid "
                               f"trial(s) left out: {v.note or ''}[/yellow]")
    for r in summary.rqps:
        names = list(r.rows[0].rqps) if r.rows else []
        t = Table(title=f"rQPS of {r.workload} ({r.clients} clients): QPS / {base}'s "
                        "(geometric means of the trials, as the effects above)",
                  title_justify="left")
        t.add_column("variant", no_wrap=True)
        for s in names:
            t.add_column(s, justify="right")
        for row in r.rows:
            cells = [fmt.number(row.qps[s]) if row.variant == base else fmt.ratio(row.rqps[s])
                     for s in names]
            t.add_row(row.variant + (" (QPS)" if row.variant == base else ""), *cells)
        dest.print(t)


def render_lab(dest, summary: Summary) -> None:
    has_steps = bool(summary.steps)
    # with steps, the geometric mean is printed below, over steps and workloads together
    single = replace(summary, workloads=summary.single,
                     overall={} if has_steps else summary.overall)
    if single.workloads:
        render_summary(dest, single)
    render_steps(dest, summary)
    if has_steps:
        for name, o in summary.overall.items():
            dest.print(f"[bold]{name}[/bold] over {o.workloads} measures: geometric mean "
                       f"{fmt.pct_change(o.geomean_ratio)} "
                       f"({fmt.interval(o.ci_low, o.ci_high)})")
    for name, why in summary.refused.items():
        dest.print(f"[bold red]refused[/] {name}: {why} (not reported)")
    for label, why in summary.stop_reasons.items():
        dest.print(f"[dim]{label}: stopped: {why}[/dim]")


def render_variants(dest, lvs: list[LabVariant], base: str) -> None:
    t = Table(title="Variants", title_justify="left")
    for col in ("variant", "server", "settings", "OS", "verified"):
        t.add_column(col, overflow="fold")
    for lv in lvs:
        v = lv.verified
        ok = ("[green]yes[/]" if v.get("ok") else
              "[red]NO: " + "; ".join(v.get("problems", [])) + "[/]") if v else fmt.DASH
        settings = ", ".join(f"{k}={val}" for k, val in lv.settings.items()) or "(defaults)"
        if lv.spec.settings_from:
            settings = f"[{lv.spec.settings_from}] " + settings
        os_txt = ", ".join(f"{k}={val}" for k, val in lv.os_target.items())
        if lv.spec.os.text_hugepages:
            os_txt = ", ".join(x for x in (os_txt, "code on huge pages") if x)
        extra = [f"hugetlb {fmt.size(v['hugetlb_kb'] * 1024)}"] if v.get("hugetlb_kb") else []
        if v.get("text_huge_kb"):
            extra.append(f"code on THP {fmt.size(v['text_huge_kb'] * 1024)}")
        if v.get("io_method"):
            extra.append(f"io_method={v['io_method']}")
        t.add_row(lv.name + (" (base)" if lv.name == base else ""),
                  f"{lv.inst.version} {lv.inst.bindir}", settings,
                  os_txt, ok + ("  " + ", ".join(extra) if extra else ""))
    dest.print(t)


def render_calibration(dest, cal: Calibration, workload: str) -> None:
    aa = cal.aa
    level = fmt.level(aa.confidence)
    dest.print(f"Noise floor ({workload}): CV of trials {fmt.cv(cal.noise_floor_cv)} "
               f"(A {fmt.cv(cal.cv_a)}, A2 {fmt.cv(cal.cv_b)}).")
    dest.print(f"A/A comparison: {verdict(aa)} ({fmt.pct_change(aa.ratio)}, {level} CI "
               f"{fmt.interval(aa.ci_low, aa.ci_high)}).")
    if aa.verdict in (FASTER, SLOWER):
        dest.print("[yellow]Two identical configurations differ: this machine drifts or is "
                   "shared; results here need more rounds or a quieter machine.[/yellow]")
    n = cal.trials_per_variant
    mde = cal.min_detectable_effect
    minutes = fmt.minutes(cal.budget_s).replace(" min", "-minute")
    how = (f"; paired by round, rounds {fmt.percent(math.expm1(cal.pair_sd))} apart"
           if cal.pair_sd is not None else "; unpaired, from the CV of trials")
    dest.print(f"A trial takes {fmt.seconds(cal.trial_s)}; a {minutes} budget runs {n} trials per "
               f"variant (two variants) and detects differences of {fmt.percent(mde)} or more "
               f"(80% power, {level} confidence{how})." if fmt.known(mde) else
               f"A {minutes} budget is too short for 2 trials per variant.")
    need = ", ".join(f"{k}: {v}" for k, v in cal.trials_needed.items())
    dest.print(f"Trials per variant needed to detect a difference of {need}.")
