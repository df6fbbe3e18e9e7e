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


def user_cluster(inst, listen: str = ""):
    """A cluster set up like a user's own (its own port, socket and listen_addresses in
    postgresql.conf), not started; a generator for a pytest fixture (cleaned up after)."""
    from pgaccel.server.cluster import Cluster
    c = Cluster.create_throwaway(inst)
    with open(os.path.join(c.pgdata, "postgresql.conf"), "a") as f:
        f.write(f"\nport = {c.port}\nunix_socket_directories = '{c.sockdir}'\n"
                f"listen_addresses = '{listen}'\n")
    yield c
    c.cleanup()


def pg_ctl(c, *args: str) -> None:
    """pg_ctl on a cluster as its owner (starting or stopping it behind pgaccel's back)."""
    from pgaccel.server.osuser import as_user_kwargs
    r = subprocess.run([c.inst.path("pg_ctl"), "-D", c.pgdata, "-l", c.logfile, "-w", *args],
                       capture_output=True, text=True, **as_user_kwargs(c.user))
    assert r.returncode == 0, r.stderr
