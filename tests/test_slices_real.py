"""PausedPgbench's slices on a real server: when ``pause()`` returns, every thread of every
pgbench is stopped, so the clock read after it bounds the slice, and every transaction
pgbench logged ends inside one of the windows taken as the lab takes them."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time
from contextlib import ExitStack

import numpy as np
import pytest

from pgaccel.errors import DiskFull
from pgaccel.server.discovery import find_client
from pgaccel.server.target import open_target
from pgaccel.workloads.base import BenchContext, RunParams, get_workload
from pgaccel.workloads.pgbench_logs import (LOG_CEILING_TPS, LOG_LINE_BYTES, RAM_DIR, LogPlace,
                                           log_place, ram_room)
from pgaccel.workloads.slices import PausedPgbench, log_windows, wall_shift, window_stats

SLICES = 60


def _states(pid: int) -> list[str]:
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            out.append(f.read().rsplit(")", 1)[1].split()[0])
    return out


def _select_only(stack: ExitStack) -> BenchContext:
    t = stack.enter_context(open_target())
    ctx = BenchContext(t, find_client("pgbench", t.inst))
    t.start()
    t.ensure_bench_db()
    get_workload("select-only").prepare(ctx, RunParams(clients=2, duration=2, warmup=1,
                                                       scale=1))
    return ctx


def test_pause_returns_with_every_thread_stopped_and_slices_hold_every_commit():
    kw = {"builtin": "select-only", "scripts": None, "clients": 2, "threads": 2,
          "rate": None, "protocol": "prepared", "defines": None, "extra_args": None}
    with ExitStack() as stack:
        ctx = _select_only(stack)
        p = PausedPgbench(ctx.pgbench, ctx.bench_conninfo(), kw, 120)
        stack.callback(p.close)
        # started stopped: both threads of its one process
        assert _states(p.procs[0].pid) and set(_states(p.procs[0].pid)) <= {"T"}
        shift = wall_shift()
        windows, running_after_pause = [], 0
        for i in range(SLICES):
            t0 = time.monotonic()
            p.resume()
            time.sleep(0.5 if i == 0 else 0.02)     # the first: its connections open
            p.pause()
            t1 = time.monotonic()
            states = _states(p.procs[0].pid)
            running_after_pause += any(s not in "Tt" for s in states)
            windows.append((t0 + shift, t1 + shift))
            time.sleep(0.01)
        assert running_after_pause == 0
        ends, lats, failed, sampling = p.finish(timeout=30)
    assert sampling == 1.0                            # no expected length: the whole log
    before_finish = ends[ends < int(windows[-1][1] * 1e6) + 1]
    assert before_finish.size > 20 * SLICES           # a few hundred to thousands a slice
    ws = window_stats(ends, lats, failed, windows)
    # every commit logged before the finish ended inside a window: none between slices
    assert ws.ops == before_finish.size and not failed.any()
    assert len(ws.rates) == SLICES and np.min(ws.rates[1:]) > 0


def test_wall_shift_maps_the_monotonic_clock_onto_the_wall_clock():
    shift = wall_shift()
    for _ in range(20):
        assert abs(time.monotonic() + shift - time.time()) < 0.002


KW = {"builtin": "select-only", "scripts": None, "clients": 2, "threads": 1, "rate": None,
      "protocol": "prepared", "defines": None, "extra_args": None}


def test_logs_go_to_ram_when_they_surely_fit_and_under_workdir_otherwise(tmp_path):
    """A pgbench expected to run seconds logs into /dev/shm (a tmpfs with room): its
    transactions are all read back; one without an expected length logs under workdir."""
    ram = log_place(str(tmp_path), 1e6) == LogPlace(RAM_DIR)
    with ExitStack() as stack:
        ctx = _select_only(stack)
        short = PausedPgbench(ctx.pgbench, ctx.bench_conninfo(), KW, 120,
                              workdir=str(tmp_path), expect_seconds=3)
        stack.callback(short.close)
        open_ended = PausedPgbench(ctx.pgbench, ctx.bench_conninfo(), KW, 120,
                                   workdir=str(tmp_path))
        stack.callback(open_ended.close)
        # each inside this process's reaped root there
        assert os.path.dirname(os.path.dirname(open_ended.dir)) == str(tmp_path)
        assert os.path.dirname(os.path.dirname(short.dir)) == (RAM_DIR if ram else str(tmp_path))
        for p in (short, open_ended):
            p.resume()
            time.sleep(0.5)
            p.pause()
            log = p.finish(timeout=30)
            assert log.ends_us.size > 100 and not log.failed.any()
            assert log.sampling == 1.0 and log.ends_us.size == p.counted


def _sampled(stack: ExitStack, workdir: str, share: float) -> PausedPgbench:
    """A select-only pgbench whose most possible log is ``1 / share`` times its room in
    RAM, so that it logs about ``share`` of its transactions there (skipped without a
    tmpfs with room)."""
    room = ram_room()
    if room < 1e8:
        pytest.skip("no tmpfs with room at /dev/shm here")
    seconds = room / share / (LOG_CEILING_TPS * KW["threads"] * LOG_LINE_BYTES)
    ctx = _select_only(stack)
    p = PausedPgbench(ctx.pgbench, ctx.bench_conninfo(), KW, 120, workdir=workdir,
                      expect_seconds=seconds)
    stack.callback(p.close)
    return p


def test_a_log_too_large_for_ram_is_a_sample_that_counts_what_pgbench_counted(tmp_path):
    """A pgbench whose most possible log is three times its room in RAM logs about a third
    of its transactions there (pgbench --sampling-rate), and the windows' count of that
    sample, each line standing for 1 / rate, matches pgbench's own count within the
    sampling error: a rate not passed to pgbench, or lines not weighted, would be off by
    three."""
    with ExitStack() as stack:
        p = _sampled(stack, str(tmp_path), 1 / 3)
        # a third, rounded down; the host's available memory moves between the two looks
        assert 0.3 < p.sampling < 0.37
        assert os.path.dirname(os.path.dirname(p.dir)) == RAM_DIR
        shift, windows = wall_shift(), []
        for _ in range(10):
            t0 = time.monotonic()
            p.resume()
            time.sleep(0.1)
            p.pause()
            windows.append((t0 + shift, time.monotonic() + shift))
        log = p.finish(timeout=30)
    assert log.sampling == p.sampling
    n = p.counted
    assert n > 2000
    sd = (n * p.sampling * (1 - p.sampling)) ** 0.5
    assert abs(log.ends_us.size - n * p.sampling) < 6 * sd      # about a third were logged
    ws = log_windows(log, windows)
    # the transactions made after the last pause (finish ends them) are in no window
    assert abs(ws.ops - n) < 6 * sd / p.sampling + 20
    assert ws.count_error == pytest.approx(((1 - p.sampling) / ws.logged) ** 0.5)


def test_a_sample_written_where_no_room_is_left_is_an_error(tmp_path, monkeypatch):
    """A sample may lose a few lines without its count showing it, so a sampled log whose
    filesystem is full at the end is refused as a full disk (exit 7).  The full filesystem
    is the one thing faked here (filling /dev/shm would starve the host)."""
    from pgaccel.workloads import slices
    with ExitStack() as stack:
        p = _sampled(stack, str(tmp_path), 0.5)
        assert p.sampling < 1.0
        p.resume()
        time.sleep(0.3)
        p.pause()
        monkeypatch.setattr(slices, "free_bytes", lambda path: 4096.0)
        with pytest.raises(DiskFull) as ei:
            p.finish(timeout=30)
    assert "cut short" in ei.value.message and "a sample of them" in (ei.value.hint or "")


def test_logs_cut_short_are_an_error_not_lower_rates(tmp_path):
    """A log that lost lines is refused at finish as a full disk (exit 7), with what to do,
    not read as lower rates.  Here the log is removed while pgbench writes it; on a full
    disk pgbench goes on the same way, its writes failing."""
    with ExitStack() as stack:
        ctx = _select_only(stack)
        p = PausedPgbench(ctx.pgbench, ctx.bench_conninfo(), KW, 120, workdir=str(tmp_path))
        stack.callback(p.close)
        p.resume()
        time.sleep(0.5)
        p.pause()
        (log,) = glob.glob(os.path.join(p.dir, "tx*-.*"))
        os.unlink(log)
        with pytest.raises(DiskFull) as ei:
            p.finish(timeout=30)
    assert "its logs in" in ei.value.message and "cut short" in ei.value.message
    assert "Make room" in (ei.value.hint or "")


def test_the_log_root_goes_when_its_process_is_killed(tmp_path):
    """kill -9 of the process that made it: its reaper removes the root of its pgbench
    logs (in /dev/shm they would hold memory until the host restarts)."""
    code = ("import os, sys, time\n"
            "from pgaccel.workloads.pgbench_logs import reaped_root\n"
            f"root = reaped_root({str(tmp_path)!r})\n"
            "open(os.path.join(root, 'tx-.1'), 'w').write('0 1 5 0 1700000000 1\\n')\n"
            "print(root, flush=True)\n"
            "time.sleep(120)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    root = p.stdout.readline().strip()
    assert os.path.isfile(os.path.join(root, "tx-.1"))
    p.kill()
    p.wait()
    deadline = time.monotonic() + 20
    while os.path.exists(root) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(root) and os.listdir(tmp_path) == []


def test_the_log_root_goes_at_a_normal_exit_at_once(tmp_path):
    code = ("from pgaccel.workloads.pgbench_logs import reaped_root\n"
            f"print(reaped_root({str(tmp_path)!r}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out.startswith(str(tmp_path)) and os.listdir(tmp_path) == []
