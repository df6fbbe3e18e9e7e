"""Last-resort cleanup for a throwaway cluster, or a directory, whose owner process died.

Started by :class:`pgaccel.server.cluster.Cluster` in its own session with the read end of
a pipe whose write end only the owner holds.  When the read returns end-of-file the owner
has exited (normally, by a signal, or by kill -9).  If the cluster directory still exists
the owner did not clean up: stop the postmaster (SIGQUIT = immediate shutdown, then SIGKILL)
and remove the directory, unless the owner wrote ``k`` (``--keep``) first.  With PGDATA
empty there is no server: only the directory goes (``workloads/pgbench_logs.reaped_root``: the
directories pgbench's logs go to).

Usage: python -m pgaccel.server.reaper FD BASE_DIR PGDATA
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time


def _postmaster_pid(pgdata: str) -> int | None:
    try:
        with open(os.path.join(pgdata, "postmaster.pid")) as f:
            return int(f.readline().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def stop_postmaster(pgdata: str, timeout: float = 20.0) -> None:
    pid = _postmaster_pid(pgdata)
    if not pid or not _alive(pid):
        return
    for sig, wait in ((signal.SIGQUIT, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if not _alive(pid):
                return
            time.sleep(0.1)


def spawn(base: str, pgdata: str) -> tuple[subprocess.Popen, int]:
    """A reaper for ``base`` (and the server in ``pgdata``, if any) in its own session; the
    write end of its pipe, which the caller holds until it ends (closing it, or dying, lets
    the reaper run)."""
    r, w = os.pipe()
    try:
        p = subprocess.Popen([sys.executable, "-m", "pgaccel.server.reaper", str(r), base,
                              pgdata], pass_fds=(r,), start_new_session=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    except OSError:
        os.close(w)
        raise
    finally:
        os.close(r)
    return p, w


def main(argv: list[str]) -> int:
    fd, base, pgdata = int(argv[0]), argv[1], argv[2]
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    data = b""
    while True:
        try:
            chunk = os.read(fd, 64)
        except InterruptedError:
            continue
        if not chunk:
            break
        data += chunk
    keep = b"k" in data
    if pgdata:
        stop_postmaster(pgdata)
    if base and os.path.isdir(base) and not keep:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
