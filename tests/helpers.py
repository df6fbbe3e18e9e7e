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


FRESH_RECURSION_LIMIT = 1000     # sys.getrecursionlimit() in a new CPython process


def pgaccel_inprocess(*args: str, env: dict, cwd: str | None = None
                      ) -> subprocess.CompletedProcess:
    """``pgaccel ARGS`` through the console script's own entry point (``cli.main``, the
    same error handling and exit codes) in this process: for cases that fail before
    anything starts, where a fresh interpreter would cost a second each and test nothing
    more.  The environment is ``env`` alone while it runs, stdin is /dev/null as in a
    pipeline, and an exception that escapes is returned as its traceback on stderr, where a
    test's ``"Traceback" not in`` finds it.  Signals, kill -9 and runs stay subprocesses."""
    import contextlib
    import io
    import signal
    import tempfile
    import traceback
    from pgaccel.cli import main
    saved = (dict(os.environ), os.getcwd(), list(sys.argv), tempfile.tempdir,
             signal.getsignal(signal.SIGTERM), sys.stdin, sys.getrecursionlimit())
    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    try:
        os.environ.clear()
        os.environ.update(env)
        tempfile.tempdir = None                  # TMPDIR read again, as a new process would
        # a new interpreter's limit: a test before may have raised it (test_layers does),
        # and a spec nested 3,000 deep must fail here as it does there
        sys.setrecursionlimit(FRESH_RECURSION_LIMIT)
        if cwd:
            os.chdir(cwd)
        sys.argv = ["pgaccel", *args]
        with open(os.devnull) as null, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            sys.stdin = null
            try:
                main()
            except SystemExit as e:
                code = e.code
            except BaseException:                # noqa: BLE001 - a test reads it
                err.write(traceback.format_exc())
                code = 1
    finally:
        env0, cwd0, argv0, tmp0, term0, stdin0, limit0 = saved
        sys.setrecursionlimit(limit0)
        os.environ.clear()
        os.environ.update(env0)
        os.chdir(cwd0)
        sys.argv, tempfile.tempdir, sys.stdin = argv0, tmp0, stdin0
        signal.signal(signal.SIGTERM, term0)
    if code is None:
        code = 0
    elif not isinstance(code, int):              # sys.exit("text"): printed, exit 1
        err.write(str(code))
        code = 1
    return subprocess.CompletedProcess(["pgaccel", *args], code, out.getvalue(),
                                       err.getvalue())
