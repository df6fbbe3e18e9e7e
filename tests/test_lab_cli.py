"""`pgaccel lab`, `calibrate`, `history`, `show` and `compare` as a user runs them: an
interrupted lab run keeps its trials and `--resume` finishes it without repeating any."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time

import pytest

from helpers import PGACCEL, pgaccel, postgres_processes_for

SPEC = """\
name = "resume-me"
[run]
rounds = 3
duration = 2
warmup = 1

[[variant]]
name = "default"

[[variant]]
name = "wal-buffers"
settings = { wal_buffers = "4MB" }

[[variant]]
name = "pg18"
version = 18
settings = { io_method = "worker" }

[[workload]]
name = "select-only"
scale = 1
clients = 1
"""


def _no_traceback(r):
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r.stderr


def _flat(text: str) -> str:
    return " ".join(text.split())


def _trial_count(store: str) -> int:
    if not os.path.exists(store):
        return 0
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5) as db:
            return db.execute("SELECT count(*) FROM trials").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory):
    """A lab run interrupted with SIGINT after two trials, then resumed to the end."""
    d = tmp_path_factory.mktemp("lab")
    spec, store = d / "spec.toml", str(d / "store.sqlite")
    spec.write_text(SPEC)
    env = {**os.environ, "PGACCEL_STORE": store}
    work = tempfile.mkdtemp(prefix="pgaccel-test-lab-", dir="/tmp")   # the server user's
    os.chmod(work, 0o755)                                             # reach, and only ours
    p = subprocess.Popen([*PGACCEL, "lab", str(spec), "--json", "--workdir", work,
                          "--out", str(d / "out")],
                         stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    end = time.monotonic() + 180
    while time.monotonic() < end and _trial_count(store) < 2 and p.poll() is None:
        time.sleep(0.2)
    interrupted_at = _trial_count(store)
    p.send_signal(signal.SIGINT)
    out1, err1 = p.communicate(timeout=120)
    kept = _trial_count(store)
    resumed = None
    if p.returncode == 130:
        run_id = json.loads(pgaccel("history", "--json", env=env,
                                    check=True).stdout)["runs"][0]["id"]
        resumed = pgaccel("lab", "--resume", run_id[:15], "--json", "--workdir", work,
                          env=env, timeout=600)
    left = os.listdir(work)
    yield {"store": store, "env": env, "spec": str(spec), "rc1": p.returncode, "err1": err1,
           "out": str(d / "out"),
           "interrupted_at": interrupted_at, "kept": kept, "resumed": resumed,
           "work": work, "left": left}
    shutil.rmtree(work, ignore_errors=True)


def test_interrupted_lab_keeps_trials_and_resume_finishes(lab_run):
    """An interrupted lab run exits 130 with its trials kept, and --resume finishes it without
    repeating any and leaves no server behind.  It takes long (about 47 s on a 2-core VM: as the
    module's first test it pays for the module-scoped lab_run fixture, a real lab run of 2
    variants x 3 rounds of 2-s select-only trials after 1-s warm-ups on throwaway servers with
    scale-1 data, stopped with SIGINT after two trials and resumed to the end)."""
    assert lab_run["rc1"] == 130, lab_run["err1"]
    assert "Traceback" not in lab_run["err1"]
    assert "PostgreSQL 18 is not installed" in _flat(lab_run["err1"])
    assert 2 <= lab_run["interrupted_at"] <= lab_run["kept"] < 6
    r = lab_run["resumed"]
    _no_traceback(r)
    assert r.returncode == 0, r.stderr
    assert f"{lab_run['kept']} trials already stored" in r.stderr
    s = json.loads(r.stdout)
    assert s["run_dir"] == lab_run["out"]          # resumed into the directory it began in
    with open(os.path.join(lab_run["out"], "run.json")) as f:
        assert len(json.load(f)["trials"]) == 6
    w = s["workloads"][0]
    assert {k: v["n"] for k, v in w["variants"].items()} == {"default": 3, "wal-buffers": 3}
    assert w["comparisons"]["wal-buffers"]["verdict"] in (
        "faster", "slower", "equivalent", "not enough evidence")
    with sqlite3.connect(lab_run["store"]) as db:
        rows = db.execute("SELECT round, variant FROM trials").fetchall()
        status = db.execute("SELECT status FROM runs").fetchone()[0]
    assert sorted(rows) == sorted((r, v) for r in range(3) for v in ("default", "wal-buffers"))
    assert status == "finished"
    assert lab_run["left"] == []           # every throwaway cluster is gone
    assert postgres_processes_for(lab_run["work"]) == []


def test_history_show_export(lab_run):
    env = lab_run["env"]
    runs = json.loads(pgaccel("history", "--json", env=env, check=True).stdout)["runs"]
    assert runs[0]["kind"] == "lab" and runs[0]["n_trials"] == 6
    rid = runs[0]["id"]
    r = pgaccel("show", rid[:15], env=env, check=True)
    assert "resume-me" in r.stdout and "wal_buffers=4MB" in r.stdout
    assert "verified" in r.stdout and "select-only" in r.stdout
    rows = list(csv.DictReader(io.StringIO(pgaccel("show", rid, "--export", "csv", env=env,
                                                   check=True).stdout)))
    assert len(rows) == 6 and {r["variant"] for r in rows} == {"default", "wal-buffers"}
    assert all(float(r["primary_value"]) > 0 for r in rows)
    doc = json.loads(pgaccel("show", rid, "--export", "json", env=env, check=True).stdout)
    assert len(doc["trials"]) == 6 and doc["trials"][0]["series"]["throughput"]
    assert {v["name"]: v["verified"]["ok"] for v in doc["variants"]} == {
        "default": True, "wal-buffers": True}
    bad = pgaccel("show", "nosuchrun", env=env)
    assert bad.returncode == 2 and "No run 'nosuchrun'" in bad.stderr


def test_compare_flags_different_hosts(lab_run):
    from pgaccel.session.store import Store
    env = lab_run["env"]
    rid = json.loads(pgaccel("history", "--json", env=env, check=True).stdout)["runs"][0]["id"]
    same = json.loads(pgaccel("compare", rid, rid, "--json", env=env, check=True).stdout)
    assert same["hosts_differ"] is False
    row = next(r for r in same["rows"] if r["variant"] == "default")
    assert row["n_a"] == row["n_b"] == 3 and row["ratio"] == pytest.approx(1.0)
    # a run recorded on another machine (one that cannot exist here: 64 ARM cores)
    with Store(lab_run["store"]) as st:
        other = st.create_run("lab", "elsewhere", host={"arch": "aarch64", "cpu_model": "N1",
                                                        "logical_cpus": 64,
                                                        "memory_total_bytes": 2**37})
        for rnd in range(3):
            for v, tps in (("default", 1000.0), ("wal-buffers", 1100.0)):
                st.add_trial(other, variant=v, workload="select-only", round=rnd, clients=1,
                             primary_metric="throughput", primary_value=tps + rnd)
        st.finish_run(other)
    r = pgaccel("compare", rid, other, env=env, check=True)
    assert "different hosts" in r.stderr
    assert json.loads(pgaccel("compare", rid, other, "--json", env=env).stdout)["hosts_differ"]


def test_lab_check_and_errors(tmp_path):
    env = {"PGACCEL_STORE": str(tmp_path / "s.sqlite")}
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    r = pgaccel("lab", str(spec), "--check", env=env)
    _no_traceback(r)
    assert r.returncode == 0, r.stderr
    text = _flat(r.stderr)
    assert "apt-get install postgresql-18" in text and "OK (2 variants" in text
    # the server refuses a value: named with the spec's line
    spec.write_text(SPEC.replace('wal_buffers = "4MB"', 'wal_buffers = "4MB", '
                                                       'huge_pages = "sometimes"'))
    r = pgaccel("lab", str(spec), "--check", env=env)
    assert r.returncode == 2 and f"{spec}:12:" in r.stderr and "huge_pages" in r.stderr
    # fewer than two variants can run here
    spec.write_text(SPEC.replace('name = "wal-buffers"', 'name = "pg19"\nversion = 19'))
    r = pgaccel("lab", str(spec), env=env)
    _no_traceback(r)
    assert r.returncode == 2 and "only 1 variant(s) can run" in _flat(r.stderr)
    assert "postgresql-19" in _flat(r.stderr)
    r = pgaccel("lab", env=env)
    assert r.returncode == 2 and "Name a spec file" in r.stderr


def test_calibrate_reports_noise_floor(tmp_path):
    """`calibrate` measures an A/A pair and reports the noise floor, the budget's setup seconds
    and the trials a difference needs.  It takes long (about 31 s on a 2-core VM: scale-1 data
    loaded on two throwaway servers side by side, a burn-in round and 2 rounds of 2-s A/A trials
    after 1-s warm-ups)."""
    env = {"PGACCEL_STORE": str(tmp_path / "s.sqlite")}
    r = pgaccel("calibrate", "--rounds", "2", "--duration", "2", "--warmup", "1",
                "--scale", "1", "--clients", "1", "--budget", "10m", "--json", env=env)
    _no_traceback(r)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert 0 < d["noise_floor_cv"] < 1 and d["trial_s"] > 2
    # the budget's first seconds go to the data on both servers and the burn-in round, as
    # the budget check counts them (scale 1, 2 s trials with 1 s warm-up: about 10 s)
    from pgaccel.decide.budget import Load, need_of
    setup = need_of(Load("select-only", 2.0, 1.0, 1.0), 2, 2, side_by_side=True).setup_s
    assert d["setup_s"] == pytest.approx(setup) and 5 < setup < 15
    assert d["trials_per_variant"] == int((600 - setup) // (2 * d["trial_s"]))
    assert f"a 10-minute budget, after its data and burn-in (about {round(setup)} s), runs" \
        in _flat(r.stderr)
    assert 0 < d["min_detectable_effect"] < 1
    # how many trials a difference needs follows from the noise the A/A run measured (a 2 s
    # trial's noise is low enough here that 10% can need only the minimum of 3)
    from pgaccel.decide import stats
    assert d["trials_needed"] == {f"{e:.0%}": stats.trials_needed(d["noise_floor_cv"], e)
                                  for e in (0.02, 0.05, 0.1)}
    assert d["trials_needed"]["2%"] >= d["trials_needed"]["5%"] >= d["trials_needed"]["10%"] >= 3
    assert d["aa"]["n_base"] == d["aa"]["n_other"] == 2
    assert "Noise floor" in r.stderr and "budget" in r.stderr
    runs = json.loads(pgaccel("history", "--json", "--kind", "calibrate",
                              env=env).stdout)["runs"]
    assert len(runs) == 1 and runs[0]["n_trials"] == 4


def test_calibrate_measures_runs_design_by_default(tmp_path):
    """Without --clients/--scale/--budget, calibrate measures what `run --quick` would on
    this host (2 x CPUs clients, scale 20, a 6-minute budget): on a 16-CPU machine its old
    fixed 2 clients reported a 0.9% detectable difference for a design whose 32-client
    trials varied 8%.
    It takes long (about 40 s on a 2-core VM: scale-20 data loaded on two throwaway servers side
    by side, a burn-in round and 2 rounds of 2-s trials after 1-s warm-ups at 2 x CPUs clients)."""
    env = {"PGACCEL_STORE": str(tmp_path / "s.sqlite")}
    r = pgaccel("calibrate", "--quick", "--rounds", "2", "--duration", "2", "--warmup", "1",
                "--json", env=env)
    _no_traceback(r)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    cpus = len(os.sched_getaffinity(0))
    assert d["budget_s"] == 360
    assert f"{2 * cpus} clients, scale 20, 2 s each" in _flat(r.stderr)
    run_json = re.search(r"Results: (\S+/run\.json)", _flat(r.stderr)).group(1)
    trials = json.loads(open(run_json).read())["trials"]
    assert len(trials) == 4 and {t["clients"] for t in trials} == {2 * cpus}


def test_calibration_numbers():
    from pgaccel.decide.judge import calibration
    from pgaccel.decide import stats
    a = [100.0, 104.0, 96.0, 101.0, 99.0]
    b = [102.0, 98.0, 100.0, 97.0, 103.0]
    c = calibration(a, b, trial_s=20.0, budget_s=600.0).to_dict()
    assert c["noise_floor_cv"] == pytest.approx(stats.summarize(a + b).cv)
    assert c["trials_per_variant"] == 15
    assert c["min_detectable_effect"] == pytest.approx(
        stats.min_detectable_effect(c["noise_floor_cv"], 15))
    assert c["aa"]["verdict"] == "not enough evidence"      # ±4% noise: not within ±2%
    assert c["aa"]["more_rounds"] >= 1
    assert calibration(a, b, trial_s=400.0, budget_s=600.0).trials_per_variant == 0


DURABILITY_SPEC = """\
[[variant]]
name = "safe"

