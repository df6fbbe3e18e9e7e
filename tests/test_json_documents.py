"""The JSON documents pgaccel writes and prints carry ``"schema": 1`` first (docs/formats.md),
and the reports rendered from them print the run's own confidence level.  No server: the
experiment here is given every trial already measured, and the store is filled by hand."""

from __future__ import annotations

import json
import math
import subprocess
from dataclasses import replace

import pytest
from click.testing import CliRunner

from helpers import PGACCEL
from pgaccel.cli import cli
from pgaccel.cli.common import print_json
from pgaccel.decide import judge, results
from pgaccel.decide.effect import Comparison, compare
from pgaccel.lab.experiment import Experiment
from pgaccel.decide.model import Variant, WorkloadSpec
from pgaccel.session.store import Store
from pgaccel.decide.model import Trial
from pgaccel.report.html import render_html, render_markdown
from pgaccel.util import json_text
from pgaccel.workloads.base import RunParams, get_workload

SO = WorkloadSpec(get_workload("select-only"), RunParams(clients=2))
TP = WorkloadSpec(get_workload("tpcb-like"), RunParams(clients=2))
TPS = {"base": (1000, 1010, 990), "tuned": (1100, 1110, 1090)}


def measured() -> list[Trial]:
    return [Trial(v, ws.name, r, 2, 0.0, float(x), "tps",
                  {"latency_ms": {"p95": 2.5}, "client_cpu_share": 0.25},
                  series=[x - 5.0, x + 5.0])
            for ws in (SO, TP) for v, xs in TPS.items() for r, x in enumerate(xs)]


def judged(tmp_path, name: str, trials: list[Trial]):
    """An experiment whose trials were all measured before (as a resumed run's are): run()
    only judges, writes run.json, summary.json and the store's summary.  (store, run id,
    summary)."""
    store = Store(str(tmp_path / "s.sqlite"))
    rid = store.create_run("lab", name)
    for v in TPS:
        store.add_variant(rid, v, settings={})
    exp = Experiment(None, [Variant("base"), Variant("tuned")], [SO, TP], rounds=3,
                     confidence=0.9, store=store, run_id=rid, run_dir=str(tmp_path / "run"),
                     info={"kind": "lab", "target": "nowhere"}, trials=trials)
    return store, rid, exp.run()


@pytest.fixture
def finished(tmp_path):
    store, rid, summary = judged(tmp_path, "measured", measured())
    yield {"summary": summary, "store": store, "run_id": rid, "dir": tmp_path / "run",
           "path": store.path}
    store.close()


def test_run_json_and_summary_json_carry_the_schema(finished):
    s = finished["summary"]
    assert isinstance(s, results.Summary) and s.confidence == 0.9
    doc = json.loads((finished["dir"] / "run.json").read_text())
    assert list(doc)[:3] == ["schema", "run_id", "status"] and doc["schema"] == 1
    assert doc["status"] == "finished" and doc["kind"] == "lab" and len(doc["trials"]) == 12
    assert doc["summary"] == s.to_dict()
    summ = json.loads((finished["dir"] / "summary.json").read_text())
    assert list(summ)[0] == "schema" and summ["schema"] == 1
    assert results.Summary.from_dict(summ) == s
    stored = finished["store"].get_run(finished["run_id"])["summary"]
    assert stored["schema"] == 1 and results.Summary.from_dict(stored) == s


def test_reports_print_the_runs_confidence(finished):
    doc = json.loads((finished["dir"] / "run.json").read_text())
    html, md = render_html(doc), render_markdown(doc)
    for text in (html, md):
        assert "90% CI" in text and "95%" not in text
    assert "+10.0%" in html and "tuned" in md
    doc["summary"]["confidence"] = 0.99            # the level is read from the document:
    for w in doc["summary"]["workloads"]:          # a measure's, from its comparisons
        for c in w["comparisons"].values():
            c["confidence"] = 0.97
    html = render_html(doc)
    assert "vs base (97% CI)" in html and "(99% CI" in html   # the overall line: the run's


def test_reports_warn_of_a_noisy_host_and_drift(finished):
    doc = json.loads((finished["dir"] / "run.json").read_text())
    assert "noisy host" not in render_html(doc) and "⚠" not in render_markdown(doc)
    v = doc["summary"]["workloads"][0]["variants"]["tuned"]
    v.update(noisy_trials=2, noise_why="other processes used 31% of the CPUs",
             drifting=True, drift_total=-0.12, drift_per_round=-0.04, drift_p=0.01)
    html, md = render_html(doc), render_markdown(doc)
    for text in (html, md):
        assert f"tuned: 2 of {v['n']} trials ran on a noisy host (other processes used 31%" \
            in text
        assert "drifted -12.0% over the rounds (-4.0% a round" in text
    assert html.count('class="warn"') == 2 and md.count("> ⚠ ") == 2


def _invoke(*args: str) -> str:
    r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.output


def _strict(text: str):
    """JSON as a strict reader takes it: NaN, Infinity and -Infinity refused."""
    def refuse(word):
        raise AssertionError(f"{word} in a JSON document")
    return json.loads(text, parse_constant=refuse)


