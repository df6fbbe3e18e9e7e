"""Capture and replay end to end (issue 39's check): a test server runs a known mix
(pgbench tpcb-like with an added reporting query, 9:1), `pgaccel capture --data dump`
records it, `pgaccel run --workloads captured:DIR` replays it on throwaway servers and judges
tuned against the defaults with the replay's mix read back from each trial: faithful on that
mix; a planted mismatch (index scans off, so the point statements take the time) is flagged
at the top of the output and the report."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from helpers import pgaccel
from pgaccel.server.cluster import Cluster
from pgaccel.server.discovery import find_client

REPORT = ("\\set b random(1, 2)\n"
          "SELECT a.bid, count(*), sum(abalance) FROM pgbench_accounts a "
          "WHERE a.bid = :b GROUP BY a.bid;\n")
FLAG = "the replay is not the captured mix"


@pytest.fixture(scope="module")
def bundle(inst, tmp_path_factory):
    from pgaccel.session.capture import CaptureRequest, capture
    tmp = tmp_path_factory.mktemp("cap")
    with Cluster.create_throwaway(inst) as c:
        c.start({"shared_preload_libraries": "pg_stat_statements"})
        with c.connect() as conn:
            conn.execute("CREATE DATABASE shop")
        ci = c.conninfo("shop")
        pgbench = find_client("pgbench", inst)
        subprocess.run([pgbench, "-i", "-s", "2", "-q", ci], check=True, capture_output=True)
        with c.connect("shop") as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        with c.connect() as conn:          # every execution with its values in the log
            conn.execute("ALTER SYSTEM SET log_min_duration_statement = 0")
            conn.execute("ALTER SYSTEM SET log_parameter_max_length = -1")
            conn.execute("SELECT pg_reload_conf()")
        (tmp / "report.sql").write_text(REPORT)

        def load(elapsed, total):
            if not load.done:
                load.done = True
                subprocess.run([pgbench, "-n", "-T", "6", "-c", "2", "-M", "prepared",
                                "-b", "tpcb-like@9", "-f", f"{tmp / 'report.sql'}@1", ci],
                               check=True, capture_output=True)
        load.done = False
        path, m = capture(CaptureRequest(dsn=ci, duration_s=1.0, out=str(tmp / "b"),
                                         data="dump", from_log=c.logfile, with_values=True),
                          load)
    yield path, m


def test_the_capture_holds_the_mix_and_the_data(bundle):
    path, m = bundle
    stmts = {" ".join(s.query.split()): s for s in m["statements"]}
    report = next(s for q, s in stmts.items() if "GROUP BY a.bid" in q)
    upd = next(s for q, s in stmts.items() if q.startswith("UPDATE pgbench_accounts"))
    # pgbench picks the report script for about one transaction in ten, and a tpcb-like
    # transaction runs one UPDATE of pgbench_accounts
    assert 0.05 < report.calls / (report.calls + upd.calls) < 0.16
    assert report.share_time > 0.5                 # it scans 100,000 rows a call
    assert os.path.isfile(os.path.join(path, "data", "toc.dat"))
    assert not any("pgaccel capture" in s.query for s in m["statements"])
    # the log's values, kept (--with-values): aid between 1 and 200,000 (scale 2)
    from pgaccel.workloads.captured import Captured
    values = json.load(open(os.path.join(path, "values.json")))
    (sel,) = [s for q, s in stmts.items()
              if q == "SELECT abalance FROM pgbench_accounts WHERE aid = $1"]
    aid = values[str(sel.queryid)]                  # keyed by pg_stat_statements' queryid
    assert len(aid) > 100 and all(1 <= int(t["1"]) <= 200_000 for t in aid)
    assert "kept from the log" in m["parameter_values"]
    w = Captured(f"captured:{path}")
    # the five tpcb-like statements with parameters have their tuples
    assert len(set(w._values()) & {s.queryid for s in m["statements"]}) >= 5
    assert "the captured parameter values" in w.summary


def test_run_replays_it_judges_tuned_and_reads_the_mix_back(bundle, tmp_path):
    """`run` replays the captured mix on throwaway servers, judges tuned against the defaults
    and reads the replayed mix back from each trial.  It takes long (about 46 s on a 2-core VM:
    a real `run` of baseline and tuned x 2 rounds of 4-s replay trials after 1-s warm-ups, on
    throwaway servers loaded from the capture's dump first)."""
    path, _ = bundle
    env = {"XDG_DATA_HOME": str(tmp_path / "data"),
           "PGACCEL_STORE": str(tmp_path / "store.sqlite")}
    r = pgaccel("run", "--workloads", f"captured:{path}", "--rounds", "2", "--duration", "4",
                "--warmup", "1", "--clients", "2", env=env, timeout=900)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "100% of the captured time and 100% of the calls replayed" in text, r.stdout
    assert "within 10 points of the captured in all 4 trials" in text, r.stdout
    assert FLAG not in text
    run_json = next(os.path.join(d, "run.json") for d, _, fs in os.walk(tmp_path / "data")
                    if "run.json" in fs)
    doc = json.load(open(run_json))
    ts = doc["trials"]
    assert {t["variant"] for t in ts} == {"baseline", "tuned"} and len(ts) == 4
    for t in ts:
        fid = {" ".join(x["query"].split()): x for x in t["metrics"]["fidelity"]}
        rep = next(x for q, x in fid.items() if "GROUP BY a.bid" in q)
        assert abs(rep["replayed_time"] - rep["captured_time"]) < 0.10
        assert abs(rep["replayed_calls"] - rep["captured_calls"]) < 0.03
    (w,) = doc["summary"]["workloads"]
    assert "tuned" in w["comparisons"] and w["unit"] == "stmt/s"


def test_a_planted_mismatch_is_flagged(bundle, tmp_path):
    path, _ = bundle
    env = {"XDG_DATA_HOME": str(tmp_path / "data"),
           "PGACCEL_STORE": str(tmp_path / "store.sqlite")}
    r = pgaccel("bench", "--workload", f"captured:{path}", "--set", "enable_indexscan=off",
                "--set", "enable_bitmapscan=off", "--duration", "2", "--warmup", "0",
                env=env, timeout=900)             # a mismatch of several times, not timed
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert f"{FLAG} in 1 of 1 trials: 'SELECT a.bid, count(*)" in text
    html = next(os.path.join(d, "report.html") for d, _, fs in os.walk(tmp_path / "data")
                if "report.html" in fs)
    page = open(html).read()
    assert page.index(FLAG) < page.index("<h2>Facts</h2>")      # at the top


def test_calibrate_on_a_replay_says_how_faithful_it_is(bundle, tmp_path):
    """`calibrate -w captured:DIR`, the A/A of a replay, prints the replay's mix and its
    calibration as bench, lab and run do (it printed only the noise floor: a floor measured
    on another mix than the captured one would go unsaid).  It takes about 35 s here: the
    dump restored, the replay fitted and calibrated, 2 rounds of two 2-s trials."""
    path, _ = bundle
    env = {"XDG_DATA_HOME": str(tmp_path / "data"),
           "PGACCEL_STORE": str(tmp_path / "store.sqlite")}
    r = pgaccel("calibrate", "-w", f"captured:{path}", "--rounds", "2", "--duration", "2",
                "--warmup", "0", "--clients", "2", "--yes", env=env, timeout=900)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert f"Noise floor (captured:{path})" in text
    assert f"captured:{path}: the replay's mix against the captured one" in text
    assert f"captured:{path}: calibration, each statement on the lab's server" in text
    assert "SELECT a.bid, count(*)" in text


def test_a_bundle_without_data_is_refused_with_what_to_do(bundle, tmp_path):
    import shutil
    path, _ = bundle
    bare = tmp_path / "bare"
    shutil.copytree(path, bare, ignore=shutil.ignore_patterns("data"))
    r = pgaccel("bench", "--workload", f"captured:{bare}", "--duration", "2",
                env={"XDG_DATA_HOME": str(tmp_path / "data"),
                     "PGACCEL_STORE": str(tmp_path / "store.sqlite")})
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--data dump" in " ".join(r.stderr.split())


def test_a_copy_of_the_data_directory_replays_without_a_dump(bundle, inst, tmp_path):
    """DIR/pgdata, a link to a copy of the captured server's data directory (here one
    whose bootstrap superuser is another role, as a user's is): each lab server starts on a
    copy of it, the captured database as its bench database; the user's copy is untouched."""
    import shutil
    import tempfile
    from pgaccel.server.cluster import free_port
    from pgaccel.server.osuser import as_user_kwargs, chown_tree, server_user
    path, _ = bundle
    user = server_user(None)
    base = tempfile.mkdtemp(prefix="pgaccel-test-copy-", dir="/tmp")
    try:
        os.chmod(base, 0o711)
        chown_tree(base, user)
        pgdata, sock = os.path.join(base, "data"), os.path.join(base, "sock")
        kw = as_user_kwargs(user)
        subprocess.run([inst.path("initdb"), "-D", pgdata, "-U", "appowner", "--auth=trust",
                        "-E", "UTF8", "--locale=C", "--no-sync"], check=True,
                       capture_output=True, **kw)
        os.mkdir(sock)
        chown_tree(sock, user)
        port = free_port()
        ctl = [inst.path("pg_ctl"), "-D", pgdata, "-w", "-l", os.path.join(base, "log")]
        subprocess.run([*ctl, "-o", f"-c port={port} -c listen_addresses='' "
                        f"-c unix_socket_directories={sock}", "start"], check=True,
                       capture_output=True, **kw)
        ci = f"host={sock} port={port} user=appowner"
        subprocess.run([find_client("createdb", inst), "-h", sock, "-p", str(port), "-U",
                        "appowner", "shop"], check=True, capture_output=True)
        subprocess.run([find_client("pg_restore", inst), "--no-owner", "--dbname",
                        f"{ci} dbname=shop", os.path.join(path, "data")], check=True,
                       capture_output=True)
        subprocess.run([*ctl, "stop"], check=True, capture_output=True, **kw)
        files = sorted(os.listdir(pgdata))
        bare = tmp_path / "bare"
        shutil.copytree(path, bare, ignore=shutil.ignore_patterns("data"))
        os.symlink(pgdata, bare / "pgdata")
        r = pgaccel("bench", "--workload", f"captured:{bare}", "--duration", "3", "--warmup",
                    "1", env={"XDG_DATA_HOME": str(tmp_path / "d"),
                              "PGACCEL_STORE": str(tmp_path / "store.sqlite")}, timeout=600)
        assert r.returncode == 0, r.stderr
        text = " ".join(r.stdout.split())
        assert "100% of the captured time and 100% of the calls replayed" in text, r.stdout
        assert "within 10 points of the captured in all 1 trials" in text, r.stdout
        # the user's copy: not started, nothing added
        assert sorted(os.listdir(pgdata)) == files
        assert not os.path.exists(os.path.join(pgdata, "postmaster.pid"))
    finally:
        subprocess.run([inst.path("pg_ctl"), "-D", os.path.join(base, "data"), "stop", "-m",
                        "immediate"], capture_output=True, **as_user_kwargs(user))
        shutil.rmtree(base, ignore_errors=True)
