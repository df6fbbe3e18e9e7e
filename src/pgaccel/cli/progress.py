"""The progress bar every benchmarking command shows while an experiment runs."""

from __future__ import annotations

import time
from typing import Any

from rich.progress import (BarColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

from ..lab.experiment import Experiment
from ..decide.schedule import estimate_trial_s
from ..decide.results import Summary
from ..report import format as fmt
from .common import console


def make_progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(),
                    TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(),
                    TextColumn("ETA"), TimeRemainingColumn(), console=console, transient=False)


def trial_label(exp: Experiment, n: int, workload: str, variant: str, rnd: int) -> str:
    """The progress line's description: which trial of how many, and, once rounds are added
    until every verdict is decided, that this round is one of them and how many may come."""
    n_min = len(exp.workloads) * exp.rounds * len(exp.variants)
    if rnd < exp.rounds:
        return f"trial {n}/{n_min} {workload} {variant}"
    why = "until decided" if exp.until_decided else "for a narrower interval"
    last = exp.last_look_of(workload)
    limit = f", at most {last}" if last else ""
    return f"trial {n} {workload} {variant} (round {rnd + 1}, added {why}{limit})"


def drive(exp: Experiment) -> Summary:
    """Run an experiment under a progress bar whose total is the estimated seconds of the
    minimum rounds; a round added until decided extends it by its trials."""
    per = {w.label: estimate_trial_s(w) for w in exp.workloads}
    with make_progress() as progress:
        task = progress.add_task("starting", total=exp.total_estimate_s())
        state = {"done": 0.0, "trial_start": time.monotonic(), "n": 0}

        def on_event(kind: str, **kw: Any) -> None:
            if kind == "prepare":
                progress.update(task, description=f"preparing {kw['workload']}")
            elif kind == "burn_in":
                state["trial_start"] = time.monotonic()
                progress.update(task, description=f"burn-in trial {kw['workload']} "
                                f"{kw['variant']} (not counted)")
            elif kind == "trial_start":
                state["trial_start"] = time.monotonic()
                k = kw.get("trials", 1)          # a round side by side starts them all
                state["n"] += k
                total = progress.tasks[0].total or 0.0
                if kw.get("round", 0) >= exp.rounds:
                    # an added round: its trials were not in the estimate
                    progress.update(task, total=total + per[kw["workload"]] * k)
                progress.update(task, description=trial_label(
                    exp, state["n"], kw["workload"], kw["variant"], kw.get("round", 0)))
            elif kind == "phase":
                est = per[kw["workload"]] * len(kw["variant"].split(" & "))
                el = min(time.monotonic() - state["trial_start"], est * 0.98)
                progress.update(task, completed=state["done"] + el)
            elif kind == "trial_done":
                state["done"] += per[kw["workload"]]
                progress.update(task, completed=state["done"])
                t = kw["trial"]
                p95 = (t.metrics.get("latency_ms") or {}).get("p95")
                progress.console.print(
                    f"  {kw['workload']:<22} {kw['variant']:<9} round {kw['round'] + 1}: "
                    f"{t.throughput:>10,.0f} {t.unit}"
                    + (f"  p95 {fmt.ms(p95)} ms" if fmt.known(p95) else ""), markup=False)
            elif kind == "last_look":
                why = ("the most allowed" if kw["capped"] else
                       f"as far as the {kw['left_s']:.0f} s left of its share of the "
                       "budget reach")
                progress.console.print(
                    f"  {kw['workload']}: a round takes about {kw['round_s']:.0f} s; it is "
                    f"judged after every round up to round {kw['last']} ({why})",
                    markup=False, style="dim")
            elif kind == "settings_replaced":
                progress.console.print(
                    f"  {kw['variant']} on {kw['workload']}: " + "; ".join(kw["replaced"]),
                    markup=False, style="yellow")
            elif kind == "stop":
                progress.console.print(f"  {kw['workload']}: stopped after {kw['rounds']} "
                                       f"rounds ({kw['reason']})", markup=False,
                                       style="dim")
        exp.on_event = on_event
        summary = exp.run()
        progress.update(task, completed=progress.tasks[0].total, description="done")
    return summary
