"""A search's page (``searches/ID/report.html``): the confirmation's verdicts first (the only
effect a search reports), the plan found as a diff against pgaccel's rules, then every
candidate in the order tried with its interval, the incumbent's path, the candidates over the
space in parallel coordinates and each knob's importance, and how candidates were raced.
Input: the journal ``search.json`` alone; one self-contained file, like a run's report."""

from __future__ import annotations

import math
import os
from typing import Any, Mapping

from markupsafe import Markup

from ..decide.effect import Comparison
from ..decide.race import RaceRules
from ..decide.results import HeadToHead, Summary, judged
from ..util import atomic_write
from . import format as fmt
from . import search as view
from . import search_charts as charts
from .html import _css, _env
from .terminal import verdict_text
from .view import CSS_CLASS

NAMES = {"baseline": "server defaults", "tuned": "pgaccel's rules", "pgtune": "PGTune",
         "found": "found settings"}


def _line(subject: str, against: str, c: Comparison) -> dict[str, Any]:
    return {"subject": subject, "against": against, "verdict": verdict_text(c),
            "css": CSS_CLASS.get(c.verdict, ""), "effect": fmt.pct_change(c.ratio),
            "interval": f"{fmt.level(c.confidence)} CI {fmt.interval(c.ci_low, c.ci_high)}"}


def headlines(journal: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The confirmation's verdicts: the found settings against the rules and PGTune when
    something was found; each config against the server defaults."""
    conf = journal.get("confirmation") or {}
    out = []
    for other in ("tuned", "pgtune"):
        for r in (conf.get("found_vs") or {}).get(other, []):
            h = HeadToHead.from_dict(r)
            out.append(_line(f"found settings ({h.workload} c={h.clients})",
                             f"vs {NAMES[other]}", h.comparison))
    if conf.get("summary"):
        s = Summary.from_dict(conf["summary"])
        for w in s.workloads:
            for name, c in w.comparisons.items():
                out.append(_line(f"{NAMES.get(name, name)} ({w.workload} c={w.clients})",
                                 f"vs {NAMES.get(s.base, s.base)}", c))
    return out


def outcome(journal: Mapping[str, Any]) -> str:
    rows = view.candidate_rows(journal)
    promoted = sum(1 for r in rows if r.confirm is not None)
    inc = (journal.get("incumbent") or {}).get("number")
    n = len(rows)
    if inc is not None:
        return (f"Candidate {inc} was shown better than pgaccel's rules ({n} candidates, "
                f"{promoted} confirmed or tried); the confirmation measured it afresh.")
    screen = ("none promoted by the screen" if not promoted else
              f"{promoted} promoted by the screen, none confirmed on fresh rounds")
    return f"No candidate was shown better than pgaccel's rules: {n} candidates, {screen}."


def method(rules: RaceRules = RaceRules()) -> str:
    r = rules
    return (
        f"Each candidate ran side by side with the incumbent on two throwaway servers, one "
        f"log ratio per round (the servers swap configs every round). Screen: looks after "
        f"rounds {r.screen_first}–{r.screen_last}, dropped once its one-sided "
        f"{fmt.level(r.futility)} upper bound is below +{fmt.share(r.min_effect)}, promoted "
        f"once its one-sided {fmt.level(r.promote)} lower bound is above no change. "
        f"Confirmation: on fresh rounds, looks after rounds {r.confirm_first}–"
        f"{r.confirm_last}, \"better\" only on a faster verdict at a one-sided "
        f"{fmt.percent(r.alpha / r.max_confirmations, 2)} error (spent over its looks), at "
        f"most {r.max_confirmations} confirmations per search: the chance that a search "
        f"makes a candidate that is not better the incumbent is at most "
        f"{fmt.share(r.alpha)}. The search's own estimates are biased upward (the best of "
        f"many noisy measurements); the effect reported is the final confirmation's, on "
        f"fresh servers.")


def context(journal: Mapping[str, Any]) -> dict[str, Any]:
    rows = view.candidate_rows(journal)
    level = fmt.level(view.SHOWN_LEVEL)
    p = journal.get("params") or {}
    conf = journal.get("confirmation") or {}
    report = os.path.join(conf["run_dir"], "report.html") if conf.get("run_dir") else None
    imp_note = view.importance_note(journal)
    imp = {} if imp_note else journal.get("importance") or {}
    space = charts.space_of(journal)
    table = []
    for r in rows:
        table.append({
            "number": r.number, "changes": view.changes_text(r.changes, 99),
            "stage": r.stage, "rounds": r.rounds,
            "css": {"better": "faster", "not better": "nee"}.get(r.stage, ""),
            "screen": view.estimate_text(r.screen), "confirm": view.estimate_text(r.confirm),
            "confirm_level": (fmt.level(r.confirm.level)
                              if r.confirm and math.isfinite(r.confirm.low) else ""),
            "incumbent": "rules" if r.incumbent is None else f"#{r.incumbent}"})
    spent = journal.get("spent_s") or 0.0
    found = (journal.get("incumbent") or {}).get("number") is not None
    v = judged(conf.get("summary"), "found" if found else "tuned") \
        if conf.get("summary") else None
    advice = ("none" if v is None else "slower" if v["slower"] else
              "undecided" if v["undecided"] or not v["held"] else "proven")
    return {
        "advice": advice, "advice_text": fmt.verdict_lines(
            (v or {}).get("slower") or (v or {}).get("undecided") or (v or {}).get("held")
            or []),
        "id": journal.get("id"), "css": _css(),
        "subtitle": (f"{', '.join(journal.get('workloads') or [journal.get('workload')])}, "
                     f"{p.get('clients')} clients, scale "
                     f"{p.get('scale')}, PostgreSQL {journal.get('server_version', '?')}; "
                     f"budget {fmt.minutes(journal.get('budget_s'))}, "
                     f"{fmt.minutes(spent)} searched; status {journal.get('status')}"),
        "outcome": outcome(journal), "headlines": headlines(journal),
        "confirmation_run": conf.get("run_id"), "confirmation_report": report,
        "plan": view.plan_diff(journal), "rows": table, "level": level,
        "path": [("pgaccel's rules" if n is None else f"candidate {n}",
                  fmt.pct_change(math.exp(v))) for n, v in view.incumbent_path(journal)],
        "candidates_chart": Markup(charts.candidates_chart(
            rows, view.incumbent_path(journal), level)) if rows else "",
        "parallel_chart": Markup(charts.parallel_chart(space, rows))
        if rows and space else "",
        "importance_chart": Markup(charts.importance_chart(imp)) if imp else "",
        "importance": sorted(imp.items(), key=lambda kv: -kv[1]),
        "importance_note": imp_note if rows else None,
        "space": space, "fmt": fmt, "method": method(), "many_knobs": len(space) > 6,
    }


def render_search_html(journal: Mapping[str, Any]) -> str:
    return _env().get_template("search.html.j2").render(**context(journal))


def write_search_report(search_dir: str, journal: Mapping[str, Any]) -> str:
    path = os.path.join(search_dir, "report.html")
    atomic_write(path, render_search_html(journal))
    return path
