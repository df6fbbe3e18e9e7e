"""A real pgbench trial on a real server, with every metric parsed, and the log parser."""

from __future__ import annotations

import time

import pytest

from pgaccel.pg.values import same_value
from pgaccel.decide.model import TrialSpec
from pgaccel.lab.trial import run_trial, snapshot_template
from pgaccel.server.discovery import find_client
from pgaccel.server.target import LocalTarget
from pgaccel.workloads.base import BenchContext, RunParams, get_workload
from pgaccel.workloads.pgbench import parse_transaction_logs


def test_parse_transaction_logs(tmp_path):
    # client tx latency_us script epoch_s epoch_us ; second 100: 3 tx, second 101: 2 tx + 1 failed
    lines = ["0 1 1000 0 100 100000", "1 1 3000 0 100 500000", "0 2 2000 0 100 900000",
             "1 2 4000 0 101 200000", "0 3 10000 0 101 700000", "1 3 failed 0 101 800000"]
    p = tmp_path / "tx.1"
    p.write_text("\n".join(lines) + "\n")
    r = parse_transaction_logs([str(p)])
    assert r["n"] == 5 and r["failed"] == 1
    assert r["tps_series"] == [3.0, 2.0]
    assert r["latency_ms"]["p50"] == pytest.approx(3.0)
    assert r["latency_ms"]["mean"] == pytest.approx(4.0)
    assert r["latency_ms"]["max"] == pytest.approx(10.0)
    cdf = dict((q, v) for q, v in r["latency_ms"]["cdf"])     # latencies 1, 2, 3, 4, 10 ms
    assert cdf[0.0] == 1.0 and cdf[0.5] == 3.0 and cdf[1.0] == 10.0 and cdf[0.9] == pytest.approx(7.6)
    assert r["latency_p50_series"] == [pytest.approx(2.0), pytest.approx(7.0)]


def test_version_keyed_sql_files():
    from pgaccel.pg.sql import load_sql
    assert "pg_stat_bgwriter" in load_sql("checkpoints", 15)
    assert "pg_stat_checkpointer" in load_sql("checkpoints", 17)
    assert load_sql("wal", 13) is None and "pg_stat_wal" in load_sql("wal", 14)
    assert load_sql("io", 15) is None and "pg_stat_io" in load_sql("io", 16)


@pytest.mark.parametrize("expected,actual,unit,vartype,ok", [
    ("1GB", "131072", "8kB", "integer", True),
    ("1024MB", "131072", "8kB", "integer", True),
    ("64MB", "65536", "kB", "integer", True),
    ("64MB", "65535", "kB", "integer", False),
    ("15min", "900", "s", "integer", True),
    ("on", "on", None, "bool", True),
    ("true", "on", None, "bool", True),
    ("off", "on", None, "bool", False),
    ("LZ4", "lz4", None, "enum", True),
    ("1.1", "1.1", None, "real", True),
    ("-1", "-1", "kB", "integer", True),
])
def test_setting_equality(expected, actual, unit, vartype, ok):
    assert same_value(expected, actual, unit, vartype) is ok


@pytest.fixture(scope="module")
def ctx(cluster):
    target = LocalTarget(cluster)
    target.apply({})
    target.ensure_bench_db()
    return BenchContext(target, find_client("pgbench", cluster.inst))


