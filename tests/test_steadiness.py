"""metrics/steadiness.py: each CPU's speed in tenth-of-a-second windows."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import psutil
import pytest

from pgaccel.metrics import steadiness
from pgaccel.report import facts


@pytest.mark.parametrize("counts, cv, low, high, unsteady", [
    ([1000] * 10, 0.0, 1.0, 1.0, False),
    # half the windows at half speed: sd 250 over a mean of 750
    ([1000, 500] * 5, 0.3333, 0.667, 1.333, True),
    # one window in ten at 70%: mean 970, sd 90; the 5th percentile 0.45 of the way
    # from it to the others
    ([1000] * 9 + [700], 0.0928, 0.835, 1.0, False),
    ([1000] * 7 + [1300, 700, 1000], 0.1342, 0.835, 1.165, False),
    # just under the line, and on it
    ([1149, 851] * 5, 0.149, 0.851, 1.149, False),
    ([1150, 850] * 5, 0.15, 0.85, 1.15, True),
])
def test_a_cpus_windows_as_a_spread(counts, cv, low, high, unsteady):
    s = steadiness.summarize({0: counts})
    p = s["per_cpu"]["0"]
    assert p["cv"] == pytest.approx(cv, abs=5e-4)
    assert (p["low"], p["high"]) == (pytest.approx(low, abs=2e-3),
                                     pytest.approx(high, abs=2e-3))
    assert p["windows"] == len(counts) and s["unsteady"] is unsteady


def test_the_worst_cpu_decides_and_short_or_missing_windows_are_left_out():
    s = steadiness.summarize({0: [1000] * 10, 1: [1000, 600] * 5,
                              2: [None, None, 1000, 1000, 1000, 990],   # started late
                              3: [None, 1000, 1000]})                   # too few counted
    assert set(s["per_cpu"]) == {"0", "1", "2"} and s["cpus"] == 3
    assert s["per_cpu"]["2"]["windows"] == 4
    assert s["worst_cv"] == s["per_cpu"]["1"]["cv"] == pytest.approx(0.25)
    assert s["unsteady"] is True
    t = steadiness.text(s)
    assert "CPU 1 did 0.75-1.25 times its median" in t      # the worst one named
    assert "varied 0-25% (CV, 3 of 4 CPUs counted)" in t and "an unsteady host" in t


def test_the_sentence_of_a_steady_host_an_unmeasured_one_and_the_fact_sheet():
    s = steadiness.summarize({0: [1000, 1010, 990, 1000, 1000]})
    t = steadiness.text(s)
    assert t.startswith("every CPU measured busy for 0.5 s, the work a CPU did per 100 ms "
                        "varied 1% (CV, 1 CPU); CPU 0 did")
    assert "unsteady" not in t
    assert steadiness.text(None) == "" and steadiness.text({}) == ""
    assert steadiness.text({"error": "no CPU affinity here"}) == (
        "not measured: no CPU affinity here")
    rows = dict(facts.facts({"run_id": "20261130-010000-abcd", "cpu_steadiness": s}))
    assert rows["CPU steadiness"] == t
    assert "CPU steadiness" not in dict(facts.facts({"run_id": "20261130-010000-abcd"}))


@pytest.mark.parametrize("allowed, limit, want, note", [
    ([0, 1, 2, 3], None, [0, 1, 2, 3], ""),
    ([0, 1, 2, 3], 4.0, [0, 1, 2, 3], ""),
    ([0, 1, 2, 3], 2.5, [2, 3], "2 of 4 CPUs measured: the cgroup allows 2.5 CPUs"),
    ([3, 1, 2, 0], 0.5, [3], "1 of 4 CPUs measured: the cgroup allows 0.5 CPUs"),
])
def test_no_more_loops_than_a_cgroup_quota_lets_run(allowed, limit, want, note):
    assert steadiness.usable_cpus(allowed, limit) == (want, note)


def test_the_sentence_says_which_machine_and_what_was_left_out():
    s = {**steadiness.summarize({0: [1000] * 5}), "where": "pgaccel's machine, not the "
         "server's", "limited": "1 of 4 CPUs measured: the cgroup allows 1 CPUs"}
    t = steadiness.text(s)
    assert t.startswith("pgaccel's machine, not the server's: every CPU measured busy")
    assert t.endswith("; 1 of 4 CPUs measured: the cgroup allows 1 CPUs")
    assert steadiness.text({"where": "pgaccel's machine, not the server's",
                            "error": "no CPU affinity here"}) == (
        "pgaccel's machine, not the server's: not measured: no CPU affinity here")


@pytest.mark.slow        # a loop on every CPU for up to 1.5 s
def test_measured_on_this_host_every_cpu_in_its_windows():
    cpus = sorted(os.sched_getaffinity(0))
    s = steadiness.measure(0.5)
    assert set(s["per_cpu"]) == {str(c) for c in cpus}
    assert (s["measured"], s["seconds"]) == (len(cpus), 0.5)
    assert all(p["windows"] == 5 for p in s["per_cpu"].values())
    one = steadiness.measure(0.3, cpus=[cpus[-1]])
    assert set(one["per_cpu"]) == {str(cpus[-1])} and one["measured"] == 1


@pytest.mark.slow
def test_windows_that_began_before_a_loop_was_ready_are_not_counted(monkeypatch):
    # the loops start 0.25 s late: the first three of ten windows are not theirs
    monkeypatch.setattr(steadiness, "START_AFTER_S", -0.25)
    s = steadiness.measure(1.0)
    assert all(p["windows"] == 7 for p in s["per_cpu"].values())


def _loops() -> list[psutil.Process]:
    return [c for c in psutil.Process().children()
            if "-c" in c.cmdline() and any("sched_setaffinity" in a for a in c.cmdline())]


@pytest.mark.slow
def test_a_stalled_cpu_is_counted_not_skipped():
    # a loop stopped for 0.3 s (as a host that takes its CPU away): the windows it missed
    # count, near nothing, and its CV says so
    stopped: list[int] = []

    def stall():
        time.sleep(steadiness.START_AFTER_S + 0.45)
        for p in _loops()[:1]:
            p.send_signal(signal.SIGSTOP)
            stopped.append(int(p.cpu_affinity()[0]))
            time.sleep(0.3)
            p.send_signal(signal.SIGCONT)
    t = threading.Thread(target=stall)
    t.start()
    s = steadiness.measure(1.0)
    t.join()
    [cpu] = stopped
    p = s["per_cpu"][str(cpu)]
    assert p["windows"] == 10                  # none of its windows dropped
    assert p["low"] < 0.1 and p["cv"] > 0.3    # two windows with next to no work


@pytest.mark.slow
def test_an_interrupt_leaves_no_loop_running(monkeypatch):
    real = subprocess.Popen.communicate

    def interrupted(self, *a, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(subprocess.Popen, "communicate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        steadiness.measure(1.0)
    monkeypatch.setattr(subprocess.Popen, "communicate", real)
    assert _loops() == []


@pytest.mark.slow
def test_a_cpu_this_process_may_not_use_is_an_error_not_a_traceback():
    bad = max(os.sched_getaffinity(0)) + 1000
    s = steadiness.measure(0.3, cpus=[bad])
    assert s["error"].startswith(f"the loop on CPU {bad} failed: OSError")
    assert steadiness.text(s).startswith("not measured: the loop on CPU")
