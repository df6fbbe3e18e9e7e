"""Run pgbench and read what it measured from its per-transaction log.

pgbench's summary line gives one TPS figure and a mean latency; the per-transaction log
(``-l``) gives every transaction's latency and completion time, from which we compute the
latency percentiles and the per-second throughput series.  The load generator's own CPU
time comes from ``wait4`` on the pgbench process.

Connection parameters are passed through the environment (PGHOST, PGPASSWORD, ...) so a
password never appears on a command line.
"""

from __future__ import annotations

import glob
import io
import os
import re
import shutil
import signal
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from psycopg import conninfo as pgconninfo

from .loadgen import run_loadgen
from .pgbench_cmd import PROGRESS_RE, pgbench_args, pgbench_failed
from .remote import run_on_hosts

_ENV_FOR = {
    "host": "PGHOST", "hostaddr": "PGHOSTADDR", "port": "PGPORT", "dbname": "PGDATABASE",
    "user": "PGUSER", "password": "PGPASSWORD", "passfile": "PGPASSFILE",
    "service": "PGSERVICE", "options": "PGOPTIONS", "application_name": "PGAPPNAME",
    "sslmode": "PGSSLMODE", "sslrootcert": "PGSSLROOTCERT", "sslcert": "PGSSLCERT",
    "sslkey": "PGSSLKEY", "connect_timeout": "PGCONNECT_TIMEOUT",
    "target_session_attrs": "PGTARGETSESSIONATTRS", "gssencmode": "PGGSSENCMODE",
    "channel_binding": "PGCHANNELBINDING", "sslnegotiation": "PGSSLNEGOTIATION",
}



# Where the latency distribution is sampled for the report's CDF: dense in the tail.
CDF_QUANTILES = (0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98,
                 0.99, 0.995, 0.999, 0.9999, 1.0)

