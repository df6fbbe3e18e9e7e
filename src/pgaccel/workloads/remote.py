"""pgbench on separate load hosts (``--client-host ssh://[user@]host[:port]``).

A load generator on the server's own host takes CPU the server could use (study 003 saw
about 20% and a bent curve from 6 clients on).  With client hosts, pgaccel starts pgbench on
each of them over SSH, splits the clients between them, and brings back what it needs: the
progress lines (live, on stderr), pgbench's summary, the per-transaction logs (gzip'd tar,
base64 on stdout), the client process's CPU (the shell's ``times`` for its children) and
the host's CPU (``/proc/stat`` before and after).  The server side is measured as always:
through the DSN, and from /proc when the server runs on this machine.

SSH is the system's client (``ssh``, or the command in ``$PGACCEL_SSH``, e.g. ``ssh -F
FILE``) with ``BatchMode``: keys, agents and known_hosts are the user's own; pgaccel never
asks for or passes an SSH password.  A database password travels on the SSH channel's
stdin (read by the remote shell into ``PGPASSWORD``), never on a command line.

The command built for a host (:func:`remote_script`), the client split and the parsing of
what comes back are pure and table-tested; :class:`ClientHost` runs things.
"""

from __future__ import annotations

import base64
import io
import os
import re
import shlex
import tarfile
import threading
import uuid
from pathlib import Path
from typing import Any

from ..errors import BenchError, UsageError
from ..metrics.serverhost import cpu_busy_total
from ..server.ssh import SshHost as ClientHost
from .loadgen import run_loadgen
from .pgbench_cmd import PROGRESS_RE, pgbench_args, pgbench_failed

MARK = "@@pgaccel"
_SAFE_ENV = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGUSER", "PGDATABASE", "PGOPTIONS",
             "PGSSLMODE", "PGAPPNAME", "PGCONNECT_TIMEOUT", "PGSSLROOTCERT", "PGTARGETSESSIONATTRS")


# -- pure parts --------------------------------------------------------------------------------

def split_clients(clients: int, hosts: int) -> list[int]:
    """``clients`` spread over ``hosts`` as evenly as possible, the larger shares first;
    a host gets none when there are fewer clients than hosts."""
    q, r = divmod(clients, hosts)
    return [q + (1 if i < r else 0) for i in range(hosts)]


def remote_env(env: dict[str, str]) -> tuple[dict[str, str], str]:
    """(the libpq variables the remote command line may carry, the password for stdin).
    A password never goes on the command line; a host that is this machine's socket or
    loopback cannot be reached from another host."""
    host = env.get("PGHOST", "")
    if not host or host.startswith("/") or host in ("localhost", "127.0.0.1", "::1"):
        raise UsageError("With --client-host the server must be named by an address the "
                         f"client hosts can reach; the DSN says host={host or '(socket)'}.",
                         "Give --dsn with host=ADDRESS (and listen_addresses on the server "
                         "covering it).")
    return ({k: v for k, v in env.items() if k in _SAFE_ENV}, env.get("PGPASSWORD", ""))


def remote_script(pgbench_args: list[str], env: dict[str, str], tag: str,
                  scripts: dict[str, str], logs: bool) -> str:
    """The sh script run on a client host: a private directory, the scripts written into
    it, the password read from stdin, pgbench run with ``pgbench_args`` (paths of
    ``scripts`` given as their names), then the markers :func:`parse_output` reads."""
    d = f"/tmp/pgaccel-{tag}"
    lines = [f"d={shlex.quote(d)}", 'mkdir -m 700 "$d" || exit 97',
             "trap 'rm -rf \"$d\"' EXIT INT TERM", 'cd "$d" || exit 97',
             "IFS= read -r PGPASSWORD || true",
             'if [ -n "$PGPASSWORD" ]; then export PGPASSWORD; else unset PGPASSWORD; fi']
    for name, text in scripts.items():
        b64 = base64.b64encode(text.encode()).decode()
        lines.append(f"printf %s {b64} | base64 -d > {shlex.quote(name)}")
    envs = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
    lines += [f'echo "{MARK}-stat0 $(head -n1 /proc/stat)"',
              f"env {envs} pgbench " + " ".join(shlex.quote(a) for a in pgbench_args)
              + " < /dev/null",
              "rc=$?",
              f'echo "{MARK}-stat1 $(head -n1 /proc/stat)"',
              f'echo "{MARK}-times"', "times",
              f'echo "{MARK}-rc $rc"']
    if logs:
        lines += [f'echo "{MARK}-logs $(tar czf - tx.* 2>/dev/null | base64 | tr -d \'\\n\')"']
    lines.append("exit $rc")
    return "\n".join(lines)