[[variant]]
name = "async"
settings = { synchronous_commit = "off" }

[[workload]]
name = "select-only"
scale = 1
clients = 1
"""


def test_durability_off_only_when_asked_and_read_back(tmp_path):
    """The study's own configs (the Insert Benchmark's) commit asynchronously: a lab may
    measure that on its throwaway clusters, but only with the flag named for the risk, and
    every variant that ran so says it, from the server, not from the spec."""
    env = {"PGACCEL_STORE": str(tmp_path / "s.sqlite"), "COLUMNS": "250"}
    spec = tmp_path / "async.toml"
    spec.write_text(DURABILITY_SPEC)
    r = pgaccel("lab", "--check", str(spec), env=env)
    _no_traceback(r)
    assert r.returncode == 2, r.stderr
    text = _flat(r.stderr)
    assert f"{spec}:6:" in text and "synchronous_commit = off can lose committed data" in text
    assert "--allow-unsafe-durability" in text
    r = pgaccel("lab", "--check", "--json", "--allow-unsafe-durability", str(spec), env=env,
                timeout=300)
    _no_traceback(r)
    assert r.returncode == 0, r.stderr[-2000:]
    v = json.loads(r.stdout)["variants"]
    assert ("async runs with durability off (synchronous_commit=off, asked with "
            "--allow-unsafe-durability)") in _flat(r.stderr)
    assert "safe runs with durability off" not in _flat(r.stderr)
    assert v["async"]["verified"]["durability_off"] == ["synchronous_commit=off"]
    assert "durability_off" not in v["safe"]["verified"]
    # the Variants table says it in async's row (it folds), and nowhere else
    lines = r.stderr.splitlines()
    i = next(i for i, x in enumerate(lines)
             if "│" in x and "async" in x and "synchronous_commit" in x)
    said = " ".join(x.split("│")[-2].strip() for x in lines[i:i + 2])
    assert "durability off: synchronous_commit=off" in said, said
    assert sum("durability" in x for x in lines if "│" in x) == 1       # safe: none
