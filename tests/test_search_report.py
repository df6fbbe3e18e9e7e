"""A search's page and table from its journal (report/search.py, search_html.py,
search_charts.py): each candidate placed against the incumbent it raced, intervals from the
journaled rounds at one level, the incumbent's path, the plan as a diff against the rules,
the confirmation's verdicts first.  (Pure: constructed journals; the real search's page is
checked in tests/test_search.py.)"""

from __future__ import annotations

import html

import math

import pytest

from pgaccel.report import search as view
from pgaccel.report.search_charts import _position, space_of
from pgaccel.report.search_html import headlines, render_search_html


def _look(stage, d, **kw):
    return {"stage": stage, "rounds": len(d), "log_ratios": d, **kw}


def _journal():
    return {
        "schema": 1, "id": "20261126-000000-abcd", "status": "finished",
        "workload": "tpcb-like", "params": {"clients": 4, "scale": 20},
        "budget_s": 3600, "spent_s": 2700, "server_version": "15.20",
        "knobs": ["work_mem", "jit"],
        "space": [{"name": "work_mem", "kind": "bytes", "low": 1048576,
                   "high": 268435456, "log": True, "choices": []},
                  {"name": "jit", "kind": "choice", "low": 0, "high": 0, "log": False,
                   "choices": ["on", "off"]}],
        "rules": {"work_mem": "45MB", "jit": "off", "shared_buffers": "6GB"},
        "candidates": [
            {"number": 0, "params": {"work_mem": 2097152, "jit": "on"},
             "changes": {"work_mem": "2MB", "jit": "on"}, "stage": "dropped",
             "looks": [_look("screen", [-0.05, -0.07, -0.06], decision="dropped")],
             "log_effect": -0.06},
            {"number": 1, "params": {"work_mem": 16777216, "jit": "off"},
             "changes": {"work_mem": "16MB"}, "stage": "better",
             "looks": [_look("screen", [0.04, 0.06, 0.05], decision="promoted"),
                       _look("confirm", [0.03, 0.05, 0.04, 0.04], decision="better",
                             confidence=0.999, j=1)],
             "log_effect": 0.04},
            {"number": 2, "params": {"work_mem": 33554432, "jit": "off"},
             "changes": {"work_mem": "32MB"}, "stage": "dropped",
             "looks": [_look("screen", [0.01, -0.01, -0.03], decision="dropped")],
             "log_effect": 0.03},
            {"number": 3, "params": {"work_mem": 16777216, "jit": "off"}, "changes": {},
             "stage": "same as the incumbent"},
        ],
        "incumbent": {"number": 1, "log_effect": 0.04,
                      "settings": {"work_mem": "16MB", "jit": "off", "shared_buffers": "6GB"}},
        "path": [{"number": 1, "log_effect": 0.04}],
        "importance": {"work_mem": 0.8, "jit": 0.2},
        "confirmation": {
            "run_id": "20261126-010000-beef", "run_dir": "/tmp/runs/20261126-010000-beef",
            "found_vs": {"tuned": [{"workload": "tpcb-like", "clients": 4, "base": "tuned",
                                    "other": "found", "ratio": 1.031, "ci_low": 1.012,
                                    "ci_high": 1.051, "p_value": 0.001, "verdict": "faster",
                                    "explain": "", "confidence": 0.99, "method": "paired",
                                    "n_base": 11, "n_other": 11}]},
            "summary": {"base": "baseline", "workloads": [{
                "workload": "tpcb-like", "clients": 4, "step": None,
                "comparisons": {"found": {"ratio": 1.12, "ci_low": 1.08, "ci_high": 1.16,
                                          "verdict": "faster", "method": "paired-log-t",
                                          "n_base": 11, "n_other": 11, "p_value": 0.001,
                                          "explain": ""}}}]}},
    }


def test_each_candidate_is_placed_against_the_incumbent_it_raced():
    rows = view.candidate_rows(_journal())
    assert [r.incumbent for r in rows] == [None, None, 1, 1]
    assert [r.incumbent_log for r in rows] == [0.0, 0.0, 0.04, 0.04]
    # candidate 2 was 1% behind candidate 1, which was 4% ahead of the rules
    r2 = rows[2]
    assert r2.screen.ratio == pytest.approx(math.exp(-0.01))
    assert r2.over_rules(r2.screen)[0] == pytest.approx(math.exp(0.03))
    assert [r.rounds for r in rows] == [3, 7, 3, 0]
    assert rows[3].screen is None and rows[3].confirm is None


def test_the_screen_interval_is_a_t_interval_of_its_rounds_at_the_shown_level():
    (r0,) = view.candidate_rows({"candidates": [_journal()["candidates"][0]]})
    # mean -0.06, sd 0.01, n 3: t(0.95, 2) = 2.919986
    h = 2.919986 * 0.01 / math.sqrt(3)
    assert r0.screen.level == view.SHOWN_LEVEL == 0.90
    assert r0.screen.low == pytest.approx(math.exp(-0.06 - h), rel=1e-6)
    assert r0.screen.high == pytest.approx(math.exp(-0.06 + h), rel=1e-6)


