"""pgbench kept running for a whole round and measured in slices (``lab/paired.py``).

Two servers side by side, one per config, each with its own pgbench: the idle one's
pgbench is stopped (SIGSTOP) while the other's runs, and a slice's throughput is the
transactions pgbench's per-transaction log (``-l``) shows ending inside it.  Connections
stay open all round: 1-second pgbench runs with new connections every second found a
smaller tuned effect than 5-second ones (docs/measurements.md, "Two servers side by side").

:class:`PausedPgbench` is the process (started stopped, resumed and stopped around each
slice, its CPU read from /proc at each slice's edges); :func:`window_stats` is pure: what the
logged transactions say about each window.
"""

from __future__ import annotations

import ctypes
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Sequence

import numpy as np
import psutil

from ..errors import BenchError, DiskFull
from .pgbench import CDF_QUANTILES, libpq_env, read_transactions
from .pgbench_cmd import pgbench_args, pgbench_failed
from .pgbench_logs import (LOG_CEILING_TPS, LOG_LINE_BYTES, counted_transactions, free_bytes,
                           lines_missing, log_place, reaped_root)
from .pinning import Share


class Transactions(NamedTuple):
    """A pgbench's logged transactions (``pgbench.read_transactions``): a ``sampling``
    share of those it made (``--sampling-rate``; 1.0: all)."""
    ends_us: np.ndarray
    lat_us: np.ndarray
    failed: np.ndarray
    sampling: float = 1.0


