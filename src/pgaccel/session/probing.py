"""`pgaccel probe`'s facts: the installations and builds found, the chosen one's build
options, the host, and the server's facts over one connection (a throwaway cluster, a
--pgdata cluster read as it runs, or --dsn)."""

from __future__ import annotations

from typing import Any

from ..metrics import steadiness
from ..pg.build import build_summary
from ..probe.host import probe_host
from ..server.binary import pg_config
from ..server.discovery import choose_server, find_installations
from ..server.target import open_target


def collect(pg_bin: str | None, dsn: str | None, pgdata: str | None, run_as: str | None,
            workdir: str | None, port: int | None, keep: bool, server: bool = True
            ) -> dict[str, Any]:
    from ..server.buildcache import list_builds
    insts = find_installations(pg_bin)
    data: dict[str, Any] = {"installations": [i.to_dict() for i in insts],
                            "builds": [b.to_dict() for b in list_builds()]}
    chosen = None
    if not dsn:
        chosen = choose_server(pg_bin)
        data["installation"] = chosen.to_dict()
        data["build"] = build_summary(pg_config(chosen))
    host = probe_host(data_dir=pgdata or workdir or "/")
    data["host"] = host.to_dict()
    data["cpu_steadiness"] = steadiness.measure(cpu_limit=host.cgroup.cpu_limit)
    if server:
        # bench=False: a --pgdata cluster is read as it runs (started and stopped again
        # only when it was stopped), never restarted with other settings
        with open_target(pg_bin=pg_bin, dsn=dsn, pgdata=pgdata, run_as=run_as,
                         workdir=workdir, port=port, keep=keep, bench=False) as target:
            started = target.kind != "dsn" and not target.running()
            if started:
                target.start()
            try:
                with target.database() as db:
                    data["server"] = db.facts()
            finally:
                if started and target.kind == "pgdata":
                    target.stop()
            data["server"]["target"] = target.describe()
    return data
