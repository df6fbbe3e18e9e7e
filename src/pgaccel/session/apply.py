"""Carrying out a plan on the server the options name (`pgaccel tune --apply/--apply-os`)
and undoing it (`pgaccel rollback`): the local, ``--dsn`` and throwaway paths of
``apply/``, one call each, on the target ``server.target.open_target`` opens."""

from __future__ import annotations

import os

from ..apply.dsn import apply_dsn
from ..apply.local import apply_linux, apply_local
from ..apply.reports import ApplyReport, RollbackReport
from ..apply.state import State, StateStore
from ..errors import UsageError
from ..server.target import open_target
from ..tune.plan import TuneResult


def run_apply(res: TuneResult, *, pg_bin=None, dsn=None, pgdata=None, run_as=None,
              workdir=None, port=None, do_apply=True, apply_os=False, dry_run=False,
              restart_cmd=None, allow_unsafe_durability=False, state_dir=None,
              os_root="/", patroni=None) -> ApplyReport:
    """Carry out ``res.plan`` on the target the options name (thin); an ApplyReport."""
    if patroni:
        from ..apply.patroni import apply_patroni
        return _linux_note(apply_patroni(patroni, res.plan, StateStore(state_dir), dsn=dsn,
                                         plan_dict=res.plan.to_dict(), dry_run=dry_run,
                                         allow_unsafe_durability=allow_unsafe_durability),
                           res, False)
    if do_apply and res.catalog is None:
        raise UsageError("This plan is for another PostgreSQL version than the server's; it "
                         "cannot be applied.", "Drop --pg-version to plan for the server.")
    store = StateStore(state_dir)
    if not dry_run:
        refuse_interrupted(store, pgdata=pgdata if do_apply else None,
                           os_root=os_root if apply_os else None)
    plan = res.plan
    plan_dict = plan.to_dict()
    os_changes = plan.layer("linux") if apply_os else None
    kw = dict(catalog=res.catalog, plan_dict=plan_dict, dry_run=dry_run,
              allow_unsafe_durability=allow_unsafe_durability)
    if not do_apply:
        return apply_linux(os_changes, store, root=os_root, dry_run=dry_run,
                           plan_dict=plan_dict)
    where = dict(pg_bin=pg_bin, run_as=run_as, port=port, bench=False)
    if dsn or pgdata:
        with open_target(dsn=dsn, pgdata=pgdata, restart_cmd=restart_cmd, **where) as target:
            if dsn:
                report = apply_dsn(target, plan.changes, store, **kw)
            else:
                report = apply_local(target, plan.changes, store, os_changes=os_changes,
                                     os_root=os_root, describe=_describe(res), **kw)
        return _linux_note(report, res, apply_os)
    # a throwaway cluster: a trial of the plan on this machine's binary, then removed; the
    # Linux layer (real, kept) gets its own state so it can be rolled back
    os_report = (apply_linux(os_changes, store, root=os_root, dry_run=dry_run,
                             plan_dict=plan_dict) if apply_os else None)
    with open_target(workdir=workdir, **where) as target:
        target.start()
        report = apply_local(target, plan.changes,
                             StateStore(os.path.join(target.cluster.base, "states")),
                             describe=_describe(res), **kw)
        target.stop()
    report.state_id = report.state_dir = None
    report.notes.append("This was a trial on a throwaway cluster (now removed): no server of "
                        "yours changed. Use --pgdata DIR or --dsn to apply to one.")
    if os_report is not None:
        report.os_applied, report.os_skipped = os_report.os_applied, os_report.os_skipped
        report.state_id, report.state_dir = os_report.state_id, os_report.state_dir
        report.notes += os_report.notes
    return _linux_note(report, res, apply_os)


def interrupted_applies(store: StateStore, *, pgdata: str | None = None,
                        os_root: str | None = None) -> list[State]:
    """Applies to this cluster (or this machine's Linux settings) that were killed before
    they finished."""
    keys = ([f"pgdata:{os.path.realpath(pgdata)}"] if pgdata else []) + \
        ([f"os:{os.path.realpath(os_root)}"] if os_root else [])
    return [s for k in keys for s in store.interrupted(k)]


def interrupted_message(cut: list[State], root: str) -> tuple[str, str]:
    """(what was found, what to do) for applies killed before they finished."""
    s = cut[-1]
    what = (f"An earlier `pgaccel tune --apply` (state {s.id}, started {s.data.get('created')}) "
            "was interrupted before it finished: the configuration may be partly applied. "
            "Its backups and manifest were saved before any file was written.")
    return what, (f"`pgaccel rollback` (state dir {root}) restores the files byte for byte and "
                  "the server's previous values; then apply again.")


def refuse_interrupted(store: StateStore, *, pgdata: str | None = None,
                       os_root: str | None = None) -> None:
    cut = interrupted_applies(store, pgdata=pgdata, os_root=os_root)
    if cut:
        raise UsageError(*interrupted_message(cut, store.root))


def warn_interrupted(say, *, pgdata: str | None, state_dir: str | None = None) -> None:
    """Tell the user (``say``) about an interrupted apply on the cluster in ``pgdata``."""
    if not pgdata:
        return
    store = StateStore(state_dir)
    cut = interrupted_applies(store, pgdata=pgdata)
    if cut:
        what, todo = interrupted_message(cut, store.root)
        say(f"warning: {what} {todo}")


def _linux_note(report: ApplyReport, res: TuneResult, apply_os: bool) -> ApplyReport:
    if not apply_os and any(not c.advice_only for c in res.plan.layer("linux")):
        report.notes.append("The Linux settings were not applied: that takes --apply-os "
                            "(as root).")
    return report


def saved_states(state_dir: str | None = None) -> tuple[str, list[State]]:
    """(where the states are kept, every saved state, oldest first)."""
    store = StateStore(state_dir)
    return store.root, store.states()


def run_rollback(ref: str | None, *, state_dir: str | None = None, dsn: str | None = None,
                 force: bool = False) -> RollbackReport:
    """Undo state ``ref`` (default: the latest applied) and every later one on its target."""
    from ..apply.rollback import rollback
    return rollback(StateStore(state_dir), ref, dsn=dsn, force=force)


def _describe(res: TuneResult) -> str:
    i = res.inputs
    return (f"{i.workload} workload, {i.cpus:g} CPUs, {i.memory_bytes / 1024**3:.1f} GB, "
            f"{i.connections} connections, PostgreSQL {i.pg_version}")
