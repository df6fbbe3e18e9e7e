"""What a search's journal shows (pure), and ``tune --search`` on the terminal: each candidate
in the order tried with the stage it reached and the search's own estimate (biased upward,
so labelled as such), the incumbent's path, which knobs mattered (Optuna's importance), and
the confirmation's verdicts.  The HTML page (``search_html.py``) shows the same rows."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from rich.markup import escape
from rich.table import Table

from ..decide.effect import paired_interval
from ..decide.results import HeadToHead
from . import format as fmt
from .terminal import verdict

STAGE_STYLE = {"better": "bold green", "not better": "yellow", "dropped": "dim",
               "refused": "red"}
# every candidate's screen is shown at one level, whatever level its decisions used
SHOWN_LEVEL = 0.90


@dataclass(frozen=True)
class Estimate:
    """A stage's estimate of candidate / incumbent: the ratio and its interval at ``level``
    (NaN where the stage had fewer than two rounds)."""
    ratio: float
    low: float
    high: float
    level: float
    rounds: int


@dataclass(frozen=True)
class CandidateRow:
    number: int
    changes: dict[str, str]          # from the incumbent it raced
    stage: str
    incumbent: int | None            # the candidate it raced (None: pgaccel's rules)
    incumbent_log: float             # that incumbent's log estimate over the rules
    screen: Estimate | None
    confirm: Estimate | None
    params: dict[str, Any]

    @property
    def rounds(self) -> int:
        return sum(e.rounds for e in (self.screen, self.confirm) if e)

    def over_rules(self, e: Estimate) -> tuple[float, float, float]:
        """An estimate placed on the rules' scale (times the incumbent's own estimate)."""
        k = math.exp(self.incumbent_log)
        return e.ratio * k, e.low * k, e.high * k


def _estimate(look: Mapping[str, Any], level: float) -> Estimate | None:
    """A look's estimate: from its rounds' log ratios at ``level`` where the journal has
    them, else the look's own interval at the level it was decided at."""
    d = look.get("log_ratios")
    n = int(look.get("rounds") or 0)
    if d is not None and len(d) >= 2:
        iv = paired_interval(d, level)
        return Estimate(math.exp(iv.d), math.exp(iv.d - iv.h), math.exp(iv.d + iv.h),
                        level, len(d))
    if d is not None and len(d) == 1:
        return Estimate(math.exp(d[0]), math.nan, math.nan, level, 1)
    if look.get("ratio") is None or not n:
        return None
    return Estimate(look["ratio"], look.get("ci_low", math.nan),
                    look.get("ci_high", math.nan), look.get("confidence", math.nan), n)


def candidate_rows(journal: Mapping[str, Any]) -> list[CandidateRow]:
    """Every candidate in the order tried, each with the incumbent it raced: the screen at
    :data:`SHOWN_LEVEL`, the confirmation at its own (final look's) level."""
    rows = []
    inc_number, inc_log = None, 0.0
    for c in journal.get("candidates", []):
        screen = confirm = None
        for look in c.get("looks") or []:
            if look.get("stage") == "screen":
                screen = _estimate(look, SHOWN_LEVEL)
            elif look.get("stage") == "confirm":
                level = look.get("confidence") or SHOWN_LEVEL
                confirm = _estimate(look, level if math.isfinite(level) else SHOWN_LEVEL)
        rows.append(CandidateRow(c["number"], dict(c.get("changes") or {}),
                                 c.get("stage", ""), inc_number, inc_log, screen, confirm,
                                 dict(c.get("params") or {})))
        if c.get("stage") == "better":
            inc_number, inc_log = c["number"], float(c.get("log_effect") or 0.0)
    return rows


def incumbent_path(journal: Mapping[str, Any]) -> list[tuple[int | None, float]]:
    """(candidate number, its log estimate over the rules) from the rules (None, 0) on,
    one entry per change of incumbent."""
    return [(None, 0.0)] + [(p["number"], float(p["log_effect"]))
                            for p in journal.get("path") or []]


def plan_diff(journal: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(setting, pgaccel's rules, found) for each setting the found plan changes."""
    inc = journal.get("incumbent") or {}
    if inc.get("number") is None:
        return []
    rules = journal.get("rules") or {}
    return [(k, str(rules.get(k, "(default)")), str(v))
            for k, v in (inc.get("settings") or {}).items() if str(rules.get(k)) != str(v)]


def changes_text(changes: dict[str, Any], limit: int = 4) -> str:
    items = [f"{k}={v}" for k, v in changes.items()]
    more = len(items) - limit
    return ", ".join(items[:limit]) + (f" (+{more})" if more > 0 else "")


def estimate_text(e: Estimate | None) -> str:
    if e is None:
        return fmt.DASH
    return fmt.ratio_ci(e.ratio, e.low, e.high) if math.isfinite(e.low) else \
        fmt.pct_change(e.ratio)


def render_candidates(dest, journal: dict[str, Any]) -> None:
    t = Table(title=f"Search {journal['id']}: candidates in the order tried (the search's own "
              f"estimates against the incumbent, biased upward; screen at "
              f"{fmt.level(SHOWN_LEVEL)})", title_justify="left")
    for col in ("#", "changes from the incumbent", "stage", "rounds", "screen",
                "confirmation"):
        t.add_column(col, justify="right" if col in ("#", "rounds") else "left")
    for r in candidate_rows(journal):
        style = STAGE_STYLE.get(r.stage, "")
        t.add_row(str(r.number), escape(changes_text(r.changes)),
                  f"[{style}]{r.stage}[/]" if style else r.stage, str(r.rounds or ""),
                  estimate_text(r.screen), estimate_text(r.confirm))
    dest.print(t)
    imp = {} if importance_note(journal) else journal.get("importance") or {}
    if imp:
        top = sorted(imp.items(), key=lambda kv: -kv[1])[:5]
        dest.print("Knobs that mattered (Optuna's importance): "
                   + ", ".join(f"{k} {fmt.share(v)}" for k, v in top))


def render_found_vs(dest, rows: list[HeadToHead], confidence: float) -> None:
    ci = f"{fmt.level(confidence)} CI"
    t = Table(title=f"The confirmation: the found settings against each (ratio of geometric "
              f"means, {ci})", title_justify="left")
    for col in ("workload", "against", "found / it", ci, "verdict"):
        t.add_column(col)
    for r in rows:
        c = r.comparison
        t.add_row(f"{r.workload} c={r.clients}", r.base, fmt.pct_change(c.ratio),
                  fmt.interval(c.ci_low, c.ci_high), verdict(c))
    dest.print(t)


IMPORTANCE_MIN = 10       # measured candidates before Optuna's importance is shown


def measured_candidates(journal: Mapping[str, Any]) -> int:
    """Candidates a race measured (those with a look; a repeat of the incumbent has none)."""
    return sum(1 for c in journal.get("candidates") or [] if c.get("looks"))


def importance_note(journal: Mapping[str, Any]) -> str | None:
    """Why the page shows no knob importance, when it has too few candidates for one: an
    importance from a handful of noisy estimates ranks the knobs by chance (the page showed
    one from 2). None when there are enough."""
    n = measured_candidates(journal)
    if n >= IMPORTANCE_MIN:
        return None
    return (f"Which knobs mattered is not shown: Optuna's importance needs at least "
            f"{IMPORTANCE_MIN} measured candidates to rank anything but noise, and this "
            f"search measured {n}.")
