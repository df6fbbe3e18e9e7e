"""The SQLite results store, on real files."""

from __future__ import annotations

import math

import csv
import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from pgaccel.errors import UsageError
from pgaccel.decide.crossrun import compare_runs
from pgaccel.decide.effect import SLOWER
from pgaccel.session.store import SCHEMA_VERSION, Store, default_store_path, host_fingerprint

HOST = {"arch": "x86_64", "cpu_model": "AMD EPYC 7B13", "logical_cpus": 2,
        "memory_total_bytes": 24 * 2**30 - 300 * 2**20, "kernel": "6.1.0-18-amd64",
        "memory_available_bytes": 20 * 2**30}


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "results.sqlite"))
    yield s
    s.close()


def test_a_store_with_the_old_results_column_still_works(tmp_path):
    """Stores written before the results column was dropped from the schema (it was never
    read) open, take new runs and read old ones; the column is left in place."""
    path = str(tmp_path / "old.sqlite")
    Store(path).close()
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE runs ADD COLUMN results_json TEXT")
        db.execute("INSERT INTO runs (id, created_at, kind, status, results_json) VALUES "
                   "('20240101-000000-abcd', '2024-01-01T00:00:00Z', 'run', 'finished', "
                   "'[1]')")
    db.close()
    with Store(path) as s:
        rid = s.create_run("run", "new")
        s.finish_run(rid, "finished", summary={"ok": 1})
        assert s.get_run(rid)["summary"] == {"ok": 1}
        old = s.get_run("20240101-000000-abcd")
        assert old["status"] == "finished" and "results" not in old
        assert [r["id"] for r in s.list_runs()] == [rid, "20240101-000000-abcd"]
    with sqlite3.connect(path) as db:
        cols = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
    db.close()
    assert "results_json" in cols


def fill(store: Store, run_id: str, variant: str, values, workload="tpcb", clients=2):
    for i, v in enumerate(values):
        store.add_trial(run_id, variant=variant, workload=workload, round=i, clients=clients,
                        duration_s=30.0, metrics={"tps": v, "latency": {"avg_ms": 2.0,
                                                                          "p99_ms": 9.5}},
                        series={"tps": [v - 1, v, v + 1]})


def test_round_trip(store):
    rid = store.create_run("lab", "hugepages", host=HOST, spec={"trials": 5})
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", rid)
    store.add_variant(rid, "base", settings={"shared_buffers": "256MB"},
                      server_version="15.8", bindir="/usr/lib/postgresql/15/bin")
    store.add_variant(rid, "huge", settings={"huge_pages": "on"}, server_version="15.8",
                      verified={"huge_pages": "on"})
    tid = store.add_trial(rid, variant="base", workload="select", round=0, clients=2,
                          duration_s=12.5, metrics={"tps": 1234.5, "errors": 0},
                          series={"tps": [1200, 1250.5], "latency_ms": [1.5, 1.6]})
    store.finish_run(rid, "finished", summary={"verdict": "faster"})
    run = store.get_run(rid, with_series=True)
    assert run["kind"] == "lab" and run["name"] == "hugepages" and run["status"] == "finished"
    assert run["host"]["cpu_model"] == "AMD EPYC 7B13"
    assert run["host_fingerprint"] == host_fingerprint(HOST)
    assert run["spec"] == {"trials": 5} and run["summary"] == {"verdict": "faster"}
    assert "results" not in run and run["finished_at"]
    assert [v["name"] for v in run["variants"]] == ["base", "huge"]
    assert run["variants"][0]["settings"] == {"shared_buffers": "256MB"}
    assert run["variants"][1]["verified"] == {"huge_pages": "on"}
    (t,) = run["trials"]
    assert t["id"] == tid and t["primary_metric"] == "tps" and t["primary_value"] == 1234.5
    assert t["metrics"] == {"tps": 1234.5, "errors": 0}
    assert t["series"] == {"tps": [1200.0, 1250.5], "latency_ms": [1.5, 1.6]}
    assert json.loads(json.dumps(store.export_json(rid)))["trials"][0]["series"]["tps"][1] == 1250.5
    # updating a variant after verification replaces it
    store.add_variant(rid, "huge", settings={"huge_pages": "on"}, verified={"ok": False})
    assert store.get_run(rid)["variants"][1]["verified"] == {"ok": False}


