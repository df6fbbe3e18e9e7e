"""Apply a plan to a server reached only through ``--dsn``, and roll it back.

ALTER SYSTEM is the only way in from outside.  Reload-level settings only (then
pg_reload_conf() and verify); restart-level ones are listed with the restart they need,
never applied; a parameter the user set with ALTER SYSTEM (one pgaccel's saved states did
not write), or on the server's command line, is left alone; values already in force are
not written.  A refused value or a failed verification resets what was changed and reloads.
The state records each entry's previous ALTER SYSTEM value (``previous_auto``) and a copy
and checksum of postgresql.auto.conf, so ``rollback_dsn`` restores exactly.

The server is a :class:`~pgaccel.server.target_dsn.DsnTarget` (connections, pg_settings,
pg_file_settings errors, reload); the DSN is only ever shown or stored without its
password (``DsnTarget.display_dsn``).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Iterable

import psycopg

from ..errors import PgaccelError, ServerError, UsageError
from ..pg.catalog import GucCatalog
from ..pg.values import same_value
from .conf import AUTO_CONF, differs, postgres_changes, quote, verify
from ..server.database import error_line
from ..server.target import DsnTarget, open_target
from ..tune.plan import Change
from .reports import Applied, ApplyReport, RollbackReport, first_previous
from .state import State, StateStore, sha


# -- the server (thin) -------------------------------------------------------------------

def _auto_entries(conn) -> dict[str, str]:
    try:
        rows = conn.execute("SELECT name, setting, sourcefile FROM pg_file_settings "
                            "ORDER BY seqno").fetchall()
    except psycopg.errors.InsufficientPrivilege:
        raise ServerError("Reading pg_file_settings needs a superuser (or a role granted "
                          "SELECT on it); pgaccel needs it to leave your ALTER SYSTEM "
                          "settings alone and to roll back exactly.",
                          "Connect as a superuser.") from None
    return {n: s for n, s, f in rows if f and f.endswith(AUTO_CONF)}


def _auto_file(conn) -> bytes | None:
    try:
        text = conn.execute("SELECT pg_read_file(%s)", (AUTO_CONF,)).fetchone()[0]
    except psycopg.Error:
        return None
    return text.encode()


def _system_id(conn) -> str | None:
    try:
        return str(conn.execute("SELECT system_identifier FROM pg_control_system()")
                   .fetchone()[0])
    except psycopg.Error:
        return None


def _alter(conn, name: str, value: str | None) -> None:
    from psycopg import sql
    if value is None:
        conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(name)))
    else:
        conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name),
                                                                 sql.Literal(str(value))))


def alter_statements(changes: Iterable[Change]) -> str:
    lines = [f"ALTER SYSTEM SET {c.name} = {quote(c.proposed)};" for c in changes]
    return "\n".join(lines + ["SELECT pg_reload_conf();"]) + "\n" if lines else ""


# -- apply -------------------------------------------------------------------------------

def apply_dsn(server: DsnTarget, changes: list[Change], store: StateStore, *,
              catalog: GucCatalog | None = None, plan_dict: dict | None = None,
              dry_run: bool = False, allow_unsafe_durability: bool = False) -> ApplyReport:
    """Reload-level changes through ALTER SYSTEM + pg_reload_conf(); restart-level ones
    are listed, never applied; the user's ALTER SYSTEM entries are left alone."""
    pg = postgres_changes(changes, catalog, allow_unsafe_durability)
    report = ApplyReport(server.describe(), dry_run=dry_run)
    with server.connect() as conn:
        sysid = _system_id(conn)
        key = f"cluster:{sysid}" if sysid else f"dsn:{server.display_dsn}"
        auto = _auto_entries(conn)
        ours = store.owned_auto_entries(key)
        rows = server.pg_settings([c.name for c in pg])
        todo = []
        for c in pg:
            row = rows.get(c.name)
            restart = c.restart or (row is not None and catalog is not None
                                    and catalog.context(c.name) == "postmaster")
            if row is not None and same_value(c.proposed, row["setting"], row["unit"],
                                              row["vartype"], c.name):
                report.unchanged.append(c.name)
                continue
            if restart:
                report.listed.append((c.name, c.proposed, "needs a server restart: not "
                                      "applied over --dsn; use --pgdata on the server's "
                                      "host, or ALTER SYSTEM and restart"))
            elif c.name in auto and ours.get(c.name) != auto[c.name]:
                report.skipped.append((c.name, f"set with ALTER SYSTEM ({auto[c.name]}), "
                                       "which pgaccel leaves alone"))
            elif row is not None and row["source"] == "command line":
                report.skipped.append((c.name, "set on the server's command line"))
            else:
                todo.append(c)
        report.diff = alter_statements(todo)
        if dry_run or not todo:
            if not todo and not dry_run:
                report.notes.append("Nothing to apply over --dsn.")
            return report
        auto_before = _auto_file(conn)
        state = store.new({"kind": "dsn", "dsn": server.display_dsn, "system_identifier": sysid,
                           "key": key, "auto_conf_sha256": sha(auto_before)}, plan_dict)
        if auto_before is not None:
            state.backup_bytes(AUTO_CONF, auto_before)
        report.applied = [Applied(c.name, c.proposed, False, rows[c.name]["shown"],
                                  rows[c.name]["setting"], auto.get(c.name)) for c in todo]
        state.data["postgres"] = {"applied": [asdict(a) for a in report.applied],
                                  "skipped": report.skipped, "listed": report.listed}
        state.save()
        report.state_id, report.state_dir = state.id, state.dir
        done: list[Applied] = []
        failure: str | None = None
        for a in report.applied:
            try:
                _alter(conn, a.name, a.value)
                done.append(a)
            except psycopg.Error as e:
                failure = (f"ALTER SYSTEM SET {a.name} = {quote(a.value)} was refused: "
                           f"{error_line(e)}")
                break
        if failure is None:
            try:
                server.reload()
                report.reloaded = True
                expected = {a.name: a.value for a in done}
                probs = verify(expected, server.pg_settings(expected), server.file_errors())
            except (psycopg.Error, PgaccelError) as e:
                probs = [error_line(e)]
            if probs:
                failure = "a setting does not show its intended value: " + "; ".join(probs)
        if failure is not None:
            for a in reversed(done):
                _alter(conn, a.name, a.previous_auto)
            server.reload()
            state.data["error"] = {"what": failure}
            state.finish("failed")
            raise ServerError(f"Applying the plan to {report.target} failed: {failure}. "
                              "pgaccel reset the settings it had changed and reloaded.",
                              f"State {state.id} records what was attempted.")
        rows = server.pg_settings([a.name for a in done])
        for a in report.applied:
            a.shown = rows.get(a.name, {}).get("shown")
        state.data["postgres"]["applied"] = [asdict(a) for a in report.applied]
        state.data["target"]["auto_conf_sha256_after"] = sha(_auto_file(conn))
        state.finish("applied")
    return report