def libpq_env(conninfo: str, extra_options: str | None = None,
              base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment that makes a libpq client connect as ``conninfo`` describes.

    The user's libpq environment (every PG* variable of ``base``, default ``os.environ``:
    PGUSER, PGPASSWORD, PGSSLMODE, PGSERVICEFILE, PGPASSFILE, PGAPPNAME, ...) is kept, and
    each key the conninfo gives is put on top of it (a key in the DSN wins, as in libpq).
    ``extra_options`` (a variant's ``-c`` settings) is appended to PGOPTIONS.  The password
    travels here, never on a command line."""
    env = dict(os.environ if base is None else base)
    for key, val in pgconninfo.conninfo_to_dict(conninfo).items():
        if key in _ENV_FOR and val is not None:
            env[_ENV_FOR[key]] = str(val)
    if extra_options:
        env["PGOPTIONS"] = (env.get("PGOPTIONS", "") + " " + extra_options).strip()
    return env


@dataclass
class PgbenchResult:
    transactions: int
    failed: int
    duration_s: float
    tps: float
    latency_ms: dict[str, float]
    tps_series: list[float]
    latency_p50_series: list[float]
    client: dict[str, Any] = field(default_factory=dict)
    summary_tps: float | None = None
    returncode: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def read_transactions(paths: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(end time in µs since the epoch, latency in µs, failed) per logged transaction of
    pgbench ``-l`` files; a failed or skipped transaction has a word for its latency
    (its latency is then 0 and ``failed`` is True)."""
    parts = [_read_log(path) for path in paths]
    if not parts:
        return (np.array([], dtype=np.int64), np.array([], dtype=np.int64),
                np.array([], dtype=bool))
    return tuple(np.concatenate(x) for x in zip(*parts))   # type: ignore[return-value]


# what pgbench -l writes in place of a latency: a transaction skipped (--latency-limit) or
# failed (with --failures-detailed, which failure); only the third column holds words
_LOG_WORDS = (b"skipped", b"failed", b"serialization", b"deadlock")
_CHUNK = 32 << 20


def _read_log(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One log, as :func:`read_transactions`: numpy's parser when every line is numbers
    (a q step's 280,000 lines in 0.05 s, 0.18 s line by line).  A log with a word in it
    (a failed transaction) is read in chunks of 32 MiB with each word made -1 for numpy's
    parser (2.1 million lines in 1.1 s, 2.7 s line by line: benchmarks/slice_logs.py); one
    that still does not parse (a line cut short when pgbench was killed) line by line."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")               # "input contained no data"
            a = np.loadtxt(path, dtype=np.int64, ndmin=2, usecols=(2, 4, 5))
        return a[:, 1] * 1_000_000 + a[:, 2], a[:, 0], np.zeros(len(a), dtype=bool)
    except (ValueError, IndexError):                      # a word, or too few columns
        pass
    try:
        parts = [_numbers(chunk) for chunk in _line_chunks(path)]
        a = np.concatenate(parts) if parts else np.zeros((0, 3), dtype=np.int64)
        bad = a[:, 0] < 0
        return a[:, 1] * 1_000_000 + a[:, 2], np.where(bad, 0, a[:, 0]), bad
    except (ValueError, IndexError):
        pass
    ends, lats, bad = [], [], []
    with open(path, "rb") as f:
        for line in f:
            c = line.split()
            if len(c) < 6:
                continue
            ok = c[2].isdigit()
            ends.append(int(c[4]) * 1_000_000 + int(c[5]))
            lats.append(int(c[2]) if ok else 0)
            bad.append(not ok)
    return (np.array(ends, dtype=np.int64), np.array(lats, dtype=np.int64),
            np.array(bad, dtype=bool))


def _line_chunks(path: str):
    """The file's bytes in pieces of about ``_CHUNK`` that end at a line's end."""
    rest = b""
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            block = rest + block
            cut = block.rfind(b"\n") + 1
            rest = block[cut:]
            if cut:
                yield block[:cut]
    if rest:
        yield rest


def _numbers(chunk: bytes) -> np.ndarray:
    """Columns 3, 5 and 6 of the lines in ``chunk``, a word in the third as -1."""
    for word in _LOG_WORDS:
        if word in chunk:
            chunk = chunk.replace(word, b"-1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = np.loadtxt(io.BytesIO(chunk), dtype=np.int64, ndmin=2, usecols=(2, 4, 5))
    if a.size and (a[:, 0] < -1).any():                   # a latency pgbench never writes
        raise ValueError("negative latency")
    return a.reshape(-1, 3)


def parse_transaction_logs(paths: list[str]) -> dict[str, Any]:
    """Latency percentiles and per-second series from pgbench ``-l`` files
    (:func:`read_transactions`)."""
    ends, lats, bad = read_transactions(paths)
    failed = int(bad.sum())
    if not (~bad).any():
        return {"n": 0, "failed": failed}
    lat_ms = lats[~bad] / 1000.0
    end_us = ends[~bad]
    t0 = int(end_us.min() // 1_000_000)
    sec = (end_us // 1_000_000 - t0).astype(np.int64)
    nsec = int(sec.max()) + 1
    counts = np.bincount(sec, minlength=nsec).astype(float)
    # per-second median latency
    order = np.argsort(sec, kind="stable")
    sec_sorted, lat_sorted = sec[order], lat_ms[order]
    bounds = np.searchsorted(sec_sorted, np.arange(nsec + 1))
    p50s = [float(np.median(lat_sorted[bounds[i]:bounds[i + 1]])) if bounds[i + 1] > bounds[i]
            else float("nan") for i in range(nsec)]
    return {
        "n": int(lat_ms.size), "failed": failed,
        "latency_ms": {
            "mean": float(lat_ms.mean()), "p50": float(np.percentile(lat_ms, 50)),
            "p95": float(np.percentile(lat_ms, 95)), "p99": float(np.percentile(lat_ms, 99)),
            "max": float(lat_ms.max()), "stddev": float(lat_ms.std()),
            "cdf": [[q, float(v)] for q, v in zip(CDF_QUANTILES,
                                                  np.quantile(lat_ms, CDF_QUANTILES))],
        },
        "tps_series": counts.tolist(), "latency_p50_series": p50s,
        "first_epoch": t0,
    }


def trim_series(tps: list[float], p50: list[float]) -> tuple[list[float], list[float]]:
    """Drop the first and last seconds, which are partial: seconds are counted on the clock
    (parse_transaction_logs), and a run starts and ends inside one.  Kept only when fewer
    than 3 seconds were seen.  (Until November 24 they were kept up to 4 seconds, so a 3 s
    run's rate counted a partial first second: 3,296 tps for a tpcb-like trial whose whole
    seconds ran at 4,417 and 4,674.)"""
    if len(tps) >= 3:
        return tps[1:-1], p50[1:-1]
    return tps, p50


def run_pgbench(pgbench: str, conninfo: str, *, builtin: str | None = None,
                scripts: list[tuple[str, int]] | None = None, clients: int = 1,
                threads: int = 1, duration: float | None = None,
                transactions: int | None = None, rate: float | None = None,
                protocol: str = "prepared", defines: dict[str, Any] | None = None,
                extra_args: list[str] | None = None, log: bool = True,
                session_options: str | None = None,
                on_progress: Callable[[float, float], None] | None = None,
                stop_when: Callable[[list[float]], bool] | None = None,
                workdir: str | None = None, hosts: list | None = None,
                deadline_s: float | None = None) -> PgbenchResult:
    """Run one pgbench measurement (on ``hosts``, client hosts over SSH, when given:
    workloads/remote.py).

    ``stop_when`` receives the per-second progress TPS list and may end the run early
    (used by warm-ups that stop once the rate is steady); ``deadline_s`` stops it after
    that many seconds (local runs: a fixed-work trial's cap, workloads/captured.py).
    """
    if duration is None and transactions is None:
        raise ValueError("give duration or transactions")
    kw = dict(builtin=builtin, scripts=scripts, clients=clients, threads=threads,
              duration=duration, transactions=transactions, rate=rate, protocol=protocol,
              defines=defines, extra_args=extra_args)
    env = libpq_env(conninfo, session_options)
    logdir = tempfile.mkdtemp(prefix="pgbench-", dir=workdir)
    started = time.monotonic()
    try:                                  # the logs go on every path (error, Ctrl-C)
        if hosts:
            rc, stdout, lg_client, logs, progress, stopped = run_on_hosts(
                hosts, kw, env, log, logdir, on_progress=on_progress, stop_when=stop_when)
        else:
            prefix = os.path.join(logdir, "tx")
            cmd = [pgbench, *pgbench_args(**kw, log_prefix=prefix if log else None)]
            lg = run_loadgen(cmd, env=env, cwd=logdir, progress_re=PROGRESS_RE,
                             progress_on="stderr", stop_signal=signal.SIGINT, name="pgbench",
                             stop_when=stop_when, on_progress=on_progress,
                             deadline_s=deadline_s)
            rc, stdout, lg_client, progress, stopped = (lg.returncode, lg.stdout, lg.client,
                                                        lg.progress, lg.stopped_early)
            if rc != 0 and not stopped:
                raise pgbench_failed(lg.stderr_lines, rc)
            logs = sorted(glob.glob(prefix + ".*"))
        elapsed = time.monotonic() - started
        parsed = parse_transaction_logs(logs) if log else {"n": 0, "failed": 0}
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    m = re.search(r"tps = ([\d.]+)", stdout)
    summary_tps = float(m.group(1)) if m else None
    tps_series, p50_series = trim_series(parsed.get("tps_series", progress),
                                          parsed.get("latency_p50_series", []))
    n = parsed.get("n", 0)
    measured_s = float(len(parsed.get("tps_series", []))) or elapsed
    tps = float(np.mean(tps_series)) if tps_series else (summary_tps or 0.0)
    return PgbenchResult(
        transactions=n, failed=parsed.get("failed", 0), duration_s=measured_s, tps=tps,
        latency_ms=parsed.get("latency_ms", {}), tps_series=tps_series,
        latency_p50_series=p50_series, client=lg_client, summary_tps=summary_tps,
        returncode=rc)
