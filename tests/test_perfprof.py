"""perf's output parsed and folded (pure): ``perf stat -x,`` with unsupported hardware
events, ``perf script`` call stacks folded leaf-last with unknown frames merged and kernel
frames marked, the hottest functions, and the flame graph's geometry."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from pgaccel.metrics.perfprof import (LiveProfile, fold_script, leaf_objects,
                                      parse_stat_csv, top_functions)
from pgaccel.report.flamegraph import boxes, build_tree, colour, svg

# perf 6.1 `perf stat -x, -e task-clock,context-switches,cycles,instructions` on this VM
STAT = """# started on Mon Nov 23 08:33:32 2026

2933.72,msec,task-clock,2933717751,100.00,0.747,CPUs utilized
51729,,context-switches,2933717751,100.00,17.633,K/sec
<not supported>,,cycles,0,100.00,,
<not counted>,,instructions:u,0,100.00,,
"""

SCRIPT = """postgres 
\t          459603 [unknown] (/usr/lib/postgresql/15/bin/postgres)
\t          45d069 GlobalVisTestIsRemovableXid+0x79 (/usr/lib/postgresql/15/bin/postgres)
\t          1a236f [unknown] (/usr/lib/postgresql/15/bin/postgres)
\t          1a1111 [unknown] (/usr/lib/postgresql/15/bin/postgres)
\t          47d359 PostgresMain+0x919 (/usr/lib/postgresql/15/bin/postgres)

postgres 
\tffffffff81000000 _raw_spin_unlock_irqrestore+0x1a ([kernel.kallsyms])
\t          9a0000 __libc_recv (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t          47d359 PostgresMain+0x919 (/usr/lib/postgresql/15/bin/postgres)

postgres 
\t          459603 [unknown] (/usr/lib/postgresql/15/bin/postgres)
\t          45d069 GlobalVisTestIsRemovableXid+0x12 (/usr/lib/postgresql/15/bin/postgres)
\t          1a236f [unknown] (/usr/lib/postgresql/15/bin/postgres)
\t          47d359 PostgresMain+0x919 (/usr/lib/postgresql/15/bin/postgres)
"""


def test_stat_counts_and_unsupported_events():
    c = parse_stat_csv(STAT)
    assert c == {"task-clock": 2933.72, "context-switches": 51729.0, "cycles": None,
                 "instructions": None}


def test_per_op_figures():
    p = LiveProfile(3.0, 1000, {"task-clock": 50.0, "context-switches": 2000.0,
                                "cycles": 4e6, "instructions": 6e6})
    per = p.per_op()
    assert per["cpu_us"] == pytest.approx(50.0)       # 50 ms over 1000 ops
    assert per["context-switches"] == 2.0 and per["ipc"] == pytest.approx(1.5)
    assert p.hardware
    q = LiveProfile(3.0, 1000, {"task-clock": 50.0, "cycles": None, "instructions": None})
    assert not q.hardware and q.per_op()["ipc"] is None and "cycles" in q.unavailable
    assert LiveProfile(1.0, 0, {"task-clock": 5.0}).per_op()["task-clock"] is None


def test_fold_merges_unknown_runs_strips_offsets_marks_kernel():
    f = fold_script(SCRIPT)
    assert f == {
        "postgres;PostgresMain;[postgres];GlobalVisTestIsRemovableXid;[postgres]": 2,
        "postgres;PostgresMain;__libc_recv;_raw_spin_unlock_irqrestore_[k]": 1}
    assert leaf_objects(SCRIPT) == {"postgres": 2, "kernel": 1}


def test_top_functions_self_and_total():
    # self: leaf samples; total: samples with the function anywhere on the stack; only
    # functions that were ever on the CPU are ranked
    f = {"pg;main;a;b": 3, "pg;main;a": 2, "pg;main;c;b": 1, "pg;main;b;b": 1}
    assert top_functions(f, 10) == [("b", 5, 5), ("a", 2, 5)]
    assert top_functions(f, 1) == [("b", 5, 5)]


def test_flame_graph_widths_are_sample_shares():
    folded = {"pg;main;a;b": 3, "pg;main;c": 1}
    root = build_tree(folded)
    assert root.count == 4 and root.children["pg"].children["main"].count == 4
    geo = {n.name: (x, level, w) for x, level, w, n in boxes(root, 400.0)}
    assert geo["all"] == (0.0, 0, 400.0)
    assert geo["a"] == (0.0, 3, 300.0) and geo["b"] == (0.0, 4, 300.0)
    assert geo["c"] == (300.0, 3, 100.0)                # siblings in name order
    doc = ET.fromstring(svg(folded, title="t", width=400))
    titles = [t.text for t in doc.iter("{http://www.w3.org/2000/svg}title")]
    assert "b: 3 samples (75.0%)" in titles
    assert colour("x_[k]") != colour("x") and colour("[postgres]") == "rgb(180,180,180)"
    assert colour("ExecScan") == colour("ExecScan")
    assert "no samples" in svg({})
    # boxes too narrow to see are left out
    tiny = {"pg;a": 10000, "pg;b": 1}
    assert "b" not in {n.name for *_, n in boxes(build_tree(tiny), 100.0)}


def _row(config, instr, *, live=True):
    pt = {"transactions": 1000, "instructions": instr, "i1_misses": 3000.0,
          "lli_misses": 0.0, "data_refs": 1.0, "d1_misses": 1.0, "lld_misses": 0.0,
          "branches": 100.0, "mispredicts": 10.0}
    lp = LiveProfile(5.0, 10000, {"task-clock": 120.0, "context-switches": 10000.0,
                                  "cycles": None}, {"postgres;PostgresMain;ExecScan": 70,
                                                     "postgres;PostgresMain;send_[k]": 30},
                     {"postgres": 70, "kernel": 30})
    return {"config": config, "workload": "select-only", "server_version": "15.20",
            "per_transaction": pt, "live": lp.to_dict() if live else None}


def test_instructions_against_the_base_config():
    from pgaccel.session.profiling import relative
    rows = relative([_row("baseline", 100000.0), _row("build", 81000.0),
                     {**_row("x", 5.0), "workload": "tpcb-like"}], "baseline")
    assert [r["instructions_vs_base"] for r in rows] == [0.0, pytest.approx(-0.19), None]


def test_profile_section_of_the_reports():
    from pgaccel.report.profile import object_shares, profiles_html, profiles_markdown
    rows = [{**_row("baseline", 100000.0), "instructions_vs_base": 0.0},
            {**_row("build", 81000.0, live=False), "instructions_vs_base": -0.19}]
    page = "".join(profiles_html(rows))
    assert "<td>100,000</td>" in page and "<td>-19.0%</td>" in page
    assert "<td>12.0</td>" in page                    # 120 ms over 10,000 ops = 12 µs
    assert "<td>70% / 30%</td>" in page and "no PMU" in page
    assert page.count("<details>") == 1 and "ExecScan 70%" in page   # no samples: no graph
    md = "\n".join(profiles_markdown(rows))
    assert "| select-only | build | 15.20 | 81,000 | -19.0% |" in md
    assert object_shares({"postgres": 3, "kernel": 1}) == [("postgres", 0.75), ("kernel", 0.25)]
    assert profiles_html([]) == [] and profiles_markdown([]) == []
