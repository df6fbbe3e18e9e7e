"""Five applications in the shapes frameworks emit (tests/appshapes.py: Django with inline
literals, Rails, Hibernate/JPA, SQLAlchemy, a hand-written order system), each captured on a
real server without a log (Hibernate and Django also with --log), then replayed by
``pgaccel bench``: the replay runs at least 95% of the captured time and calls, every
statement that takes 1 ms or more reads within 2x of the captured shared blocks and rows per
call in the calibration, the one holding most of the time runs within 2x of its captured
time, the statements left out are named with a reason, and both reports list the replay's
tables.
Small data (a few thousand rows a table) and 2-s trials: the TPC-sized checks belong in
benchmarks/."""

from __future__ import annotations

import json
import os
import threading

import pytest

import appshapes
from helpers import pgaccel
from pgaccel.server.cluster import Cluster


@pytest.fixture(scope="module")
def bundles(inst, tmp_path_factory):
    from pgaccel.session.capture import CaptureRequest, capture
    out = {}
    tmp = tmp_path_factory.mktemp("apps")
    with Cluster.create_throwaway(inst) as c:
        c.start({"shared_preload_libraries": "pg_stat_statements",
                 "logging_collector": "on"})
        for app in (appshapes.DJANGO, appshapes.RAILS, appshapes.HIBERNATE,
                    appshapes.SQLALCHEMY, appshapes.ORDERS):
            with c.connect() as conn:
                conn.execute(f"CREATE DATABASE {app.name}")
            ci = c.conninfo(app.name)
            with c.connect(app.name) as conn:
                conn.execute("CREATE EXTENSION pg_stat_statements")
            appshapes.load(ci, app)
            for log in ((False, True) if app.name in ("django", "hibernate") else (False,)):
                ran: list[threading.Thread] = []
                failed: list[BaseException] = []

                def run(ci=ci, app=app, failed=failed):
                    try:
                        appshapes.drive(ci, app, 4.0, 1)
                    except BaseException as e:       # noqa: BLE001 - failed below
                        failed.append(e)

                def tick(_e, _t, ran=ran, run=run):
                    if not ran:      # one client: the capture's statements not slowed by
                        ran.append(threading.Thread(target=run))   # the app's own Python
                        ran[0].start()                              # on 2 cores
                key = f"{app.name}{'-log' if log else ''}"
                path, _m = capture(CaptureRequest(dsn=ci, duration_s=5.0,
                                                  out=str(tmp / key), data="dump", log=log,
                                                  with_values=False), tick)
                ran[0].join()
                assert not failed, f"{key}: the application failed: {failed[0]!r}"
                out[key] = path
    yield out


@pytest.mark.parametrize("key", ["django", "django-log", "rails", "hibernate",
                                 "hibernate-log", "sqlalchemy", "orders"])
def test_a_framework_app_replays_whole_at_its_captured_cost(bundles, key, tmp_path):
    path = bundles[key]
    env = {"XDG_DATA_HOME": str(tmp_path / "data"),
           "PGACCEL_STORE": str(tmp_path / "store.sqlite")}
    r = pgaccel("bench", "--workload", f"captured:{path}", "--duration", "2", "--warmup",
                "0", "--clients", "1", env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    run_dir = next(d for d, _, fs in os.walk(tmp_path / "data") if "run.json" in fs)
    doc = json.load(open(os.path.join(run_dir, "run.json")))
    (t,) = doc["trials"]
    rep = t["metrics"]["replay"]
    assert rep["replayed_time"] >= 0.95 and rep["replayed_calls"] >= 0.95, rep["left"]
    for x in rep["left"]:
        assert x["reason"] and x["query"]
    app = appshapes.APPS[key.removesuffix("-log")]
    if any(len(tx) > 1 for _, tx in app.mix):
        # each transaction's BEGIN/COMMIT counted apart, not as a statement left out
        assert rep["transaction_control"]["share_calls"] > 0.05, rep
    long = [c for c in rep["calibration"] if c["captured_mean_ms"] >= 1.0]
    assert long, rep["calibration"]                    # each app has analytic statements
    for c in long:
        # what the fit matches and no host changes: shared blocks and rows per call
        seen = (c["query"], c["captured_mean_ms"], c["replayed_mean_ms"],
                c["captured_blocks"], c["replayed_blocks"], c["captured_rows"],
                c["replayed_rows"])
        assert 0.5 <= (c["replayed_blocks"] + 1) / (c["captured_blocks"] + 1) <= 2.0, seen
        assert 0.5 <= (c["replayed_rows"] + 1) / (c["captured_rows"] + 1) <= 2.0, seen
    # time, which the vCPUs here change on their own between the capture and the replay
    # (a 1.1-ms statement once measured 0.50x at the same fit, 0.73-0.83x in other runs),
    # judged on the statement that holds most of the captured time: the replay's throughput
    top = max(rep["calibration"], key=lambda c: c["captured_mean_ms"] * c["calls"])
    ratio = top["replayed_mean_ms"] / top["captured_mean_ms"]
    assert 0.5 <= ratio <= 2.0, top
    text = " ".join(r.stdout.split())
    # trials taking turns (a statement over 25 ms) take pgbench's total, not the mean of
    # the steady seconds a handful of long statements make noisy
    turns = "ran whole trials taking turns" in text
    assert (t["metrics"].get("throughput_from") == "totals") == turns
    if turns:
        assert t["throughput"] == pytest.approx(t["metrics"]["summary_tps"])
        # a fixed amount of work (pgbench -t), the same on every config, not a fixed time:
        # every statement of it ran, and the throughput is how long they took
        fw = t["metrics"]["fixed_work"]
        assert fw["clients"] == 1 and fw["transactions_per_client"] >= 20
        assert t["metrics"]["ops"] == fw["transactions_per_client"]
    else:
        assert "fixed_work" not in t["metrics"]
    if key == "orders":                                  # 44-ms reports here
        assert turns
    assert "of the captured time and" in text and "calls replayed" in text
    assert "calibration, each statement on the lab's server" in text
    md = open(os.path.join(run_dir, "report.md")).read()
    html = open(os.path.join(run_dir, "report.html")).read()
    for page in (md, html):
        assert "the replay against the captured mix" in page
        assert "ms captured" in page and "blocks replayed" in page
