"""A lab whose Insert Benchmark is sized to the host (``load_seconds``), as a user runs it:
l.i0 timed alone on the base's server before the first round, the cut rows said on the
terminal and in the report's facts, and every round of every variant run with them."""

from __future__ import annotations

import json
import os
import shutil
import tempfile

from helpers import pgaccel

SPEC = """\
name = "sized"
[run]
rounds = 2
max_rounds = 2

[[variant]]
name = "A"
settings = { work_mem = "4MB" }

[[variant]]
name = "B"
base = "A"
settings = { work_mem = "8MB" }

[[workload]]
name = "insert-benchmark"
clients = 1
steps = "l.i0,l.i1"
rows_per_table = 100000
i1_rows = 10000
i2_rows = 2000
load_seconds = 0.5
"""


def test_the_rounds_run_the_rows_the_host_was_sized_to(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    work = tempfile.mkdtemp(prefix="pgaccel-test-sized-", dir="/tmp")
    os.chmod(work, 0o755)
    env = {"PGACCEL_STORE": str(tmp_path / "store.sqlite"), "COLUMNS": "250"}
    try:
        r = pgaccel("lab", str(spec), "--workdir", work, "--out", str(tmp_path / "out"),
                    env=env, timeout=600)
        left = os.listdir(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and left == []
    doc = json.loads((tmp_path / "out" / "run.json").read_text())
    sized = doc["sized"]["insert-benchmark c=1"]
    # the probe: a fifth of the rows given, one table
    assert sized["probe_rows"] == 20_000
    assert sized["given"] == {"rows_per_table": 100_000, "i1_rows": 10_000, "i2_rows": 2_000,
                              "index_passes": 1}
    # half a second of l.i0 is far fewer rows than 100,000 on a 2-core host (it loads one
    # table at well under 200,000 rows/s), so the rows are cut, not below the floors
    rows, i1 = sized["rows_per_table"], sized["i1_rows"]
    assert 20_000 <= rows < 100_000 and rows % 100 == 0
    assert 5_000 <= i1 < 10_000
    assert sized["factor"] == rows / 100_000
    # every round of every variant ran those rows, and the stored parameters say so
    steps = [t for t in doc["trials"] if t["workload"].startswith("insert-benchmark/")]
    assert len(steps) == 2 * 2 * 2
    for t in steps:
        want = rows if t["metrics"]["step"] == "l.i0" else i1
        assert t["metrics"]["ops"] == want, t["metrics"]["step"]
        assert t["metrics"]["sized"] == sized
    (w,) = doc["workloads"]
    assert w["params"]["options"]["rows_per_table"] == rows
    # told on the terminal before the first round, and in the report's facts
    flat = " ".join(r.stderr.split())
    said = flat.index("insert-benchmark c=1: sized to this host: l.i0 alone ran ")
    assert flat.index(f"{rows:,} rows a table (given 100,000), l.i1 {i1:,} (given 10,000)",
                      said) < flat.index("round 1")
    html = (tmp_path / "out" / "report.html").read_text()
    assert "sized to the host (insert-benchmark c=1)" in html
    assert f"{rows:,} rows a table (given 100,000)" in html
