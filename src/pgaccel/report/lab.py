"""Terminal rendering of lab results (rich): lab summaries with step workloads and rQPS
tables, the variants table, and calibration (noise floor) output."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from rich.table import Table

from ..decide.effect import FASTER, SLOWER
from ..decide.results import Calibration, Summary, WorkloadResult
from . import format as fmt, view
from .stepview import (STEP_COSTS, chance_note, cost_note, cost_text, rqps_text,
                       step_matrices, undecided_note)
from .terminal import render_summary, states_line, verdict

if TYPE_CHECKING:
    from ..lab.variants import LabVariant


def render_steps(dest, summary: Summary, trials: list | None = None,
                 findings: dict | None = None) -> None:
    """Step workloads: one compact table per workload, and the rQPS table with its verdicts
    and costs per operation (``report/stepview.py``; KB written needs ``trials``)."""
    by_key: dict[tuple, list[WorkloadResult]] = {}
    for w in summary.steps:
        by_key.setdefault((w.key, w.clients), []).append(w)
    base = summary.base
    for (key, clients), entries in by_key.items():
        ci = f"{fmt.level(entries[0].level(summary.confidence))} CI"
        t = Table(title=f"{key} ({view.clients(clients)}): per step, medians over rounds",
                  title_justify="left")
        for col in ("step", "variant", "n", "median", "CV", f"vs {base} ({ci})", "verdict"):
            t.add_column(col, justify="left" if col in ("step", "variant", "verdict")
                         else "right", no_wrap=col != "verdict")
        for w in entries:
            for name, v in w.variants.items():
                cmp = w.comparisons.get(name)
                # a variant with no valid trial of the step has no comparison: not the base
                ratio = (fmt.ratio_ci(cmp.ratio, cmp.ci_low, cmp.ci_high) if cmp else
                         "base" if name == base else fmt.DASH)
                inv = f" ({v.invalid} invalid)" if v.invalid else ""
                t.add_row(f"{w.step} [dim]{w.unit}[/dim]", name, f"{v.n}{inv}",
                          fmt.number(v.median, 1), fmt.cv(v.cv), ratio, verdict(cmp))
        dest.print(t)
        for w in entries:
            for name, v in w.variants.items():
                if v.invalid:
                    dest.print(f"  [yellow]{w.step} {name}: {v.invalid} invalid "
                               f"trial(s) left out: {v.note or ''}[/yellow]")
            if w.states:
                dest.print(f"  [yellow]{w.step}: {states_line(w.states)}[/yellow]")
    for m in step_matrices(summary, trials or [], findings):
        if len(m.variants) < 2:
            continue
        t = Table(title=f"{m.key} ({view.clients(m.clients)}): rQPS (QPS / {base}'s, geometric "
                        f"means) and costs per operation ({base}'s, the others as a ratio "
                        "to it)", title_justify="left")
        study = ("the study found",) if m.findings else ()
        for col in ("step", "variant", "QPS", "rQPS", "verdict",
                    *(h for _, h in STEP_COSTS), *study):
            words = col in ("verdict", "the study found")
            # numbers and names whole; the verdict and the study's words fold
            t.add_column(col, justify="left" if col in ("step", "variant") or words
                         else "right", no_wrap=not words, overflow="fold",
                         min_width=10 if words else None,
                         max_width=28 if col == "the study found" else None)
        for step in m.steps:
            missing = m.base_missing(step)
            for name in m.variants:
                c = m.cell(name, step)
                if c is None:
                    continue
                style = rqps_style(c.rqps)
                rq = rqps_text(c) if name != base else "1.00"
                vd = (verdict_text(c.verdict) if c.verdict else
                      "[yellow]not compared: " + missing + "[/]" if missing and name != base
                      else "")
                t.add_row(step if name == m.variants[0] else "", name,
                          fmt.number(c.qps) + (f" [dim]({c.invalid} invalid)[/]"
                                               if c.invalid else ""),
                          f"[{style}]{rq}[/]" if style else rq, vd,
                          *(cost_text(m, name, step, k) for k, _ in STEP_COSTS),
                          *((m.finding(name, step),) if study else ()))
        dest.print(t)
        note = cost_note(m)
        if note:
            dest.print(f"[dim]{note}[/dim]")
        for name, text in m.conclusions.items():
            dest.print(f"  [bold]{name}[/bold]: {text}")
        chance = chance_note(m)
        if chance:
            dest.print(f"[dim]{chance}[/dim]")
        for name in m.variants:
            more = undecided_note(m, name)
            if more:
                dest.print(f"  {more}")


def rqps_style(x) -> str:
    """The Insert Benchmark's colouring of rQPS: below 0.95 and above 1.05 stand out."""
    if not fmt.known(x):
        return ""
    return "red" if x < 0.95 else "blue" if x > 1.05 else ""


def verdict_text(v: str) -> str:
    style = {"faster": "blue", "slower": "red", "equivalent": "green"}.get(v, "dim")
    return f"[{style}]{v}[/]"


def render_lab(dest, summary: Summary, trials: list | None = None,
               findings: dict | None = None) -> None:
    has_steps = bool(summary.steps)
    # with steps, the geometric mean is printed below, over steps and workloads together
    single = replace(summary, workloads=summary.single,
                     overall={} if has_steps else summary.overall)
    if single.workloads:
        render_summary(dest, single)
    render_steps(dest, summary, trials, findings)
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
        if v.get("data_checksums"):
            extra.append(f"data checksums {v['data_checksums']}")
        if v.get("durability_off"):
            extra.append("[bold red]durability off: " + ", ".join(v["durability_off"]) + "[/]")
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
    after = (f", after its data and burn-in (about {fmt.seconds(cal.setup_s)}),"
             if cal.setup_s else "")
    dest.print(f"A trial takes {fmt.seconds(cal.trial_s)}; a {minutes} budget{after} runs {n} "
               f"trials per variant (two variants) and detects differences of "
               f"{fmt.percent(mde)} or more (80% power, {level} confidence{how})."
               if fmt.known(mde) else
               f"A {minutes} budget{after} is too short for 2 trials per variant.")
    need = ", ".join(f"{k}: {v}" for k, v in cal.trials_needed.items())
    dest.print(f"Trials per variant needed to detect a difference of {need}.")
