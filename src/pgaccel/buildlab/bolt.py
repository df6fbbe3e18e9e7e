"""The bolt flavor's post-link step: llvm-bolt (Debian's bolt-16) instruments the installed
postgres executable, the instrumented server runs the same training workloads as a PGO build
(every process writes its own profile when it exits, so forked backends count), and llvm-bolt
rewrites the original executable's code layout from the merged profile.  Instrumentation needs
no hardware counters, which is why it is the mode used here (this VM has none)."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from typing import IO, Callable

from .apt import BuildError

BOLT_TOOLS = ("llvm-bolt-16", "merge-fdata-16")
# the layout passes BOLT's own documentation recommends for large server binaries
OPTIMIZE = ("-reorder-blocks=ext-tsp", "-reorder-functions=hfsort+", "-split-functions",
            "-split-all-cold", "-split-eh", "-icf=1", "-dyno-stats", "-use-gnu-stack")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise BuildError(f"{name} is not installed (Debian package bolt-16).",
                         "Run `apt-get install bolt-16`; it is available for amd64 and arm64.")
    # llvm-bolt finds its instrumentation runtime beside its real location
    # (/usr/lib/llvm-16/lib), not beside the /usr/bin symlink
    return os.path.realpath(path)


def _run(args: list[str], log: IO[str], what: str, stdout: IO | None = None) -> None:
    log.write(f"\n$ {' '.join(args)}\n")
    log.flush()
    r = subprocess.run(args, stdout=stdout or log, stderr=log if stdout else subprocess.STDOUT,
                       stdin=subprocess.DEVNULL, text=True)
    if r.returncode != 0:
        raise BuildError(f"{what} failed (exit {r.returncode}); llvm-bolt's message is in the "
                         "build log.", "BOLT needs an executable linked with --emit-relocs; "
                         "try the lto or pgo flavor instead.")


def optimize(prefix: str, work: str, log: IO[str], say: Callable[[str], None],
             train: Callable[[str, str], dict]) -> dict:
    """Replace ``prefix``/bin/postgres by its BOLT-optimised layout.  ``train(prefix,
    profile_dir)`` runs the training workloads on the installation at ``prefix``.  Returns
    what ran and what BOLT reported, for the build's manifest."""
    bolt, merge = (_tool(t) for t in BOLT_TOOLS)
    exe = os.path.join(prefix, "bin", "postgres")
    original = os.path.join(work, "postgres.linked")
    shutil.move(exe, original)
    profile = os.path.join(work, "bolt-profile")
    os.makedirs(profile, exist_ok=True)
    say("bolt: instrumenting postgres")
    _run([bolt, original, "-instrument", "-o", exe,
          f"-instrumentation-file={profile}/prof.fdata", "-instrumentation-file-append-pid",
          # bolt-16's indirect-call hook crashed about every second backend that ran
          # sysbench's prepare (segfault inside the runtime, seen here); without call
          # instrumentation 5 of 5 ran clean.  Block layout and splitting still get
          # their branch profile; function order gets less of the call graph.
          "-instrument-calls=false",
          f"-instrumentation-binpath={exe}"], log, "llvm-bolt -instrument")
    training = train(prefix, profile)
    files = sorted(glob.glob(os.path.join(profile, "*.fdata")))
    if not files:
        raise BuildError("The instrumented server wrote no BOLT profile during training.",
                         None)
    merged = os.path.join(work, "merged.fdata")
    say(f"bolt: merging {len(files)} profiles and rewriting the layout")
    with open(merged, "w") as out:
        _run([merge, *files], log, "merge-fdata", stdout=out)
    start = log.tell()
    _run([bolt, original, "-o", exe, f"-data={merged}", *OPTIMIZE], log, "llvm-bolt")
    os.chmod(exe, 0o755)            # llvm-bolt writes its output world-writable
    log.flush()
    with open(log.name, errors="replace") as f:
        f.seek(start)
        report = f.read()
    return {**training, "bolt": {"profiles": len(files), "options": list(OPTIMIZE),
                                 **_dyno_summary(report)}}


def _dyno_summary(report: str) -> dict:
    """The headline of llvm-bolt's -dyno-stats: how much the taken branches fell."""
    out = {}
    m = re.search(r"BOLT-INFO: (\d+) out of (\d+) functions in the binary \((\S+)%\) have "
                  r"non-empty execution profile", report)
    if m:
        out["functions_profiled"] = int(m.group(1))
        out["functions_total"] = int(m.group(2))
    m = re.search(r"^\s*([\d]+) : taken branches \(([-+\d.]+)%\)", report, re.M)
    if m:
        out["taken_branches_change_pct"] = float(m.group(2))
    return out
