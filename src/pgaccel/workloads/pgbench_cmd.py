"""pgbench's command line and what its output means, shared by the local runner
(``pgbench.py``) and the one on client hosts (``remote.py``)."""

from __future__ import annotations

import re
from typing import Any

from ..errors import BenchError

PROGRESS_RE = re.compile(r"progress: ([\d.]+) s, ([\d.]+) tps")


def pgbench_args(*, builtin: str | None, scripts: list[tuple[str, int]] | None,
                 clients: int, threads: int, duration: float | None,
                 transactions: int | None, rate: float | None, protocol: str,
                 defines: dict[str, Any] | None, log_prefix: str | None,
                 extra_args: list[str] | None, progress: bool = True) -> list[str]:
    """pgbench's arguments (without the program) for one measurement; ``progress``: a
    progress line a second on stderr (``-P 1``)."""
    args = ["-n", "-c", str(clients), "-j", str(max(1, min(threads, clients))),
            "-M", protocol] + (["-P", "1"] if progress else [])
    args += (["-T", str(int(round(duration)))] if duration is not None
             else ["-t", str(transactions)])
    if rate:
        args += ["-R", str(rate)]
    if builtin:
        args += ["-b", builtin]
    for path, weight in scripts or []:
        args += ["-f", f"{path}@{weight}"]
    for k, v in (defines or {}).items():
        args += ["-D", f"{k}={v}"]
    if log_prefix:
        args += ["-l", f"--log-prefix={log_prefix}"]
    return args + list(extra_args or [])


def pgbench_failed(stderr_lines: list[str], rc: int) -> BenchError:
    msg = "".join(stderr_lines).strip().splitlines()
    detail = next((m for m in msg if "error" in m.lower() or "fatal" in m.lower()),
                  msg[-1] if msg else f"exit code {rc}")
    return BenchError(f"pgbench failed: {detail}",
                      "Check that the benchmark data exists (pgaccel prepares it) and "
                      "that the server accepts this many connections (max_connections).")
