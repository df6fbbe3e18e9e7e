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
    from pgaccel.decide.effect import compare
    from pgaccel.report.terminal import verdict_text
    c = compare([100.0] * 4, [107.0, 95.0, 104.5, 99.3], base_rounds=[0, 1, 2, 3],
                other_rounds=[0, 1, 2, 3])
    assert verdict_text(dataclasses.replace(c, more_rounds=more)) == says


# -- what each table says, value by value ----------------------------------------------------
# The renderers below are those `pgaccel run`, `run --stack` and `bench` print with, fed the
# typed results the judge makes; the numbers are asymmetric so that a swapped column, a
# swapped bound or a lost sign shows.

from pgaccel.decide.effect import WORTH_ROUNDS, Comparison
from pgaccel.decide.results import HeadToHead, Overall, Summary, VariantSummary, WorkloadResult
from pgaccel.report import terminal


def printed(render, *args, width=200, **kw) -> str:
    c = Console(file=io.StringIO(), width=width, color_system=None)
    render(c, *args, **kw)
    return c.file.getvalue()


def tables(text: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """Every table in ``text``: (title, headers, rows), cells as printed (padding kept)."""
    out, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("┏"):
            head = lines[i + 1].split("┃")[1:-1]
            rows = []
            for body in lines[i + 3:]:
                if body.startswith("└"):
                    break
                rows.append(body.split("│")[1:-1])
            title = lines[i - 1]
            assert title == title.strip() + " " * (len(line) - len(title.strip())), \
                "the title sits left over the table"
            out.append((title.strip(), [h.strip() for h in head], rows))
    return out


def cells(table) -> dict[str, dict[str, str]]:
    """First column -> {header: cell}, stripped (headers must be unique)."""
    _, head, rows = table
    return {r[0].strip(): {h: c.strip() for h, c in zip(head, r)} for r in rows}


def right_aligned(cell: str) -> bool:
    """Padded on the left only (rich leaves one space of padding either side)."""
    return cell.strip() != "" and cell == cell.rstrip() + " " and cell.startswith("  ")


def cmp(ratio, lo, hi, verdict, explain="", **kw):
    return Comparison(ratio, lo, hi, "paired-log-t", verdict, 6, 6, 0.01, explain, **kw)


def vsum(n, median, cv, p95=None, srv=None, share=None, **kw):
    return VariantSummary(n=n, median=median, cv=cv, min=median * 0.9, max=median * 1.1,
                          values=[median] * n, latency_p95_ms=p95, server_cpu_us_per_op=srv,
                          client_cpu_share=share, **kw)


SELECT = WorkloadResult(
    "select-only", "select-only", "select-only", None, 4, "tps",
    variants={"base": vsum(5, 4922.4, 0.047, 1.26, 208.14, 0.28),
              "tuned": vsum(6, 5396.0, 0.084, 1.16, 189.46, 0.31),
              "lean": vsum(7, 4302.0, 0.021, None, 240.0, 0.19),
              "same": vsum(4, 4941.0, 0.012, 1.3, 207.0, 0.27),
              "maybe": vsum(3, 5100.0, 0.15, 1.21, 201.0, 0.3)},
    comparisons={"tuned": cmp(1.079, 0.969, 1.165, "faster", "tuned explained",
                              confidence=0.99),
                 "lean": cmp(0.874, 0.81, 0.94, "slower", "lean explained", confidence=0.99),
                 "same": cmp(1.004, 0.985, 1.018, "equivalent", "same explained",
                             min_effect=0.03, confidence=0.99),
                 "maybe": cmp(1.036, 0.97, 1.11, "not enough evidence", "maybe explained",
                              confidence=0.99, more_rounds=7)},
    cpu_comparisons={"tuned": cmp(0.91, 0.88, 0.94, "faster", higher_is_better=False),
                     "lean": cmp(1.12, 1.05, 1.2, "slower", higher_is_better=False),
                     "same": cmp(0.995, 0.98, 1.01, "equivalent", higher_is_better=False,
                                 min_effect=0.03)},
    round_s=12.0)


def test_every_number_of_a_summary_sits_in_its_own_column():
    text = printed(terminal.render_summary, Summary("base", confidence=0.9, workloads=[SELECT]),
                   title="run 7: ")
    [t] = tables(text)
    title, head, rows = t
    assert title == "run 7: select-only (4 clients, tps)"
    # the interval's level is the measure's own (its comparisons'), not the summary's
    assert head == ["config", "n", "median tps", "CV", "p95 ms", "srv µs/op", "client CPU",
                    "vs base (99% CI)", "verdict"]
    got = cells(t)
    assert list(got) == ["base", "tuned", "lean", "same", "maybe"]
    assert got["base"] == {"config": "base", "n": "5", "median tps": "4,922", "CV": "4.7%",
                           "p95 ms": "1.26", "srv µs/op": "208.1", "client CPU": "28%",
                           "vs base (99% CI)": "baseline", "verdict": ""}
    assert got["tuned"] == {"config": "tuned", "n": "6", "median tps": "5,396", "CV": "8.4%",
                            "p95 ms": "1.16", "srv µs/op": "189.5", "client CPU": "31%",
                            "vs base (99% CI)": "+7.9% (-3.1% … +16.5%)", "verdict": "faster"}
    assert got["lean"] == {"config": "lean", "n": "7", "median tps": "4,302", "CV": "2.1%",
                           "p95 ms": "–", "srv µs/op": "240.0", "client CPU": "19%",
                           "vs base (99% CI)": "-12.6% (-19.0% … -6.0%)", "verdict": "slower"}
    assert got["same"]["vs base (99% CI)"] == "+0.4% (-1.5% … +1.8%)"
    assert got["same"]["verdict"] == "equivalent ±3%"
    assert got["maybe"]["verdict"] == "not enough evidence (+7 rounds)"
    # numbers line up on the right, names and words on the left
    base, tuned = rows[:2]
    assert all(right_aligned(c) for c in base[2:8]), base
    assert not right_aligned(base[0]) and not right_aligned(tuned[8]), tuned


def test_the_lines_under_a_summary_say_cpu_cost_explanation_and_time_per_config():
    text = printed(terminal.render_summary, Summary("base", workloads=[SELECT]))
    after = [line.rstrip() for line in text.split("└", 1)[1].splitlines()[1:]]
    assert after == [
        "  tuned: server CPU per operation -9.0% (-12.0% … -6.0%) cheaper",
        "  tuned: tuned explained",
        "  lean: server CPU per operation +12.0% (+5.0% … +20.0%) costlier",
        "  lean: lean explained",
        "  same: server CPU per operation -0.5% (-2.0% … +1.0%) equivalent ±3%",
        "  same: same explained",
        "  maybe: maybe explained",
        "  maybe: those 7 rounds would take about 84 s at 12 s a round (a --budget that much "
        "longer, or --rounds)",
    ]


def test_cpu_per_operation_judged_from_trials_reads_cheaper_when_it_drops():
    """The judge's own cost comparison (lower is better): a config that needs less server
    CPU per operation is 'cheaper', one that needs more 'costlier'."""
    from pgaccel.decide import judge
    from pgaccel.decide.model import Trial, WorkloadSpec
    from pgaccel.workloads.base import RunParams, get_workload
    jit = [1.0, 1.01, 0.99, 1.005, 0.995, 1.0]
    ts = []
    for r, b in enumerate([100, 103, 98, 101, 97, 102]):
        cpu = 50 + r % 3
        ts += [Trial("base", "select-only", r, 2, 0.0, b, "tps", {"server_cpu_us_per_op": cpu}),
               Trial("tuned", "select-only", r, 2, 0.0, b * 1.2 * jit[r], "tps",
                     {"server_cpu_us_per_op": cpu * 0.8 / jit[r]}),
               Trial("heavy", "select-only", r, 2, 0.0, b * 0.9 / jit[r], "tps",
                     {"server_cpu_us_per_op": cpu * 1.25 * jit[r]})]
    s = judge.summarize(ts, "base", ["base", "tuned", "heavy"],
                        [WorkloadSpec(get_workload("select-only"), RunParams(clients=2))])
    text = printed(terminal.render_summary, s)
    got = cells(tables(text)[0])
    assert (got["tuned"]["verdict"], got["heavy"]["verdict"]) == ("faster", "slower")
    assert got["tuned"]["median tps"] == "121" and got["tuned"]["n"] == "6"
    assert got["tuned"]["vs base (95% CI)"] == "+20.0% (+19.1% … +20.9%)"
    assert "tuned: server CPU per operation -20.0% (-20.6% … -19.4%) cheaper" in text
    assert "heavy: server CPU per operation +25.0% (+24.1% … +25.9%) costlier" in text


def test_the_geometric_mean_is_said_only_over_several_workloads():
    s = Summary("base", workloads=[SELECT],
                overall={"tuned": Overall(1.04, 0.97, 1.115, 2),
                         "lean": Overall(0.9, 0.85, 0.95, 1)})
    text = printed(terminal.render_summary, s)
    assert "tuned over 2 workloads: geometric mean +4.0% (-3.0% … +11.5%)" in text
    assert "lean over" not in text


DRIFT = WorkloadResult(
    "tpcb-like", "tpcb-like", "tpcb-like", None, 8, "queries/s",
    variants={"base": vsum(6, 812.0, 0.03, drift_per_round=0.02, drift_total=0.11,
                           drift_p=0.004, drifting=True),
              "tuned": vsum(6, 900.0, 0.05, noisy_trials=2,
                            noise_why="other processes used 31% of the machine's CPU")},
    drift_per_round=-0.015, drift_total=-0.06, drift_p=0.0031, drifting=True)


def test_a_shared_drift_is_said_once_and_a_configs_own_only_without_one():
    shared = terminal.state_warnings(DRIFT)
    assert shared == [
        "Every config's throughput drifted -6.0% over the rounds (-1.5% a round, p=0.0031): "
        "the host changed during the run and the trials did not start from the same state; "
        "the paired comparison cancels a drift shared by a round's configs, each config's "
        "median does not.",
        "tuned: 2 of 6 trials ran on a noisy host (other processes used 31% of the machine's "
        "CPU)."]
    own = terminal.state_warnings(dataclasses.replace(DRIFT, drifting=False))
    assert own == [
        "base: throughput drifted +11.0% over the rounds (+2.0% a round, p=0.004): the trials "
        "did not start from the same state; the paired comparison cancels drift shared by a "
        "round's configs.",
        shared[1]]
    text = printed(terminal.render_summary, Summary("base", confidence=0.9, workloads=[DRIFT]))
    title, head, _ = tables(text)[0]
    assert title == "tpcb-like (8 clients, queries/s)"
    assert head[2] == "median queries/s" and head[7] == "vs base (90% CI)"   # the summary's
    assert "tuned: 2 of 6 trials ran on a noisy host" in text
    assert cells(tables(text)[0])["tuned"]["vs base (90% CI)"] == "baseline"


@pytest.mark.parametrize("more,round_s,time_,more_text", [
    (7, 12.0, "about 84 s at 12 s a round",
     "about 7 more rounds would probably decide, about 84 s at 12 s a round"),
    (8, 11.1, "about 89 s at 11 s a round", None),       # 88.8 s: still seconds
    (9, 10.0, "about 2 minutes at 10 s a round", None),  # 90 s: minutes
    (13, 17.2, "about 4 minutes at 17 s a round", None),
    (1, 30.0, "about 30 s at 30 s a round", "about 1 more round would probably decide, "
                                            "about 30 s at 30 s a round"),
    (WORTH_ROUNDS, 2.0, "about 2 minutes at 2 s a round",
     f"about {WORTH_ROUNDS} more rounds would probably decide, about 2 minutes at 2 s a round"),
    (WORTH_ROUNDS + 1, 2.0, None, None),
    (3, None, None, "about 3 more rounds would probably decide"),
    (3, 0.0, None, "about 3 more rounds would probably decide"),
    (None, 10.0, None, None),
])
def test_further_rounds_are_timed_only_while_they_would_probably_decide(more, round_s, time_,
                                                                         more_text):
    c = cmp(1.03, 0.97, 1.1, "not enough evidence", more_rounds=more)
    assert terminal.rounds_time(c, round_s) == time_
    if more_text is not None:
        assert terminal.more_rounds_text(c, round_s) == more_text
    elif time_ is None and (more is None or more > WORTH_ROUNDS):
        assert terminal.more_rounds_text(c, round_s) is None


def test_a_decided_comparison_needs_no_further_rounds():
    c = cmp(1.2, 1.1, 1.3, "faster", more_rounds=3)
    assert terminal.rounds_time(c, 10.0) is None and terminal.more_rounds_text(c, 10.0) is None


@pytest.mark.parametrize("verdict,cost,says", [
    ("faster", False, "faster"), ("slower", False, "slower"),
    ("faster", True, "cheaper"), ("slower", True, "costlier"),
    ("equivalent", False, "equivalent ±3%"), ("equivalent", True, "equivalent ±3%"),
    ("no significant difference", True, "no significant difference"),
    ("not enough evidence", True, "not enough evidence (+2 rounds)"),
])
def test_verdict_words(verdict, cost, says):
    c = cmp(1.0, 0.9, 1.1, verdict, min_effect=0.03, more_rounds=2)
    assert terminal.verdict_text(c, cost) == says
    if not cost:                   # a throughput's verdict unless told it is a cost
        assert terminal.verdict_text(c) == says


@pytest.mark.parametrize("verdict,ansi", [
    ("faster", "\x1b[1;32m"), ("slower", "\x1b[1;31m"), ("equivalent", "\x1b[36m"),
    ("no significant difference", "\x1b[33m"), ("not enough evidence", "\x1b[35m"),
])
def test_each_verdict_has_its_colour(verdict, ansi):
    c = Console(file=io.StringIO(), width=100, color_system="standard", force_terminal=True)
    c.print(terminal.verdict(cmp(1.0, 0.9, 1.1, verdict, more_rounds=None)))
    assert c.file.getvalue().startswith(ansi + verdict.split()[0]), repr(c.file.getvalue())
    assert terminal.verdict(None) == ""


def test_a_verdict_word_this_version_does_not_know_is_printed_plain():
    """A stored run read back (Comparison.from_dict) may carry a verdict from another
    version: it is shown as it is, uncoloured."""
    text = printed(lambda c: c.print(terminal.verdict(cmp(1.0, 0.9, 1.1, "inconclusive"))))
    assert text == "inconclusive\n"


def test_plan_changes_show_default_and_tuned_in_their_columns():
    changes = [{"name": "shared_buffers", "current": "128MB", "proposed": "4GB",
                "restart": True, "reason": "a quarter of RAM"},
               {"name": "work_mem", "current": None, "proposed": "16MB", "reason": "sorts"},
               {"name": "jit", "current": "on", "proposed": "off"}]
    text = printed(terminal.render_plan_changes, changes, ["huge_pages", "shared_buffers"])
    [t] = tables(text)
    assert t[0] == "Tuned configuration (vs server defaults)"
    assert t[1] == ["setting", "default", "tuned", "restart", "why"]
    assert cells(t) == {
        "shared_buffers": {"setting": "shared_buffers", "default": "128MB", "tuned": "4GB",
                           "restart": "yes", "why": "a quarter of RAM"},
        "work_mem": {"setting": "work_mem", "default": "", "tuned": "16MB", "restart": "",
                     "why": "sorts"},
        "jit": {"setting": "jit", "default": "on", "tuned": "off", "restart": "", "why": ""}}
    assert text.splitlines()[-1] == ("Not measured on this target (need a restart or reload): "
                                     "huge_pages, shared_buffers")
    assert "Not measured" not in printed(terminal.render_plan_changes, changes)


def test_a_long_setting_value_folds_whole_onto_further_lines():
    libs = "pg_stat_statements,auto_explain,pg_prewarm"
    text = printed(terminal.render_plan_changes,
                   [{"name": "shared_preload_libraries", "current": "", "proposed": libs,
                     "restart": True, "reason": "r"}], width=60)
    [(_, head, rows)] = tables(text)
    assert "…" not in text
    assert "".join(r[head.index("tuned")].strip() for r in rows) == libs
    assert "".join(r[0].strip() for r in rows) == "shared_preload_libraries"


def test_head_to_head_puts_the_effect_before_its_interval():
    rows = [HeadToHead("tpcb-like", 8, "pgtune", "tuned", cmp(1.042, 0.99, 1.095, "equivalent",
                                                               min_effect=0.1)),
            HeadToHead("select-only", 2, "pgtune", "tuned", cmp(0.93, 0.9, 0.96, "slower"))]
    text = printed(terminal.render_head_to_head, rows, 0.9)
    [t] = tables(text)
    assert t[0] == "pgaccel's plan vs PGTune's (ratio of geometric means, 90% CI)"
    assert t[1] == ["workload", "tuned / pgtune", "90% CI", "verdict"]
    assert cells(t) == {
        "tpcb-like c=8": {"workload": "tpcb-like c=8", "tuned / pgtune": "+4.2%",
                          "90% CI": "-1.0% … +9.5%", "verdict": "equivalent ±10%"},
        "select-only c=2": {"workload": "select-only c=2", "tuned / pgtune": "-7.0%",
                            "90% CI": "-10.0% … -4.0%", "verdict": "slower"}}
    assert tables(printed(terminal.render_head_to_head, rows))[0][1][2] == "95% CI"


def test_layers_give_each_layer_against_the_one_before_and_against_baseline():
    steps = [{"workload": "select-only", "clients": 4, "previous": "baseline", "layer": "os",
              "vs_previous": cmp(1.05, 1.01, 1.09, "faster").to_dict(),
              "vs_baseline": cmp(1.05, 1.01, 1.09, "faster").to_dict()},
             {"workload": "select-only", "clients": 4, "previous": "os", "layer": "pg",
              "vs_previous": cmp(0.97, 0.93, 1.01, "no significant difference").to_dict(),
              "vs_baseline": cmp(1.19, 1.12, 1.26, "faster").to_dict()},
             {"workload": "tpcb-like", "clients": 2, "previous": "os", "layer": "pg",
              "vs_previous": None, "vs_baseline": cmp(0.8, 0.75, 0.86, "slower").to_dict()}]
    text = printed(terminal.render_layers, steps, 0.99)
    [(title, head, rows)] = tables(text)
    assert title == "What each layer is worth (ratio of geometric means, 99% CI)"
    assert head == ["workload", "layer", "vs the layer before", "verdict", "vs baseline",
                    "verdict"]
    assert [[c.strip() for c in r] for r in rows] == [
        ["select-only c=4", "baseline → os", "+5.0% (+1.0% … +9.0%)", "faster",
         "+5.0% (+1.0% … +9.0%)", "faster"],
        ["select-only c=4", "os → pg", "-3.0% (-7.0% … +1.0%)", "no significant difference",
         "+19.0% (+12.0% … +26.0%)", "faster"],
        ["tpcb-like c=2", "os → pg", "-", "", "-20.0% (-25.0% … -14.0%)", "slower"]]
    assert printed(terminal.render_layers, []) == ""
    assert "(ratio of geometric means, 95% CI)" in printed(terminal.render_layers, steps)


def test_client_hosts_show_each_measured_host_in_its_columns():
    rows = [{"host": "load1", "clients": 6, "trials": 3, "host_cpu_util": 0.456,
             "client_cpu_s": 12.345, "server_cpu_s": 3.2109, "rtt_ms": 0.254},
            {"host": "load2", "clients": None, "trials": 0, "rtt_ms": 0.3},
            {"host": "l3", "clients": 2, "trials": 1, "host_cpu_util": 0.05,
             "client_cpu_s": 1.0, "server_cpu_s": 30.0, "rtt_ms": 1.5}]
    text = printed(lambda c, r: terminal.render_client_hosts(r, c), rows)
    [t] = tables(text)
    assert t[0] == "Load from client hosts (medians over trials)"
    assert t[1] == ["host", "clients", "host CPU busy", "pgbench CPU s", "server CPU s",
                    "SELECT 1 round trip"]
    assert cells(t) == {"load1": {"host": "load1", "clients": "6", "host CPU busy": "46%",
                                  "pgbench CPU s": "12.35", "server CPU s": "3.21",
                                  "SELECT 1 round trip": "0.25 ms"},
                        "l3": {"host": "l3", "clients": "2", "host CPU busy": "5%",
                               "pgbench CPU s": "1.00", "server CPU s": "30.00",
                               "SELECT 1 round trip": "1.50 ms"}}
    l3 = t[2][1]
    assert l3[0] == " l3    " and all(right_aligned(c) for c in l3[1:]), l3


def test_a_table_as_wide_as_the_terminal_keeps_every_column():
    c = Console(file=io.StringIO(), width=10_000, color_system=None)
    c.print(fitted_table(c, "t", COLUMNS, ROWS))
    natural = max(len(line) for line in c.file.getvalue().splitlines())
    assert render(natural).count("client CPU") == 1
    assert "client CPU" not in render(natural - 1)


def test_titles_sit_left_over_the_table():
    text = printed(terminal.render_summary, Summary("base", workloads=[SELECT]))
    title, table = text.splitlines()[:2]
    assert title.startswith("select-only (4 clients, tps)") and len(title) == len(table)


def test_a_narrow_terminal_wraps_only_the_verdict():
    """At 70 columns the optional columns are gone and the verdict wraps; the names, the
    medians and the effects with their intervals stay whole on their rows."""
    text = printed(terminal.render_summary, Summary("base", workloads=[SELECT]), width=70)
    [(_, head, rows)] = tables(text)
    assert head == ["config", "n", "median tps", "vs base (99% CI)", "verdict"]
    got = [[c.strip() for c in r] for r in rows]
    assert got[:5] == [["base", "5", "4,922", "baseline", ""],
                       ["tuned", "6", "5,396", "+7.9% (-3.1% … +16.5%)", "faster"],
                       ["lean", "7", "4,302", "-12.6% (-19.0% … -6.0%)", "slower"],
                       ["same", "4", "4,941", "+0.4% (-1.5% … +1.8%)", "equivalent ±3%"],
                       ["maybe", "3", "5,100", "+3.6% (-3.0% … +11.0%)", "not enough"]]
    assert [r[4] for r in got[5:]] == ["evidence (+7", "rounds)"]


def test_a_long_config_name_folds_so_the_verdict_stays_whole():
    """At 73 columns a 23-character config name no longer fits beside the effect and the
    verdict: the name folds over lines, the verdict and the interval stay whole (rich used
    to cut the verdict to 'equival…')."""
    long = "tuned-huge-pages-plus-x"
    w = dataclasses.replace(SELECT, variants={("base" if k == "base" else
                                               long if k == "tuned" else k): v
                                              for k, v in SELECT.variants.items()},
                            comparisons={(long if k == "tuned" else k): c
                                         for k, c in SELECT.comparisons.items()})
    text = printed(terminal.render_summary, Summary("base", workloads=[w]), width=73)
    [(_, head, rows)] = tables(text)
    assert max(len(line) for line in text.splitlines()) <= 73
    got = [[c.strip() for c in r] for r in rows]
    assert "".join(r[0] for r in got[1:4]) == long          # folded, every letter kept
    assert got[1][3:] == ["+7.9% (-3.1% … +16.5%)", "faster"]
    verdicts = [r[4] for r in got]
    assert "equivalent" in verdicts and "±3%" in verdicts and "slower" in verdicts


def looked(*measures, nominal=0.9, looks=(3, 10), last_looks=None, confidence=0.974):
    """A run that looked after every round; ``measures``: (workload, level, n_pairs,
    n_base, n_other) of each measure's first comparison."""
    ws = [WorkloadResult(wl, wl, wl, None, 4, "tps", {"base": vsum(n, 100, 0.01)},
                         {"a": dataclasses.replace(cmp(1.1, 1.0, 1.2, "faster"), confidence=lv,
                                                   n_pairs=np_, n_base=nb, n_other=n),
                          "b": dataclasses.replace(cmp(1.1, 1.0, 1.2, "faster"), confidence=0.5,
                                                   n_pairs=99)})
          for wl, lv, np_, nb, n in measures]
    return Summary("base", confidence=confidence, workloads=ws, nominal_confidence=nominal,
                   looks=list(looks) if looks else looks, last_looks=last_looks or {})


TAIL = ("and stopped when decided, and the looks share the 10% chance of 'faster' or "
        "'slower' between identical configs, little of it early and most at the last.")


def test_the_looks_note_gives_the_level_of_the_last_look():
    s = looked(("select-only", 0.974, 10, 10, 10), ("tpcb-like", 0.974, 0, 11, 10))
    assert terminal.looks_note(s) == (
        "Intervals are at 97.4%, the level of the look after 10 rounds, not 90%: the run "
        "looked after every round from 3 to 10 " + TAIL)
    text = printed(terminal.render_summary, s)
    assert text.replace("\n", " ").rstrip().endswith("most at the last.")


def test_the_looks_note_names_each_measures_own_level_and_budget_share():
    s = looked(("select-only", 0.995, 4, 9, 9), ("tpcb-like", 0.974, 0, 11, 12),
               ("big scan", 0.995, 4, 4, 4), looks=(3, 15),      # a spec's own label
               last_looks={"select-only c=4": 10, "tpcb-like c=8": 15, "big scan c=4": 10})
    assert terminal.looks_note(s) == (
        "Intervals are at the level of each measure's last look (select-only, big scan: "
        "99.5% after 4 rounds; tpcb-like: 97.4% after 11 rounds), not 90%: the run looked "
        "after every round from 3 to the last its share of the budget reached (select-only: "
        "10, tpcb-like: 15, big scan: 10) " + TAIL)
    same = dataclasses.replace(s, last_looks={"select-only c=4": 15, "tpcb-like c=8": 15})
    assert "every round from 3 to 15 and stopped" in terminal.looks_note(same)


def test_the_looks_note_without_comparisons_gives_the_summarys_level_and_none_otherwise():
    s = dataclasses.replace(looked(), workloads=[WorkloadResult(
        "w", "w", "w", None, 4, "tps", {"base": vsum(3, 1, 0.1)})])
    assert terminal.looks_note(s) == ("Intervals are at 97.4%, not 90%: the run looked after "
                                      "every round from 3 to 10 " + TAIL)
    assert terminal.looks_note(dataclasses.replace(s, nominal_confidence=None)) is None
    assert terminal.looks_note(dataclasses.replace(s, looks=[])) is None
    assert terminal.looks_note(dataclasses.replace(s, looks=None)) is None
    assert "Intervals" not in printed(terminal.render_summary,
                                      dataclasses.replace(s, nominal_confidence=None))


def test_a_verdict_word_is_coloured_and_an_unknown_one_printed_plain():
    """`pgaccel compare` and the summaries colour a verdict word through ``styled``; a word
    from another version's stored run has no colour and must print as itself, not as
    broken markup (rich would raise on '[]word[/]')."""
    buf = io.StringIO()
    con = Console(file=buf, width=80, color_system="truecolor", force_terminal=True)
    con.print(terminal.styled("slower"), terminal.styled("much better"))
    text = buf.getvalue()
    assert "slower" in text and "much better" in text
    assert terminal.styled("slower") == f"[{terminal.VERDICT_STYLE['slower']}]slower[/]"
    assert terminal.styled("much better") == "much better"
    assert terminal.styled("faster", "cheaper") == \
        f"[{terminal.VERDICT_STYLE['faster']}]cheaper[/]"
