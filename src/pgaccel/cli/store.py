"""The results store's commands: `pgaccel history`, `pgaccel show`, `pgaccel compare`."""

from __future__ import annotations

import os
import sys

import click
from rich.table import Table

from ..util import with_schema
from ..decide.results import Summary
from ..report import format as fmt
from ..report.lab import render_calibration, render_lab
from ..report.terminal import styled
from .common import STORE_OPT, console, out, print_json


@click.command()
@click.option("--limit", type=click.IntRange(1), default=30, show_default=True)
@click.option("--kind", type=click.Choice(["run", "lab", "bench", "calibrate"]))
@STORE_OPT
@click.option("--json", "as_json", is_flag=True)
def history(limit, kind, store_path, as_json) -> None:
    """List the runs in the results store, newest first."""
    from ..session.stored import list_runs
    path, runs = list_runs(store_path, limit=limit, kind=kind)
    if as_json:
        print_json({"runs": [{k: r[k] for k in ("id", "created_at", "finished_at", "kind",
                                                "name", "status", "n_trials",
                                                "host_fingerprint")} for r in runs]})
        return
    t = Table(title=f"Runs in {path}", title_justify="left")
    for col in ("run", "created (UTC)", "kind", "name", "status", "trials", "host"):
        t.add_column(col, no_wrap=col != "name")
    for r in runs:
        st = {"finished": "green", "interrupted": "yellow", "failed": "red"}.get(r["status"], "")
        t.add_row(r["id"], r["created_at"].replace("T", " ").rstrip("Z"), r["kind"], r["name"],
                  f"[{st}]{r['status']}[/]" if st else r["status"], str(r["n_trials"]),
                  r["host_fingerprint"] or fmt.DASH)
    out.print(t)
    if not runs:
        console.print("No runs yet: `pgaccel run --quick` or `pgaccel lab SPEC.toml`.")


@click.command()
@click.argument("run_id", metavar="RUN")
@click.option("--export", "export", type=click.Choice(["csv", "json"]),
              help="Write the run's trials (csv) or everything (json) instead.")
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="File for --export (default: stdout).")
@STORE_OPT
@click.option("--json", "as_json", is_flag=True, help="The run as JSON (without series).")
def show(run_id, export, output, store_path, as_json) -> None:
    """Show one run (id, unique prefix or its run directory): variants, results, trials."""
    from ..session import stored
    if export == "json":
        data = stored.export_json(store_path, run_id)
        if output:
            from ..util import atomic_write_json
            atomic_write_json(output, with_schema(data))
        else:
            print_json(data)
        return
    if export == "csv":
        _rid, n = stored.export_csv(store_path, run_id, output or sys.stdout)
        if output:
            console.print(f"{n} trials written to {output}")
        return
    run = stored.stored_run(store_path, run_id)
    if as_json:
        print_json(run)
        return
    out.print(f"[bold]{run['id']}[/bold] {run['kind']} {run['name']!r}: {run['status']}, "
              f"{len(run['trials'])} trials, created {run['created_at']}, host "
              f"{run['host_fingerprint'] or fmt.DASH}")
    for v in run["variants"]:
        ver = v.get("verified") or {}
        flag = "" if not ver else (" [green]verified[/]" if ver.get("ok") else
                                   " [red]refused: " + "; ".join(ver.get("problems", [])) + "[/]")
        settings = ", ".join(f"{k}={x}" for k, x in (v["settings"] or {}).items())
        out.print(f"  {v['name']}: {v.get('server_version') or ''} {settings or '(defaults)'}"
                  f"{flag}")
    summary = Summary.from_dict(run["summary"]) if run.get("summary") else None
    if summary and summary.workloads:
        render_lab(out, summary, run["trials"],
                   ((run.get("spec") or {}).get("resolved") or {}).get("findings"))
    if summary and summary.calibration:
        render_calibration(out, summary.calibration, run["name"])
    t = Table(title="Trials", title_justify="left")
    for col in ("round", "variant", "workload", "clients", "value", "status"):
        t.add_column(col, justify="right" if col in ("round", "clients", "value") else "left")
    for tr in run["trials"]:
        t.add_row(str(tr["round"] + 1), tr["variant"], tr["workload"], str(tr["clients"]),
                  fmt.number(tr["primary_value"], 1), tr["status"])
    out.print(t)
    from ..session.runs import run_dir_of
    d = run_dir_of(run)
    made = [os.path.join(d, n) for n in ("report.html", "report.md")
            if os.path.exists(os.path.join(d, n))]
    console.print("Report: " + (" and ".join(made) if made else
                                f"none yet; `pgaccel report {run['id']}` writes it"),
                  markup=False)


@click.command()
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@click.option("--min-effect", type=click.FloatRange(0, 1), default=0.02, show_default=True)
@STORE_OPT
@click.option("--json", "as_json", is_flag=True)
def compare(run_a, run_b, min_effect, store_path, as_json) -> None:
    """Compare two stored runs: per workload, client count and variant, the medians side by
    side and B against A with a 95% confidence interval.  Runs from different hosts are
    flagged: their difference is the machines' as much as the configurations'."""
    from ..session.stored import compare_stored
    res = compare_stored(store_path, run_a, run_b, min_effect=min_effect)
    if as_json:
        print_json(res)
        return
    if res["hosts_differ"]:
        console.print(f"[bold yellow]The runs were recorded on different hosts "
                      f"({res['host_a'] or 'unknown'} vs {res['host_b'] or 'unknown'}): the "
                      "difference includes the machines.[/bold yellow]")
    t = Table(title=f"{res['run_b']} against {res['run_a']}", title_justify="left")
    for col in ("workload", "clients", "variant", "n A", "median A", "n B", "median B",
                "B vs A", "verdict"):
        t.add_column(col, justify="left" if col in ("workload", "variant", "verdict")
                     else "right")
    for r in res["rows"]:
        v = r["verdict"]
        t.add_row(r["workload"], str(r["clients"]), r["variant"], str(r["n_a"]),
                  fmt.number(r["median_a"], 1), str(r["n_b"]), fmt.number(r["median_b"], 1),
                  fmt.pct_change(r["ratio"]), styled(v) if v else
                  "[dim]one run only[/]")
    out.print(t)
