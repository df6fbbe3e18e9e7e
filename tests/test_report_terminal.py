"""Terminal tables at the width of the user's terminal (report/terminal.py)."""

from __future__ import annotations

import dataclasses
import io

import pytest
from rich.console import Console

from pgaccel.report.terminal import NARROW_DROPS, fitted_table

RIGHT = {"justify": "right"}
COLUMNS = [("config", {"no_wrap": True}), ("n", RIGHT),
           ("median tps", {"justify": "right", "no_wrap": True}), ("CV", RIGHT),
           ("p95 ms", RIGHT), ("srv µs/op", RIGHT), ("client CPU", RIGHT),
           ("vs baseline (99.1% CI)", {"justify": "right", "no_wrap": True}), ("verdict", {"min_width": 8})]
ROWS = [["baseline", "6", "4,922", "4.7%", "1.26", "208.1", "28%", "baseline", ""],
        ["tuned", "6", "5,396", "8.4%", "1.16", "189.5", "29%", "+7.9% (+0.0% … +16.5%)",
         "not enough evidence (+4 rounds)"]]


def render(width: int) -> str:
    c = Console(file=io.StringIO(), width=width, color_system=None)
    c.print(fitted_table(c, "tpcb-like (4 clients, tps)", COLUMNS, ROWS))
    return c.file.getvalue()


@pytest.mark.parametrize("width,gone", [
    (200, ()),
    (120, ("client CPU",)),
    (100, ("client CPU", "p95 ms", "srv µs/op")),
    (80, NARROW_DROPS),
])
def test_a_narrow_terminal_loses_the_optional_columns_first(width, gone):
    text = render(width)
    assert max(len(line) for line in text.splitlines()) <= width
    for header in NARROW_DROPS:
        assert (header not in text) == (header in gone), (header, text)
    # the effect and its interval are never cut, whatever the width
    assert "+7.9% (+0.0% … +16.5%)" in text
    assert "…" not in text.replace("+0.0% … +16.5%", "")
    assert "enough" in text and "evidence" in text


def test_the_verdict_keeps_whole_words_on_a_very_narrow_terminal():
    text = render(64)
    assert "faster" not in text and "ve…" not in text and "evidence" in text, text


@pytest.mark.parametrize("more,says", [
    (4, "not enough evidence (+4 rounds)"),
    (1, "not enough evidence (+1 round)"),
    (50, "not enough evidence (+50 rounds)"),
    (533, "not enough evidence"),        # "would probably not decide": no count to chase
    (None, "not enough evidence"),
])
def test_the_verdict_counts_further_rounds_only_while_they_would_probably_decide(more, says):
    from pgaccel.lab.effect import compare
    from pgaccel.report.terminal import verdict_text
    c = compare([100.0] * 4, [107.0, 95.0, 104.5, 99.3], base_rounds=[0, 1, 2, 3],
                other_rounds=[0, 1, 2, 3])
    assert verdict_text(dataclasses.replace(c, more_rounds=more)) == says
