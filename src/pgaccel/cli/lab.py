"""`pgaccel lab` (experiments from a TOML spec) and `pgaccel calibrate` (this machine's
noise floor).  The results store's commands are in ``store.py``; rendering in
``report/lab.py``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import click
from rich.markup import escape

from ..errors import UsageError
from ..lab.experiment import Experiment
from ..decide.schedule import estimate_trial_s
from ..decide.model import Variant, WorkloadSpec
from ..decide.judge import calibration, samples
from ..specs.spec import SIZES
from ..specs.parse import load_spec, parse_spec
from ..report.lab import render_calibration, render_lab
from ..server.discovery import find_client
from ..server.target import open_target
from ..workloads.base import BenchContext, RunParams, get_workload
from ..session.runs import VariantRecord, amend_summary, start_run
from ..session.preflight import (check_specs, confirm_duration, new_cluster_dir,
                                 throwaway_dir)
from ..session.clienthosts import client_hosts_for
from .common import (BUILD_OPT, CLIENT_HOST_OPT, STORE_OPT, YES_OPT, announce_hosts,
                     ask_terminal, clients_type, console, out, parse_budget, print_json,
                     resolves_build, scale_type, seconds, target_options, write_reports)
from .labrun import execute_spec, workload_specs
from .progress import drive


# -- pgaccel lab ---------------------------------------------------------------------------
@click.command()
@click.argument("spec_path", required=False, type=click.Path(dir_okay=False))
@click.option("--size", type=click.Choice(SIZES), default=None,
              help="Scale of the workloads: small runs in minutes (default: medium).")
@click.option("--resume", "resume_id", metavar="RUN",
              help="Carry on with an interrupted lab run (id or unique prefix).")
@click.option("--check", is_flag=True,
              help="Check the spec against the servers and show the variants; no trials.")
@click.option("--budget", metavar="TIME", help="Override the spec's time budget, e.g. 10m.")
@click.option("--pg-bin", metavar="DIR", envvar="PGACCEL_PG_BIN",
              help="Server for variants that name no bin or version.")
@BUILD_OPT
@click.option("--workdir", metavar="DIR", type=click.Path(file_okay=False),
              help="Where throwaway clusters are created (default: the temp dir).")
@click.option("--run-as", metavar="USER", help="Unprivileged OS user running the servers.")
@click.option("--keep", is_flag=True, help="Keep the throwaway clusters' directories.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Run directory.")
@STORE_OPT
@YES_OPT
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@resolves_build
def lab(spec_path, size, resume_id, check, budget, pg_bin, workdir, run_as, keep, out_dir,
        store_path, yes, as_json) -> None:
    """Run the experiment a TOML spec describes: variants (settings, server binaries, OS
    settings) against workloads, trials interleaved, every variant verified, each
    difference judged with a confidence interval (95% unless the spec says otherwise).
    See examples/*.toml."""
    from ..session.store import Store
    from ..probe.host import probe_host
    prior: dict[str, Any] | None = None
    if resume_id:
        with Store(store_path) as store:
            prior = store.get_run(resume_id)
        if prior["kind"] != "lab":
            raise UsageError(f"Run {prior['id']} is a {prior['kind']} run, not a lab run.")
        if prior["status"] == "running":
            raise UsageError(f"Run {prior['id']} is still running (pid {prior.get('pid')}).")
        if prior["status"] == "finished":
            raise UsageError(f"Run {prior['id']} already finished.",
                             f"`pgaccel show {prior['id']}` prints its results.")
        saved = prior["spec"] or {}
        out_dir = out_dir or saved.get("out_dir")   # the run directory it began in
        spec = parse_spec(saved["text"], saved.get("path", "<stored spec>"),
                          size or saved.get("size", "medium"))
    elif spec_path:
        spec = load_spec(spec_path, size or "medium")
    else:
        raise UsageError("Name a spec file, or --resume RUN.",
                         "Examples are in the examples/ directory.")
    if budget:
        spec.budget_s = parse_budget(budget)
    wspecs = workload_specs(spec)
    check_specs(wspecs, data_dir=throwaway_dir(workdir))
    if not check:
        est = sum(estimate_trial_s(ws) for ws in wspecs) * spec.rounds * len(spec.variants)
        confirm_duration(min(est, spec.budget_s) if spec.budget_s else est, yes=yes,
                         what="lab run", ask=ask_terminal())
    facts = probe_host(data_dir=workdir or "/")
    if prior:
        from ..session.store import host_fingerprint
        if prior.get("host_fingerprint") not in (None, host_fingerprint(facts.to_dict())):
            console.print(f"[bold yellow]Run {prior['id']} began on another host "
                          f"({prior['host_fingerprint']}); trials from both machines will be "
                          "pooled.[/bold yellow]")
    result = execute_spec(spec, wspecs, facts, pg_bin=pg_bin, workdir=workdir, run_as=run_as,
                          keep=keep, out_dir=out_dir, store_path=store_path, yes=yes,
                          check=check, as_json=as_json, prior=prior,
                          until_decided=spec.until_decided)
    if result is None:
        return
    summary, run_id, run_dir, store, notes, _exp = result
    render_lab(console if as_json else out, summary)
    write_reports(run_dir, store, run_id)
    if as_json:
        print_json({"run_id": run_id, "run_dir": run_dir, "spec": spec.name,
                    "size": spec.size, "notes": notes, **summary.to_dict()})


# -- pgaccel calibrate ---------------------------------------------------------------------
@click.command()
@target_options
@click.option("--workload", "-w", "workload_name", default="select-only", show_default=True)
@click.option("--clients", type=clients_type(), default=2, show_default=True)
@click.option("--scale", type=scale_type(), default=10, show_default=True)
@click.option("--duration", type=seconds(2), default=10, show_default=True)
@click.option("--warmup", type=seconds(1), default=5, show_default=True,
              help="Maximum warm-up seconds (ends early once the rate is steady).")
@click.option("--rounds", type=click.IntRange(2, 10000), default=5, show_default=True,
              help="Trials per (identical) variant.")
@click.option("--budget", default="10m", show_default=True,
              help="Budget to report the smallest detectable difference for.")
@CLIENT_HOST_OPT
@STORE_OPT
@YES_OPT
@click.option("--json", "as_json", is_flag=True)
def calibrate(pg_bin, dsn, pgdata, run_as, workdir, port, keep, workload_name, clients,
              scale, duration, warmup, rounds, budget, client_hosts, store_path, yes,
              as_json) -> None:
    """A/A experiment: two identical variants, trials interleaved.  Reports this machine's
    noise floor (the trials' coefficient of variation) and the smallest difference an
    experiment with the given budget can detect (80% power, 95% confidence)."""
    from ..probe.host import probe_host
    budget_s = parse_budget(budget)
    wl = get_workload(workload_name)
    if getattr(wl, "kind", "single") == "steps":
        raise UsageError(f"{wl.name} is a multi-step workload.",
                         "Calibrate with a single-interval one such as select-only.")
    hosts = client_hosts_for(client_hosts, [wl], dsn)
    facts = probe_host(data_dir=pgdata or workdir or "/")
    params = RunParams(clients=clients, duration=duration, warmup=warmup, scale=scale)
    specs = [WorkloadSpec(wl, params)]
    check_specs(specs, data_dir=new_cluster_dir(dsn, pgdata, workdir))
    confirm_duration(estimate_trial_s(specs[0]) * rounds * 2, yes=yes, what="calibration",
                     ask=ask_terminal())
    with open_target(pg_bin=pg_bin, dsn=dsn, pgdata=pgdata, run_as=run_as, workdir=workdir,
                     port=port, keep=keep) as target:
        console.print(f"[bold]pgaccel calibrate[/bold] on {escape(target.describe())}: A/A, "
                      f"{wl.name}, {rounds} rounds")
        target.apply({})
        ctx = BenchContext(target, find_client("pgbench", target.inst), workdir=workdir,
                           client_hosts=hosts)
        with target.database() as db:
            server = {"version": db.version, "bindir": getattr(target.inst, "bindir", None)}
        if hosts:
            server["client_hosts"] = announce_hosts(hosts, target)
        variants = [Variant("A"), Variant("A2")]
        rec = start_run(store_path, "calibrate", wl.name,
                        [VariantRecord(v.name) for v in variants], host=facts.to_dict(),
                        spec={"params": params.to_dict(), "rounds": rounds},
                        info={"target": target.describe(), "server": server})
        exp = Experiment(ctx, variants, specs, rounds=rounds,
                         store=rec.store, run_id=rec.run_id, run_dir=rec.run_dir,
                         info=rec.info)
        summary = drive(exp)
    (a, ra), (b, rb) = samples(exp.trials, wl.name, "A"), samples(exp.trials, wl.name, "A2")
    walls = [float(t.metrics.get("trial_wall_s") or 0) for t in exp.trials]
    cal = calibration(a, b, sum(walls) / len(walls), budget_s, rounds_a=ra, rounds_b=rb)
    judged = replace(summary, calibration=cal).to_dict()
    rec.store.finish_run(rec.run_id, "finished", summary=judged)
    rec.close()
    amend_summary(rec.run_dir, judged)
    dest = console if as_json else out
    render_calibration(dest, cal, wl.name)
    write_reports(rec.run_dir, run_id=rec.run_id)
    if as_json:
        print_json({"run_id": rec.run_id, "workload": wl.name, **cal.to_dict()})
