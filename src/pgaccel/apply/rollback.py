"""``pgaccel rollback``: return every target of a saved state to how it was before it.

The state and every later applied state sharing a target with it (``StateStore.chain``)
are undone newest first: each PostgreSQL target by its own path (:func:`rollback_local`
restores a local cluster's files, also those of an apply that was killed half-way;
``dsn.rollback_dsn`` resets ALTER SYSTEM entries, ``patroni.rollback_patroni`` puts the
dynamic configuration back), then the Linux values
(``osknobs.apply.restore_os``).
"""

from __future__ import annotations

from ..errors import PgaccelError, ServerError
from ..server.target import LocalTarget, open_target
from ..osknobs import apply as ossettings
from .conf import differs
from .dsn import rollback_dsn
from .patroni import rollback_patroni
from .local import check_os_allowed, wait_pending
from .reports import RollbackReport, first_previous
from .state import State, StateStore, edited_since, mark_rolled_back, read_bytes, sha


def rollback(store: StateStore, ref: str | None = None, *, dsn: str | None = None,
             force: bool = False, is_root: bool | None = None) -> RollbackReport:
    """Return the target(s) of state ``ref`` (default: the latest applied) to how they were
    before it: undo it and every later applied state on the same target, newest first
    (PostgreSQL first, then the Linux values)."""
    target = store.find(ref)
    chain = store.chain(target)
    report = RollbackReport(target.id, undone=[s.id for s in chain])
    os_items = [ossettings.OsItem.from_dict(d) for s in chain
                for d in s.data.get("os", {}).get("items", [])]
    if os_items:
        check_os_allowed(is_root)
    groups: dict[str, list[State]] = {}
    for s in chain:
        if s.data["target"].get("kind") in ("pgdata", "throwaway", "dsn", "patroni"):
            groups.setdefault(s.data["target"]["key"], []).append(s)
    for states in groups.values():
        if states[0].data["target"]["kind"] == "dsn":
            rollback_dsn(states, report, dsn, force)
        elif states[0].data["target"]["kind"] == "patroni":
            rollback_patroni(states, report, dsn)
        else:
            rollback_local(states, report, force)
    if os_items:
        ossettings.restore_os(os_items, is_root=is_root)
        report.os_restored = ossettings.describe(os_items)
    mark_rolled_back(chain, target.id)
    return report


# -- rollback of a local cluster ---------------------------------------------------------

def rollback_local(chain: list[State], report: RollbackReport, force: bool) -> None:
    """Undo ``chain`` (newest first, one local cluster): restore every file byte for byte,
    reload (restart when a value is pending), verify the previous values are back."""
    oldest = chain[-1]
    t = oldest.data["target"]
    cut = [s for s in chain if s.status == "interrupted"]
    changed = edited_since(chain)
    if changed and not force:
        raise PgaccelError("These files changed after pgaccel's apply: " + ", ".join(changed)
                           + "; a rollback would overwrite those edits.",
                           "Look at them first; pgaccel rollback --force restores anyway "
                           "(the current files are saved in the state directory).")
    for s in chain:                       # newest first
        if changed:
            for p in changed:
                s.save_copy(p, "before-rollback")
        problems = s.restore_files()
        if problems:
            raise PgaccelError("Restoring the configuration failed: " + "; ".join(problems),
                               f"The backups are in {s.dir}.")
    if not any(s.data.get("os", {}).get("items") for s in chain):
        mark_rolled_back(chain, oldest.id)   # the files are back, whatever the server does
    for rec in oldest.data["files"]:
        now = sha(read_bytes(rec["path"]))
        report.files.append({"path": rec["path"], "identical": now == rec["sha256_before"],
                             "existed": rec["existed"], "touched": rec.get("touched", True)})
    with open_target(pg_bin=t["bindir"], pgdata=t["pgdata"], run_as=t.get("server_user"),
                     restart_cmd=t.get("restart_cmd"), bench=False) as server:
        if cut:
            _after_interrupted(server, cut, t.get("was_running", True), report)
        _reload_restored(server, chain, report)


def _after_interrupted(server: LocalTarget, cut: list[State], was_running: bool,
                       report: RollbackReport) -> None:
    """A killed apply may have left the cluster started (to verify a stopped one) or down
    (killed around a restart): put it back to running or stopped as it was found."""
    report.notes.append("Undid an apply that was interrupted before it finished ("
                        + ", ".join(s.id for s in cut) + "): the files were restored from the "
                        "backups it saved before writing anything.")
    running = server.running()
    if not was_running and running and any(s.data.get("started_server") for s in cut):
        server.stop()
        report.notes.append("pgaccel had started the stopped cluster to verify the settings: "
                            "it is stopped again.")
    elif was_running and not running:
        server.start()
        report.notes.append("The cluster was down after the interrupted apply: started it "
                            "with the restored configuration.")


def _reload_restored(server: LocalTarget, chain: list[State], report: RollbackReport) -> None:
    """After the files are restored: check they parse; a running server is reloaded
    (restarted when a value is pending) and checked to show the previous values."""
    bad = server.check_files()
    if bad:
        raise ServerError(f"The restored configuration does not parse: {bad}",
                          "Check the files listed in the state manifest.")
    if not server.running():
        report.notes.append("The cluster is stopped: files restored; it will start with its "
                            "previous settings.")
        return
    prev = {n: a.previous_raw for n, a in first_previous(chain).items()
            if a.previous_raw is not None}
    server.reload()
    report.reloaded = True
    if wait_pending(server, prev):
        server.restart()
        report.restarted = True
    rows = server.pg_settings(prev)
    wrong = differs(rows, prev)
    if wrong:
        raise ServerError("After the rollback these settings do not show their previous "
                          "values: " + ", ".join(f"{n} = {rows.get(n, {}).get('shown')}"
                                                 for n in wrong) + ".",
                          "Another configuration source may override them (SELECT * FROM "
                          "pg_file_settings).")
    report.settings = {n: r["shown"] for n, r in rows.items()}
