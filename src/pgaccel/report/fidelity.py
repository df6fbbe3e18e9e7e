"""A replay's fidelity across a run's trials (pure): for each captured workload, what share
of the captured time and calls it replays, every statement's captured share of calls and
time against the median of the trials' replayed shares, the statements not replayed with
their reasons, the values it guessed, how it ran beside other configs, and the calibration
(each statement's mean time, rows and blocks per call on the lab's server with the captured
settings against the capture's).  ``capture/replay.py`` decided each trial's flags when it
ran; this gathers them.  Shown on the terminal after the summary and in both reports."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from rich.markup import escape
from rich.table import Table

from . import format as fmt

FLAG = "the replay is not the captured mix"
COST = "the replay's cost is not the captured one: "
LEFT_FLOOR = 0.005             # a statement left out below this share of time and calls
# a statement's text on one line, cut, at least 24 columns wide
_STMT = {"no_wrap": True, "overflow": "ellipsis", "min_width": 20, "max_width": 44}
_NUM = {"no_wrap": True, "min_width": 6}


@dataclass(frozen=True)
class Fidelity:
    workload: str
    trials: int
    flagged: int
    first_problem: str
    rows: list[dict[str, Any]]       # query, captured_calls/time, replayed_calls/time (medians)
    replay: dict[str, Any] = field(default_factory=dict)   # the first trial's replay facts
    costly: tuple[str, ...] = ()     # the calibration's statements more than 2x off
    fixed: tuple[int, ...] = ()      # a fixed-work trial's statements per client, each size

    @property
    def fixed_line(self) -> str:
        """How a fixed-work replay's trials were measured, or ''."""
        if not self.fixed:
            return ""
        n = " or ".join(f"{x:,}" for x in self.fixed)
        return (f"Each measured trial ran the same {n} statements per client in the same "
                "order on every config (a fixed amount of work: its throughput is the time "
                "they took)")

    @property
    def left(self) -> list[dict[str, Any]]:
        return list(self.replay.get("left") or [])

    @property
    def left_of_note(self) -> list[dict[str, Any]]:
        return [x for x in self.left if x["share_time"] >= LEFT_FLOOR
                or x["share_calls"] >= LEFT_FLOOR]

    @property
    def coverage(self) -> str:
        """``97% of the captured time and 95% of the calls replayed``."""
        t, c = self.replay.get("replayed_time"), self.replay.get("replayed_calls")
        if t is None:
            return ""
        return f"{fmt.share(t)} of the captured time and {fmt.share(c)} of the calls replayed"

    @property
    def attention(self) -> bool:
        return bool(self.flagged or self.left_of_note or self.costly)

    @property
    def line(self) -> str:
        parts = [self.coverage] if self.coverage else []
        if not self.flagged:
            parts.append(f"every statement's share of time and calls within 10 points of "
                         f"the captured in all {self.trials} trials")
        else:
            why = self.first_problem.split(": ", 1)[-1]
            parts.append(f"{FLAG} in {self.flagged} of {self.trials} trials: {why}")
        if self.left_of_note:
            big = self.left_of_note[0]
            parts.append(f"{len(self.left_of_note)} statement(s) not replayed, the largest "
                         f"'{_short(big['query'], 50)}': {big['reason']}")
        if self.costly:
            parts.append(f"{len(self.costly)} statement(s) cost more than 2x the captured "
                         f"in the calibration: {self.costly[0]}")
        return f"{self.workload}: " + "; ".join(parts) + "."

    @property
    def calibration(self) -> list[dict[str, Any]]:
        out = []
        for r in self.replay.get("calibration") or []:
            a, b = r.get("captured_mean_ms"), r.get("replayed_mean_ms")
            out.append({**r, "ratio": (b / a) if a and b is not None else None})
        return out


def g3(x: Any) -> str:
    """Three significant figures (a calibration's ms, rows, blocks per call)."""
    return f"{float(x):.3g}" if fmt.known(x) else fmt.DASH


