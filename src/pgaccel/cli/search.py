"""``pgaccel tune --search``: the flags turned into a ``session.search.SearchRequest``, the
search's progress and its candidates on the terminal, then the confirmation run rendered as
``run`` renders one (docs/search.md).  It is tune's half, not a command of its own."""

from __future__ import annotations

import math
import os

from rich.markup import escape

from ..errors import UsageError
from ..probe.host import probe_host
from ..report import format as fmt
from ..report.search import render_candidates, render_found_vs
from ..report.search_html import write_search_report
from ..report.terminal import render_summary
from ..session import search as srch
from ..session.search_confirm import confirm_search
from ..session.request import ServerRequest
from ..workloads.base import RunParams, get_workload
from .common import console, out, parse_budget, parse_list, write_reports
from .progress import ConsoleEvents


class _Events(srch.SearchEvents):
    """The search's lines on the terminal above a progress bar of its searching time, whose
    description is the candidate in its race and its estimate so far."""

    def __init__(self, search_s: float):
        from .progress import make_progress
        self.search_id: str | None = None
        self.search_s = search_s
        self.progress = make_progress()
        self.task = self.progress.add_task("starting", total=search_s)
        self.started = 0.0

    def __enter__(self) -> "_Events":
        import time
        self.started = time.monotonic()
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def _tick(self, description: str) -> None:
        import time
        self.progress.update(self.task, description=description,
                             completed=min(self.search_s, time.monotonic() - self.started))

    def say(self, text: str, style: str = "") -> None:
        console.print(text, style=style or None, markup=False)

    def opened(self, search_id: str, directory: str, resumed: bool) -> None:
        self.search_id = search_id
        console.print(f"Search {search_id} ({'resumed; ' if resumed else ''}journal "
                      f"{os.path.join(directory, 'search.json')}): Ctrl-C keeps what it "
                      f"measured, and `pgaccel tune --search --resume {search_id}` carries "
                      "on.", markup=False, soft_wrap=True)

    def candidate(self, number: int, changes: dict[str, str], left_s: float) -> None:
        from ..report.search import changes_text
        console.print(f"[bold]candidate {number}[/bold] ({fmt.minutes(left_s)} of search "
                      f"left): {escape(changes_text(changes, 6))}")
        self._tick(f"candidate {number}: screen round 1")

    def looked(self, number: int, stage: str, look) -> None:
        if look.decision == "continue" or not look.rounds:
            so_far = (f": {fmt.ratio_ci(look.ratio, look.ci_low, look.ci_high)}"
                      if look.rounds and math.isfinite(look.ratio) else "")
            self._tick(f"candidate {number}: {stage} round {look.rounds + 1}"
                       f"{escape(so_far)}")
            return
        ratio = fmt.ratio_ci(look.ratio, look.ci_low, look.ci_high)
        console.print(f"  {stage} after {look.rounds} rounds: {ratio} at "
                      f"{fmt.level(look.confidence)} -> {look.decision}"
                      + (f" ({escape(look.why)})" if look.why else ""), style="dim")
        self._tick(f"candidate {number}: {look.decision}")


def _space_file(path: str | None) -> dict:
    if not path:
        return {}
    try:
        import tomllib
    except ImportError:                                  # Python 3.10
        import tomli as tomllib                          # type: ignore[no-redef]
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise UsageError(f"--space {path}: {e.strerror or e}.",
                         "Give the path of a TOML file (docs/search.md has an example).") \
            from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"--space {path}: not valid TOML ({e}).",
                         "docs/search.md has an example.") from None


