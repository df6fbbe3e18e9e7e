"""The sysbench program: running it against the bench database, and what its output says
(totals, the per-second report lines, latency percentiles from ``--histogram``).  The
workloads are in ``sysbench.py``."""

from __future__ import annotations

import re
import shutil
import signal
import tempfile
from typing import Any, Callable

from ..errors import BenchError, DiskFull
from .base import BenchContext
from .loadgen import run_loadgen
from .pgbench import libpq_env

SYSBENCH_BIN = "sysbench"

_REPORT_RE = re.compile(r"^\[\s*([\d.]+)s\s*\].*?tps:\s*([\d.]+).*?qps:\s*([\d.]+)"
                        r"(?:.*?lat \(ms,[\d.]+%\):\s*([\d.]+))?")
_HIST_RE = re.compile(r"^\s*([\d.]+)\s+\|\**\s+(\d+)\s*$")


def parse_sysbench_output(text: str) -> dict[str, Any]:
    """Totals, per-second series and latency percentiles from ``sysbench ... run`` output."""
    def grab(pattern: str, cast: Callable[[str], Any] = float) -> Any:
        m = re.search(pattern, text, re.M)
        return cast(m.group(1)) if m else None

    tps, p50, qps = [], [], []
    hist: list[tuple[float, int]] = []
    for line in text.splitlines():
        m = _REPORT_RE.match(line)
        if m:
            tps.append(float(m.group(2)))
            qps.append(float(m.group(3)))
            p50.append(float(m.group(4)) if m.group(4) else float("nan"))
            continue
        h = _HIST_RE.match(line)
        if h:
            hist.append((float(h.group(1)), int(h.group(2))))
    lat: dict[str, float] = {}
    for key, pat in (("min", r"^\s*min:\s+([\d.]+)"), ("mean", r"^\s*avg:\s+([\d.]+)"),
                     ("max", r"^\s*max:\s+([\d.]+)")):
        v = grab(pat)
        if v is not None:
            lat[key] = v
    lat.update(histogram_percentiles(hist, (50, 95, 99)))
    return {
        "transactions": grab(r"^\s*transactions:\s+(\d+)", int) or 0,
        "queries": grab(r"^\s*queries:\s+(\d+)", int) or 0,
        "ignored_errors": grab(r"^\s*ignored errors:\s+(\d+)", int) or 0,
        "reconnects": grab(r"^\s*reconnects:\s+(\d+)", int) or 0,
        "total_time_s": grab(r"^\s*total time:\s+([\d.]+)s"),
        "tps_series": tps, "qps_series": qps, "latency_p50_series": p50,
        "latency_ms": lat,
    }


def histogram_percentiles(hist: list[tuple[float, int]], pcts: tuple[int, ...]
                          ) -> dict[str, float]:
    """Percentiles from sysbench's latency histogram (bucket value, count)."""
    total = sum(c for _, c in hist)
    if not total:
        return {}
    out: dict[str, float] = {}
    for p in pcts:
        need, seen = total * p / 100.0, 0
        for value, count in hist:
            seen += count
            if seen >= need:
                out[f"p{p}"] = value
                break
    return out


def sysbench_connection_args(ctx: BenchContext) -> list[str]:
    """--pgsql-* flags naming the bench database (host may be a unix-socket directory)."""
    with ctx.connect() as conn:
        info = conn.info
        host, port, user, db = info.host, info.port, info.user, info.dbname
    return [f"--pgsql-host={host}", f"--pgsql-port={port}", f"--pgsql-user={user}",
            f"--pgsql-db={db}"]


def run_sysbench(ctx: BenchContext, test: str, args: list[str], *, command: str = "run",
                 stop_when: Callable[[list[float]], bool] | None = None,
                 on_progress: Callable[[float, float], None] | None = None
                 ) -> tuple[str, dict[str, Any], bool]:
    """Run sysbench; returns (stdout, client rusage, stopped early)."""
    exe = shutil.which(SYSBENCH_BIN)
    if not exe:
        raise BenchError("sysbench is not installed.",
                         "Install it (Debian/Ubuntu: `apt-get install sysbench`) or use "
                         "--option driver=pgbench, which runs the same statements.")
    cmd = [exe, test, "--db-driver=pgsql", *sysbench_connection_args(ctx), *args, command]
    env = libpq_env(ctx.bench_conninfo(), ctx.target.session_options)
    lg = run_loadgen(cmd, env=env, cwd=ctx.workdir or tempfile.gettempdir(),
                     progress_re=_REPORT_RE, progress_on="stdout", stop_signal=signal.SIGTERM,
                     name="sysbench", stop_when=stop_when, on_progress=on_progress)
    rc, errs = lg.returncode, lg.stderr_lines
    out = lg.stdout
    if rc != 0 and not lg.stopped_early:
        text = out + "".join(errs)
        if "No space left on device" in text:
            raise DiskFull("The disk filled up while sysbench was writing.",
                           "Free space or use fewer/smaller tables.")
        detail = next((ln.strip() for ln in text.splitlines()
                       if re.search(r"FATAL|error|failed", ln, re.I)), f"exit code {rc}")
        raise BenchError(f"sysbench {test} {command} failed: {detail}",
                         "Check that the server accepts connections and that the sbtest "
                         "tables exist (pgaccel prepares them).")
    return out, lg.client, lg.stopped_early
