"""`pgaccel tune`: the plan for this machine (or another one), layer by layer.

``build_plan`` does the work and returns a :class:`TuneResult`; the click command only
renders it.  Where the server's catalog and current values come from:

* ``--dsn``: that server's pg_settings (its host facts are this machine's unless it is
  local: pass --memory/--cpus for a remote server's machine);
* ``--pgdata``: ``postgres -C`` on that data directory, the catalog from
  ``postgres --describe-config`` (no enum values);
* otherwise a throwaway cluster of the chosen installation is started just to read its
  pg_settings (the build's defaults and full catalog), stopped for
  ``postgres -C shared_memory_size_in_huge_pages``, and removed.

``--apply`` / ``--apply-os`` / ``--dry-run`` hand the plan to ``tune/apply.py`` and
``tune/osapply.py`` (see their docstrings); ``pgaccel rollback`` (below) undoes a saved state.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import click
from rich.table import Table

from ..errors import UsageError
from ..tune.inputs import STORAGE, WORKLOADS, TuneInputs
from ..tune.plan import Plan
from ..session.apply import run_apply
from ..session.plan import TuneResult, build_plan, measure
from .common import console, out, parse_pairs, print_json, target_options

FORMATS = ("table", "conf", "sql", "json", "sysctl", "tuned", "script")
LAYERS = ("postgres", "linux", "build", "all")


def _layers(layer: str, fmt: str) -> tuple[str, ...]:
    if layer == "all":
        return ("postgres", "linux", "build")
    if fmt in ("sysctl", "tuned", "script"):
        return ("linux",) if layer == "postgres" else (layer, "linux")
    return (layer,)


# -- rendering ----------------------------------------------------------------------------

def _plan_table(plan: Plan, title: str, show_layer: bool) -> Table:
    t = Table(title=title, title_justify="left", show_lines=False)
    if show_layer:
        t.add_column("layer")
    for col in ("setting", "current", "proposed", "restart", "reason"):
        t.add_column(col, overflow="fold")
    for c in plan.changes:
        restart = "advice" if c.advice_only else ("yes" if c.restart else "no")
        style = None if c.changes_value else "dim"
        row = [c.name, "" if c.current is None else str(c.current), c.proposed, restart,
               c.reason]
        t.add_row(*([c.layer] if show_layer else []), *row, style=style)
    return t


def _compare_table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title="PGTune (published formulas) vs pgaccel, same inputs", title_justify="left")
    for col in ("setting", "PGTune", "pgaccel", "why pgaccel differs"):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(r["setting"], r["pgtune"] or "-", r["pgaccel"] or "-", r["reason"],
                  style=None if not r["same"] else "dim")
    return t


def _inputs_line(i: TuneInputs) -> str:
    from ..util import format_bytes
    over = f" (overridden: {', '.join(i.overridden)})" if i.overridden else ""
    return (f"{format_bytes(i.memory_bytes)} memory, {i.cpus:g} CPUs, {i.storage} storage, "
            f"{i.connections} connections, {i.workload} workload, PostgreSQL "
            f"{i.pg_version}, {i.arch}{over}")


@click.command()
@target_options
@click.option("--memory", metavar="SIZE", help="Plan for this much memory (e.g. 32GB).")
@click.option("--cpus", type=click.FloatRange(min=0.5), help="Plan for this many CPUs.")
@click.option("--pg-version", type=int, help="Plan for this PostgreSQL major version (13-18).")
@click.option("--storage", type=click.Choice(STORAGE), help="Storage class of the data disk.")
@click.option("--connections", type=click.IntRange(1, 262143),
              help="Expected connections (default: the server's max_connections).")
@click.option("--workload", type=click.Choice(WORKLOADS),
              help="Workload profile (default: oltp).")
@click.option("--layer", type=click.Choice(LAYERS), default="postgres", show_default=True,
              help="Which layer to plan.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table",
              show_default=True, help="table, conf (conf.d snippet), sql (ALTER SYSTEM), json, "
              "sysctl (sysctl.d file), tuned (tuned profile), script (shell script).")
@click.option("--compare", type=click.Choice(["pgtune"]),
              help="Show PGTune's published formulas' values beside pgaccel's.")
@click.option("--set", "sets", metavar="NAME=VALUE", multiple=True,
              help="Override (or add) a PostgreSQL setting of the plan; repeatable.")
@click.option("--apply", "do_apply", is_flag=True,
              help="Apply the PostgreSQL settings: to --pgdata (in pgaccel.conf, included from "
                   "postgresql.conf; reload, restart when needed, verify, restore on failure), "
                   "to --dsn (ALTER SYSTEM, reload-level only; restart-level ones are listed) "
                   "or, without either, to a throwaway cluster (a trial, then removed).")
@click.option("--apply-os", is_flag=True,
              help="Apply the Linux layer (sysctls, transparent huge pages, block-device "
                   "scheduler and read-ahead) on this machine. Root only.")
@click.option("--dry-run", is_flag=True,
              help="With --apply/--apply-os: show the diff (or ALTER SYSTEM statements), "
                   "change nothing.")
@click.option("--restart-cmd", metavar="CMD",
              help="With --pgdata: restart with this command instead of pg_ctl (e.g. "
                   "'systemctl restart postgresql@15-main').")
@click.option("--allow-unsafe-durability", is_flag=True,
              help="Allow settings that turn off fsync, full_page_writes or synchronous_commit "
                   "(a crash can lose or corrupt data). pgaccel never proposes them.")
@click.option("--state-dir", metavar="DIR", type=click.Path(file_okay=False),
              envvar="PGACCEL_STATE_DIR",
              help="Where applied states (backups + manifest) are kept (default: the user "
                   "state dir, tune-states/; also $PGACCEL_STATE_DIR).")
@click.option("--sample", type=click.FloatRange(1), metavar="SECONDS",
              help="Measured rules: sample the server's WAL, checkpoint, temp-file and "
                   "buffer counters for SECONDS (use with --dsn or a running --pgdata).")
@click.option("--from-run", metavar="RUN",
              help="Measured rules from the baseline trials of a stored `pgaccel run`.")
@click.option("--measure-storage", is_flag=True,
              help="Measure 8 kB random reads with fio (about 10 s) on the data directory's "
                   "disk and set random_page_cost / effective_io_concurrency from them.")
@click.option("--os-root", metavar="DIR", default="/", hidden=True,
              help="Root of /proc and /sys for the Linux layer (a constructed tree in tests).")
def tune(pg_bin, dsn, pgdata, run_as, workdir, port, keep, memory, cpus, pg_version, storage,
         connections, workload, layer, fmt, compare, sets, do_apply, apply_os, dry_run,
         restart_cmd, allow_unsafe_durability, state_dir, sample, from_run, measure_storage,
         os_root) -> None:
    """Propose settings for PostgreSQL, Linux and the build, each with its reason.

    Without --apply/--apply-os nothing is changed: the output is a plan (a table, a conf.d
    snippet, ALTER SYSTEM statements, a sysctl.d file, a tuned profile or a script).
    With them, every change is backed up first and can be undone: `pgaccel rollback`."""
    applying = do_apply or apply_os
    if compare and fmt not in ("table", "json"):
        raise UsageError("--compare pgtune works with --format table or json.")
    if dry_run and not applying:
        raise UsageError("--dry-run goes with --apply or --apply-os.",
                         "Without them `pgaccel tune` changes nothing anyway.")
    if restart_cmd and not pgdata:
        raise UsageError("--restart-cmd goes with --pgdata.",
                         "It restarts that cluster (e.g. through systemd).")
    if applying and (compare or fmt not in ("table", "json")):
        raise UsageError("--apply/--apply-os show their result as a table or --format json.",
                         "Drop --compare/--format, or run without --apply to render the plan.")
    if apply_os and dsn:
        raise UsageError("--apply-os changes this machine, --dsn names a server elsewhere.",
                         "Run `pgaccel tune --apply-os` on the server's own host.")
    overrides = parse_pairs(sets, "--set", lower=True)
    _refuse_early(overrides, allow_unsafe_durability, apply_os and not dry_run)
    layers = _layers(layer, fmt)
    if apply_os and "linux" not in layers:
        layers = (*layers, "linux") if do_apply else ("linux",)
    ov = {"memory": memory, "cpus": cpus, "pg_version": pg_version, "storage": storage,
          "connections": connections, "workload": workload}
    res = build_plan(pg_bin=pg_bin, dsn=dsn, pgdata=pgdata, run_as=run_as, workdir=workdir,
                     port=port, keep=keep, overrides=ov, layers=layers, os_root=os_root)
    measure(res, sample=sample, from_run=from_run, measure_storage=measure_storage,
            dsn=dsn, pgdata=pgdata, pg_bin=pg_bin, run_as=run_as,
            workdir=workdir or tempfile.gettempdir(), say=console.print)
    if overrides:
        from ..apply.conf import with_overrides
        res.plan.changes = with_overrides(res.plan.changes, overrides, res.catalog)
    if not applying:
        emit(res, fmt, compare)
        return
    if do_apply and res.catalog is None:
        raise UsageError("This plan is for another PostgreSQL version than the server's; it "
                         "cannot be applied.", "Drop --pg-version to plan for the server.")
    report = run_apply(res, pg_bin=pg_bin, dsn=dsn, pgdata=pgdata, run_as=run_as,
                       workdir=workdir, port=port, do_apply=do_apply, apply_os=apply_os,
                       dry_run=dry_run, restart_cmd=restart_cmd,
                       allow_unsafe_durability=allow_unsafe_durability, state_dir=state_dir,
                       os_root=os_root)
    if do_apply and not apply_os and any(not c.advice_only for c in res.plan.layer("linux")):
        report.notes.append("The Linux settings were not applied: that takes --apply-os "
                            "(as root).")
    emit_apply(report, fmt, res)


def _refuse_early(overrides: dict[str, str], allow_unsafe: bool, os_writes: bool) -> None:
    """What can be refused before probing and planning: unsafe --set values, --apply-os
    without root."""
    from ..apply.conf import check_changes
    from ..apply.ossettings import check_allowed
    from ..tune.plan import Change
    check_changes([Change("postgres", n, v, "") for n, v in overrides.items()], None,
                  allow_unsafe)
    if os_writes:
        check_allowed(os.geteuid() == 0)


def emit_apply(report, fmt: str, res: TuneResult | None = None) -> None:
    if fmt == "json":
        print_json({"apply": report.to_dict(), "target": res.target if res else None})
        return
    for n in (res.notes if res else []):
        console.print(f"[yellow]note:[/yellow] {n}", soft_wrap=True)
    if report.dry_run:
        out.print(f"Dry run for {report.target}: nothing was changed.")
        if report.diff:
            click.echo(report.diff, nl=not report.diff.endswith("\n"))
        _emit_lists(report)
        for i in report.os_applied:
            out.print(f"would set {i['key']}: {i['previous']} -> {i['value']}")
        for n in report.notes:
            out.print(f"- {n}", soft_wrap=True)
        return
    if report.applied:
        t = Table(title=f"Applied to {report.target} (verified)", title_justify="left")
        for col in ("setting", "before", "now", "level"):
            t.add_column(col, overflow="fold")
        for a in report.applied:
            t.add_row(a.name, a.previous or "", a.shown or a.value,
                      "restart" if a.restart else "reload")
        out.print(t)
    if report.os_applied:
        t = Table(title="Linux settings applied (read back)", title_justify="left")
        for col in ("key", "before", "now"):
            t.add_column(col, overflow="fold")
        for i in report.os_applied:
            t.add_row(i["key"], i["previous"], i["value"])
        out.print(t)
    _emit_lists(report)
    steps = [w for w, done in (("reloaded", report.reloaded), ("restarted", report.restarted))
             if done]
    if steps:
        out.print(f"The server was {' and '.join(steps)}.")
    for n in report.notes:
        out.print(f"- {n}", soft_wrap=True)
    if report.state_id:
        out.print(f"State {report.state_id} saved in {report.state_dir}. Undo with: "
                  f"pgaccel rollback {report.state_id}", soft_wrap=True)


def _emit_lists(report) -> None:
    if report.unchanged:
        out.print(f"already at the planned value: {', '.join(report.unchanged)}",
                  soft_wrap=True)
    for name, value, why in report.listed:
        out.print(f"not applied: {name} = {value}: {why}", soft_wrap=True)
    for name, why in report.skipped:
        out.print(f"skipped: {name}: {why}", soft_wrap=True)
    for key, why in report.os_skipped:
        if "advice only" not in why:
            out.print(f"skipped: {key}: {why}", soft_wrap=True)


@click.command()
@click.argument("state", required=False)
@click.option("--list", "list_", is_flag=True, help="List the saved states.")
@click.option("--dsn", metavar="DSN",
              help="Connection for a --dsn state (its manifest keeps the DSN without a "
                   "password; PGPASSWORD and .pgpass also work).")
@click.option("--force", is_flag=True,
              help="Restore even if the configuration changed after the apply (the current "
                   "files are saved in the state directory first).")
@click.option("--state-dir", metavar="DIR", type=click.Path(file_okay=False),
              envvar="PGACCEL_STATE_DIR", help="Where the states are kept.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def rollback(state, list_, dsn, force, state_dir, as_json) -> None:
    """Return a server (and this machine's Linux settings) to a saved state.

    STATE is a state id (or a unique prefix) from `pgaccel rollback --list`; the default is
    the latest applied one. The target goes back to how it was before that apply: it and
    every later apply on the same target are undone, the configuration files are restored
    byte for byte (checked), and the server is reloaded or restarted and verified."""
    from ..apply.rollback import rollback as rollback_states
    from ..apply.state import StateStore
    store = StateStore(state_dir)
    if list_:
        if state:
            raise UsageError("--list takes no STATE.")
        states = store.states()
        if as_json:
            print_json([{k: s.data.get(k) for k in ("id", "created", "status", "target",
                                                     "rolled_back")} for s in states])
            return
        if not states:
            out.print(f"No saved states in {store.root}.")
            return
        t = Table(title=f"Saved states ({store.root})", title_justify="left")
        for col in ("state", "created", "status", "target", "settings", "linux"):
            t.add_column(col, overflow="fold")
        for s in states:
            tg = s.data.get("target", {})
            where = tg.get("pgdata") or tg.get("dsn") or tg.get("root") or "?"
            t.add_row(s.id, s.data.get("created", ""), s.status, f"{tg.get('kind')}: {where}",
                      str(len(s.data.get("postgres", {}).get("applied", []))),
                      str(len(s.data.get("os", {}).get("items", []))))
        out.print(t)
        return
    rep = rollback_states(store, state, dsn=dsn, force=force)
    if as_json:
        print_json(rep.to_dict())
        return
    out.print(f"Rolled back to before state {rep.state_id} (undid {', '.join(rep.undone)}).")
    for f in rep.files:
        if not f["identical"]:
            state = "restored, but NOT byte-identical to before"
        elif not f["existed"]:
            state = "removed (it did not exist before)"
        elif not f["touched"]:
            state = "never touched, unchanged"
        else:
            state = "byte-identical to before (checksum verified)"
        out.print(f"  {f['path']}: {state}")
    if rep.settings:
        out.print("  settings now: " + ", ".join(f"{k} = {v}" for k, v in
                                                 sorted(rep.settings.items())), soft_wrap=True)
    for line in rep.os_restored:
        out.print(f"  restored {line.split(' -> ')[0]}", soft_wrap=True)
    steps = [w for w, done in (("reloaded", rep.reloaded), ("restarted", rep.restarted)) if done]
    if steps:
        out.print(f"  The server was {' and '.join(steps)}.")
    for n in rep.notes:
        out.print(f"  - {n}", soft_wrap=True)


def emit(res: TuneResult, fmt: str, compare: str | None) -> None:
    from ..tune import linux, pgtune, render
    from ..tune.rules import memory_budget
    plan, inp = res.plan, res.inputs
    rows = pgtune.compare(plan, inp, res.catalog) if compare else None
    if fmt == "json":
        used, limit, bd = memory_budget(plan, inp)
        extra: dict[str, Any] = {"target": res.target, "notes": res.notes,
                                 "memory_budget": {"used_bytes": used, "limit_bytes": limit,
                                                   "breakdown": bd}}
        if rows is not None:
            extra["compare_pgtune"] = rows
        print_json(render.plan_json(plan, extra))
        return
    text = {"conf": render.render_conf, "sql": render.render_sql,
            "sysctl": linux.render_sysctl, "tuned": linux.render_tuned,
            "script": linux.render_script}.get(fmt)
    for n in res.notes + plan.warnings:
        console.print(f"[yellow]note:[/yellow] {n}", soft_wrap=True)
    if text is not None:
        click.echo(text(plan), nl=False)
        return
    out.print(f"Plan for {_inputs_line(inp)}.\nServer: {res.target}.")
    if rows is not None:
        out.print(_compare_table(rows))
    else:
        layers = {c.layer for c in plan.changes}
        out.print(_plan_table(plan, "Proposed changes (dim: already so)", len(layers) > 1))
    for a in plan.advice:
        out.print(f"- {a}", soft_wrap=True)
    for c in plan.changes:
        for cmd in c.inputs.get("commands", []) if c.advice_only else []:
            out.print(f"    {cmd}", soft_wrap=True)
