"""Where a sliced pgbench's per-transaction logs go, and whether they hold every
transaction (``workloads/slices.PausedPgbench`` uses them).

Off the measured disks where they surely fit in RAM (:func:`log_dir`), always inside a
directory of this process's own that a reaper removes once it has ended
(:func:`reaped_root`), and checked against pgbench's own count
(:func:`counted_transactions`)."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import tempfile

import psutil

from ..server import reaper

# pgbench's per-transaction log kept off the measured disks: in RAM (a tmpfs) when the most
# it could hold surely fits.  On disk, a minute-long q step's logs (160 MB a variant here)
# were written back while the variants took turns and made most of the device's writes: an
# A/A's qr100 showed 2.1 times the KB written per query for one side (docs/statistics.md,
# "pgbench's logs in RAM").  A bound, not an estimate: no pgbench thread logs more
# transactions a second than LOG_CEILING_TPS (a pgbench thread ran at most 45,000 here).
RAM_DIR = "/dev/shm"
LOG_LINE_BYTES = 48
LOG_CEILING_TPS = 200_000
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


def log_dir(workdir: str | None, bound_bytes: float | None, ram_dir: str = RAM_DIR
            ) -> str | None:
    """Where a pgbench's logs go: ``ram_dir`` when it is a tmpfs whose free room holds
    ``bound_bytes`` twice and the host's available memory four times, else ``workdir``
    (None: no bound known)."""
    if bound_bytes is None:
        return workdir
    try:
        st = os.statvfs(ram_dir)
        with open("/proc/mounts") as fh:
            tmpfs = any(f.split()[1:3] == [ram_dir, "tmpfs"] for f in fh)
    except OSError:
        return workdir
    free = st.f_bavail * st.f_frsize
    if (tmpfs and os.access(ram_dir, os.W_OK) and 2 * bound_bytes <= free
            and 4 * bound_bytes <= psutil.virtual_memory().available):
        return ram_dir
    return workdir
