"""`pgaccel lab` side by side, as a user runs it: a server per variant, pgbench workloads in
slices and the Insert Benchmark's steps in turn, data checksums named to initdb and read back,
variants that set the host differently measured one after the other (and told why), a version
this machine cannot have replaced by its substitute."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile

import pytest

from helpers import pgaccel
from pgaccel.lab.paired import STEP_SLICE_S
from pgaccel.lab.paired_xstep import SETTLE_S
from pgaccel.workloads.pinning import split_load, usable_cpus

SPEC = """\
name = "sharing"
[run]
rounds = 2
max_rounds = 2
duration = 2
warmup = 1

[[variant]]
name = "A"
settings = { work_mem = "4MB" }

[[variant]]
name = "B"
base = "A"
settings = { work_mem = "8MB" }
data_checksums = true

[[workload]]
name = "select-only"
scale = 1
clients = 1

[[workload]]
name = "insert-benchmark"
clients = 1
size = "tiny"
steps = "l.i0,l.x,l.i1,qr100"
query_seconds = 2
index_passes = 2

[findings.B]
"l.i0" = "about +4%"
"""


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    d = tmp_path_factory.mktemp("sharing")
    spec = d / "spec.toml"
    spec.write_text(SPEC)
    work = tempfile.mkdtemp(prefix="pgaccel-test-share-", dir="/tmp")
    os.chmod(work, 0o755)
    env = {"PGACCEL_STORE": str(d / "store.sqlite"), "COLUMNS": "250"}
    r = pgaccel("lab", str(spec), "--json", "--workdir", work, "--out", str(d / "out"),
                env=env, timeout=900)
    left = os.listdir(work)
    shutil.rmtree(work, ignore_errors=True)
    doc = json.loads((d / "out" / "run.json").read_text()) if r.returncode == 0 else None
    return {"r": r, "doc": doc, "left": left, "out": d / "out"}


def test_variants_run_side_by_side_each_on_its_own_server(shared):
    """Each variant of the lab run gets a throwaway server of its own and select-only's trials
    take turns side by side, the checksummed B's server never swapped with A's.  It takes long
    (about 51 s on a 2-core VM: as the module's first test it pays for the module-scoped
    `shared` fixture, a real lab run of 2 variants on two throwaway servers, both loaded, with 2
    rounds of 2-s select-only trials after 1-s warm-ups and 2 rounds of the Insert Benchmark's
    four steps)."""
    r, doc = shared["r"], shared["doc"]
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert ("Variants measured side by side on a throwaway server each (2 servers), taking "
            "turns in 0.25-second slices") in _flat(r.stderr)
    step_s = f"{STEP_SLICE_S:g}"
    assert ("; in a step workload step by step, the same step of every variant in turn "
            f"(the Insert Benchmark's load steps in {step_s}-second slices until each is "
            "done, l.x index by index, its query steps with every server's writers at once "
            f"and the queries in {step_s}-second slices, each query pgbench on one CPU with "
            "its backends)") in _flat(r.stderr)
    assert doc["measurement"]["design"] == "side by side"
    assert shared["left"] == []                      # every server removed
    single = [t for t in doc["trials"] if t["workload"] == "select-only"]
    assert len(single) == 4
    for rnd in (0, 1):
        a, b = (next(t for t in single if t["round"] == rnd and t["variant"] == v)
                for v in ("A", "B"))
        assert a["metrics"]["design"] == b["metrics"]["design"] == "side by side"
        assert a["metrics"]["with"] == ["B"] and b["metrics"]["with"] == ["A"]
        assert a["metrics"]["server"] != b["metrics"]["server"]
    # B's checksums make its server another kind: it is never swapped with A's
    servers = {t["variant"]: {u["metrics"]["server"] for u in single
                              if u["variant"] == t["variant"]} for t in single}
    assert len(servers["A"]) == len(servers["B"]) == 1 and servers["A"] != servers["B"]


def test_the_insert_benchmark_runs_the_same_step_of_every_variant_in_turn(shared):
    doc = shared["doc"]
    steps = [t for t in doc["trials"] if t["workload"].startswith("insert-benchmark/")]
    assert len(steps) == 2 * 2 * 4                      # rounds x variants x steps
    designs = {"l.i0": "load step in slices", "l.x": "index step in turns",
               "l.i1": "load step in slices", "qr100": "q step in slices"}
    for rnd in (0, 1):
        firsts = []
        for k, step in enumerate(("l.i0", "l.x", "l.i1", "qr100")):
            pair = {t["variant"]: t["metrics"] for t in steps
                    if t["round"] == rnd and t["metrics"]["step"] == step}
            assert set(pair) == {"A", "B"}
            assert {m["design"] for m in pair.values()} == {designs[step]}
            assert sorted(m["turn"] for m in pair.values()) == [0, 1]
            assert all(m["step_index"] == k and m["after_step_checkpoint_s"] >= 0
                       for m in pair.values())
            firsts.append(next(v for v, m in pair.items() if m["turn"] == 0))
        # A B, B A, A B, B A
        assert firsts[0] != firsts[1] and firsts[0] == firsts[2] and firsts[1] == firsts[3]
    # the query step: both servers' writers throughout, the queries in slices of
    # paired.STEP_SLICE_S taking turns A B B A A B ... (2 seconds each), never overlapping
    k = round(2.0 / STEP_SLICE_S)
    for rnd in (0, 1):
        q = {t["variant"]: t["metrics"] for t in steps
             if t["round"] == rnd and t["metrics"]["step"] == "qr100"}
        spans = sorted((w[0], w[1], v) for v, m in q.items() for w in m["slice_windows"])
        assert len(spans) == 2 * k and all(m["slices"] == k for m in q.values())
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        assert all(0.8 * STEP_SLICE_S <= b - a <= STEP_SLICE_S + 0.15 for a, b, _ in spans)
        seq = [v for _, _, v in spans]
        assert seq in (["A", "B", "B", "A"] * (k // 2), ["B", "A", "A", "B"] * (k // 2))
        # the queries only read: their pgbench and its backend placed on one CPU
        placed = {str(sh.cpu): sh.clients for sh in split_load(1, 1, usable_cpus())}
        for m in q.values():
            assert m["pinned"] == {"on": True, "cpus": placed}
            assert m["extra"]["writer_target_rows_per_s"] == 100
            # the writers ran from before the first slice until the last had ended, on
            # schedule: a commit of 50 rows every half second, all of them counted
            span = spans[-1][1] - spans[0][0]
            assert span < m["writer_seconds"] < span + 3
            assert m["valid"] and 0.97 <= m["extra"]["writer_fraction"] <= 1.03
            assert m["duration_s"] == pytest.approx(2.0, abs=0.1)
    # the load steps: every commit done, in STEP_SLICE_S slices taking turns (A B B A ...,
    # one that is done drops out), never overlapping, each variant's last slice ending
    # when its commits did
    for rnd in (0, 1):
        for step, rows in (("l.i0", 20_000), ("l.i1", 10_000)):
            ld = {t["variant"]: (t, t["metrics"]) for t in steps
                  if t["round"] == rnd and t["metrics"]["step"] == step}
            spans = sorted((w[0], w[1], v) for v, (_, m) in ld.items()
                           for w in m["slice_windows"])
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
            assert all(b - a <= STEP_SLICE_S + 0.2 for a, b, _ in spans)
            for v, (t, m) in ld.items():
                assert m["extra"]["rows_per_commit"] == (100 if step == "l.i0" else 50)
                assert m["ops"] == rows and m["slices"] == len(m["slice_windows"])
                own = [b - a for a, b in m["slice_windows"]]
                assert all(x >= STEP_SLICE_S - 0.01 for x in own[:-1])
                assert t["throughput"] == pytest.approx(rows / sum(own), rel=0.02)
                # pgbench's CPU through its last slice (at tiny, l.i0 ends in its first):
                # 4-6 µs a row here in l.i0 and l.i1 at size small
                assert m["client_cpu_us_per_op"] >= 1.0
            first = next(v for v, (_, m) in ld.items() if m["turn"] == 0)
            assert spans[0][2] == first
            if step == "l.i1":
                assert all(m["valid"] and m["extra"]["rows_before"] == m["extra"]["rows_after"]
                           for _, m in ld.values())
    # l.x: the variants take turns index by index (A B, B A, A B for its three indexes),
    # never overlapping, each turn one index of the variant's one table; twice
    # (index_passes = 2), the turns going on as they went
    for rnd in (0, 1):
        x = {t["variant"]: t for t in steps if t["round"] == rnd and t["metrics"]["step"] == "l.x"}
        spans = sorted((w[0], w[1], v) for v, t in x.items()
                       for w in t["metrics"]["slice_windows"])
        assert len(spans) == 12 and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        assert [v for _, _, v in spans] in (["A", "B", "B", "A"] * 3, ["B", "A", "A", "B"] * 3)
        # the first turn waits a settling second after l.i0's last slice and checkpoints
        li0_end = max(w[1] for t in steps if t["round"] == rnd and t["metrics"]["step"] == "l.i0"
                      for w in t["metrics"]["slice_windows"])
        assert SETTLE_S <= spans[0][0] - li0_end < SETTLE_S + 1.5
        for v, t in x.items():
            own = [b - a for a, b in t["metrics"]["slice_windows"]]
            assert t["metrics"]["ops"] == 2 * 20_000 and len(t["series"]) == 6
            assert t["metrics"]["extra"]["index_passes"] == 2
            # its seconds are its own turns' (each window kept to the millisecond, and an
            # index of 20,000 rows takes about 10 ms here)
            assert sum(own) == pytest.approx(t["metrics"]["duration_s"], abs=0.0013 * len(own))
            assert t["throughput"] == pytest.approx(2 * 20_000 / t["metrics"]["duration_s"])
            # the index builds' writes count (server_spans): 6 indexes of 20,000 rows
            assert t["metrics"]["server_cpu_us_per_op"] > 0.3
    # rounds 0 and 1 start from the other end (trial_order's ABBA)
    first = {t["round"]: t["variant"] for t in steps
             if t["metrics"]["step"] == "l.i0" and t["metrics"]["turn"] == 0}
    assert first[0] != first[1]
    assert shared["doc"]["measurement"]["turns"] == "ABBA"     # two variants: A B B A


def test_data_checksums_are_explicit_read_back_and_shown(shared):
    doc, out = shared["doc"], shared["out"]
    assert doc["verified"]["A"]["data_checksums"] == "off"      # 15's and 18's alike
    assert doc["verified"]["B"]["data_checksums"] == "on"
    md = (out / "report.md").read_text()
    assert ("l.x index by index (every index built 2 times, each but the last dropped "
            "untimed)") in _flat(md)
    assert re.search(r"server of A \| PostgreSQL [0-9.]+ \(.*\), data checksums off", md)
    assert re.search(r"server of B \| PostgreSQL [0-9.]+ \(.*\), data checksums on", md)


def test_the_report_sets_rqps_verdicts_costs_and_findings_per_step(shared):
    out = shared["out"]
    html = (out / "report.html").read_text()
    assert "rQPS and costs per operation of insert-benchmark" in html
    assert "KB written/op" in html and "the study found" in html and "about +4%" in html
    assert html.count('class="chart"') >= 2                     # the heatmap and the bars
    r = shared["r"]
    row = next(x for x in r.stderr.splitlines() if "about +4%" in x)
    assert " B " in row


@pytest.mark.skipif(os.geteuid() != 0, reason="a variant's sysctl needs root")
def test_variants_that_set_the_host_differently_run_one_after_the_other(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text("""\
[run]
rounds = 1
max_rounds = 1
duration = 1
warmup = 1

