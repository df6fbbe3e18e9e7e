"""What a benchmarking command shows while the runner works: the progress bar (or one line
per trial for a lab), and :class:`ConsoleEvents`, the runner's events on this terminal."""

from __future__ import annotations

import time
from typing import Any, Callable

from rich.progress import (BarColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

from rich.markup import escape

from ..session.events import RunEvents
from ..decide.schedule import estimate_trial_s
from ..decide.results import Summary
from ..lab.paired import SLICE_S, STEP_SLICE_S
from ..report import format as fmt
from ..report.facts import sized_text
from .common import ask_terminal, console, print_json


def make_progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(),
                    TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(),
                    TextColumn("ETA"), TimeRemainingColumn(), console=console, transient=False)


def trial_label(exp: Any, n: int, workload: str, variant: str, rnd: int) -> str:
    """The progress line's description: which trial of how many, and, once rounds are added
    until every verdict is decided, that this round is one of them and how many may come."""
    n_min = len(exp.workloads) * exp.rounds * len(exp.variants)
    if rnd < exp.rounds:
        return f"trial {n}/{n_min} {workload} {variant}"
    why = "until decided" if exp.until_decided else "for a narrower interval"
    last = exp.last_look_of(workload)
    limit = f", at most {last}" if last else ""
    return f"trial {n} {workload} {variant} (round {rnd + 1}, added {why}{limit})"


def drive(exp: Any) -> Summary:
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
                       f"as far as the {fmt.seconds(kw['left_s'])} left of its share of the "
                       "budget reach")
                progress.console.print(
                    f"  {kw['workload']}: a round takes about {fmt.seconds(kw['round_s'])}; it is "
                    f"judged after every round up to round {kw['last']} ({why})",
                    markup=False, style="dim")
            elif kind == "sized":
                progress.console.print(f"  {kw['workload']}: sized to this host: "
                                       + sized_text(kw), markup=False)
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


def trial_lines(kind: str, **kw: Any) -> None:
    """A lab's experiment told one line per event (no progress bar: a lab runs for long and
    its trials are worth a line each)."""
    if kind == "prepare":
        console.print(f"[bold]{kw['workload']}[/bold]: preparing data")
    elif kind == "burn_in":
        console.print(f"  {kw['workload']:<24} {kw['variant']:<14} burn-in trial (not counted)")
    elif kind == "trial_done":
        ts = kw["trials"]
        t = ts[0]
        what = (f"{fmt.number(t.throughput, 1):>10} {t.unit}" if len(ts) == 1 else
                f"{len(ts)} steps: " + ", ".join(f"{x.metrics.get('step')} "
                                                  f"{fmt.number(x.throughput)}" for x in ts[:4])
                + (" …" if len(ts) > 4 else ""))
        console.print(f"  {kw['workload']:<24} {kw['variant']:<14} round {kw['round'] + 1}: "
                      f"{what}")
    elif kind == "sized":
        console.print(f"  {kw['workload']}: " + ("the sizes the stored rounds ran with: "
                                                 if kw.get("resumed") else "sized to this "
                                                 "host: ") + sized_text(kw), markup=False)
    elif kind == "refused":
        console.print(f"[bold red]Variant {kw['variant']} refused:[/] {kw['reason']}")
    elif kind == "settings_replaced":
        console.print(f"  {kw['variant']} on {kw['workload']}: " + "; ".join(kw["replaced"]),
                      markup=False, style="yellow")
    elif kind == "stop":
        console.print(f"  [dim]{kw['workload']}: {kw['rounds']} rounds; {kw['reason']}[/dim]")


class ConsoleEvents(RunEvents):
    """The runner's events on this terminal: ``title`` heads the line that names the
    server; ``start`` gives the (text, style) lines said before the first trial; a lab's
    trials are told a line each (``lines``), the others' under a progress bar."""

    def __init__(self, title: str, tail: str = "", *,
                 start: Callable[..., list[tuple[str, str]]] | None = None,
                 lines: bool = False, asker: Callable[[str], bool] | None = None):
        self.title, self.tail, self.start, self.lines = title, tail, start, lines
        self.asker = asker

    def say(self, text: str, style: str = "") -> None:
        console.print(text, style=style or None, markup=False)

    def opened(self, where: str) -> None:
        console.print(f"[bold]{self.title}[/bold] on {escape(where)}{escape(self.tail)}")

    def plan(self, changes: list[dict[str, Any]], not_tested: list[str]) -> None:
        from ..report.terminal import render_plan_changes
        render_plan_changes(console, changes, not_tested)

    def variants(self, lvs: list[Any], base: str) -> None:
        from ..report.lab import render_variants
        render_variants(console, lvs, base)

    def starting(self, exp: Any, run_id: str, design: dict[str, Any]) -> None:
        for text, style in (self.start(exp, run_id, design) if self.start else []):
            console.print(text, style=style or None, markup=False)

    def drive(self, exp: Any) -> Summary:
        if self.lines:
            exp.on_event = trial_lines
            return exp.run()
        return drive(exp)