_TIME = re.compile(r"(\d+)m([\d.]+)s")


def _seconds(text: str) -> float:
    return sum(int(m) * 60 + float(s) for m, s in _TIME.findall(text))


def parse_output(stdout: str) -> dict[str, Any]:
    """pgbench's own stdout, the client CPU (children's user+sys from ``times``), the
    host's CPU utilisation over the run, pgbench's exit code and the log files."""
    out: dict[str, Any] = {"stdout": "", "client_cpu_s": None, "host_cpu_util": None,
                           "rc": None, "logs": {}}
    body, stat0, stat1 = [], None, None
    lines = stdout.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(f"{MARK}-stat0 "):
            stat0 = line.split(" ", 1)[1]
        elif line.startswith(f"{MARK}-stat1 "):
            stat1 = line.split(" ", 1)[1]
        elif line == f"{MARK}-times":
            times = lines[i + 1:i + 3]
            if len(times) == 2:
                out["client_cpu_s"] = _seconds(times[1])
            i += 2
        elif line.startswith(f"{MARK}-rc "):
            out["rc"] = int(line.split()[1])
        elif line.startswith(f"{MARK}-logs"):
            data = line[len(f"{MARK}-logs"):].strip()
            if data:
                with tarfile.open(fileobj=io.BytesIO(base64.b64decode(data)), mode="r:gz") as t:
                    for m in t.getmembers():
                        f = t.extractfile(m)
                        if f is not None and m.isfile():
                            out["logs"][os.path.basename(m.name)] = f.read()
        else:
            body.append(line)
        i += 1
    out["stdout"] = "\n".join(body) + ("\n" if body else "")
    if stat0 and stat1:
        b0, t0 = cpu_busy_total(stat0.split()[1:])
        b1, t1 = cpu_busy_total(stat1.split()[1:])
        out["host_cpu_util"] = (b1 - b0) / (t1 - t0) if t1 > t0 else None
    return out


def new_tag() -> str:
    return uuid.uuid4().hex[:12]


# -- checks before a run -----------------------------------------------------------------------

def check_hosts(hosts: list[ClientHost]) -> dict[str, str]:
    """Every host answers over ssh and has pgbench; host label -> pgbench's version."""
    versions = {}
    for h in hosts:
        r = h.run("command -v pgbench >/dev/null 2>&1 && pgbench --version")
        if r.returncode != 0:
            raise BenchError(f"pgbench is not installed on client host {h.label}.",
                             f"Install it there: `{h.ssh_hint} sudo apt-get install -y "
                             "postgresql-client` (Debian/Ubuntu; a version at least the "
                             "server's is best).")
        versions[h.label] = r.stdout.strip()
    return versions


def round_trip_ms(h: ClientHost, env: dict[str, str]) -> float | None:
    """The mean latency of ``SELECT 1`` from ``h`` (pgbench, one client, 300 queries after a
    connection): the network round trip plus a trivial query."""
    safe, password = remote_env(env)
    script = remote_script(["-n", "-c", "1", "-j", "1", "-t", "300", "-M", "prepared",
                            "-f", "rtt.sql"], safe, new_tag(), {"rtt.sql": "SELECT 1;\n"},
                           logs=False)
    r = h.run(script, stdin=password + "\n")
    got = parse_output(r.stdout)
    m = re.search(r"latency average = ([\d.]+) ms", got["stdout"])
    if r.returncode != 0 or not m:
        err = [x for x in r.stderr.strip().splitlines() if x.strip()]
        why = next((x for x in err if "failed:" in x or "FATAL" in x),
                   err[-1] if err else f"exit code {r.returncode}")
        raise BenchError(f"pgbench on client host {h.label} could not reach the server: {why}",
                         "Check that the DSN's host and port are reachable from that host "
                         "and that pg_hba.conf lets it in.")
    return float(m.group(1))


# -- a measurement on the hosts ------------------------------------------------------------------

