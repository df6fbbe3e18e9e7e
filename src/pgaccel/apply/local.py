"""Apply a plan to this machine safely and verify it: a local cluster's PostgreSQL
settings and the Linux layer (undoing it is ``rollback.py``'s).

Where pgaccel writes (the reasons are in docs/tuning-rules.md, "Applying a plan"): a local
cluster (throwaway or ``--pgdata``) gets one file pgaccel owns, ``pgaccel.conf`` beside
postgresql.conf, read through one line appended once to the end of postgresql.conf
(``include_if_exists = 'pgaccel.conf'``).  pgaccel rewrites only its own file; the user's
postgresql.conf lines and ALTER SYSTEM entries are never edited.  (A server reached only
through ``--dsn`` is ``dsn.py``'s.)  The
cluster is a :class:`~pgaccel.server.target_local.LocalTarget`: everything here reaches
it through that (``postgres -C``, pg_settings, reload, start/stop/restart).

Order: validate and refuse (catalog, durability; ``conf.py``); back up every file it will
touch into a state directory with a JSON manifest (``state.py``, saved before any write, so
a kill anywhere can be undone); apply the Linux layer (``osknobs/apply.py``); write the file with the reload-level settings and the restart-level values
already in force, check it with ``postgres -C`` (which names any refused value without
touching the server), reload, verify (pg_settings, pg_file_settings errors); then the full
file, restart if the server says a value is pending, verify again.  Any failure restores
the backups (byte-identical, checked), restarts or reloads, verifies the previous values
are back, and raises a :class:`ServerError` naming the setting and the server's log line.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from dataclasses import asdict
from typing import Any, Iterable

import psycopg

from ..errors import DiskFull, Interrupted, PgaccelError, ServerError
from ..osknobs import apply as ossettings
from ..pg.catalog import GucCatalog
from ..server.database import error_line
from ..server.target import LocalTarget
from ..tune.plan import Change
from .conf import (AUTO_CONF, OWNED, cmdline_settings, conf_entries, differs,
                   postgres_changes, render_owned, unified_diff, verify, with_include)
from .reports import Applied, ApplyReport
from .state import State, StateStore, crash_point, file_mode, new_state_id, read_bytes

_LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d [\d:.]+ [A-Z+\-\d]+ \[\d+\] ")


class _Failed(Exception):
    def __init__(self, what: str, line: str = "", hint: str | None = None):
        super().__init__(what)
        self.what, self.line, self.hint = what, _LOG_PREFIX.sub("", line.strip()), hint


def check_os_allowed(is_root: bool | None) -> None:
    """Refuse the Linux layer unless root (``is_root`` None: this process's uid)."""
    ossettings.check_allowed(os.geteuid() == 0 if is_root is None else is_root)


def local_target_info(target: LocalTarget, config_file: str) -> dict[str, Any]:
    pgdata = os.path.realpath(target.pgdata)
    return {"kind": target.kind, "key": f"pgdata:{pgdata}", "pgdata": pgdata,
            "bindir": target.inst.bindir, "version": target.inst.version,
            "server_user": target.user.name,
            "restart_cmd": target.restart_cmd, "config_file": config_file,
            "owned_file": os.path.join(os.path.dirname(config_file), OWNED),
            "auto_conf": os.path.join(pgdata, AUTO_CONF)}


# -- the Linux layer ---------------------------------------------------------------------

def _os_apply(state: State, report: ApplyReport, changes: list[Change], root: str,
              is_root: bool | None) -> None:
    def record(items) -> None:
        state.data["os"] = {"root": root, "items": [i.to_dict() for i in items]}
        state.save()
    try:
        done, skipped = ossettings.apply_os(changes, root, is_root=is_root, record=record)
    except PgaccelError:
        state.data["os"]["items"] = []            # apply_os undid what it had written
        state.finish("failed")
        raise
    state.data["os"]["items"] = [i.to_dict() for i in done]
    report.os_applied, report.os_skipped = [i.to_dict() for i in done], skipped


def apply_linux(changes: list[Change], store: StateStore, *, root: str = "/",
                is_root: bool | None = None, dry_run: bool = False,
                plan_dict: dict | None = None) -> ApplyReport:
    """The Linux layer alone (``--apply-os`` without ``--apply``)."""
    check_os_allowed(is_root)
    report = ApplyReport(f"Linux settings under {root}", dry_run=dry_run)
    items, report.os_skipped = ossettings.plan_os(changes, root)
    if dry_run or not items:
        report.os_applied = [i.to_dict() for i in items]
        if not items and not dry_run:
            report.notes.append("No Linux setting needs to change.")
        return report
    state = store.new({"kind": "os", "key": f"os:{os.path.realpath(root)}", "root": root},
                      plan_dict)
    report.state_id, report.state_dir = state.id, state.dir
    _os_apply(state, report, changes, root, is_root)
    state.finish("applied")
    return report


# -- a local cluster ---------------------------------------------------------------------

def apply_local(server: LocalTarget, changes: list[Change], store: StateStore, *,
                catalog: GucCatalog | None = None, plan_dict: dict | None = None,
                dry_run: bool = False, allow_unsafe_durability: bool = False,
                os_changes: list[Change] | None = None, os_root: str = "/",
                is_root: bool | None = None, describe: str = "") -> ApplyReport:
    """Apply ``changes`` (the postgres layer) to a local cluster (``server``: its target,
    throwaway or ``--pgdata``), and ``os_changes`` (the Linux layer) first when given; see
    the module docstring."""
    pg = postgres_changes(changes, catalog, allow_unsafe_durability)
    if os_changes is not None:
        check_os_allowed(is_root)
    config_file = server.config_file()
    info = local_target_info(server, config_file)
    owned, auto = info["owned_file"], info["auto_conf"]
    report = ApplyReport(f"the cluster in {server.pgdata}", dry_run=dry_run)

    # never override the user's own ALTER SYSTEM entries or command-line settings
    user_auto = conf_entries((read_bytes(auto) or b"").decode("utf-8", "replace"))
    on_cmdline = cmdline_settings(server.cluster.original_opts)
    todo = []
    for ch in pg:
        if ch.name in user_auto:
            report.skipped.append((ch.name, f"set with ALTER SYSTEM ({AUTO_CONF}: "
                                   f"{user_auto[ch.name]}), which pgaccel leaves alone; "
                                   f"ALTER SYSTEM RESET {ch.name} lets pgaccel manage it"))
        elif ch.name in on_cmdline:
            report.skipped.append((ch.name, "set on the server's command line, which "
                                   "overrides any file"))
        else:
            todo.append(ch)
    if not todo and os_changes is None:
        report.notes.append("Nothing to apply: every setting was skipped.")
        return report
    conf_before = read_bytes(config_file) or b""
    owned_before = read_bytes(owned)
    new_conf = with_include(conf_before.decode("utf-8", "replace"))
    sid = new_state_id()
    full = render_owned(todo, sid, describe)
    restart_level = {ch.name for ch in todo if ch.restart}
    old = conf_entries((owned_before or b"").decode("utf-8", "replace"))
    keep = [Change("postgres", n, v, "in force until the restart", restart=True)
            for n, v in old.items()
            if n in restart_level or (catalog is not None and catalog.restart(n))]
    phase1 = render_owned([ch for ch in todo if not ch.restart] + keep, sid, describe)
    if new_conf is not None:
        report.diff += unified_diff(conf_before.decode("utf-8", "replace"), new_conf,
                                    config_file)
    report.diff += unified_diff((owned_before or b"").decode("utf-8", "replace"), full, owned)
    if dry_run:
        if os_changes is not None:
            items, report.os_skipped = ossettings.plan_os(os_changes, os_root)
            report.os_applied = [i.to_dict() for i in items]
        return report

    running = server.running()
    names = [ch.name for ch in todo]
    if running:
        before_rows = server.pg_settings(names)
        before = {n: r["setting"] for n, r in before_rows.items()}
        shown = {n: r["shown"] for n, r in before_rows.items()}
    else:
        from ..tune.engine import show_form
        before = server.raw_values(names)
        shown = {n: show_form(v, (catalog.get(n).unit if catalog and catalog.get(n) else None))
                 for n, v in before.items()}
    report.applied = [Applied(ch.name, ch.proposed, ch.restart, shown.get(ch.name),
                              before.get(ch.name)) for ch in todo]
    state = _saved_state(store, {**info, "was_running": running}, plan_dict, sid, report,
                         backup=[config_file] if new_conf is not None else [],
                         also=[owned], watch=[auto])
    like = file_mode(config_file)
    if os_changes is not None:
        store.add_os_key(state, os_root)
        _os_apply(state, report, os_changes, os_root, is_root)   # huge pages before restart
        state.save()
        crash_point("os")
    expected = {ch.name: ch.proposed for ch in todo}
    reload_expected = {ch.name: ch.proposed for ch in todo if not ch.restart}

    def fetch():
        return server.pg_settings(expected), server.file_errors()

    try:
        if new_conf is not None:          # the user's bytes, then the include line
            added = new_conf[len(conf_before.decode("utf-8", "replace")):]
            state.write(config_file, conf_before + added.encode())
            crash_point("include")
        state.write(owned, full.encode(), like)
        crash_point("owned")
        bad = server.check_files()
        if bad:
            raise _Failed("the server refuses a value in the new configuration", bad,
                          "Nothing was reloaded or restarted.")
        if not running:
            state.data["started_server"] = True       # a rollback stops it again
            state.save()
            try:
                server.start()
            except ServerError as e:
                raise _Failed("the server did not start with the new settings",
                              e.message.split(": ", 1)[-1], e.hint) from None
            crash_point("started")
            try:
                probs = verify(expected, *fetch())
            finally:
                server.stop()
            if probs:
                raise _Failed("a setting does not show its intended value", "; ".join(probs))
        else:
            if phase1 != full:
                state.write(owned, phase1.encode(), like)
            server.reload()
            report.reloaded = True
            crash_point("reloaded")
            probs = verify(reload_expected, *fetch())
            if probs:
                raise _Failed("a reload-level setting was not applied", "; ".join(probs))
            if phase1 != full:
                state.write(owned, full.encode(), like)
                server.reload()
            dropped = [n for n in old if n not in expected]   # back to the user's value
            if wait_pending(server, expected, dropped):
                try:
                    server.restart()
                except ServerError as e:
                    raise _Failed("the server did not come back after the restart",
                                  e.message.split(": ", 1)[-1], e.hint) from None
                report.restarted = True
                crash_point("restarted")
            probs = verify(expected, *fetch())
            if probs:
                raise _Failed("a setting does not show its intended value", "; ".join(probs))
    except _Failed as f:
        _restore_after_failure(server, state, report, f, running, before, is_root)
    except (psycopg.Error, PgaccelError, OSError, KeyboardInterrupt) as e:
        what = ("pgaccel was interrupted" if isinstance(e, (KeyboardInterrupt, Interrupted))
                else "an unexpected error")
        _restore_after_failure(server, state, report, _Failed(what, error_line(e)),
                               running, before, is_root)
    if running:
        rows, _ = fetch()
        for a in report.applied:
            a.shown = rows.get(a.name, {}).get("shown", a.value)
    else:
        report.notes.append("The cluster was stopped: pgaccel started it to verify the "
                            "settings and stopped it again.")
    state.data["postgres"]["applied"] = [asdict(a) for a in report.applied]
    state.data["postgres"]["restarted"] = report.restarted
    crash_point("verified")
    state.finish("applied")
    return report


def _saved_state(store: StateStore, target: dict, plan_dict: dict | None, sid: str,
                 report: ApplyReport, backup: list[str], also: list[str],
                 watch: list[str]) -> State:
    """The state directory with the manifest and every backup, saved before any write; a
    failure to save it (a full disk, no permission) removes it and changes nothing."""
    state = None
    try:
        state = store.new(target, plan_dict, sid=sid)
        crash_point("manifest")
        for p in [*backup, *also]:
            state.backup(p)
        for p in watch:
            state.watch(p)
        state.data["postgres"] = {"applied": [asdict(a) for a in report.applied],
                                  "skipped": report.skipped}
        state.save()
    except OSError as e:
        if state is not None:
            shutil.rmtree(state.dir, ignore_errors=True)
        cls = DiskFull if e.errno in (errno.ENOSPC, errno.EDQUOT) else PgaccelError
        raise cls(f"Could not save the backups in {store.root}: {e.strerror or e}"
                  f"{f' ({e.filename})' if e.filename else ''}. Nothing was changed.",
                  "Free space there or choose another place with --state-dir "
                  "(or $PGACCEL_STATE_DIR), then apply again.") from None
    crash_point("backups")
    report.state_id, report.state_dir = state.id, state.dir
    return state


def wait_pending(server: LocalTarget, expected: Iterable[str],
                  also: Iterable[str] = ()) -> list[str]:
    """Names (of ``expected`` and ``also``) the server marks pending_restart after the
    reload that wrote them."""
    rows = server.pg_settings([*expected, *also])
    return [n for n, r in rows.items() if r["pending_restart"]]


def _differs(server: LocalTarget, raw: dict[str, str]) -> list[str]:
    """Names whose pg_settings.setting is not the given raw value."""
    return differs(server.pg_settings(raw), raw)


def _culprits(line: str, applied: list[Applied]) -> str:
    """'shared_buffers = 1TB' for the settings a failure line points at (pure)."""
    named = set(re.findall(r'parameter "([^"]+)"', line))
    named |= {a.name for a in applied if re.search(rf"\b{re.escape(a.name)}\b", line)}
    hit = [a for a in applied if a.name in named]
    if not hit and re.search(r"shared memory|huge pages|could not map", line, re.I):
        hit = [a for a in applied if a.restart and a.previous != a.value]
        return (" (restart-level settings: " + ", ".join(f"{a.name} = {a.value}" for a in hit)
                + ")") if hit else ""
    return (" (" + ", ".join(f"{a.name} = {a.value}" for a in hit) + ")") if hit else ""


def _restore_after_failure(server: LocalTarget, state: State, report: ApplyReport,
                           f: _Failed, was_running: bool, before: dict[str, str],
                           is_root: bool | None) -> None:
    problems = state.restore_files()
    try:
        ossettings.restore_os([ossettings.OsItem.from_dict(d) for d in report.os_applied],
                           is_root=is_root)
    except PgaccelError as e:
        problems.append(e.message)
    back = ("restoring failed: " + "; ".join(problems) if problems else
            "the configuration files are byte-identical to before (checked)")
    if was_running:
        try:
            if not server.running():
                server.restart() if server.restart_cmd else server.start()
            else:
                server.reload()
                if report.restarted or wait_pending(server, before):
                    server.restart()
            still = _differs(server, before)
            back += (", and the server is running with its previous values" if not still
                     else f"; but these still differ: {', '.join(still)}")
        except ServerError as e:
            back += f"; but the server did not come back: {e.message}"
    else:
        bad = server.check_files()
        back += ("; the cluster stays stopped" if not bad else
                 f"; but the restored files do not parse: {bad}")
    state.data["error"] = {"what": f.what, "line": f.line}
    state.finish("failed")
    raise ServerError(f"Applying the plan to {report.target} failed: {f.what}"
                      f"{_culprits(f.line, report.applied)}: {f.line}. pgaccel restored the "
                      f"previous configuration: {back}.",
                      (f.hint + " " if f.hint else "") + f"State {state.id} keeps the backups.")
