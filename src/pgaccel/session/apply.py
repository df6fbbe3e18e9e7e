"""Carrying out a plan on the server the options name (`pgaccel tune --apply/--apply-os`):
the local, ``--dsn`` and throwaway paths of ``apply/``, one call each."""

from __future__ import annotations

import os

from ..apply.dsn import apply_dsn
from ..apply.local import apply_linux, apply_local
from ..apply.state import StateStore
from ..server.cluster import Cluster
from ..server.discovery import choose_server
from ..server.local import LocalServer
from .plan import TuneResult


def run_apply(res: TuneResult, *, pg_bin=None, dsn=None, pgdata=None, run_as=None,
              workdir=None, port=None, do_apply=True, apply_os=False, dry_run=False,
              restart_cmd=None, allow_unsafe_durability=False, state_dir=None,
              os_root="/"):
    """Carry out ``res.plan`` on the target the options name (thin); an ApplyReport."""
    store = StateStore(state_dir)
    plan = res.plan
    plan_dict = plan.to_dict()
    os_changes = plan.layer("linux") if apply_os else None
    kw = dict(catalog=res.catalog, plan_dict=plan_dict, dry_run=dry_run,
              allow_unsafe_durability=allow_unsafe_durability)
    if not do_apply:
        return apply_linux(os_changes, store, root=os_root, dry_run=dry_run,
                           plan_dict=plan_dict)
    if dsn:
        return apply_dsn(dsn, plan.changes, store, **kw)
    inst = choose_server(pg_bin)
    if pgdata:
        cluster = Cluster.existing(inst, pgdata, port=port, run_as=run_as)
        return apply_local(LocalServer(cluster, restart_cmd), plan.changes, store,
                           os_changes=os_changes, os_root=os_root, describe=_describe(res),
                           **kw)
    # a throwaway cluster: a trial of the plan on this machine's binary, then removed; the
    # Linux layer (real, kept) gets its own state so it can be rolled back
    os_report = (apply_linux(os_changes, store, root=os_root, dry_run=dry_run,
                             plan_dict=plan_dict) if apply_os else None)
    with Cluster.create_throwaway(inst, workdir=workdir, port=port, run_as=run_as) as c:
        c.start({})
        report = apply_local(LocalServer(c), plan.changes,
                             StateStore(os.path.join(c.base, "states")),
                             kind="throwaway", describe=_describe(res), **kw)
        c.stop()
    report.state_id = report.state_dir = None
    report.notes.append("This was a trial on a throwaway cluster (now removed): no server of "
                        "yours changed. Use --pgdata DIR or --dsn to apply to one.")
    if os_report is not None:
        report.os_applied, report.os_skipped = os_report.os_applied, os_report.os_skipped
        report.state_id, report.state_dir = os_report.state_id, os_report.state_dir
        report.notes += os_report.notes
    return report


def _describe(res: TuneResult) -> str:
    i = res.inputs
    return (f"{i.workload} workload, {i.cpus:g} CPUs, {i.memory_bytes / 1024**3:.1f} GB, "
            f"{i.connections} connections, PostgreSQL {i.pg_version}")
