"""Measured tuning end to end: storage measured with real fio, live server counters sampled
while real pgbench traffic runs, and the pure storage rule's table."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading

import pytest

from helpers import pgaccel
from pgaccel.tune.measured import storage_rules


@pytest.mark.parametrize("lat,iops1,iops32,rpc,eic", [
    (0.07, 13725, 58528, "1.1", "8"),     # this VM's virtio disk
    (0.6, 1600, 40000, "1.5", "64"),      # a SAN LUN with a deep queue
    (6.0, 160, 320, "3.0", "4"),          # a spinning disk: seeks dominate, little overlap
    (20.0, 50, 50, "4.0", "2"),           # a very slow disk
    (0.02, 100000, 900000, "1.1", "16"),  # NVMe: 2 x 9 = 18 -> 16
])
def test_storage_rules(lat, iops1, iops32, rpc, eic):
    m = {"qd1": {"iops": iops1, "lat_ms": lat}, "qd32": {"iops": iops32, "lat_ms": lat}}
    ch = {c.name: c for c in storage_rules(m)}
    assert ch["random_page_cost"].proposed == rpc
    assert ch["effective_io_concurrency"].proposed == eic
    assert ch["maintenance_io_concurrency"].proposed == eic
    assert ch["random_page_cost"].inputs["qd1_lat_ms"] == round(lat, 3)


@pytest.mark.skipif(not shutil.which("fio"), reason="fio is not installed")
def test_measure_storage_with_real_fio():
    r = pgaccel("tune", "--measure-storage", "--workdir", "/var/tmp", "--format", "json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout[r.stdout.index("{"):])
    got = {c["name"]: c for c in plan["changes"] if c["rule"].startswith("measured.")}
    assert set(got) == {"random_page_cost", "effective_io_concurrency",
                        "maintenance_io_concurrency"}
    nums = got["random_page_cost"]["inputs"]
    assert nums["qd1_iops"] > 0 and nums["qd32_iops"] > 0 and nums["qd1_lat_ms"] > 0


def test_sample_live_counters_under_real_traffic(cluster):
    dsn = f"host={cluster.sockdir} port={cluster.port} user=pgaccel dbname=postgres"
    pgbench = cluster.inst.path("pgbench")
    env = {"PGHOST": cluster.sockdir, "PGPORT": str(cluster.port), "PGUSER": "pgaccel",
           "PGDATABASE": "postgres"}
    subprocess.run([pgbench, "-i", "-q", "-s", "2"], env=env, check=True, capture_output=True)
    # 9 s of load outlasts tune's start and its 5-s sample
    load = threading.Thread(target=subprocess.run, args=(
        [pgbench, "-n", "-c", "2", "-T", "9"],), kwargs={"env": env, "capture_output": True})
    load.start()
    try:
        r = pgaccel("tune", "--dsn", dsn, "--sample", "5", "--format", "json")
    finally:
        load.join()
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout[r.stdout.index("{"):])
    wal = [c for c in plan["changes"] if c["rule"] == "measured.max_wal_size"]
    assert wal, "the WAL rule must use the sampled WAL rate"
    assert wal[0]["inputs"]["wal_bytes_per_sec"] > 0


def test_sample_needs_a_live_server():
    r = pgaccel("tune", "--sample", "2")
    assert r.returncode == 2 and "live server" in r.stderr and "Traceback" not in r.stderr


def test_from_run_hit_ratio_uses_the_baseline_shared_buffers():
    """A real `pgaccel run` (its baseline: the throwaway server's 128MB), then tune
    --from-run: the hit ratio is set against the 128MB the trials ran with, not the plan's
    proposed shared_buffers.
    It takes long (about 20 s on a 2-core VM: a real `run --quick` on two throwaway servers side
    by side, scale-1 data, a burn-in round and one round of 2-s trials without warm-ups)."""
    r = pgaccel("run", "--quick", "--workloads", "select-only", "--rounds", "1",
                "--duration", "2", "--warmup", "0", "--scale", "1", "--json")
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout[r.stdout.index("{"):])["run_id"]
    r = pgaccel("tune", "--from-run", run_id, "--format", "json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout[r.stdout.index("{"):])
    proposed = next(c["proposed"] for c in plan["changes"] if c["name"] == "shared_buffers")
    hit = next(c for c in plan["changes"] if c["rule"] == "measured.hit_ratio")
    assert proposed != "128MB"
    assert hit["inputs"]["shared_buffers_bytes"] == 128 * 1024 ** 2
    assert hit["inputs"]["shared_buffers_source"] == (
        f"the server's value recorded in run {run_id}, which the 'baseline' variant ran with")
    assert "shared_buffers (128MB)" in hit["reason"] and proposed not in hit["reason"]
    assert "measured with shared_buffers 128MB" in hit["reason"]
