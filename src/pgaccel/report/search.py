"""``tune --search`` on the terminal: each candidate in the order tried with the stage it
reached and the search's own estimate (biased upward, so labelled as such), the incumbent's
path, which knobs mattered (Optuna's importance), and the confirmation's verdicts."""

from __future__ import annotations

import math
from typing import Any

from rich.markup import escape
from rich.table import Table

from ..decide.results import HeadToHead
from . import format as fmt
from .terminal import verdict

STAGE_STYLE = {"better": "bold green", "not better": "yellow", "dropped": "dim",
               "refused": "red"}


def changes_text(changes: dict[str, Any], limit: int = 4) -> str:
    items = [f"{k}={v}" for k, v in changes.items()]
    more = len(items) - limit
    return ", ".join(items[:limit]) + (f" (+{more})" if more > 0 else "")


def render_candidates(dest, journal: dict[str, Any]) -> None:
    t = Table(title=f"Search {journal['id']}: candidates in the order tried (estimates are "
              "the search's own, biased upward)", title_justify="left")
    for col in ("#", "changes from the incumbent", "stage", "vs rules (search)"):
        t.add_column(col, justify="right" if col in ("#", "vs rules (search)") else "left")
    for c in journal.get("candidates", []):
        stage = c.get("stage", "")
        style = STAGE_STYLE.get(stage, "")
        eff = c.get("log_effect")
        t.add_row(str(c["number"]), escape(changes_text(c.get("changes") or {})),
                  f"[{style}]{stage}[/]" if style else stage,
                  fmt.pct_change(math.exp(eff)) if eff is not None else fmt.DASH)
    dest.print(t)
    imp = journal.get("importance") or {}
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