def run_on_hosts(hosts: list[ClientHost], kw: dict[str, Any], env: dict[str, str], log: bool,
                 logdir: str, *, on_progress=None, stop_when=None):
    """pgbench on every host at once, the clients split between them; the result as
    ``run_pgbench`` uses it: (rc, stdout with the summed ``tps = ``, client dict, local
    paths of every host's transaction logs, the first host's progress, stopped early)."""
    safe, password = remote_env(env)
    shares = split_clients(int(kw["clients"]), len(hosts))
    tag = new_tag()
    runs: list[Any] = [None] * len(hosts)
    errors: list[BaseException] = []

    def stopper(h: ClientHost, tag_i: str):
        def stop() -> None:
            # only the pgbench process (not the shells whose command lines hold the tag:
            # the bracket keeps pkill's own from matching); pgbench turns -D's "=" into a
            # NUL in its argv, which pkill sees as a space
            try:
                h.run(f"pkill -INT -f '^[^ ]*pgbench .*pgaccel_ta[g].{tag_i}' || true",
                      timeout=30)
            except BenchError:
                pass                # the run ends at its duration anyway
        return stop
    stops = [stopper(h, f"{tag}{i}") for i, h in enumerate(hosts)]

    def one(i: int) -> None:
        h, c = hosts[i], shares[i]
        scripts = {f"s{j}.sql": Path(path).read_text()
                   for j, (path, _w) in enumerate(kw.get("scripts") or [])}
        args = pgbench_args(**{**kw, "clients": c, "threads": min(int(kw["threads"]), c),
                               "scripts": [(f"s{j}.sql", w) for j, (_p, w)
                                           in enumerate(kw.get("scripts") or [])],
                               "defines": {**(kw.get("defines") or {}),
                                           "pgaccel_tag": f"{tag}{i}"}},
                            log_prefix="tx" if log else None)
        script = remote_script(args, safe, f"{tag}{i}", scripts, logs=log)

        stop = stops[i]
        try:
            runs[i] = run_loadgen(h.command(script), env=dict(os.environ), cwd=None,
                                  progress_re=PROGRESS_RE, progress_on="stderr",
                                  name=f"pgbench on {h.label}", stdin_text=password + "\n",
                                  stop_when=stop_when, stop=stop,
                                  on_progress=on_progress if i == 0 else None)
        except BaseException as e:      # noqa: BLE001 - re-raised in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,), daemon=True)
               for i in range(len(hosts)) if shares[i] > 0]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException:       # Ctrl-C: stop every host's pgbench, so its ssh ends too
        for stop in stops:
            stop()
        for t in threads:
            t.join(timeout=30)
        raise
    if errors:
        raise errors[0]
    logs, per_host, tps_sum, rc_all = [], [], 0.0, 0
    stopped = all(r.stopped_early for r in runs if r is not None)
    for i, r in enumerate(runs):
        if r is None:
            continue
        h = hosts[i]
        if r.returncode == 255:
            err = ("".join(r.stderr_lines).strip().splitlines() or ["ssh failed"])[-1]
            raise BenchError(f"Could not reach client host {h.label} over ssh: {err}",
                             f"Check that `{h.ssh_hint} true` works without a prompt.")
        got = parse_output(r.stdout)
        rc = got["rc"] if got["rc"] is not None else r.returncode
        if rc != 0 and not r.stopped_early:
            raise pgbench_failed(r.stderr_lines + [f"(on client host {h.label})\n"], rc)
        rc_all = rc_all or rc
        for name, data in got["logs"].items():
            path = os.path.join(logdir, f"h{i}-{name}")
            with open(path, "wb") as f:
                f.write(data)
            logs.append(path)
        m = re.search(r"tps = ([\d.]+)", got["stdout"])
        tps_sum += float(m.group(1)) if m else 0.0
        per_host.append({"host": h.label, "clients": shares[i],
                         "client_cpu_s": got["client_cpu_s"],
                         "host_cpu_util": got["host_cpu_util"],
                         "tps": float(m.group(1)) if m else None})
    cpu = [p["client_cpu_s"] for p in per_host if p["client_cpu_s"] is not None]
    client = {"client_cpu_s": sum(cpu) if cpu else None, "client_hosts": per_host}
    first = next(r for r in runs if r is not None)
    return (rc_all, f"tps = {tps_sum:.6f}\n", client, sorted(logs), first.progress, stopped)