# -- rollback ----------------------------------------------------------------------------

def rollback_dsn(chain: list[State], report: RollbackReport, dsn: str | None,
                 force: bool) -> None:
    """Undo ``chain`` (newest first, one --dsn target): each ALTER SYSTEM entry back to its
    previous value (or RESET), reload, verify the previous values are in force."""
    t = chain[-1].data["target"]
    use = dsn or t["dsn"]
    with open_target(dsn=use, bench=False) as server:
        _rollback_on(server, chain, report, force)


def _rollback_on(server: DsnTarget, chain: list[State], report: RollbackReport,
                 force: bool) -> None:
    t = chain[-1].data["target"]
    use = server.display_dsn
    with server.connect() as conn:
        sysid = _system_id(conn)
        if t.get("system_identifier") and sysid and sysid != t["system_identifier"]:
            raise UsageError(f"{use} is another cluster (system identifier {sysid}, the state "
                             f"was saved for {t['system_identifier']}).",
                             "Pass --dsn for the server the state belongs to.")
        auto = _auto_entries(conn)
        latest: dict[str, str] = {}
        for s in reversed(chain):          # oldest first: newer values win
            for d in s.data.get("postgres", {}).get("applied", []):
                latest[d["name"]] = d["value"]
        edited = [n for n, v in latest.items() if auto.get(n) != v]
        if edited and not force:
            raise PgaccelError("These settings were changed with ALTER SYSTEM after pgaccel's "
                               "apply: " + ", ".join(edited) + ".",
                               "pgaccel rollback --force resets them anyway.")
        for s in chain:                    # newest first
            for d in reversed(s.data.get("postgres", {}).get("applied", [])):
                _alter(conn, d["name"], d.get("previous_auto"))
    server.reload()
    report.reloaded = True
    prev = first_previous(chain)
    rows = server.pg_settings(prev)
    with server.connect() as conn:
        after = _auto_file(conn)
    wrong = differs(rows, {n: a.previous_raw for n, a in prev.items()})
    if wrong:
        raise ServerError("After the rollback these settings do not show their previous "
                          "values: " + ", ".join(wrong) + ".", "Check pg_file_settings.")
    report.settings = {n: r["shown"] for n, r in rows.items()}
    sha_before = t.get("auto_conf_sha256")
    if sha_before and after is not None:
        report.files.append({"path": AUTO_CONF, "identical": sha(after) == sha_before,
                             "existed": True, "touched": True})
        if sha(after) != sha_before:
            report.notes.append(f"{AUTO_CONF} holds the previous values but is not "
                                "byte-identical (it had been edited by hand before).")
