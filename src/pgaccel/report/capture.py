"""What a capture recorded, on the terminal: the statements that took most of the time,
hidden statements, and where the bundle is (``pgaccel capture``, ``run --capture``)."""

from __future__ import annotations

import math

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import format as fmt


def render_capture(out: Console, err: Console, path: str, m: dict) -> None:
    t = Table(title=f"What {escape(m['database'])} ran in {fmt.duration(m['duration_s'])} "
              f"({fmt.number(m['totals']['calls'])} calls, "
              f"{fmt.duration(m['totals']['time_ms'] / 1000)} of execution)",
              title_justify="left")
    for col in ("share of time", "share of calls", "calls", "mean ms", "sd ms", "statement"):
        t.add_column(col, justify="left" if col == "statement" else "right")
    for s in m["statements"][:15]:
        t.add_row(fmt.share(s.share_time), fmt.share(s.share_calls), fmt.number(s.calls),
                  fmt.general(round(s.mean_ms, 3)),
                  fmt.general(round(s.stddev_ms, 3)) if not math.isnan(s.stddev_ms)
                  else fmt.DASH, escape(" ".join(s.query.split())[:90]))
    out.print(t)
    if m.get("hidden_statements"):
        err.print(f"{m['hidden_statements']} statement(s) of other roles were hidden from "
                  "this role (pg_stat_statements shows their queryid and text only to "
                  "superusers and pg_read_all_stats): capture as such a role to see "
                  "the whole mix.", style="yellow")
    err.print(f"Bundle: {path} (readable by you only); parameter values: "
              f"{m['parameter_values']}")
