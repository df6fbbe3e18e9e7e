"""`--client-host` for a command: the hosts parsed and refused where they cannot work, then
checked and measured once the server is open (workloads/remote.py does the SSH)."""

from __future__ import annotations

from typing import Any

from ..errors import UsageError


def client_hosts_for(urls: tuple[str, ...] | list[str], workloads: list, dsn: str | None,
                     ) -> list:
    """The parsed ``--client-host`` values; refused without ``--dsn`` (a throwaway or
    ``--pgdata`` cluster listens on this machine only) or for a workload that cannot run
    its load elsewhere."""
    if not urls:
        return []
    from ..workloads.remote import ClientHost
    hosts = [ClientHost.parse(u) for u in urls]
    if not dsn:
        raise UsageError("--client-host needs --dsn: a throwaway or --pgdata cluster listens "
                         "on this machine only.",
                         "Start the server where the load hosts reach it, then give --dsn "
                         "host=ADDRESS ... .")
    bad = [w.name for w in workloads if not getattr(w, "remote_clients", False)]
    if bad:
        raise UsageError(f"{', '.join(bad)} cannot run from client hosts yet: --client-host "
                         "drives pgbench's built-in workloads (select-only, simple-update, "
                         "tpcb-like).", "Drop --client-host for these workloads.")
    return hosts


def describe_hosts(hosts: list, conninfo: str) -> list[dict[str, Any]]:
    """Each client host's pgbench version and its SELECT 1 round trip to the server,
    measured before the run."""
    from ..workloads.pgbench import libpq_env
    from ..workloads.remote import check_hosts, round_trip_ms
    versions = check_hosts(hosts)
    env = libpq_env(conninfo)
    return [{"host": h.label, "pgbench": versions[h.label], "rtt_ms": round_trip_ms(h, env)}
            for h in hosts]


def server_host_for(url: str | None, dsn: str | None):
    """The parsed ``--server-host``; it needs ``--dsn`` (the server pgaccel measures)."""
    if not url:
        return None
    from ..server.ssh import SshHost
    host = SshHost.parse(url, "--server-host")
    if not dsn:
        raise UsageError("--server-host goes with --dsn: it names the machine that server "
                         "runs on.", "Give --dsn for the server on that host.")
    return host


def attach_server_host(target, host):
    """Find the server's postmaster on ``host`` (the parent of this connection's backend),
    let every measurement read that host's counters, and return the host's facts."""
    from ..probe.remote import postmaster_pid, probe_server_host
    with target.connect() as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        pm = postmaster_pid(host, backend)       # while the backend lives
    target.server_host, target.server_pm = host, pm
    return probe_server_host(host, pm)