def _short(q: str, n: int = 70) -> str:
    return " ".join(str(q).split())[:n]


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
        costly = tuple(dict.fromkeys(x[len(COST):] for m in ms
                                     for x in (m.get("warnings") or []) if x.startswith(COST)))
        replay = next((m["replay"] for m in ms if m.get("replay")), {})
        fixed = tuple(sorted({int(m["fixed_work"]["transactions_per_client"]) for m in ms
                              if m.get("fixed_work")}))
        out.append(Fidelity(w, len(ms), n_flag, flagged[0] if flagged else "", rows,
                            replay, costly, fixed))
    return out


def render_fidelity(dest, fids: list[Fidelity], top: int = 15) -> None:
    for f in fids:
        t = Table(title=f"{escape(f.workload)}: the replay's mix against the captured one "
                  "(medians over trials)", title_justify="left")
        for col in ("statement", "time\ncapt.", "time\nreplay", "calls\ncapt.",
                    "calls\nreplay"):
            t.add_column(col, justify="left" if col == "statement" else "right",
                         **(_STMT if col == "statement" else _NUM))
        for r in f.rows[:top]:
            t.add_row(escape(_short(r["query"])),
                      fmt.share(r["captured_time"]), fmt.share(r["replayed_time"]),
                      fmt.share(r["captured_calls"]), fmt.share(r["replayed_calls"]))
        if len(f.rows) > top:
            rest = f.rows[top:]
            t.add_row(f"({len(rest)} more statements)",
                      fmt.share(sum(r["captured_time"] for r in rest)),
                      fmt.share(sum(r["replayed_time"] for r in rest)),
                      fmt.share(sum(r["captured_calls"] for r in rest)),
                      fmt.share(sum(r["replayed_calls"] for r in rest)))
        dest.print(t)
        if f.left:
            lt = Table(title=f"{escape(f.workload)}: captured statements not replayed",
                       title_justify="left")
            for col in ("statement", "time", "calls", "why"):
                lt.add_column(col, justify="right" if col in ("time", "calls") else "left",
                              **{"statement": _STMT, "why": {}}.get(col, _NUM))
            for x in f.left:
                lt.add_row(escape(_short(x["query"], 60)), fmt.share(x["share_time"]),
                           fmt.share(x["share_calls"]), escape(x["reason"]))
            dest.print(lt)
        tx = f.replay.get("transaction_control")
        if tx:
            dest.print(f"Transaction control (BEGIN, COMMIT, ...) was {fmt.share(tx['share_calls'])}"
                       " of the captured calls; each replayed statement commits alone.",
                       style="dim")
        if f.calibration:
            ct = Table(title=f"{escape(f.workload)}: calibration, each statement on the lab's "
                       "server with the captured settings (means per call)",
                       title_justify="left")
            for col in ("statement", "ms\ncapt.", "ms\nreplay", "ratio", "rows\ncapt.",
                        "rows\nreplay", "blocks\ncapt.", "blocks\nreplay"):
                ct.add_column(col, justify="left" if col == "statement" else "right",
                              **({**_STMT, "max_width": 30} if col == "statement" else _NUM))
            for r in f.calibration:
                ct.add_row(escape(_short(r["query"], 50)), g3(r["captured_mean_ms"]),
                           g3(r["replayed_mean_ms"]), fmt.ratio(r["ratio"]),
                           g3(r.get("captured_rows")), g3(r.get("replayed_rows")),
                           g3(r.get("captured_blocks")), g3(r.get("replayed_blocks")))
            dest.print(ct)
        for g in f.replay.get("guesses") or []:
            dest.print(escape(f"guessed for '{_short(g['query'], 50)}': "
                              + "; ".join(g["guesses"])), style="dim")
        if f.replay.get("design"):
            dest.print(escape(f"{f.workload} ran {f.replay['design']}."), style="dim")
        if f.fixed_line:
            dest.print(escape(f.fixed_line + "."), style="dim")
        dest.print(escape(f.line), style="yellow" if f.attention else "dim")
