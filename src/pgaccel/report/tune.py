"""What `pgaccel tune` and `pgaccel rollback` print: the plan (a table, a text format or
JSON), the PGTune comparison, an apply's result, the saved states and a rollback's result.

Every function writes to the consoles it is given (``out``: the result, on stdout;
``err``: notes, on stderr).  Text formats (conf, sql, sysctl, ...), diffs and JSON are
written to ``out``'s file as they are, never through rich's markup or wrapping.  ``res`` is
a ``tune.plan.TuneResult`` (plan, inputs, catalog, target, notes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from rich.console import Console
from rich.table import Table

from ..apply.reports import ApplyReport, RollbackReport
from ..tune.inputs import TuneInputs
from ..tune.plan import Plan, TuneResult
from ..util import format_bytes, json_text, with_schema
from . import format as fmt

if TYPE_CHECKING:
    from ..apply.state import State


def _raw(dest: Console, text: str) -> None:
    dest.file.write(text)
    dest.file.flush()


def _json(dest: Console, data: Any) -> None:
    _raw(dest, json_text(with_schema(data)) + "\n")


def _notes(err: Console, notes: Iterable[str]) -> None:
    for n in notes:
        err.print(f"[yellow]note:[/yellow] {n}", soft_wrap=True)


# -- the plan ---------------------------------------------------------------------------------

def plan_table(plan: Plan, title: str, show_layer: bool) -> Table:
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


def compare_table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title="PGTune (published formulas) vs pgaccel, same inputs", title_justify="left")
    for col in ("setting", "PGTune", "pgaccel", "why pgaccel differs"):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(r["setting"], r["pgtune"] or "-", r["pgaccel"] or "-", r["reason"],
                  style=None if not r["same"] else "dim")
    return t


def inputs_line(i: TuneInputs) -> str:
    over = f" (overridden: {', '.join(i.overridden)})" if i.overridden else ""
    how = {"profile": " (measured)", "flag": "", "default": " (assumed)"}.get(
        i.workload_from, "")
    return (f"{format_bytes(i.memory_bytes)} memory, {fmt.short(i.cpus)} CPUs, {i.storage} storage, "
            f"{i.connections} connections, {i.workload} workload{how}, PostgreSQL "
            f"{i.pg_version}, {i.arch}{over}")


def profile_table(i: TuneInputs) -> Table | None:
    """The measured workload profile a plan read, with the numbers it came from, and the
    class it chose (or that --workload overrode)."""
    from ..tune.workload import WorkloadProfile, classify, lines
    if not i.profile:
        return None
    p = WorkloadProfile.from_dict(i.profile)
    kind, why = classify(p)
    if i.workload_from == "profile":
        title = f"Workload profile: {kind} ({why})"
    elif kind is not None and kind != i.workload:
        title = (f"Workload profile: {kind} ({why}); --workload {i.workload} overrides the "
                 "class, the rules still read the profile")
    else:
        title = f"Workload profile: {kind or 'nothing to plan from'} ({why})"
    t = Table(title=title, title_justify="left", show_header=False)
    t.add_column("what")
    t.add_column("measured", overflow="fold")
    for what, value in lines(p):
        t.add_row(what, value)
    for n, top in enumerate(p.top[:3], 1):
        t.add_row(f"busiest #{n}", f"{top['time_share']:.0%} of the time, "
                                   f"{fmt.ms(top['mean_ms'])} ms per call: "
                                   f"{top['statement']}")
    return t


def emit_plan(res: TuneResult, fmt: str, compare: str | None, *, out: Console,
              err: Console) -> None:
    """The plan as ``fmt`` (table, json, conf, sql, sysctl, tuned, script); ``compare``
    ("pgtune") puts PGTune's values beside pgaccel's (table and json)."""
    from ..tune import fleet, linux, pgtune, render
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
        _json(out, render.plan_json(plan, extra))
        return
    text = {"conf": render.render_conf, "sql": render.render_sql,
            "sysctl": linux.render_sysctl, "tuned": linux.render_tuned,
            "script": linux.render_script, **fleet.RENDERERS}.get(fmt)
    _notes(err, res.notes + plan.warnings)
    if text is not None:
        _raw(out, text(plan))
        return
    out.print(f"Plan for {inputs_line(inp)}.\nServer: {res.target}.")
    prof = profile_table(inp)
    if prof is not None:
        out.print(prof)
    if rows is not None:
        out.print(compare_table(rows))
    else:
        layers = {c.layer for c in plan.changes}
        out.print(plan_table(plan, "Proposed changes (dim: already so)", len(layers) > 1))
    for a in plan.advice:
        out.print(f"- {a}", soft_wrap=True)
    for c in plan.changes:
        for cmd in c.inputs.get("commands", []) if c.advice_only else []:
            out.print(f"    {cmd}", soft_wrap=True)


# -- an apply -------------------------------------------------------------------------------

def emit_apply(report: ApplyReport, fmt: str, res: TuneResult | None = None, *,
               out: Console, err: Console) -> None:
    """What ``tune --apply/--apply-os`` did (or would do, with --dry-run)."""
    if fmt == "json":
        _json(out, {"apply": report.to_dict(), "target": res.target if res else None})
        return
    _notes(err, res.notes if res else [])
    if report.dry_run:
        out.print(f"Dry run for {report.target}: nothing was changed.")
        if report.diff:
            _raw(out, report.diff if report.diff.endswith("\n") else report.diff + "\n")
        _emit_lists(report, out)
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
    _emit_lists(report, out)
    steps = [w for w, done in (("reloaded", report.reloaded), ("restarted", report.restarted))
             if done]
    if steps:
        out.print(f"The server was {' and '.join(steps)}.")
    for n in report.notes:
        out.print(f"- {n}", soft_wrap=True)
    if report.state_id:
        out.print(f"State {report.state_id} saved in {report.state_dir}. Undo with: "
                  f"pgaccel rollback {report.state_id}", soft_wrap=True)


def _emit_lists(report: ApplyReport, out: Console) -> None:
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


# -- saved states and a rollback ------------------------------------------------------------

def emit_states(root: str, states: list["State"], as_json: bool, *, out: Console) -> None:
    """`pgaccel rollback --list`."""
    if as_json:
        _json(out, {"states": [{**{k: s.data.get(k) for k in ("id", "created", "target",
                                                            "rolled_back")},
                                "status": s.status} for s in states]})
        return
    if not states:
        out.print(f"No saved states in {root}.")
        return
    t = Table(title=f"Saved states ({root})", title_justify="left")
    for col in ("state", "created", "status", "target", "settings", "linux"):
        t.add_column(col, overflow="fold")
    for s in states:
        tg = s.data.get("target", {})
        where = tg.get("pgdata") or tg.get("dsn") or tg.get("root") or "?"
        t.add_row(s.id, s.data.get("created", ""), s.status, f"{tg.get('kind')}: {where}",
                  str(len(s.data.get("postgres", {}).get("applied", []))),
                  str(len(s.data.get("os", {}).get("items", []))))
    out.print(t)


def emit_rollback(rep: RollbackReport, as_json: bool, *, out: Console) -> None:
    """What `pgaccel rollback` did."""
    if as_json:
        _json(out, rep.to_dict())
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
