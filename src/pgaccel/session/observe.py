"""Numbers for the measured rules (effects; the rules themselves are in measured.py):

* ``sample_server``: PostgreSQL's cumulative counters (WAL bytes, checkpoints, temp files,
  buffer hits) sampled twice, SECONDS apart, on a live server;
* ``from_stored_run``: the same counters summed over the baseline trials of a stored
  ``pgaccel run``;
* ``fio_random_read``: a short random-read test with fio (``--measure-storage``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from typing import Any

from ..errors import NotFound, PgaccelError, UsageError
from ..metrics import pg as pgmetrics
from ..tune.measured import MeasuredStats, stats_from_delta


def sample_server(target, seconds: float) -> MeasuredStats:
    """Counters of the target's own database (db_*) and server (WAL, checkpoints)."""
    with target.database() as db:
        before = db.counters()
        t0 = time.monotonic()
    time.sleep(seconds)
    with target.database() as db:
        after = db.counters()
    return stats_from_delta(pgmetrics.delta(before, after), time.monotonic() - t0)


def from_stored_run(store, run_ref: str, variant: str = "baseline") -> MeasuredStats:
    """Sum of the pg counters of a stored run's trials of ``variant``."""
    run = store.get_run(run_ref)
    trials = [t for t in run.get("trials", []) if t.get("variant") == variant]
    if not trials:
        raise UsageError(f"Run {run['id']} has no trials of the {variant!r} config.",
                         "Name a `pgaccel run` run (see `pgaccel history`).")
    total: dict[str, Any] = {}
    seconds = 0.0
    for t in trials:
        m = t.get("metrics") or {}
        seconds += float(m.get("duration_s") or 0)
        for k, v in (m.get("pg") or {}).items():
            if isinstance(v, (int, float)) and k != "db_size_bytes":
                total[k] = total.get(k, 0) + v
        total["db_size_bytes"] = (m.get("pg") or {}).get("db_size_bytes")
    return stats_from_delta(total, seconds)


def _fio_job(fio: str, path: str, engine: str, depth: int, seconds: int) -> dict[str, float]:
    cmd = [fio, "--name=pgaccel-randread", f"--filename={path}", "--size=256M", "--bs=8k",
           "--rw=randread", "--direct=1", f"--ioengine={engine}", f"--iodepth={depth}",
           f"--runtime={seconds}", "--time_based", "--output-format=json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    if r.returncode != 0:
        err = (r.stderr or r.stdout).strip().splitlines()
        raise PgaccelError(f"fio failed: {err[-1] if err else r.returncode}",
                           "Point --workdir (or --pgdata) at a directory on the data disk; "
                           "tmpfs and some network filesystems do not support direct I/O.")
    read = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]["read"]
    lat = read.get("clat_ns") or read.get("lat_ns") or {}
    return {"iops": float(read["iops"]), "lat_ms": float(lat.get("mean", 0)) / 1e6,
            "p99_ms": float((lat.get("percentile") or {}).get("99.000000", 0)) / 1e6}


def fio_random_read(directory: str, seconds: int = 5) -> dict[str, Any]:
    """8 kB random reads with O_DIRECT at queue depth 1 and 32 on ``directory``'s disk."""
    fio = shutil.which("fio")
    if not fio:
        raise NotFound("--measure-storage needs fio.",
                       "Install it (Debian/Ubuntu: `apt-get install fio`), or drop the flag to "
                       "use the storage class rules.")
    path = os.path.join(directory, f".pgaccel-fio-{os.getpid()}")
    try:
        qd1 = _fio_job(fio, path, "psync", 1, seconds)
        qd32 = _fio_job(fio, path, "libaio", 32, seconds)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    return {"directory": directory, "seconds": seconds, "qd1": qd1, "qd32": qd32}