class LabEvents(ConsoleEvents):
    """A lab's events: its variants table, ``--check``'s answer, one line per trial."""

    def __init__(self, spec: Any, as_json: bool = False):
        super().__init__(spec.name, lines=True, asker=ask_terminal(), start=self._start)
        self.spec, self.as_json = spec, as_json

    def opened(self, where: str) -> None:
        pass                            # a lab's servers are in its variants table

    def _start(self, exp: Any, run_id: str, design: dict[str, Any]) -> list[tuple[str, str]]:
        spec = self.spec
        budget = f", budget {fmt.minutes(spec.budget_s, 1)}" if spec.budget_s else ""
        return [(f"{spec.name} ({spec.size}): {len(exp.variants)} variants x "
                 f"{len(exp.workloads)} workload runs, at least {spec.rounds} rounds"
                 f"{budget}. Run {run_id}.", "bold"), (design_line(design, "variants"), "dim")]

    def checked(self, lvs: list[Any], refused: dict[str, str], notes: list[str]) -> None:
        if self.as_json:
            print_json({"spec": self.spec.to_dict(), "notes": notes, "ok": not refused,
                        "variants": {lv.name: {"settings": lv.settings,
                                               "verified": lv.verified} for lv in lvs}})
        if not refused:
            n = sum(len(e.clients) for e in self.spec.workloads)
            console.print(f"{self.spec.path}: OK ({len(lvs)} variants, {n} workload runs, "
                          f"at least {self.spec.rounds} rounds).")


def _step_turns(steps: Any, pin: bool) -> str:
    """How the step workloads of ``steps`` (their names) take their turns inside a step,
    in parentheses; nothing where ``steps`` names none (an older run's ``True``)."""
    short = fmt.short(STEP_SLICE_S)
    how = {"insert-benchmark": (
               f"the Insert Benchmark's load steps in {short}-second slices until each is "
               "done, l.x index by index, its query steps with every server's writers at "
               f"once and the queries in {short}-second slices"
               + (", each query pgbench on one CPU with its backends" if pin else "")),
           "parallel-scan": ("parallel-scan's timed runs in turns run by run"
                             + (", every variant's backend on one CPU" if pin else "")),
           "in-server-loop": ("in-server-loop's loop calls in turns call by call"
                              + (", client i's backend of every variant on one CPU"
                                 if pin else "")
                              + f", its select-only in {fmt.short(SLICE_S)}-second slices")}
    said = [how[s] for s in steps if s in how] if isinstance(steps, list) else []
    return f" ({'; '.join(said)})" if said else ""


def design_line(design: dict[str, Any], what: str = "configs") -> str:
    """How a run measures, in a sentence: side by side (servers, placement) or one at a
    time and why."""
    if design.get("design") == "side by side":
        turns = []
        if design.get("slices", True):
            turns.append(f"in {fmt.short(SLICE_S)}-second slices"
                         + ("; for a workload that does not write, each pgbench on one CPU "
                            "with its connections' backends" if design.get("pin", True) else
                            "; the scheduler places pgbench and the backends (--no-pin)"))
        if design.get("steps"):
            turns.append("in a step workload step by step, the same step of every "
                         f"{what[:-1]} in turn" + _step_turns(design["steps"],
                                                              design.get("pin", True)))
        return (f"{what.capitalize()} measured side by side on a throwaway server each "
                f"({design['servers']} servers), taking turns " + "; ".join(turns) + ".")
    where = " on one server" if what == "configs" else ""
    if design.get("why"):
        return f"{what.capitalize()} measured one at a time{where}: {design['why']}."
    return f"{what.capitalize()} measured one at a time{where}."
