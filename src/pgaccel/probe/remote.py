"""The server's own host over SSH (``--server-host ssh://[user@]host[:port]``).

When pgaccel (and the load generator) run on another machine than the server, the DSN
gives the server's PostgreSQL counters but not its machine.  With ``--server-host``:

* **facts**: the files ``probe/host.py`` reads (cpuinfo, meminfo, huge pages, THP, block
  devices, sysctls, the postmaster's cgroup limits) are copied into a local tree with the
  same layout and probed by the same code as this machine's (:func:`probe_server_host`);
* **costs per trial**: ``metrics/serverhost.py``.

The postmaster is found from the server side: the backend of pgaccel's own connection
(``pg_backend_pid()``) is a child of it.  The SSH is ``server/ssh.py``'s.
"""

from __future__ import annotations

import base64
import os
import shlex
import tempfile

from ..errors import BenchError
from .facts import HostFacts
from .cgroup import cgroup_ancestors, parse_proc_cgroup
from .host import SYSCTLS, probe_host

_FILES = ["/proc/cpuinfo", "/proc/meminfo", "/proc/sys/kernel/osrelease",
          "/proc/sys/kernel/io_uring_disabled",
          "/sys/kernel/mm/transparent_hugepage/enabled",
          "/sys/kernel/mm/transparent_hugepage/defrag",
          "/sys/kernel/mm/hugepages/hugepages-*/*_hugepages",
          "/sys/block/*/queue/rotational", "/sys/block/*/queue/scheduler",
          "/sys/block/*/queue/read_ahead_kb", "/sys/block/*/size",
          "/sys/block/*/device/model", "/sys/devices/system/node/node[0-9]*/cpulist",
          "/sys/fs/cgroup/cgroup.controllers",
          *("/proc/sys/" + s.replace(".", "/") for s in SYSCTLS)]
_CGROUP_FILES = ("memory.max", "cpu.max", "cpuset.cpus.effective", "memory.limit_in_bytes",
                 "cpu.cfs_quota_us", "cpu.cfs_period_us", "cpuset.cpus")


def _dump_script(paths: list[str]) -> str:
    """sh that prints ``@@file PATH BASE64`` for every readable file the globs match."""
    globs = " ".join(paths)
    return (f"for f in {globs}; do [ -f \"$f\" ] && [ -r \"$f\" ] && "
            "printf '@@file %s %s\\n' \"$f\" \"$(base64 -w0 < \"$f\" 2>/dev/null)\"; done; "
            "printf '@@file /arch %s\\n' \"$(uname -m | base64 -w0)\"")


def parse_dump(text: str) -> dict[str, bytes]:
    out = {}
    for line in text.splitlines():
        if line.startswith("@@file "):
            parts = line.split(" ", 2)
            if len(parts) == 3:
                try:
                    out[parts[1]] = base64.b64decode(parts[2])
                except ValueError:
                    continue
    return out


def write_tree(files: dict[str, bytes], root: str) -> None:
    for path, data in files.items():
        dest = os.path.join(root, path.lstrip("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
            f.write(data)


def postmaster_pid(host, backend_pid: int) -> int:
    """The postmaster of ``backend_pid`` on ``host`` (its parent)."""
    r = host.run(f"sed 's/.*) //' /proc/{int(backend_pid)}/stat | cut -d' ' -f2")
    try:
        return int(r.stdout.strip())
    except ValueError:
        raise BenchError(f"Could not find the server's processes on {host.label}: "
                         f"{(r.stderr.strip() or r.stdout.strip() or 'no answer')[:200]}",
                         "Check that --server-host names the machine the DSN's server runs "
                         "on.") from None


def probe_server_host(host, pm: int) -> HostFacts:
    """The server host's facts, through ``probe_host`` on a local copy of its files."""
    first = parse_dump(host.run(_dump_script(_FILES + [f"/proc/{pm}/cgroup"])).stdout)
    membership = parse_proc_cgroup((first.get(f"/proc/{pm}/cgroup") or b"").decode())
    dirs = ["/sys/fs/cgroup"] + [f"/sys/fs/cgroup/{c}" for c in (
        "memory", "cpu", "cpu,cpuacct", "cpuset") + tuple(ctl for ctl, _ in membership.values())
        if c]
    wanted = sorted({os.path.join(d, a.lstrip("/"), f) for d in dirs
                     for _ctl, path in membership.values() for a in cgroup_ancestors(path)
                     for f in _CGROUP_FILES})
    second = parse_dump(host.run(_dump_script([shlex.quote(w) for w in wanted])).stdout) \
        if wanted else {}
    files = {**first, **second}
    if f"/proc/{pm}/cgroup" in files:
        files["/proc/self/cgroup"] = files.pop(f"/proc/{pm}/cgroup")
    arch = (files.pop("/arch", b"") or b"").decode().strip() or None
    with tempfile.TemporaryDirectory(prefix="pgaccel-serverhost-") as root:
        write_tree(files, root)
        return probe_host(root=root, arch=arch)