def test_a_slice_without_transactions_is_null_not_nan_in_every_document(tmp_path):
    """A side-by-side trial whose last slices completed no transaction (a stall: a real
    tpcb-like trial here had 4 such slices of 20) has no median latency there.  run.json,
    summary.json, the store, `show --json` / `--export json` and print_json write
    it as null, which strict readers take; the report still draws the series."""
    lat = [0.9, 0.95, math.nan, math.nan]
    trials = [replace(t, latency_series=list(lat) if t.round == 1 and t.variant == "tuned"
                      else [0.9, 0.95, 1.0, 0.92],
                      metrics={**t.metrics, "spread": math.inf})
              for t in measured()]
    store, rid, _ = judged(tmp_path, "stalled", trials)
    for t in trials:
        store.add_trial(rid, variant=t.variant, workload=t.workload, round=t.round,
                        metrics=t.metrics, primary_value=t.throughput,
                        series={"throughput": t.series, "latency_p50_ms": t.latency_series})
    doc = _strict((tmp_path / "run" / "run.json").read_text())
    _strict((tmp_path / "run" / "summary.json").read_text())
    stalled = [t for t in doc["trials"] if t["latency_series"][2:] == [None, None]]
    assert len(stalled) == 2            # the round-1 tuned trial of each workload
    assert stalled[0]["latency_series"][:2] == [0.9, 0.95]      # the numbers kept as they were
    assert all(t["metrics"]["spread"] is None for t in doc["trials"])
    _strict(_invoke("show", rid, "--json", "--store", store.path))
    shown = _strict(_invoke("show", rid, "--export", "json", "--store", store.path))
    stored = [t["series"]["latency_p50_ms"] for t in shown["trials"]
              if t["series"].get("latency_p50_ms", [0])[-1] is None]
    assert stored == [[0.9, 0.95, None, None]] * 2
    html = render_html(doc)
    assert "latency per slice" in html or "latency per second" in html
    assert "+10.0%" in _invoke("show", rid, "--store", store.path)
    store.close()


def test_an_interval_that_could_not_be_computed_reads_back_as_nan():
    """One trial a side has no interval: NaN in the typed result, null in the document,
    NaN again when read back, so its width is still infinite (not a TypeError)."""
    c = compare([1000.0], [1100.0])
    assert math.isnan(c.ci_low) and c.ci_width == math.inf
    back = Comparison.from_dict(_strict(json_text(c.to_dict())))
    assert back.ci_low != back.ci_low and back.ci_width == math.inf      # NaN again
    assert back.ratio == pytest.approx(1.1) and back.verdict == c.verdict


def test_store_commands_print_the_schema(finished, tmp_path):
    path, rid = finished["path"], finished["run_id"]
    runs = json.loads(_invoke("history", "--json", "--store", path))
    assert list(runs) == ["schema", "runs"] and runs["schema"] == 1
    assert runs["runs"][0]["id"] == rid and runs["runs"][0]["n_trials"] == 0
    shown = json.loads(_invoke("show", rid, "--json", "--store", path))
    assert shown["schema"] == 1 and shown["id"] == rid and shown["summary"]["schema"] == 1
    exported = json.loads(_invoke("show", rid, "--export", "json", "--store", path))
    assert list(exported)[0] == "schema" and exported["id"] == rid
    _invoke("show", rid, "--export", "json", "-o", str(tmp_path / "e.json"), "--store", path)
    assert json.loads((tmp_path / "e.json").read_text())["schema"] == 1
    cmp = json.loads(_invoke("compare", rid, rid, "--json", "--store", path))
    assert cmp["schema"] == 1 and cmp["run_a"] == rid


def test_show_renders_a_stored_summary_with_its_calibration(finished):
    """`show` reads the stored summary back into the typed results (Summary.from_dict),
    calibration included, and prints it at the run's confidence."""
    store, rid = finished["store"], finished["run_id"]
    cal = judge.calibration([100.0, 104.0, 96.0, 101.0], [102.0, 98.0, 100.0, 99.0],
                            20.0, 600.0)
    store.finish_run(rid, "finished", summary=replace(finished["summary"],
                                                      calibration=cal).to_dict())
    text = _invoke("show", rid, "--store", finished["path"])
    assert "vs base (90% CI)" in text and "+10.0%" in text
    assert "Noise floor" in text and "A/A comparison" in text


def test_print_json_adds_the_schema_to_documents_only(capsys):
    print_json({"a": 1, "schema": 7})
    assert json.loads(capsys.readouterr().out) == {"schema": 1, "a": 1}
    print_json(results.Summary("A"))
    assert json.loads(capsys.readouterr().out)["schema"] == 1
    print_json([{"name": "x"}])                    # a list (`workloads --json`) stays a list
    assert json.loads(capsys.readouterr().out) == [{"name": "x"}]
    print_json({"p50": [1.5, math.nan], "max": -math.inf, "note": "NaN"})
    assert _strict(capsys.readouterr().out) == {"schema": 1, "p50": [1.5, None],
                                               "max": None, "note": "NaN"}


def test_probe_json_carries_the_schema():
    r = subprocess.run([*PGACCEL, "probe", "--no-server", "--json"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert list(d)[0] == "schema" and d["schema"] == 1 and d["host"]["logical_cpus"] >= 1