def test_schema_wal_and_foreign_keys(store):
    db = sqlite3.connect(store.path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    db.close()
    with pytest.raises(sqlite3.IntegrityError):
        store.add_trial("no-such-run", variant="a", workload="w", round=0, metrics={"tps": 1})
    with pytest.raises(ValueError):
        store.create_run("party")


def test_trial_with_bad_series_is_not_half_written(store):
    rid = store.create_run("bench")
    with pytest.raises((TypeError, ValueError)):
        store.add_trial(rid, variant="a", workload="w", round=0, metrics={"tps": 5},
                        series={"tps": [1.0, "not a number"]})
    assert store.trials_for(rid) == []


def test_newer_schema_is_refused(tmp_path):
    path = str(tmp_path / "r.sqlite")
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE schema_version SET version = 99")
    db.commit()
    db.close()
    with pytest.raises(UsageError, match="schema version 99"):
        Store(path)


def test_not_a_database_is_a_clear_error(tmp_path):
    p = tmp_path / "junk.sqlite"
    p.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(UsageError, match="Cannot open the results store"):
        Store(str(p))


_CHILD = """
import os, sys
from pgaccel.session.store import Store
s = Store(sys.argv[1])
rid = s.create_run("lab", "killed")
s.add_variant(rid, "a")
for i in range(3):
    s.add_trial(rid, variant="a", workload="w", round=i, metrics={"tps": 100 + i})
print(rid, flush=True)
os._exit(1)          # dies mid-run: no finish_run, no close
"""


def test_interrupted_run_keeps_finished_trials_and_resumes(tmp_path):
    path = str(tmp_path / "r.sqlite")
    out = subprocess.run([sys.executable, "-c", _CHILD, path], capture_output=True, text=True,
                         timeout=60)
    rid = out.stdout.strip()
    assert out.returncode == 1 and rid, out.stderr
    with Store(path) as s:
        run = s.get_run(rid)
        assert run["status"] == "interrupted"       # 'running' and its process is gone
        assert [t["primary_value"] for t in run["trials"]] == [100, 101, 102]
        assert s.list_runs()[0]["status"] == "interrupted"
        resumed = s.resume_run(rid[:15])
        assert resumed["status"] == "running" and resumed["pid"] == os.getpid()
        s.add_trial(rid, variant="a", workload="w", round=3, metrics={"tps": 103})
        s.finish_run(rid, "finished")
        assert len(s.trials_for(rid)) == 4 and s.get_run(rid)["status"] == "finished"


def test_prefix_lookup(store):
    a = store.create_run("run", "one")
    b = store.create_run("run", "two")
    assert store.get_run(a)["name"] == "one"
    common = os.path.commonprefix([a, b])
    assert store.get_run(a[:len(common) + 1])["id"] == a
    assert store.get_run(b[:len(common) + 1])["id"] == b
    with pytest.raises(UsageError, match="ambiguous"):
        store.get_run(common)
    with pytest.raises(UsageError, match="No run"):
        store.get_run("19990101")


def test_a_run_is_found_by_the_paths_its_end_prints(store, tmp_path):
    a = store.create_run("run", "one")
    store.create_run("run", "two")
    d = tmp_path / "runs" / a
    for arg in (str(d), f"{d}/", f"{d}/run.json", f"{d}/report.html", f"runs/{a}"):
        assert store.resolve(arg) == a, arg
    with pytest.raises(UsageError, match="No run '19990101-000000-0000'"):
        store.resolve(str(tmp_path / "19990101-000000-0000" / "run.json"))


def test_list_runs_newest_first_with_counts(store):
    ids = [store.create_run("run", f"r{i}") for i in range(3)]
    fill(store, ids[1], "a", [1.0, 2.0])
    runs = store.list_runs()
    assert [r["id"] for r in runs] == sorted(ids, reverse=True)
    assert {r["id"]: r["n_trials"] for r in runs}[ids[1]] == 2
    assert len(store.list_runs(limit=2)) == 2
    assert store.list_runs(kind="lab") == []
    assert runs[0]["status"] == "running"           # our own process is alive


def test_trials_for_filters(store):
    rid = store.create_run("lab")
    fill(store, rid, "a", [10, 11], workload="ro")
    fill(store, rid, "b", [12], workload="ro")
    store.add_trial(rid, variant="b", workload="rw", round=0, status="failed", metrics={})
    assert len(store.trials_for(rid, workload="ro")) == 3
    assert [t["primary_value"] for t in store.trials_for(rid, variant="a")] == [10, 11]
    (f,) = store.trials_for(rid, status="failed")
    assert f["primary_value"] is None and f["workload"] == "rw"


def test_export_csv_columns(store, tmp_path):
    rid = store.create_run("lab")
    fill(store, rid, "a", [10.0, 11.0])
    store.add_trial(rid, variant="b", workload="tpcb", round=0, clients=2,
                    metrics={"tps": 9.0, "cpu": {"user_pct": 40}})
    path = str(tmp_path / "out.csv")
    assert store.export_csv(rid, path) == 3
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    cols = list(rows[0])
    assert cols[:11] == ["run_id", "trial_id", "variant", "workload", "round", "clients",
                         "started_at", "duration_s", "status", "primary_metric",
                         "primary_value"]
    assert {"metric.tps", "metric.latency.avg_ms", "metric.latency.p99_ms",
            "metric.cpu.user_pct"} <= set(cols)
    assert rows[0]["metric.latency.p99_ms"] == "9.5" and rows[2]["metric.latency.p99_ms"] == ""
    assert rows[2]["metric.cpu.user_pct"] == "40" and rows[1]["primary_value"] == "11.0"
    assert all(r["run_id"] == rid for r in rows)
    assert [r["round"] for r in rows] == ["1", "2", "1"]        # numbered as `show` does


def test_compare_runs_and_host_flag(store):
    other_host = dict(HOST, cpu_model="Ampere Altra", arch="aarch64")
    a = store.create_run("run", host=HOST)
    b = store.create_run("run", host=HOST)
    c = store.create_run("run", host=other_host)
    fill(store, a, "current", [1000, 1010, 990, 1005, 995])
    fill(store, b, "tuned", [800, 810, 790, 805, 795])
    fill(store, c, "current", [1000, 1010, 990, 1005, 995])
    fill(store, c, "current", [50, 51], workload="only-in-c")
    ab = compare_runs(store.get_run(a), store.get_run(b))
    assert ab["hosts_differ"] is False
    (row,) = ab["rows"]                      # single-variant runs pair up across names
    assert row["median_a"] == 1000 and row["median_b"] == 800
    geo = (math.prod([800, 810, 790, 805, 795]) / math.prod([1000, 1010, 990, 1005, 995])) ** 0.2
    assert row["ratio"] == pytest.approx(geo) and row["verdict"] == SLOWER
    ac = compare_runs(store.get_run(a), store.get_run(c))
    assert ac["hosts_differ"] is True and ac["host_a"] != ac["host_b"]
    only = [r for r in ac["rows"] if r["workload"] == "only-in-c"][0]
    assert only["n_a"] == 0 and only["verdict"] is None


def test_host_fingerprint_is_stable_and_discriminating():
    fp = host_fingerprint(HOST)
    assert fp == host_fingerprint(dict(HOST, memory_available_bytes=1))   # volatile: ignored
    assert fp == host_fingerprint(dict(HOST, memory_total_bytes=HOST["memory_total_bytes"]
                                       + 10 * 2**20))                       # rounding
    assert fp == host_fingerprint({"arch": "x86_64", "cpu_model": "AMD  EPYC 7B13 ",
                                   "cpus": 2, "memory_bytes": 24 * 2**30,
                                   "kernel": "6.1.0-18-amd64"})
    for change in ({"logical_cpus": 4}, {"kernel": "6.12.0"}, {"arch": "aarch64"},
                   {"memory_total_bytes": 48 * 2**30}, {"cpu_model": "Intel Xeon"}):
        assert host_fingerprint(dict(HOST, **change)) != fp
    # same value in a fresh interpreter (no per-process hash seeds)
    out = subprocess.run([sys.executable, "-c", "import json,sys; from pgaccel.session.store "
                          "import host_fingerprint as h; print(h(json.loads(sys.argv[1])))",
                          json.dumps(HOST)], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == fp


def test_default_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PGACCEL_STORE", str(tmp_path / "x.sqlite"))
    assert default_store_path() == str(tmp_path / "x.sqlite")
    monkeypatch.delenv("PGACCEL_STORE")
    p = default_store_path()
    assert p.endswith(os.path.join("pgaccel", "results.sqlite"))


def test_log_dir_beside_database(store):
    rid = store.create_run("lab")
    d = store.log_dir(rid)
    assert os.path.isdir(d) and os.path.dirname(os.path.dirname(d)) == \
        os.path.dirname(store.path)


def test_reader_is_not_blocked_by_an_open_write_transaction(tmp_path):
    path = str(tmp_path / "r.sqlite")
    with Store(path) as w:
        rid = w.create_run("lab")
        fill(w, rid, "a", [1.0])
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("BEGIN IMMEDIATE")
    raw.execute("INSERT INTO trials (run_id, variant, workload, round, status, primary_value)"
                " VALUES (?, 'a', 'tpcb', 9, 'ok', 2.0)", (rid,))
    t0 = time.monotonic()
    with Store(path) as r:                      # opening needs no write lock
        assert [t["primary_value"] for t in r.trials_for(rid)] == [1.0]
    assert time.monotonic() - t0 < 5
    raw.execute("COMMIT")
    raw.close()
    with Store(path) as r:
        assert len(r.trials_for(rid)) == 2


def test_concurrent_reader_while_writing(tmp_path):
    path = str(tmp_path / "r.sqlite")
    with Store(path) as s:
        rid = s.create_run("lab")
    n, errors = 150, []

    def writer():
        try:
            with Store(path) as w:
                for i in range(n):
                    w.add_trial(rid, variant="a", workload="w", round=i,
                                metrics={"tps": float(i)}, series={"tps": [float(i)] * 60})
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    th = threading.Thread(target=writer)
    seen = []
    with Store(path) as r:
        th.start()
        while th.is_alive():
            seen.append(len(r.trials_for(rid)))
            r.list_runs()
        th.join()
        seen.append(len(r.trials_for(rid)))
    assert not errors
    assert seen == sorted(seen) and seen[-1] == n
    assert len(seen) > 2
