"""Reports for every command: `bench` and `lab` write report.html and report.md beside
run.json and print where; `pgaccel report RUN` writes them again from the stored run, or
one format to a file or stdout; `show` names them; a run whose directory is gone gets a
one-paragraph error naming what still has its data."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import pgaccel


@pytest.fixture(scope="module")
def benched(tmp_path_factory):
    """One real `bench` (a throwaway server, scale-1 data, one 2-s trial) and its own store,
    shared by the module's tests: each one puts back what it changes in the run's directory
    (the run's report is what they test, not the bench)."""
    tmp = tmp_path_factory.mktemp("report")
    env = {"PGACCEL_STORE": str(tmp / "store.db")}
    out = tmp / "bench"
    r = pgaccel("bench", "-w", "select-only", "--scale", "1", "--clients", "1",
                "--duration", "2", "--warmup", "0", "--trials", "1", "--out", str(out),
                "--json", env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"report {out}/report.html" in r.stderr
    return json.loads(r.stdout)["run_id"], out, env


def test_bench_writes_a_report_and_report_makes_it_again(benched, tmp_path):
    run_id, out, env = benched
    html = (out / "report.html").read_text()
    assert run_id in html and "select-only" in html and "<svg" in html   # the charts
    assert run_id in (out / "report.md").read_text()
    (out / "report.html").unlink()
    try:
        r = pgaccel("report", run_id[:15], env=env)
        assert r.returncode == 0, r.stderr
        assert (out / "report.html").read_text() == html                # the same report
    finally:
        (out / "report.html").write_text(html)     # as the module's other tests expect it
    r = pgaccel("report", run_id, "--format", "md", env=env)           # stdout
    assert r.returncode == 0 and r.stdout.startswith(f"# pgaccel bench {run_id}")
    r = pgaccel("report", run_id, "-f", "json", "-o", str(tmp_path / "r.json"), env=env)
    assert r.returncode == 0
    assert json.loads((tmp_path / "r.json").read_text())["run_id"] == run_id
    r = pgaccel("report", run_id, "-f", "csv", env=env)              # one row per trial
    assert r.returncode == 0 and r.stdout.startswith("run_id,trial_id,variant,workload")
    assert len(r.stdout.strip().splitlines()) == 2 and "metric.latency_ms.p99" in r.stdout
    show = pgaccel("show", run_id, env=env)
    assert f"Report: {out}/report.html and {out}/report.md" in show.stderr.replace("\n", "")


def test_report_of_a_run_whose_directory_is_gone(benched):
    run_id, out, env = benched
    away = out.with_name("bench-away")
    shutil.move(out, away)
    try:
        r = pgaccel("report", run_id, env=env)
        assert r.returncode == 3, r.stderr
        assert "run.json is not there" in r.stderr and f"pgaccel show {run_id} --export " \
            "json" in r.stderr.replace("\n", " ") and "Traceback" not in r.stderr
        r = pgaccel("report", run_id, "-o", "x.html", env=env)
        assert r.returncode == 2 and "--format" in r.stderr
        r = pgaccel("report", "nosuchrun", env=env)
        assert r.returncode != 0 and "Traceback" not in r.stderr
    finally:
        shutil.move(away, out)


def test_a_report_that_cannot_be_written_fails_with_exit_9_and_keeps_the_results(benched,
                                                                                 tmp_path):
    """A report that cannot be written fails with exit 9, from `report` and from `bench` itself,
    and the results stay stored."""
    run_id, out, env = benched
    html = (out / "report.html").read_bytes()
    (out / "report.html").unlink()
    (out / "report.html").mkdir()            # nothing can replace a directory with a file
    try:
        r = pgaccel("report", run_id, env=env)
    finally:
        (out / "report.html").rmdir()
        (out / "report.html").write_bytes(html)
    err = r.stderr.replace("\n", " ")
    assert r.returncode == 9, r.stderr
    assert "The results are saved" in err and f"pgaccel report {run_id}" in err
    assert "Traceback" not in r.stderr
    assert json.loads((out / "run.json").read_text())["run_id"] == run_id
    # the same when the run itself writes its report: the run is stored all the same
    out2 = tmp_path / "bench2"
    (out2 / "report.html").mkdir(parents=True)
    r = pgaccel("bench", "-w", "select-only", "--scale", "1", "--clients", "1",
                "--duration", "2", "--warmup", "0", "--trials", "1", "--out", str(out2),
                env=env, timeout=600)
    assert r.returncode == 9, r.stderr[-3000:]
    assert "report could not be written" in r.stderr.replace("\n", " ")
    stored = json.loads((out2 / "run.json").read_text())["run_id"]
    assert pgaccel("show", stored, env=env).returncode == 0
