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