@dataclass(frozen=True)
class WindowStats:
    """What the transactions ending inside some windows show."""
    ops: int                                  # good transactions (estimated from a sample)
    failed: int
    seconds: float                            # the windows' total length
    rates: list[float] = field(default_factory=list)       # per window, transactions/s
    p50_ms: list[float] = field(default_factory=list)      # per window
    latency_ms: dict[str, Any] = field(default_factory=dict)
    sampling: float = 1.0                     # the share of transactions logged
    logged: int = 0                           # lines counted (good and failed)

    @property
    def count_error(self) -> float:
        """The relative standard error of ``ops`` from sampling: 0 for a whole log,
        about 1/sqrt(lines counted) for a sample."""
        if self.sampling >= 1.0 or not self.logged:
            return 0.0
        return float(np.sqrt((1 - self.sampling) / self.logged))

    @property
    def throughput(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0


def window_stats(ends_us: np.ndarray, lat_us: np.ndarray, failed: np.ndarray,
                 windows: Sequence[tuple[float, float]], sampling: float = 1.0
                 ) -> WindowStats:
    """Transactions that ended inside each ``(start, end)`` window (epoch seconds) count
    towards its rate, each for ``1 / sampling`` when the log is a sample.  Latencies are
    those of transactions that also *began* inside the window: one that was in flight when
    its pgbench was stopped ends in the next window with the pause in its latency, and is
    counted but not timed.

    The transactions are sorted by their end once and each window's found by binary search,
    so the work grows with transactions plus windows.  Masking every transaction for every
    window grew with their product: a 60-second step (600 windows, 2.1 million
    transactions) took 4.7 s, and a 5-minute q step at ``--size medium`` would have taken
    about two minutes a variant (benchmarks/slice_logs.py).  Within a window the latencies
    keep the logs' order, as before."""
    ends_us = np.asarray(ends_us)
    order = np.argsort(ends_us, kind="stable")
    ends_sorted = ends_us[order]
    edges = np.array([[int(t0 * 1e6), int(t1 * 1e6)] for t0, t1 in windows],
                     dtype=np.int64).reshape(-1, 2)
    first = np.searchsorted(ends_sorted, edges[:, 0], side="left")
    past = np.searchsorted(ends_sorted, edges[:, 1], side="left")
    rates, p50s, lat_all = [], [], []
    ops = bad = 0
    seconds = 0.0
    weight = 1.0 / sampling
    for (t0, t1), (a, _), i, j in zip(windows, edges, first, past):
        idx = np.sort(order[i:j]) if j > i else order[i:i]     # the logs' order
        bad_here = failed[idx]
        n = int(idx.size - bad_here.sum())
        ops += n
        bad += int(bad_here.sum())
        seconds += t1 - t0
        rates.append(n * weight / (t1 - t0) if t1 > t0 else 0.0)
        good = idx[~bad_here]
        lat = lat_us[good]
        timed = lat[ends_us[good] - lat >= a] / 1000.0
        p50s.append(float(np.median(timed)) if timed.size else float("nan"))
        lat_all.append(timed)
    lat = np.concatenate(lat_all) if lat_all else np.array([])
    latency = {}
    if lat.size:
        latency = {"mean": float(lat.mean()), "p50": float(np.percentile(lat, 50)),
                   "p95": float(np.percentile(lat, 95)), "p99": float(np.percentile(lat, 99)),
                   "max": float(lat.max()), "stddev": float(lat.std()),
                   "cdf": [[q, float(v)] for q, v in zip(CDF_QUANTILES,
                                                        np.quantile(lat, CDF_QUANTILES))]}
    return WindowStats(ops=int(round(ops * weight)), failed=int(round(bad * weight)),
                       seconds=seconds, rates=rates, p50_ms=p50s, latency_ms=latency,
                       sampling=sampling, logged=ops + bad)


def log_windows(log: Transactions, windows: Sequence[tuple[float, float]]) -> WindowStats:
    """:func:`window_stats` of a :class:`Transactions`, its sampling included."""
    return window_stats(log.ends_us, log.lat_us, log.failed, windows, log.sampling)


try:                              # looked up here, not in the child after fork
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _PRCTL = None
PR_SET_PDEATHSIG = 1


def _in_child(cpu: int | None) -> None:
    """In the child before exec: be killed when pgaccel dies (a pgbench stopped with
    SIGSTOP would otherwise wait for ever after a kill -9 of pgaccel: the cluster's reaper
    stops the server, but nothing resumes the client); run on ``cpu`` when given."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL)
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


def _stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped, a zombie or gone (/proc/PID/task/*/stat)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return True
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            continue
        if state not in "TtZX":
            return False
    return True


def wall_shift(tries: int = 5) -> float:
    """``time.time() - time.monotonic()``, from the pair of reads taken closest together of
    ``tries``: preempted between its two reads, a single pair is off by however long it
    waited, and every slice window moved by that against pgbench's logged times."""
    best = (float("inf"), 0.0)
    for _ in range(tries):
        a = time.monotonic()
        wall = time.time()
        b = time.monotonic()
        if b - a < best[0]:
            best = (b - a, wall - (a + b) / 2)
    return best[1]


def _firsts(shares: Sequence[Share]) -> list[int]:
    """The number of each share's first client among all the shares' clients."""
    out, n = [], 0
    for s in shares:
        out.append(n)
        n += s.clients
    return out


def _based(defines: dict[str, Any] | None, first: int) -> dict[str, Any] | None:
    """A share's defines: ``client_base``, where the scripts number their clients from it,
    set to the share's first client (each pgbench counts its own clients from 0)."""
    if not defines or "client_base" not in defines:
        return defines
    return {**defines, "client_base": first}


# a sampled log may lose a few lines without its count showing it (``lines_missing`` allows
# chance); the filesystem it was written to being full at the end tells that it did
ROOM_LEFT_MIN = 1 << 20


class PausedPgbench:
    """pgbench for a round, started and at once stopped; ``resume``/``pause`` around each
    slice; ``finish`` ends it and reads its log.  ``seconds`` (``-T``) is only a limit: the
    round ends it sooner.  With ``transactions`` (``-t``, per client) instead, it ends by
    itself once they are done (:meth:`wait_end` inside the last slice).

    With ``shares`` (``pinning.split_load``) it is one pgbench per share, started on the
    share's CPU with its part of the clients and threads and its connections named after
    that CPU (``pinning.pin_backends`` then places their backends); without, one pgbench.
    Scripts that number their clients from a ``client_base`` define (the Insert
    Benchmark's queries: a table per client) get each share's first client there.

    The logs go to a private temporary directory, in RAM when the most they could hold
    fits there (:func:`log_place`: ``LOG_CEILING_TPS`` a thread for ``expect_seconds``, the
    seconds it is expected to run, sampled to fit if need be; or ``transactions`` times the
    clients lines, always whole: that count is exact; ``siblings``: how many such pgbench
    log at once, itself included), else under ``workdir``, inside this process's
    :func:`reaped_root` there; the output to files there (nobody reads a pipe while it is
    stopped).  :meth:`finish` checks that the logs hold every transaction pgbench counted
    (of a sample: about its share, and room left where it was written).  The connection
    travels in the environment, as for every pgbench run."""

    def __init__(self, pgbench: str, conninfo: str, kw: dict[str, Any], seconds: int, *,
                 session_options: str | None = None, workdir: str | None = None,
                 shares: Sequence[Share] | None = None, transactions: int | None = None,
                 expect_seconds: float | None = None, siblings: int = 1):
        threads = sum(s.threads for s in shares) if shares else int(kw.get("threads") or 1)
        clients = sum(s.clients for s in shares) if shares else int(kw.get("clients") or 1)
        bound = (transactions * clients if transactions
                 else LOG_CEILING_TPS * threads * expect_seconds if expect_seconds else None)
        place = log_place(workdir, None if bound is None else bound * LOG_LINE_BYTES,
                          siblings, may_sample=not transactions)
        self.sampling = place.sampling
        self.counted = 0                # transactions pgbench said it made (at finish)
        self.dir = tempfile.mkdtemp(prefix="pgbench-slices-", dir=reaped_root(place.dir))
        self.started = time.time() - 1.0      # its sessions open after this (with a margin)
        self.shares = list(shares or [])
        self.procs: list[subprocess.Popen] = []
        self._files: list[Any] = []
        self._ended = [0.0, 0]          # CPU seconds and context switches of those reaped
        self._ending = False
        env = libpq_env(conninfo, session_options)
        parts = ([(f"tx{s.cpu}-", {**kw, "clients": s.clients, "threads": s.threads,
                                   "defines": _based(kw.get("defines"), first)}, s)
                  for s, first in zip(self.shares, _firsts(self.shares))]
                 or [("tx-", kw, None)])
        try:
            for prefix, pkw, share in parts:
                args = pgbench_args(**{**pkw, "duration": None if transactions else seconds,
                                       "transactions": transactions},
                                    log_prefix=os.path.join(self.dir, prefix),
                                    progress=False)
                if self.sampling < 1.0:
                    args += ["--sampling-rate", f"{self.sampling:g}"]
                out = open(os.path.join(self.dir, prefix + "out"), "w+")
                self._files.append(out)
                err = open(os.path.join(self.dir, prefix + "err"), "w+")
                self._files.append(err)
                penv = dict(env, PGAPPNAME=share.app_name) if share else env
                cpu = share.cpu if share else None
                self.procs.append(subprocess.Popen(
                    [pgbench, *args], cwd=self.dir, stdout=out, stderr=err,
                    preexec_fn=lambda cpu=cpu: _in_child(cpu), env=penv))
        except OSError as e:
            self.close()
            raise BenchError(f"Could not run pgbench ({pgbench}): {e}",
                             "Install it or point pgaccel at it (see README).") from None
        except BaseException:
            self.close()
            raise
        self.pause()

    def pause(self) -> None:
        """Stop every process, and return once each of their threads is stopped (or gone):
        the caller's clock read after this bounds every transaction end pgbench logged in
        the slice.  SIGSTOP takes effect when the kernel next runs the process: read
        straight after the signal, 54-57 of 60 pauses found a pgbench thread still running
        (``tests/test_slices_real.py``), and a commit logged in that moment would end
        between two windows and count in neither (the likely cause of a sliced load step
        that once counted one commit fewer than it made)."""
        self._signal(signal.SIGSTOP)
        deadline = time.monotonic() + 1.0
        for p in self.procs:
            while not _stopped(p.pid) and time.monotonic() < deadline:
                time.sleep(0.0001)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, sig: int) -> None:
        for p in self.procs:
            try:
                os.kill(p.pid, sig)
            except ProcessLookupError:
                pass

    def running(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def wait_end(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every process to end; whether they all have.
        A process that ends is reaped here with its resource usage (``os.wait4``), so its
        CPU up to its last instant stays in :meth:`cpu`: read from /proc, the slice it ended
        in would lose it."""
        deadline = time.monotonic() + timeout
        while True:
            for p in self.procs:
                if p.returncode is not None:
                    continue
                try:
                    pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                except ChildProcessError:         # reaped elsewhere
                    p.poll()
                    continue
                if pid:
                    p.returncode = os.waitstatus_to_exitcode(status)
                    self._ended[0] += ru.ru_utime + ru.ru_stime
                    self._ended[1] += ru.ru_nvcsw + ru.ru_nivcsw
            if all(p.returncode is not None for p in self.procs):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(0.005, left))

    def cpu(self) -> tuple[float, int]:
        """(CPU seconds, context switches) the processes have used so far (one that
        :meth:`wait_end` reaped: all it used; one that ended otherwise: 0)."""
        cpu, ctx = self._ended[0], self._ended[1]
        for proc in self.procs:
            if proc.returncode is not None:
                continue
            try:
                p = psutil.Process(proc.pid)
                t, c = p.cpu_times(), p.num_ctx_switches()
            except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                continue
            cpu += t.user + t.system
            ctx += c.voluntary + c.involuntary
        return cpu, ctx

    def end(self) -> None:
        """Tell them to end (their clients finish the transaction they are in), without
        waiting: several ended at once then finish in parallel (:meth:`finish` waits)."""
        if not self._ending:
            self._ending = True
            self.resume()
            self._signal(signal.SIGALRM)

    def finish(self, timeout: float) -> Transactions:
        """End them now and read their transactions (:func:`read_transactions`).  SIGALRM
        is how pgbench's own ``-T`` timer ends a run: its clients finish their transactions
        and every thread flushes its log (a SIGINT or SIGTERM would lose what stdio had not
        yet written, the last transactions of the last slice)."""
        self.end()
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for q in self.procs:
                    q.kill()
                    q.wait()
                raise BenchError("pgbench did not end when its time was up.",
                                 "Look at the server log; the server may be stuck.") from None
        for p, err in zip(self.procs, self._files[1::2]):
            if p.returncode != 0:
                err.seek(0)
                raise pgbench_failed(err.readlines(), p.returncode)
        log = Transactions(*read_transactions(sorted(glob.glob(os.path.join(self.dir,
                                                                             "tx*-.*")))),
                           sampling=self.sampling)
        counted = 0
        for out in self._files[0::2]:
            out.seek(0)
            counted += counted_transactions(out.read())
        self.counted = counted
        if lines_missing(len(log.ends_us), counted, self.sampling) or (
                self.sampling < 1.0 and free_bytes(self.dir) < ROOM_LEFT_MIN):
            held = f"{len(log.ends_us):,}" + (f" (a {self.sampling:g} sample)"
                                               if self.sampling < 1.0 else "")
            raise DiskFull(
                f"pgbench counted {counted:,} transactions but its logs in {self.dir} hold "
                f"{held}: the logs were cut short, so the slices' rates would be too low.",
                "Make room where they are written (the run's work directory, or /dev/shm "
                "when they, or a sample of them, surely fit in memory) and run again.")
        return log

    def close(self) -> None:
        """Stop the processes that still run and remove their files (every path)."""
        for proc in getattr(self, "procs", []):
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                proc.kill()
                proc.wait()
        for f in getattr(self, "_files", []):
            f.close()
        shutil.rmtree(self.dir, ignore_errors=True)
