"""The CPU speed probe (metrics/hostspeed.py): a real thread timing real work."""

import os
import threading
import time

from pgaccel.metrics import hostspeed
from pgaccel.metrics.hostspeed import SpeedProbe, sample_us


def test_sample_counts_cpu_time_not_waiting(monkeypatch):
    # a "work" that only waits: wall time 20 ms per run, CPU time next to nothing
    monkeypatch.setattr(hostspeed, "_work", lambda n=0: time.sleep(0.02))
    t0 = time.monotonic()
    us = sample_us(reps=3)
    assert time.monotonic() - t0 >= 0.06
    assert us < 5_000, us                  # waiting is not counted


def test_sample_is_the_fastest_run(monkeypatch):
    runs = iter([0.0, 0.004, 0.0])        # busy-loop lengths in seconds (CPU time)

    def work(n=0):
        end = time.thread_time() + next(runs)
        while time.thread_time() < end:
            pass
    monkeypatch.setattr(hostspeed, "_work", work)
    us = sample_us(reps=3)
    assert us < 2_000, us                  # not the 4 ms run


def test_probe_samples_while_open_and_stops_on_exit():
    with SpeedProbe(interval=0.02, reps=2) as p:
        time.sleep(0.3)
    n = len(p.samples)
    assert n >= 3, p.samples
    assert all(x > 0 for x in p.samples)
    assert p.median_us() == round(sorted(p.samples)[(n - 1) // 2] if n % 2 else
                                  (sorted(p.samples)[n // 2 - 1] + sorted(p.samples)[n // 2])
                                  / 2, 2)
    time.sleep(0.1)
    assert len(p.samples) == n             # the thread has stopped
    assert not p._thread.is_alive()


def test_no_samples_no_median():
    p = SpeedProbe(interval=10)
    with p:
        pass
    assert p.samples == [] and p.median_us() is None


def _allowed(tid: int) -> str:
    with open(f"/proc/self/task/{tid}/status") as f:
        return next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("Cpus_allowed_list"))


def test_probe_cpu_is_the_highest_allowed():
    assert hostspeed.probe_cpu({0, 1, 5}) == 5
    assert hostspeed.probe_cpu(frozenset({3})) == 3
    assert hostspeed.probe_cpu(set()) is None
    assert hostspeed.probe_cpu() == max(os.sched_getaffinity(0))


def test_probe_thread_runs_on_its_cpu_alone():
    """On a 16-CPU VM an unpinned probe's trials took 180 or 260 µs depending on the vCPU it
    landed on: every probe of a process runs on one CPU, and only its thread is pinned."""
    before = os.sched_getaffinity(0)
    cpu = max(before)
    with SpeedProbe(interval=0.02, reps=1) as p:
        time.sleep(0.2)
        assert _allowed(p._thread.native_id) == str(cpu)
    assert p.cpu == cpu and len(p.samples) >= 3
    assert os.sched_getaffinity(0) == before           # the process is not pinned


def test_probe_unpinned_where_asked_or_refused():
    before = os.sched_getaffinity(0)
    with SpeedProbe(interval=0.02, reps=1, cpu=None) as free:
        time.sleep(0.1)
        assert _allowed(free._thread.native_id) == _allowed(threading.get_native_id())
    with SpeedProbe(interval=0.02, reps=1, cpu=10_000) as refused:   # no such CPU
        time.sleep(0.2)
    assert free.cpu is None and refused.cpu is None and len(refused.samples) >= 3
    assert os.sched_getaffinity(0) == before