[[variant]]
name = "A"

[[variant]]
name = "B"
os = { sysctl = { "vm.swappiness" = 11 } }

[[workload]]
name = "select-only"
scale = 1
clients = 1
""")
    before = open("/proc/sys/vm/swappiness").read().strip()
    r = pgaccel("lab", str(spec), "--json", env={"PGACCEL_STORE": str(tmp_path / "s.db")},
                timeout=600)
    assert r.returncode == 0, r.stderr
    assert ("Variants measured one at a time: the variants set the host's vm.swappiness "
            "differently (A: unset, B: 11)") in _flat(r.stderr)
    assert open("/proc/sys/vm/swappiness").read().strip() == before
    d = json.loads(r.stdout)
    assert d["workloads"][0]["variants"]["B"]["n"] == 1


def test_a_version_this_machine_cannot_have_runs_its_substitute(tmp_path):
    from pgaccel.server.discovery import find_installations
    majors = {i.major for i in find_installations(None) if i.is_server}
    if 17 in majors or 15 not in majors:
        pytest.skip("needs PostgreSQL 15 installed and no 17")
    spec = tmp_path / "spec.toml"
    spec.write_text("""\
[[variant]]
name = "old"
version = 17
substitute = [16, 15]

[[variant]]
name = "new"
base = "old"
settings = { work_mem = "8MB" }

[[workload]]
name = "select-only"
scale = 1
""")
    r = pgaccel("lab", str(spec), "--check", env={"PGACCEL_STORE": str(tmp_path / "s.db")},
                timeout=300)
    assert r.returncode == 0, r.stderr
    assert re.search(r"variant 'old': PostgreSQL 17 is neither installed nor built; "
                     r"substituted the installed PostgreSQL 15\.\d+ \(/\S+\)", _flat(r.stderr))