def test_real_trial_records_every_metric(ctx):
    wl = get_workload("tpcb-like")
    params = RunParams(clients=2, duration=4, warmup=3, scale=2)
    assert wl.prepare(ctx, params) in (True, False)
    assert wl.prepare(ctx, params) is False          # idempotent: fingerprint matches
    snapshot_template(ctx.target)
    t = run_trial(ctx, TrialSpec("base", {"wal_buffers": "8MB"}, wl, params))
    m = t.metrics
    assert t.throughput > 0 and m["ops"] > 0
    lat = m["latency_ms"]
    assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]
    # per-second series: every second accounted for, most of them busy (a loaded VM can
    # stall a whole second, so a single zero is not a failure)
    assert len(t.series) >= 2 and sum(x > 0 for x in t.series) >= len(t.series) - 1
    # the trial's throughput is the mean of the steady part of its series, and that part
    # lies inside the series
    lo, hi = m["steady_range"]
    assert 0 <= lo < hi <= len(t.series)
    assert t.throughput == pytest.approx(sum(t.series[lo:hi]) / (hi - lo))
    # per operation: the trial's own raw counters over its operations, in the documented
    # units (µs, KB of 1024 bytes, bytes), each from its own counter
    ops = m["ops"]
    assert m["server_cpu_us_per_op"] == pytest.approx(m["server_cpu_s"] * 1e6 / ops)
    assert m["client_cpu_us_per_op"] == pytest.approx(m["client_cpu_s"] * 1e6 / ops)
    assert m["client_cpu_share"] == pytest.approx(
        m["client_cpu_s"] / (m["client_cpu_s"] + m["server_cpu_s"]))
    assert m["ctx_switches_per_op"] == pytest.approx(m["host_ctx_switches"] / ops)
    assert m["read_kb_per_op"] == pytest.approx(m["disk_read_bytes"] / 1024 / ops)
    assert m["write_kb_per_op"] == pytest.approx(m["disk_write_bytes"] / 1024 / ops)
    assert m["wal_bytes_per_op"] == pytest.approx(m["pg"]["wal_bytes"] / ops)
    if "host_resched_ipis" in m:
        assert m["resched_ipis_per_op"] == pytest.approx(m["host_resched_ipis"] / ops)
    # and plausible for a tpcb-like transaction (7 statements, each a round trip) on this
    # machine class: a unit slip (x1000) or a missing term leaves these ranges
    assert 50 <= m["server_cpu_us_per_op"] <= 5000
    assert 10 <= m["client_cpu_us_per_op"] <= 2000
    assert 0.02 <= m["client_cpu_share"] <= 0.6         # pgbench does less than the server
    assert 2 <= m["ctx_switches_per_op"] <= 500
    assert 300 <= m["wal_bytes_per_op"] <= 30_000       # after a CHECKPOINT: full pages too
    assert m["client_ctx_switches"] > 0
    assert "checkpoints" in m["pg"] and m["pg"]["db_xact_commit"] >= m["ops"]
    assert m["wait_samples"] > 0 and m["waits"]
    assert m["prewarm_blocks"] > 0


def test_template_restores_equal_data(ctx):
    """A write trial starts from the template's rows, not the previous trial's: rows planted
    between two trials are gone after the second, and the row counts are the template's."""
    wl = get_workload("tpcb-like")
    params = RunParams(clients=1, duration=2, warmup=0, scale=2)   # rows, not time
    wl.prepare(ctx, params)
    snapshot_template(ctx.target)
    t1 = run_trial(ctx, TrialSpec("base", {}, wl, params))
    with ctx.connect() as conn:
        after1 = conn.execute("SELECT count(*) FROM pgbench_history").fetchone()[0]
        conn.execute("INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) "
                     "SELECT 1, 1, 1 + g % 200000, 0, now() FROM generate_series(1, 300000) g")
        conn.execute("UPDATE pgbench_accounts SET abalance = abalance + 1000000 "
                     "WHERE aid <= 1000")
    t2 = run_trial(ctx, TrialSpec("base", {}, wl, params))
    with ctx.connect() as conn:
        history = conn.execute("SELECT count(*) FROM pgbench_history").fetchone()[0]
        accounts, planted = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE abalance > 900000) "
            "FROM pgbench_accounts").fetchone()
    assert (accounts, planted) == (200_000, 0)              # scale 2, as the template
    # one history row per transaction of this trial (warm-up and measured), none planted
    assert t2.metrics["ops"] <= history < 300_000
    assert t1.metrics["ops"] <= after1


def test_variant_that_does_not_take_effect_is_refused(ctx, cluster):
    from pgaccel.errors import ServerError
    wl = get_workload("select-only")
    params = RunParams(clients=1, duration=3, warmup=1, scale=2)

    class NoRestart(LocalTarget):
        def apply(self, settings):   # pretends to apply, but changes nothing
            self.settings = dict(settings)
            return []
    target = NoRestart(cluster)
    bad = BenchContext(target, ctx.pgbench)
    with pytest.raises(ServerError, match="not what it claims"):
        run_trial(bad, TrialSpec("liar", {"shared_buffers": "96MB"}, wl, params))


