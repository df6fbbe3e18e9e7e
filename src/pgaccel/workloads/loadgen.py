"""Run a load generator (pgbench, sysbench) as a child process and account for it.

Both tools print a progress line per second; this reads it as it comes (for progress bars
and for warm-ups that stop once the rate is steady, by signalling the process) and collects
the child's own CPU time and context switches with ``wait4``, so the load generator's cost
is never mixed with the server's.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import BenchError, Interrupted
from ..metrics.system import rusage_cpu


@dataclass
class LoadgenRun:
    returncode: int
    stdout: str
    stderr_lines: list[str] = field(default_factory=list)   # non-progress stderr lines
    progress: list[float] = field(default_factory=list)     # per-second rate from progress lines
    client: dict[str, Any] = field(default_factory=dict)     # client_cpu_s, client_ctx_switches
    stopped_early: bool = False


def run_loadgen(cmd: list[str], *, env: dict[str, str], cwd: str | None,
                progress_re: re.Pattern, progress_on: str = "stderr",
                stop_signal: int = signal.SIGINT, name: str = "",
                stop_when: Callable[[list[float]], bool] | None = None,
                on_progress: Callable[[float, float], None] | None = None,
                stdin_text: str | None = None,
                stop: Callable[[], None] | None = None,
                deadline_s: float | None = None) -> LoadgenRun:
    """Run ``cmd``; ``progress_re`` has groups (elapsed seconds, rate) and is matched on the
    ``progress_on`` stream.  ``stdin_text`` is written to the child's stdin (then closed);
    ``stop`` replaces sending ``stop_signal`` when ``stop_when`` fires (a load generator on
    another host).  ``deadline_s``: stopped as ``stop_when`` stops it once that many
    seconds have passed, whatever the progress lines say (pgbench -t prints them from its
    first thread only while that thread's clients run).  Raises Interrupted when the child died of SIGINT/SIGTERM that pgaccel
    did not send, BenchError when it could not start."""
    name = name or os.path.basename(cmd[0])
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                cwd=cwd, text=True,
                                stdin=subprocess.PIPE if stdin_text is not None else None)
    except OSError as e:
        raise BenchError(f"Could not run {name} ({cmd[0]}): {e}",
                         "Install it or point pgaccel at it (see README).") from None
    if stdin_text is not None and proc.stdin is not None:
        try:
            proc.stdin.write(stdin_text)
            proc.stdin.close()
        except OSError:
            pass
    run = LoadgenRun(returncode=0, stdout="")
    out_lines: list[str] = []
    stopped = threading.Event()

    def consume(stream, is_progress_stream: bool, sink: list[str]) -> None:
        for line in stream:
            m = progress_re.search(line) if is_progress_stream else None
            if not m:
                sink.append(line)
                continue
            if progress_on == "stdout":
                sink.append(line)
            rate = float(m.group(2))
            run.progress.append(rate)
            if on_progress:
                on_progress(float(m.group(1)), rate)
            if stop_when and not stopped.is_set() and stop_when(run.progress):
                halt()

    def halt() -> None:
        if stopped.is_set():
            return
        stopped.set()
        if stop is not None:
            threading.Thread(target=stop, daemon=True).start()
            return
        try:
            proc.send_signal(stop_signal)
        except ProcessLookupError:
            pass

    readers = [
        threading.Thread(target=consume, args=(proc.stdout, progress_on == "stdout", out_lines),
                         daemon=True),
        threading.Thread(target=consume, args=(proc.stderr, progress_on == "stderr",
                                               run.stderr_lines), daemon=True),
    ]
    for r in readers:
        r.start()
    timer = threading.Timer(deadline_s, halt) if deadline_s else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        _, status, ru = os.wait4(proc.pid, 0)
    except KeyboardInterrupt:
        proc.kill()
        proc.wait()
        raise
    finally:
        if timer is not None:
            timer.cancel()
    proc.returncode = run.returncode = os.waitstatus_to_exitcode(status)
    for r in readers:
        r.join(timeout=5)
    run.stdout = "".join(out_lines)
    run.client = rusage_cpu(ru)
    run.stopped_early = stopped.is_set()
    rc = run.returncode
    if rc < 0 and -rc in (signal.SIGINT, signal.SIGTERM) and not run.stopped_early:
        raise Interrupted(f"{name} was interrupted.", "Finished trials were kept.")
    return run
