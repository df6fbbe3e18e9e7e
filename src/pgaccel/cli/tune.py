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
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from typing import Any

import click
from rich.table import Table

from ..errors import NotFound, UsageError
from ..tune.gucs import GucCatalog, catalog_from_server, describe_config
from ..tune.inputs import STORAGE, WORKLOADS, TuneInputs
from ..tune.plan import Plan
from .common import console, out, print_json, target_options

FORMATS = ("table", "conf", "sql", "json", "sysctl", "tuned", "script")
LAYERS = ("postgres", "linux", "build", "all")


@dataclass
class TuneResult:
    plan: Plan
    inputs: TuneInputs
    catalog: GucCatalog | None
    target: str
    notes: list[str] = field(default_factory=list)


def _layers(layer: str, fmt: str) -> tuple[str, ...]:
    if layer == "all":
        return ("postgres", "linux", "build")
    if fmt in ("sysctl", "tuned", "script"):
        return ("linux",) if layer == "postgres" else (layer, "linux")
    return (layer,)


def build_plan(*, pg_bin: str | None = None, dsn: str | None = None, pgdata: str | None = None,
               run_as: str | None = None, workdir: str | None = None, port: int | None = None,
               keep: bool = False, overrides: dict[str, Any] | None = None,
               layers: tuple[str, ...] = ("postgres",)) -> TuneResult:
    """Probe, read the server's catalog and settings, and plan (see module docstring)."""
    from ..probe.host import probe_host
    from ..server.cluster import Cluster
    from ..server.discovery import choose_server
    from ..tune.engine import plan_for_installation, plan_for_target, settings_from_datadir
    from ..tune import versions

    ov = {k: v for k, v in (overrides or {}).items() if v is not None}
    if dsn and pgdata:
        raise UsageError("--dsn and --pgdata name two different servers.", "Give one of them.")
    notes: list[str] = []
    if dsn:
        import psycopg

        from ..server.target import explain_connect_error, safe_dsn
        from ..tune.build import read_pg_config
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=15) as conn:
                catalog, current = catalog_from_server(conn)
                host = conn.info.host
        except psycopg.Error as e:
            raise explain_connect_error(e, f"the server at {safe_dsn(dsn)}") from None
        local = host.startswith("/") or host in ("localhost", "127.0.0.1", "::1")
        if not local and not ("memory" in ov and "cpus" in ov):
            notes.append("The server is remote: host facts (memory, CPUs, disks, sysctls) are "
                         "this machine's. Pass --memory and --cpus for the server's machine.")
        pgc = {}
        if local:
            try:
                inst = choose_server(pg_bin, catalog.major)
                pgc = read_pg_config(inst.path("pg_config")) if "pg_config" in inst.programs \
                    else {}
            except NotFound:
                pass
        if ov.get("pg_version", catalog.major) != catalog.major:
            from ..tune.engine import default_settings
            notes.append(f"Planning for PostgreSQL {ov['pg_version']}, the server is "
                         f"{catalog.major}: not validated against a real server.")
            catalog, current = None, default_settings(int(ov["pg_version"]))
        plan = plan_for_target(probe_host(), ov, current, catalog, pg_config=pgc,
                               layers=layers)
        return TuneResult(plan, TuneInputs.from_dict(plan.inputs), catalog,
                          f"the server at {safe_dsn(dsn)}", notes)

    inst = choose_server(pg_bin)
    facts = probe_host(data_dir=pgdata or workdir or tempfile.gettempdir())
    other_version = ov.get("pg_version", inst.major) != inst.major
    if other_version:
        notes.append(f"--pg-version {ov['pg_version']} differs from the installed "
                     f"PostgreSQL {inst.major} ({inst.bindir}): binary validation skipped.")
        catalog = None   # (an empty catalog below only skips running --describe-config)
        plan = plan_for_installation(inst, facts, ov, catalog=GucCatalog(), layers=layers)
        target = f"PostgreSQL {ov['pg_version']} (planned, not installed)"
    elif pgdata:
        user = Cluster.existing(inst, pgdata, run_as=run_as).user
        names = [n for n in versions.GUCS if versions.known(n, inst.major)]
        current = settings_from_datadir(inst.path("postgres"), pgdata, names, user)
        catalog = describe_config(inst.path("postgres"), inst.major)
        plan = plan_for_installation(inst, facts, ov, catalog=catalog, current=current,
                                     pgdata=pgdata, user=user, layers=layers)
        target = f"the cluster in {pgdata} (PostgreSQL {inst.version})"
    else:
        with Cluster.create_throwaway(inst, workdir=workdir, port=port, run_as=run_as) as c:
            c.keep = keep
            c.start({})
            with c.connect() as conn:
                catalog, current = catalog_from_server(conn)
            c.stop()
            plan = plan_for_installation(inst, facts, ov, catalog=catalog, current=current,
                                         pgdata=c.pgdata, user=c.user, layers=layers)
        target = f"PostgreSQL {inst.version} ({inst.bindir}); 'current' = its defaults"
    return TuneResult(plan, TuneInputs.from_dict(plan.inputs), catalog, target, notes)


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
def tune(pg_bin, dsn, pgdata, run_as, workdir, port, keep, memory, cpus, pg_version, storage,
         connections, workload, layer, fmt, compare) -> None:
    """Propose settings for PostgreSQL, Linux and the build, each with its reason.

    Nothing is changed: the output is a plan (a table, a conf.d snippet, ALTER SYSTEM
    statements, a sysctl.d file, a tuned profile or a script)."""
    if compare and fmt not in ("table", "json"):
        raise UsageError("--compare pgtune works with --format table or json.")
    layers = _layers(layer, fmt)
    ov = {"memory": memory, "cpus": cpus, "pg_version": pg_version, "storage": storage,
          "connections": connections, "workload": workload}
    res = build_plan(pg_bin=pg_bin, dsn=dsn, pgdata=pgdata, run_as=run_as, workdir=workdir,
                     port=port, keep=keep, overrides=ov, layers=layers)
    emit(res, fmt, compare)


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