def test_bench_of_a_step_workload_is_a_stored_run_with_host(tmp_path):
    """`bench` of a step workload writes run.json in --out, is in `history`, and records
    the host, so `compare` of two bench runs on this machine does not warn about hosts.
    Piped, the terminal is 120 columns: in-server-loop's and parallel-scan's step tables
    had a details column squeezed to nothing and "valid" cut to "vali".  The details go
    under the table, each step's whole; the conclusion is a sentence, numbers rounded
    (the second bench's table, printed without --json)."""
    import json
    from helpers import pgaccel
    env = {"PGACCEL_STORE": str(tmp_path / "store.db")}
    ids = []
    for name in ("a", "b"):
        out = tmp_path / name
        r = pgaccel("bench", "-w", "parallel-scan", "--option", "rows=20000", "--option",
                    "degrees=0,1", "--option", "repeats=1", "--option", "queries=count",
                    "--out", str(out), *(["--json"] if name == "a" else []), env=env,
                    timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        run = json.load(open(out / "run.json"))
        if name == "a":
            doc = json.loads(r.stdout)
            assert [s["step"] for s in doc["results"]["2"]] == ["count@0", "count@1"]
            assert run["run_id"] == doc["run_id"]
        else:
            lines = r.stdout.splitlines()
            assert max(len(x) for x in lines) <= 120
            head = next(x for x in lines if "step" in x and "throughput" in x)
            assert head.rstrip().endswith("valid ┃")
            assert any(x.startswith("  count@1: degree=1") for x in lines), r.stdout
            assert any(x.startswith("  count fastest ") and "serial" in x for x in lines)
        assert run["host"]["logical_cpus"] >= 1
        assert {t["workload"] for t in run["trials"]} == {"parallel-scan/count@0",
                                                         "parallel-scan/count@1"}
        ids.append(run["run_id"])
    hist = json.loads(pgaccel("history", "--json", env=env).stdout)["runs"]
    assert set(ids) <= {h["id"] for h in hist}
    r = pgaccel("compare", *ids, env=env)
    assert r.returncode == 0 and "different hosts" not in r.stderr, r.stderr


def test_a_checkpoint_during_the_interval_is_marked_at_its_second(ctx):
    """A CHECKPOINT that writes buffers ~1.5 s into a measured interval shows up in
    ``checkpoint_s`` within a second of when it ended; none before it."""
    from pgaccel.metrics.measure import Measure
    with ctx.connect() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS ckpt_mark (i int)")
        conn.execute("CHECKPOINT")
    with Measure(ctx) as meas:
        with ctx.connect() as conn:
            time.sleep(0.5)
            conn.execute("INSERT INTO ckpt_mark SELECT generate_series(1, 50000)")
            time.sleep(1.0)
            conn.execute("CHECKPOINT")                    # dirty buffers: it writes them
            time.sleep(2.5)
    m = meas.metrics(1)
    marks = m["checkpoint_s"]
    assert m["cpu_probe_us"] and m["cpu_probe_us"] > 0      # the speed probe ran throughout
    assert len(marks) == 1 and 1.4 <= marks[0] <= 3.2, marks


def _uniform_log(tmp_path, start_s: float, seconds: float, rate: int) -> str:
    """A pgbench -l file of ``rate`` transactions a second from ``start_s`` (epoch)."""
    n = int(seconds * rate)
    lines = []
    for i in range(n):
        t = start_s + i / rate
        lines.append(f"0 {i} 500 0 {int(t)} {int(round((t - int(t)) * 1e6)) % 1000000}")
    p = tmp_path / f"u{start_s}.log"
    p.write_text("\n".join(lines) + "\n")
    return str(p)


@pytest.mark.parametrize("start,seconds,expected_len", [
    (100.7, 3.0, 2),     # seconds 100 (0.3 s), 101, 102, 103 (0.7 s): two whole ones
    (100.7, 5.0, 4),
    (100.2, 4.0, 3),
    (100.5, 1.2, 2),     # too short to trim: what there is
])
def test_the_rate_counts_whole_seconds_only(tmp_path, start, seconds, expected_len):
    from pgaccel.workloads.pgbench import trim_series
    r = parse_transaction_logs([_uniform_log(tmp_path, start, seconds, 1000)])
    tps, p50 = trim_series(r["tps_series"], r["latency_p50_series"])
    assert len(tps) == len(p50) == expected_len
    if expected_len >= 2 and len(r["tps_series"]) >= 3:
        assert tps == [1000.0] * expected_len     # no partial second left in the rate
