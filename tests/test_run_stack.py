"""`pgaccel run --stack os` for real, as root: baseline, settings and settings + OS layer
(huge pages reserved and on, sysctls from the plan) interleaved on a throwaway cluster; the
layer's huge pages are verified in the postmaster's memory map, every OS value is back
afterwards, and run.json, the JSON summary and the report carry each layer's step."""

from __future__ import annotations

import json
import os

import pytest

from helpers import pgaccel

SYSCTLS = ("vm/swappiness", "vm/dirty_background_bytes", "vm/dirty_bytes", "vm/nr_hugepages",
           "kernel/sched_autogroup_enabled")


def _os_values() -> dict[str, str]:
    out = {}
    for k in SYSCTLS:
        try:
            out[k] = open(f"/proc/sys/{k}").read()
        except OSError:
            pass
    out["thp"] = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    return out


@pytest.mark.skipif(os.geteuid() != 0, reason="the OS layer needs root")
def test_run_stack_os_measures_each_layer_and_puts_the_os_back(tmp_path):
    """`run --stack os` measures baseline, settings and settings + OS layer, verifies the OS
    layer's huge pages and sysctls, reports each layer's step and puts every OS value back.  It
    takes long (about 80 s on a 2-core VM: 3 configs x 3 rounds of 2-s select-only trials
    without warm-ups, the fewest that give each step an interval (the report's error bars),
    on throwaway servers with scale-2 data, plus a cachegrind count and a perf window for each
    of two configs, and two `tune` runs; nothing asserted depends on a verdict)."""
    before = _os_values()
    out = tmp_path / "run"
    r = pgaccel("run", "--stack", "os", "--workloads", "select-only", "--scale", "2",
                "--clients", "2", "--rounds", "3", "--duration", "2", "--warmup", "0",
                "--profile", "analytics", "--out", str(out), "--yes", "--json", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    assert _os_values() == before                       # every OS value put back
    doc = json.loads(r.stdout)
    assert [(s["previous"], s["layer"]) for s in doc["layers"]] == [
        ("baseline", "settings"), ("settings", "os")]
    for s in doc["layers"]:
        assert s["vs_previous"]["ratio"] > 0 and s["vs_baseline"]["ratio"] > 0
    # settings -> os compared directly; baseline -> settings is the lab's own comparison
    assert doc["layers"][0]["vs_previous"]["ratio"] == pytest.approx(
        doc["layers"][0]["vs_baseline"]["ratio"])
    run = json.loads((out / "run.json").read_text())
    assert run["stack"] == "os" and len(run["layers"]) == 2
    # the settings and os layers carry pgaccel's plan for --profile analytics, as `tune`
    # plans it (it used to be planned for oltp whatever the profile)
    want = {}
    for profile in ("analytics", "oltp"):
        t = pgaccel("tune", "--workload", profile, "--format", "json")
        assert t.returncode == 0, t.stderr
        want[profile] = {c["name"]: c["proposed"] for c in json.loads(t.stdout)["changes"]
                         if c.get("layer", "postgres") == "postgres"}
    assert want["analytics"]["work_mem"] != want["oltp"]["work_mem"]
    layered = {v["name"]: v["settings"] for v in run["variants"]}
    assert run["profile"] == "analytics"
    for layer in ("settings", "os"):
        assert layered[layer]["work_mem"] == want["analytics"]["work_mem"]
    v = run["verified"]
    assert v["os"]["ok"] and v["os"]["hugetlb_kb"] > 0           # shared memory on huge pages
    assert v["settings"]["hugetlb_kb"] == 0 or v["settings"]["ok"]
    assert v["os"].get("sysctl:vm.swappiness") == 1             # the plan's sysctl in effect
    html = (out / "report.html").read_text()
    assert "What each layer is worth" in html and "settings → os" in html
    assert "What each layer is worth" in (out / "report.md").read_text()
    # every config but the os layer profiled: cachegrind counts and a perf window
    prof = {p["config"]: p for p in run["profiles"]}
    assert sorted(prof) == ["baseline", "settings"]
    assert prof["baseline"]["instructions_vs_base"] == 0.0
    for p in prof.values():
        assert p["workload"] == "select-only" and p["per_transaction"]["instructions"] > 10000
        assert p["live"]["samples"] > 0 and p["live"]["per_op"]["cpu_us"] > 0
    assert "folded" not in doc["profiles"][0]["live"]              # --json stays lean
    assert "Why: CPU cost per transaction" in html and html.count("<details>") == 2
    assert "Why: CPU cost per transaction" in (out / "report.md").read_text()


def test_run_stack_refuses_an_existing_server(tmp_path):
    r = pgaccel("run", "--stack", "full", "--dsn", "postgresql://localhost/x", "--yes")
    assert r.returncode == 2, r.stderr
    assert "throwaway clusters" in r.stderr and "Traceback" not in r.stderr


def test_build_flavor_needs_a_build_layer():
    r = pgaccel("run", "--build-flavor", "lto", "--yes")
    assert r.returncode == 2 and "--stack build" in r.stderr, r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the OS layer needs root")
def test_kill_9_during_the_os_layer_then_the_next_start_puts_the_os_back(tmp_path):
    """pgaccel killed while the os layer's server runs on reserved huge pages with the
    plan's THP and sysctls: the reaper stops the orphaned server, the next pgaccel start
    restores every OS value from the journal.
    It takes long (about 23 s on a 2-core VM: a real `run --stack os` on throwaway servers,
    scale-2 data and 2-s trials after 1-s warm-ups, up to the OS layer's first trial, then a
    wait of up to 60 s for the reaper to stop the orphaned server)."""
    from helpers import postgres_processes_for
    before = _os_values()
    import shutil
    import tempfile
    from pathlib import Path
    journal = tmp_path / "journal"
    work = Path(tempfile.mkdtemp(prefix="pgaccel-kill-"))   # the server user must reach it
    os.chmod(work, 0o755)
    env = {"PGACCEL_OS_JOURNAL_DIR": str(journal)}
    try:
        r = pgaccel("run", "--stack", "os", "--workloads", "select-only", "--scale", "2",
                    "--clients", "2", "--rounds", "3", "--duration", "2", "--warmup", "0",
                    "--workdir", str(work), "--out", str(tmp_path / "run"), "--yes",
                    "--no-cpu-profile", timeout=900,
                    env={**env, "PGACCEL_TEST_KILL_AT": "lab-os-in-use"})
        assert r.returncode == -9, (r.returncode, r.stderr[-2000:])
        assert _os_values() != before                   # the kill left the OS changed
        assert len(list(journal.glob("os-journal-*.json"))) == 1
        r = pgaccel("workloads", env=env)
        assert r.returncode == 0, r.stderr
        assert "Restored OS values left by pgaccel process" in r.stderr
        assert list(journal.glob("os-journal-*.json")) == []
        # the orphaned server held huge pages; the reaper stops it, then the pool is empty
        import time
        end = time.monotonic() + 60
        while postgres_processes_for(str(work)) and time.monotonic() < end:
            time.sleep(0.5)
        assert postgres_processes_for(str(work)) == []
        assert _os_values() == before
    finally:                                             # never leave the host changed
        from pgaccel.osknobs.journal import recover
        recover(str(journal))
        shutil.rmtree(work, ignore_errors=True)


def test_cpu_profile_belongs_to_a_layered_run():
    r = pgaccel("run", "--cpu-profile", "--yes")
    assert r.returncode == 2 and "--stack" in r.stderr and "Traceback" not in r.stderr