def test_the_confirmation_is_shown_at_its_own_level():
    r1 = view.candidate_rows(_journal())[1]
    # mean 0.04, sd 0.008165, n 4: t(0.9995, 3) = 12.924
    h = 12.924 * 0.0081650 / 2
    assert r1.confirm.level == 0.999
    assert r1.confirm.low == pytest.approx(math.exp(0.04 - h), rel=1e-3)


def test_an_older_journal_without_rounds_shows_the_looks_own_interval():
    c = {"number": 0, "stage": "dropped", "changes": {},
         "looks": [{"stage": "screen", "ratio": 0.95, "ci_low": 0.9, "ci_high": 1.01,
                    "confidence": 0.6, "rounds": 3}]}
    (r,) = view.candidate_rows({"candidates": [c]})
    assert (r.screen.ratio, r.screen.low, r.screen.high, r.screen.level) == \
        (0.95, 0.9, 1.01, 0.6)


def test_the_path_and_the_plan_diff():
    j = _journal()
    assert view.incumbent_path(j) == [(None, 0.0), (1, 0.04)]
    assert view.plan_diff(j) == [("work_mem", "45MB", "16MB")]
    j["incumbent"] = {"number": None, "settings": None, "log_effect": 0.0}
    assert view.plan_diff(j) == []


@pytest.mark.parametrize("knob, value, where", [
    ({"kind": "bytes", "low": 1, "high": 100, "log": True}, 10, 0.5),
    ({"kind": "real", "low": 0.5, "high": 0.9, "log": False}, 0.6, 0.25),
    ({"kind": "real", "low": 0.5, "high": 0.9, "log": False}, 2.0, 1.0),
    ({"kind": "choice", "choices": ["off", "pglz", "lz4"]}, "pglz", 0.5),
    ({"kind": "choice", "choices": ["off", "pglz"]}, "zstd", None),
])
def test_a_value_is_placed_in_its_knobs_range(knob, value, where):
    got = _position(knob, value)
    assert got == (pytest.approx(where) if where is not None else None)


def test_an_older_journal_without_a_space_takes_the_range_the_candidates_covered():
    j = _journal()
    del j["space"]
    sp = {k["name"]: k for k in space_of(j)}
    assert sp["work_mem"]["kind"] == "bytes" and sp["work_mem"]["log"] is True
    assert (sp["work_mem"]["low"], sp["work_mem"]["high"]) == (2097152, 33554432)
    assert sp["jit"]["choices"] == ["off", "on"]


def test_the_page_leads_with_the_confirmations_verdicts():
    j = _journal()
    h = headlines(j)
    assert h[0]["subject"].startswith("found settings") and h[0]["against"] == \
        "vs pgaccel's rules"
    assert h[0]["verdict"] == "faster" and h[0]["effect"] == "+3.1%"
    page = render_search_html(j)
    assert page.index("found settings") < page.index("Candidates in the order tried")
    assert "<td><code>work_mem</code></td><td>45MB</td><td>16MB</td>" in page
    for n in range(4):
        assert f"<tr><td>{n}</td>" in page
    assert page.count("<svg") == 2            # candidates, parallel coordinates
    # 3 measured candidates (the fourth repeated the incumbent): no importance, said why
    assert "Which knobs mattered</h2>" not in page
    assert ("Which knobs mattered is not shown: Optuna's importance needs at least 10 "
            "measured candidates to rank anything but noise, and this search measured 3."
            in html.unescape(page))
    assert "pgaccel tune --from-search 20261126-000000-abcd --apply" in page
    assert "The confirmation proved it (tpcb-like vs baseline: faster (+12.0%))" in page


def test_the_page_never_advises_what_the_confirmation_found_slower_or_left_open():
    for verdict, said in (("slower", "found it slower"),
                          ("not enough evidence", "found it undecided")):
        j = _journal()
        c = j["confirmation"]["summary"]["workloads"][0]["comparisons"]["found"]
        c.update(verdict=verdict, ratio=0.97 if verdict == "slower" else 1.01)
        page = render_search_html(j)
        assert "--apply" not in page and said in page
    assert "at most 5%" in page and "0.25% error" in page


def test_the_importance_is_shown_from_ten_measured_candidates():
    """The page showed 'Which knobs mattered' computed from 2 candidates; it needs 10
    measured (a repeat of the incumbent is not measured)."""
    j = _journal()
    measured = [c for c in j["candidates"] if c.get("looks")]
    more = [{**measured[k % len(measured)], "number": 4 + k} for k in range(6)]
    j["candidates"] = j["candidates"] + more          # 9 measured
    page = render_search_html(j)
    assert "Which knobs mattered</h2>" not in page and "this search measured 9." in page
    j["candidates"].append({**measured[0], "number": 10})
    page = render_search_html(j)
    assert "Which knobs mattered</h2>" in page and page.count("<svg") == 3
    assert "is not shown" not in page
