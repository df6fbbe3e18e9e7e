"""tune --search on real servers (session/search.py): a short search races real candidates
side by side and journals them; Ctrl-C leaves no server and --resume carries on from the
candidates already measured; --from-search turns a finished search into a plan.  (The
statistics of racing are tests/test_race.py's; the space's, tests/test_tune_space.py's.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from helpers import pgaccel, postgres_processes_for

SCRIPT = """
import sys
from pgaccel.decide.race import RaceRules
from pgaccel.probe.host import probe_host
from pgaccel.session import search as s
from pgaccel.session.request import ServerRequest
from pgaccel.workloads.base import RunParams

class Events(s.SearchEvents):
    def say(self, text, style=""):
        print("say:", text, flush=True)
    def opened(self, search_id, directory, resumed):
        print("opened", search_id, resumed, flush=True)
    def candidate(self, number, changes, left_s):
        print("candidate", number, sorted(changes), round(left_s, 1), flush=True)
    def looked(self, number, stage, look):
        print("look", number, stage, look.decision, look.rounds, flush=True)

req = s.SearchRequest(ServerRequest(), workloads=("tpcb-like", "select-only"),
                      params=RunParams(clients=2, duration=2.0, warmup=0.0, scale=2),
                      budget_s=float(sys.argv[1]), confirm_share=0.0,
                      knobs=("checkpoint_completion_target", "bgwriter_lru_multiplier"),
                      resume=sys.argv[2] if len(sys.argv) > 2 else None,
                      rules=RaceRules(screen_last=3, confirm_last=3))
done = s.run_search(req, probe_host(), Events())
print("journal", done.dir, flush=True)
"""


def _start(tmp_path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PGACCEL_SEARCH_DIR": str(tmp_path / "searches")}
    return subprocess.Popen([sys.executable, "-c", SCRIPT, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _journal(tmp_path) -> dict:
    (d,) = os.listdir(tmp_path / "searches")
    return json.loads((tmp_path / "searches" / d / "search.json").read_text())


def test_a_search_journals_candidates_survives_ctrl_c_and_resumes(tmp_path):
    """A real `tune --search` journals its candidates, Ctrl-C leaves no server, --resume carries
    on from the candidates already measured, and its page shows every one.  It takes long
    (about 150 s on a 2-core VM: a real search on two throwaway servers, tpcb-like and
    select-only loaded at scale 2 on both, each candidate raced in rounds of 2-s trials of both
    workloads; interrupted in its second candidate, then resumed with a budget that leaves
    time for the servers' setup and a round or two of one more candidate)."""
    p = _start(tmp_path, "600")
    lines = []
    t0 = time.monotonic()
    setup_s = None
    while time.monotonic() - t0 < 300:                   # the first candidate is decided
        line = p.stdout.readline()
        lines.append(line)
        if line.startswith("candidate 0 "):              # the budget left after the setup
            setup_s = 600 - float(line.split()[-1])
        if line.startswith("look 0 screen") and "continue" not in line:
            break
    # the second candidate's race is under way: interrupt it
    while time.monotonic() - t0 < 400:
        line = p.stdout.readline()
        lines.append(line)
        if line.startswith("candidate 1"):
            break
    time.sleep(3)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=120)
    err = p.stderr.read()
    assert "Traceback" not in err or "KeyboardInterrupt" in err, err
    j = _journal(tmp_path)
    assert j["status"] == "interrupted"
    # the id --resume takes is said first, before any server is started
    assert lines[0] == f"opened {j['id']} False\n", lines[:3]
    assert j["knobs"] == ["checkpoint_completion_target", "bgwriter_lru_multiplier"]
    assert j["workloads"] == ["tpcb-like", "select-only"]
    first = j["candidates"][0]
    assert first["number"] == 0 and first["stage"] in ("dropped", "better", "not better")
    # each candidate changes only the searched knobs, from the rules' values
    assert set(first["changes"]) <= {"checkpoint_completion_target",
                                     "bgwriter_lru_multiplier"}
    assert first["looks"][0]["stage"] == "screen" and first["looks"][0]["rounds"] >= 3
    # each look keeps its rounds' log ratios (the page's intervals), the space its ranges
    for c in j["candidates"]:
        for look in c.get("looks", []):
            assert len(look["log_ratios"]) == look["rounds"]
    assert [k["name"] for k in j["space"]] == j["knobs"]
    assert j["space"][0]["low"] == pytest.approx(0.5) and j["space"][0]["kind"] == "real"
    # no server of the search is left running
    time.sleep(2)
    assert not [q for q in postgres_processes_for("pgaccel-")
                if q not in _ours_before], "a server outlived the search"
    # --resume: the same journal, carried on from what was measured
    assert setup_s is not None and 0 < setup_s < 200, lines
    # a budget that outlasts the servers' setup again (twice the first one's, and 30 s), so
    # one more candidate is raced (a race ends at its first look past the budget, after one
    # round at least)
    q = _start(tmp_path, str(j["spent_s"] + 2 * setup_s + 30), j["id"])
    out, err = q.communicate(timeout=600)
    assert q.returncode == 0, err
    assert out.splitlines()[0] == f"opened {j['id']} True"
    j2 = _journal(tmp_path)
    assert j2["id"] == j["id"] and j2["status"] == "searched"
    assert j2["workloads"] == ["tpcb-like", "select-only"]
    numbers = [c["number"] for c in j2["candidates"]]
    assert numbers[: len(j["candidates"])] == [c["number"] for c in j["candidates"]]
    assert len(numbers) == len(set(numbers)) and len(numbers) > len(j["candidates"])
    # its page, from the journal: every candidate in the table, the charts drawn
    env = {"PGACCEL_SEARCH_DIR": str(tmp_path / "searches")}
    r = pgaccel("report", j["id"], env=env)
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "searches" / j["id"] / "report.html").read_text()
    for n in numbers:
        assert f"<tr><td>{n}</td>" in page
    assert page.count("<svg") >= 2 and "No confirmation run yet" in page


_ours_before: list[int] = []


@pytest.fixture(autouse=True)
def _servers_before():
    _ours_before[:] = postgres_processes_for("pgaccel-")
    yield


def test_from_search_refuses_an_unfinished_search_and_renders_a_finished_one(tmp_path):
    d = tmp_path / "searches" / "20261126-000000-abcd"
    d.mkdir(parents=True)
    j = {"schema": 1, "id": d.name, "status": "searched", "candidates": [],
         "rules": {"shared_buffers": "1GB", "checkpoint_timeout": "15min"},
         "incumbent": {"number": 4, "log_effect": 0.05,
                       "settings": {"shared_buffers": "1GB", "checkpoint_timeout": "30min"}}}
    (d / "search.json").write_text(json.dumps(j))
    env = {"PGACCEL_SEARCH_DIR": str(tmp_path / "searches")}
    r = pgaccel("tune", "--from-search", d.name, "--format", "conf", env=env)
    assert r.returncode == 2 and "has not finished" in r.stderr
    assert f"pgaccel tune --search --resume {d.name}" in " ".join(r.stderr.split())
    j["status"] = "finished"
    (d / "search.json").write_text(json.dumps(j))
    r = pgaccel("tune", "--from-search", d.name, "--format", "conf", env=env)
    assert r.returncode == 0, r.stderr
    assert "checkpoint_timeout = '30min'" in r.stdout
    r = pgaccel("tune", "--from-search", "nosuch", env=env)
    assert r.returncode == 2 and "No search 'nosuch'" in r.stderr
