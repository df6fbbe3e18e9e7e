"""A replay's fidelity across a run's trials (pure): for each captured workload, each top
statement's captured share of calls and time against the median of the trials' replayed
shares, and how many trials were flagged (``capture/replay.fidelity`` decided each trial's
flag when it ran).  Shown on the terminal after the summary and in both reports."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from rich.markup import escape
from rich.table import Table

from . import format as fmt

FLAG = "the replay is not the captured mix"


@dataclass(frozen=True)
class Fidelity:
    workload: str
    trials: int
    flagged: int
    first_problem: str
    rows: list[dict[str, Any]]       # query, captured_calls/time, replayed_calls/time (medians)

    @property
    def line(self) -> str:
        if not self.flagged:
            return (f"{self.workload}: the replay ran the captured mix (every top statement's "
                    f"share of time and calls within 10% in all {self.trials} trials).")
        why = self.first_problem.split(": ", 1)[-1]
        return f"{self.workload}: {FLAG} in {self.flagged} of {self.trials} trials: {why}."


def fidelity_of(trials: Iterable[Mapping[str, Any]]) -> list[Fidelity]:
    """From trial dicts (``run.json``'s, or ``Trial.to_dict()``), per captured workload."""
    by: dict[str, list[Mapping[str, Any]]] = {}
    for t in trials:
        m = t.get("metrics") or {}
        if m.get("fidelity"):
            by.setdefault(t["workload"], []).append(m)
    out = []
    for w, ms in by.items():
        flagged = [x for m in ms for x in (m.get("warnings") or []) if x.startswith(FLAG)]
        per: dict[str, list[Mapping[str, Any]]] = {}
        for m in ms:                 # by the whole text's key: long texts share a prefix
            for r in m["fidelity"]:
                per.setdefault(r.get("key") or r["query"], []).append(r)
        rows = [{"query": rs[0]["query"], "captured_calls": rs[0]["captured_calls"],
                 "captured_time": rs[0]["captured_time"],
                 "replayed_calls": statistics.median(r["replayed_calls"] for r in rs),
                 "replayed_time": statistics.median(r["replayed_time"] for r in rs)}
                for rs in per.values()]
        rows.sort(key=lambda r: -r["captured_time"])
        n_flag = sum(1 for m in ms if any(x.startswith(FLAG)
                                          for x in (m.get("warnings") or [])))
        out.append(Fidelity(w, len(ms), n_flag, flagged[0] if flagged else "", rows))
    return out


def render_fidelity(dest, fids: list[Fidelity], top: int = 8) -> None:
    for f in fids:
        t = Table(title=f"{escape(f.workload)}: the replay's mix against the captured one "
                  "(medians over trials)", title_justify="left")
        for col in ("statement", "time captured", "time replayed", "calls captured",
                    "calls replayed"):
            t.add_column(col, justify="left" if col == "statement" else "right")
        for r in f.rows[:top]:
            t.add_row(escape(" ".join(r["query"].split())[:70]),
                      fmt.share(r["captured_time"]), fmt.share(r["replayed_time"]),
                      fmt.share(r["captured_calls"]), fmt.share(r["replayed_calls"]))
        dest.print(t)
        dest.print(escape(f.line), style="yellow" if f.flagged else "dim")