def run_tune_search(*, pg_bin, run_as, workdir, keep, workload, budget, knobs, space, resume,
                    scale, risk, huge_pages=False) -> None:
    wls = [get_workload(w) for w in parse_list(workload)]
    if not wls:
        raise UsageError("--workloads names no workload.",
                         "Name one or more: tpcb-like, select-only, a sysbench workload.")
    for wl in wls:
        if wl.kind == "steps":
            raise UsageError(f"--search races candidates on rounds of one interval; "
                             f"{wl.name} is a workload of steps.", "Use tpcb-like, "
                             "select-only or a sysbench workload.")
    names = tuple(dict.fromkeys(w.name for w in wls))
    resumed = srch.load_search(resume) if resume else None
    if resumed:            # the search carries on with what it measured, not today's flags
        names = tuple(resumed.get("workloads") or resumed["workload"].split(","))
        wls = [get_workload(w) for w in names]
    budget_s = parse_budget(budget)
    if budget_s < 10 * 60:
        raise UsageError(f"--budget {budget}: a search needs at least 10 minutes (a few "
                         "candidates and a confirmation).", "Give --budget 30m or more.")
    facts = probe_host(data_dir=workdir or "/")
    # trials long enough to hold the workloads' long statements (a replay of second-long
    # statements in 5-s trials would be decided by where each trial ends)
    duration = max([5.0] + [w.trial_seconds() for w in wls if hasattr(w, "trial_seconds")])
    params = RunParams(clients=max(2, 2 * int(facts.effective_cpus)), duration=duration,
                       warmup=min(10.0, max(2.0, duration / 4)), scale=scale)
    if resumed:
        params = RunParams(**resumed["params"])
    req = srch.SearchRequest(
        ServerRequest(pg_bin=pg_bin, run_as=run_as, workdir=workdir, keep=keep),
        workloads=names, params=params, budget_s=budget_s,
        knobs=tuple(parse_list(knobs)) if knobs else (), space=_space_file(space),
        risk_durability=bool(risk), huge_pages=bool(huge_pages), resume=resume)
    console.print(f"[bold]pgaccel tune --search[/bold]: {', '.join(names)} (each round runs "
                  f"{'all' if len(names) > 1 else 'it'}), {params.clients} clients, "
                  f"trials of {fmt.seconds(params.duration)}, scale {params.scale}, budget "
                  f"{fmt.minutes(budget_s)} "
                  f"({fmt.minutes(budget_s * (1 - req.confirm_share))} searching, then a "
                  "confirmation on fresh servers)")
    with _Events(req.budget_s * (1 - req.confirm_share)) as events:
        try:
            s = srch.run_search(req, facts, events)
        except KeyboardInterrupt:
            if events.search_id:
                console.print(f"Search {events.search_id} interrupted; what it measured is "
                              "kept. Carry on with: pgaccel tune --search --resume "
                              f"{events.search_id}", style="yellow", markup=False,
                              soft_wrap=True)
            raise
    j = s.journal
    write_search_report(s.dir, j)
    console.print(f"Search {j['id']}: {len(j['candidates'])} candidates in "
                  f"{fmt.minutes(j['spent_s'])}; journal {os.path.join(s.dir, 'search.json')}")
    render_candidates(out, j)
    found = srch.found_settings(j)
    if found:
        eff = j["incumbent"]["log_effect"]
        console.print(f"Best: candidate {j['incumbent']['number']} "
                      f"({fmt.pct_change(math.exp(eff))} over the rules by the search's own, "
                      "biased estimate); the confirmation measures it afresh.")
    else:
        console.print("No candidate was shown better than pgaccel's rules; the confirmation "
                      "measures the rules against the defaults and PGTune.")
    res = confirm_search(s, ConsoleEvents("pgaccel tune --search: confirmation"))
    outcome = res["outcome"]
    render_summary(out, outcome.summary)
    from ..report.fidelity import fidelity_of, render_fidelity
    render_fidelity(out, fidelity_of(t.to_dict() for t in outcome.trials))
    from ..decide.results import HeadToHead
    rows = [HeadToHead.from_dict(r) for other in ("tuned", "pgtune")
            for r in res["found_vs"].get(other, [])]
    if found:
        render_found_vs(out, rows, outcome.summary.confidence)
    write_reports(outcome.run_dir, outcome.store_path, outcome.run_id)
    page = write_search_report(s.dir, s.journal)
    console.print(f"The search's page: {page}")
    from ..decide.results import judged
    v = judged(outcome.summary.to_dict(), "found" if found else "tuned")
    what = "what it found" if found else "pgaccel's rules"
    if v["slower"]:
        console.print(f"Nothing to apply: the confirmation measured {what} slower "
                      f"({fmt.verdict_lines(v['slower'])}).", style="bold red")
    elif v["undecided"] or not v["held"]:
        console.print(f"Nothing is advised yet: the confirmation left {what} undecided "
                      f"({fmt.verdict_lines(v['undecided']) or 'no verdict'}); a longer "
                      "--budget gives it more rounds.", style="yellow")
    elif found:
        console.print(f"Apply what it found: pgaccel tune --from-search {j['id']} --apply "
                      "(with --pgdata or --dsn), or render it with --format "
                      "conf|sql|patroni|...")
    else:
        console.print("Nothing beyond pgaccel's rules, which the confirmation proved "
                      f"({fmt.verdict_lines(v['held'])}): `pgaccel tune --apply` applies "
                      "them.")
