"""Where a sliced pgbench's per-transaction logs go, what share of its transactions they
hold, and whether they hold it all (``workloads/slices.PausedPgbench`` uses them).

Off the measured disks, in RAM, where they surely fit there, whole or as a sample
(:func:`log_place`); always inside a directory of this process's own that a reaper removes
once it has ended (:func:`reaped_root`); checked against pgbench's own count
(:func:`counted_transactions`, :func:`lines_missing`)."""

from __future__ import annotations

import atexit
import math
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

import psutil

from ..server import reaper

# pgbench's per-transaction log kept off the measured disks: in RAM (a tmpfs) when the most
# it could hold surely fits, whole or as a sample.  On disk, a minute-long q step's logs
# (160 MB a variant here) were written back while the variants took turns and made most of
# the device's writes: an A/A's qr100 showed 2.1 times the KB written per query for one side (docs/measurements.md,
# "pgbench's logs in RAM").  A bound, not an estimate: no pgbench thread logs more
# transactions a second than LOG_CEILING_TPS (a pgbench thread ran at most 45,000 here).
RAM_DIR = "/dev/shm"
LOG_LINE_BYTES = 48
LOG_CEILING_TPS = 200_000
# A log that would not fit whole is sampled (pgbench --sampling-rate) to fit, as long as
# its room holds at least this many lines; with less room the logs go to disk whole.  The
# rate is sized to the bound, and a pgbench runs well below LOG_CEILING_TPS, so it logs
# fewer lines than that: a trial's count errs by about 1/sqrt(lines it logged) (0.1% at a
# million, 0.3% at 100,000; run.json's count_error, a warning past steps.COUNT_ERROR_WARN).
MIN_SAMPLED_LINES = 1_000_000
# the run's total; pgbench 17+ repeats the words per script, indented (" - number of ...")
PROCESSED_RE = re.compile(r"^number of transactions actually processed: (\d+)", re.M)


def counted_transactions(output: str) -> int:
    """The transactions pgbench's summary says it processed (0 when it printed none)."""
    m = PROCESSED_RE.search(output)
    return int(m.group(1)) if m else 0


_ROOTS: dict[str | None, str] = {}
_REAPERS: list[subprocess.Popen] = []


def reaped_root(parent: str | None) -> str:
    """This process's directory for pgbench logs under ``parent`` (None: the system's
    temporary directory), made on first use with a reaper (``server/reaper.py``) that
    removes it once this process has ended, also after a kill -9: logs left in /dev/shm
    would hold memory until the host restarts.  At a normal exit it goes at once
    (``atexit``), so nothing is left when the command returns."""
    root = _ROOTS.get(parent)
    if root is not None and os.path.isdir(root):
        return root
    root = tempfile.mkdtemp(prefix=f"pgaccel-logs-{os.getpid()}-", dir=parent)
    try:
        proc, _w = reaper.spawn(root, "")
    except OSError:
        shutil.rmtree(root, ignore_errors=True)
        raise
    _REAPERS.append(proc)
    # _w stays open (not inherited by children) until this process ends: then it runs
    atexit.register(shutil.rmtree, root, True)
    _ROOTS[parent] = root
    return root


@dataclass(frozen=True)
class LogPlace:
    """Where a pgbench's logs go, and the share of its transactions they hold."""
    dir: str | None
    sampling: float = 1.0          # pgbench --sampling-rate; 1.0: every transaction


def free_bytes(path: str) -> float:
    """Bytes still free to this process where ``path`` lies (infinite when that cannot be
    read)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return float("inf")
    return float(st.f_bavail * st.f_frsize)


def ram_room(ram_dir: str = RAM_DIR) -> float:
    """Bytes of logs ``ram_dir`` surely holds: half its free room and a quarter of the
    host's available memory, when it is a writable tmpfs; else 0."""
    try:
        with open("/proc/mounts") as fh:
            tmpfs = any(f.split()[1:3] == [ram_dir, "tmpfs"] for f in fh)
    except OSError:
        return 0.0
    if not tmpfs or not os.access(ram_dir, os.W_OK):
        return 0.0
    return min(free_bytes(ram_dir) / 2, psutil.virtual_memory().available / 4)


def log_place(workdir: str | None, bound_bytes: float | None, siblings: int = 1,
              ram_dir: str = RAM_DIR, room: float | None = None, *,
              may_sample: bool = True) -> LogPlace:
    """Where a pgbench that logs at most ``bound_bytes`` puts its logs, beside
    ``siblings`` such pgbench (itself included) logging at once: ``ram_dir`` when its
    share of :func:`ram_room` (``room``: given instead) holds the bound; a sample of
    the transactions in ``ram_dir``, sized to that share, when the share still holds
    :data:`MIN_SAMPLED_LINES` and ``may_sample``; else ``workdir``, every transaction
    (None: no bound known)."""
    if bound_bytes is None:
        return LogPlace(workdir)
    share = (ram_room(ram_dir) if room is None else room) / max(1, siblings)
    if bound_bytes <= share:
        return LogPlace(ram_dir)
    if may_sample and share >= MIN_SAMPLED_LINES * LOG_LINE_BYTES:
        # four significant digits, rounded down: pgbench reads it as a double
        rate = share / bound_bytes
        digits = 3 - math.floor(math.log10(rate))
        return LogPlace(ram_dir, math.floor(rate * 10 ** digits) / 10 ** digits)
    return LogPlace(workdir)


def lines_missing(logged: int, counted: int, sampling: float) -> bool:
    """Whether logs holding ``logged`` lines lost some of the ``counted`` transactions
    pgbench made, ``sampling`` of which it logged: fewer than all of them, or, for a
    sample, more than six standard deviations (and ten lines) below its expected size.  A
    full disk loses every line after it, far more than that."""
    if sampling >= 1.0:
        return logged < counted
    expected = counted * sampling
    return logged < expected - 6 * math.sqrt(expected * (1 - sampling)) - 10
