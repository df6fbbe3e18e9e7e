"""Helpers shared by test modules (import as `from helpers import ...`)."""

from __future__ import annotations

import os
import subprocess
import sys

PGACCEL = [os.path.join(os.path.dirname(sys.executable), "pgaccel")]


def pgaccel(*args: str, timeout: float = 600, env: dict | None = None,
            check: bool = False) -> subprocess.CompletedProcess:
    """Run the installed `pgaccel` console script."""
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([*PGACCEL, *args], capture_output=True, text=True, timeout=timeout, env=e)
    if check and r.returncode != 0:
        raise AssertionError(f"pgaccel {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def postgres_processes_for(path: str) -> list[int]:
    """PIDs of postgres processes whose command line mentions ``path``."""
    import psutil
    pids = []
    for p in psutil.process_iter(["pid", "name", "cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
        except Exception:
            continue
        if path in cmd and ("postgres" in (p.info["name"] or "") or "postgres" in cmd.split(" ")[0]):
            pids.append(p.info["pid"])
    return pids


def settled_counter(ctx, sql: str) -> int:
    """A cumulative statistics counter once exited backends have flushed theirs: read it in
    one (rolled back) transaction until two reads 0.2 s apart agree."""
    import time
    last = None
    with ctx.connect() as conn:
        conn.autocommit = False
        for _ in range(50):
            conn.execute("SELECT pg_stat_clear_snapshot()")
            n = conn.execute(sql).fetchone()[0]
            if n == last:
                break
            last = n
            time.sleep(0.2)
        conn.rollback()
    return last
