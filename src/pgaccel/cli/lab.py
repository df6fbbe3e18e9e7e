"""`pgaccel lab` (experiments from a TOML spec) and `pgaccel calibrate` (this machine's
noise floor).  The results store's commands are in ``store.py``; rendering in
``report/lab.py``."""

from __future__ import annotations

import contextlib
import os
from dataclasses import replace
from typing import Any

import click
from rich.markup import escape

from ..errors import PgaccelError, ServerError, UsageError
from ..lab.catalog import settings_problems
from ..lab.experiment import Experiment, estimate_trial_s, trials_from_store
from ..lab.model import Variant, WorkloadSpec
from ..lab.judge import calibration, samples
from ..lab.spec import SIZES, LabSpec
from ..lab.tomlpos import SpecError
from ..lab.specparse import load_spec, parse_spec
from ..lab.variants import LabVariant, VariantManager, choose_base, resolve_servers
from ..report import format as fmt
from ..report.lab import render_calibration, render_lab, render_variants
from ..server.discovery import choose_server, find_client, find_installations, probe_dir
from ..server.target import open_target
from ..workloads.base import BenchContext, RunParams, get_workload
from ..session.plan import computed_settings
from ..session.runs import VariantRecord, start_run
from ..session.preflight import (check_specs, confirm_duration, new_cluster_dir,
                                 throwaway_dir)
from .common import (BUILD_OPT, STORE_OPT, YES_OPT, ask_terminal, clients_type, console, out,
                     parse_budget, print_json, resolves_build, scale_type, seconds,
                     target_options)
from .progress import drive


# -- pgaccel lab ---------------------------------------------------------------------------
def check_static(spec: LabSpec, runnable: list) -> None:
    """Setting names (and unit-free values) against each server's --describe-config."""
    try:
        from ..pg.catalog import describe_config
    except ImportError:  # pragma: no cover - the catalog helper is optional
        return
    cats: dict[str, Any] = {}
    for r in runnable:
        key = r.inst.bindir
        if key not in cats:
            try:
                cats[key] = describe_config(r.inst.path("postgres"), r.inst.major)
            except PgaccelError:
                cats[key] = None
        if cats[key] is not None:
            bad = settings_problems(r.variant.settings, cats[key])
            if bad:
                raise SpecError(f"{spec.variant_where(r.variant.name, 'settings', bad[0][0])}: "
                                f"variant {r.variant.name!r}: " + "; ".join(w for _, w in bad),
                                "Fix or remove the setting (`postgres --describe-config` "
                                "lists what this server knows).")


def build_experiment(spec: LabSpec, stack: contextlib.ExitStack, *, pg_bin, workdir, run_as,
                     keep, facts, only: list[str] | None = None, max_clients: int = 1,
                     yes: bool = False, may_build: bool = True
                     ) -> tuple[list[LabVariant], str, list[str]]:
    """Resolve servers, start one throwaway cluster per bin directory, compute and check
    every variant's settings.  Returns (variants in spec order, base, messages)."""
    insts = find_installations(pg_bin)
    try:
        default = choose_server(pg_bin)
    except PgaccelError:
        default = None
    wanted = [v for v in spec.variants if only is None or v.name in only]
    if any(v.build or v.flavor or v.version for v in wanted):
        from ..session.builds import realize_builds
        wanted = realize_builds(wanted, insts, yes=yes and may_build,
                                ask=ask_terminal() if may_build else None,
                                say=lambda s: console.print(s, markup=False))
    resolved = resolve_servers(wanted, insts, default,
                               probe=lambda d: probe_dir(d, "spec bin"))
    notes = [r.skipped for r in resolved if r.skipped]
    runnable = [r for r in resolved if not r.skipped]
    base, note = choose_base(spec.base, [r.variant.name for r in runnable])
    if note:
        notes.append(note)
    if len(runnable) < 2:
        raise UsageError(f"{spec.path}: only {len(runnable)} variant(s) can run on this machine "
                         "(a comparison needs two). " + " ".join(notes),
                         "Install the missing servers or add variants this machine can run.")
    check_static(spec, runnable)
    if any(r.variant.os for r in runnable) and os.geteuid() != 0:
        raise UsageError("This spec sets OS settings (nr_hugepages, thp), which need root.",
                         "Run pgaccel lab as root, or drop the os tables.")
    ctxs: dict[str, BenchContext] = {}
    lvs = []
    for r in runnable:
        if r.inst.bindir not in ctxs:
            target = stack.enter_context(open_target(pg_bin=r.inst.bindir, workdir=workdir,
                                                     run_as=run_as, keep=keep))
            target.apply({})
            ctxs[r.inst.bindir] = BenchContext(target, find_client("pgbench", r.inst),
                                               workdir=workdir)
        ctx = ctxs[r.inst.bindir]
        settings = dict(r.variant.settings)
        if r.variant.settings_from:
            computed, dropped = computed_settings(r.variant.settings_from, ctx.target, facts)
            settings = {**computed, **settings}
            notes += [f"variant {r.variant.name!r} ({r.variant.settings_from}): {d}"
                      for d in dropped]
        from ..pg.catalog import catalog_from_server
        with ctx.target.connect() as conn:
            catalog, _ = catalog_from_server(conn)
        bad = settings_problems(settings, catalog)
        conns = settings.get("max_connections") or (catalog.get("max_connections").reset_val
                                                      if catalog.get("max_connections") else None)
        if not bad and conns and str(conns).isdigit() and max_clients + 5 > int(conns):
            bad = [("max_connections", f"max_connections = {conns} is too few for "
                                       f"{max_clients} clients (pgaccel needs 5 more)")]
        if bad:
            raise SpecError(f"{spec.variant_where(r.variant.name, 'settings', bad[0][0])}: "
                            f"variant {r.variant.name!r}: " + "; ".join(w for _, w in bad),
                            "Fix or remove the setting; the running server's pg_settings "
                            "lists what it accepts.")
        lvs.append(LabVariant(r.variant, r.inst, ctx, settings))
    order = [lv for lv in lvs if lv.name == base] + [lv for lv in lvs if lv.name != base]
    return order, base, notes


def workload_specs(spec: LabSpec) -> list[WorkloadSpec]:
    from ..workloads.steps import params_for
    out = []
    for e in spec.workloads:
        wl = get_workload(e.name)
        for c in e.clients:
            out.append(WorkloadSpec(wl, params_for(wl, {**e.overrides, "clients": c}),
                                    key=e.label))
    return out


def lab_events(kind: str, **kw: Any) -> None:
    if kind == "prepare":
        console.print(f"[bold]{kw['workload']}[/bold]: preparing data")
    elif kind == "burn_in":
        console.print(f"  {kw['workload']:<24} {kw['variant']:<14} burn-in trial (not counted)")
    elif kind == "trial_done":
        ts = kw["trials"]
        t = ts[0]
        what = (f"{fmt.number(t.throughput, 1):>10} {t.unit}" if len(ts) == 1 else
                f"{len(ts)} steps: " + ", ".join(f"{x.metrics.get('step')} "
                                                  f"{fmt.number(x.throughput)}" for x in ts[:4])
                + (" …" if len(ts) > 4 else ""))
        console.print(f"  {kw['workload']:<24} {kw['variant']:<14} round {kw['round'] + 1}: "
                      f"{what}")
    elif kind == "refused":
        console.print(f"[bold red]Variant {kw['variant']} refused:[/] {kw['reason']}")
    elif kind == "stop":
        console.print(f"  [dim]{kw['workload']}: {kw['rounds']} rounds; {kw['reason']}[/dim]")


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
    from ..lab.store import Store
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
        from ..lab.store import host_fingerprint
        if prior.get("host_fingerprint") not in (None, host_fingerprint(facts.to_dict())):
            console.print(f"[bold yellow]Run {prior['id']} began on another host "
                          f"({prior['host_fingerprint']}); trials from both machines will be "
                          "pooled.[/bold yellow]")
    with contextlib.ExitStack() as stack:
        lvs, base, notes = build_experiment(
            spec, stack, pg_bin=pg_bin, workdir=workdir, run_as=run_as, keep=keep,
            facts=facts, only=(prior["spec"] or {}).get("active") if prior else None,
            max_clients=max(w.params.clients for w in wspecs), yes=yes, may_build=not check)
        for n in notes:
            console.print(f"[yellow]{n}[/yellow]")
        manager = VariantManager({lv.name: lv for lv in lvs})
        stack.callback(manager.restore)
        manager.resolve_os()
        for lv in lvs:
            manager.verify(lv.name)
        render_variants(console, lvs, base)
        refused = {lv.name: "; ".join(lv.verified.get("problems", [])) for lv in lvs
                   if not lv.verified.get("ok")}
        if check:
            if as_json:
                print_json({"spec": spec.to_dict(), "notes": notes, "ok": not refused,
                            "variants": {lv.name: {"settings": lv.settings,
                                                   "verified": lv.verified} for lv in lvs}})
            if refused:
                raise ServerError(f"{spec.path}: {len(refused)} of {len(lvs)} variants are not "
                                  "what they claim: " + "; ".join(f"{k}: {v}" for k, v in
                                                                  refused.items()) + ".",
                                  "Fix the spec or the machine (see the Variants table).")
            console.print(f"{spec.path}: OK ({len(lvs)} variants, {len(wspecs)} workload runs, "
                          f"at least {spec.rounds} rounds).")
            return
        if base in refused or len(lvs) - len(refused) < 2:
            raise PgaccelError(
                "Not enough variants are what they claim to run the comparison: "
                + "; ".join(f"{k}: {v}" for k, v in refused.items()),
                "Fix the spec or the machine (see the Variants table) and run again.")
        runs = [lv for lv in lvs if lv.name not in refused]
        rec = start_run(
            store_path, "lab", spec.name,
            [VariantRecord(lv.name, lv.settings, lv.verified.get("server_version"),
                           lv.inst.bindir, lv.verified) for lv in lvs],
            host=facts.to_dict(), out_dir=out_dir, resume=prior["id"] if prior else None,
            spec={"text": spec.text, "path": spec.path, "size": spec.size,
                  "resolved": spec.to_dict(), "active": [lv.name for lv in runs],
                  "out_dir": os.path.abspath(out_dir) if out_dir else None},
            info={"spec": spec.to_dict(), "notes": notes,
                  "verified": {lv.name: lv.verified for lv in lvs}})
        stack.callback(rec.close)
        run_id = rec.run_id
        done = (trials_from_store(rec.store.trials_for(run_id, with_series=True))
                if prior else [])
        if prior:
            console.print(f"Resuming {run_id}: {len(done)} trials already stored.")
        exp = Experiment(runs[0].ctx, [Variant(lv.name, dict(lv.settings), lv.spec.description)
                                       for lv in runs], wspecs, rounds=spec.rounds,
                         order=spec.order, seed=spec.seed, min_effect=spec.min_effect,
                         confidence=spec.confidence, max_rounds=spec.max_rounds,
                         budget_s=spec.budget_s, target_ci_width=spec.target_ci_width,
                         store=rec.store, run_id=run_id, run_dir=rec.run_dir, info=rec.info,
                         on_event=lab_events, hooks=manager,
                         contexts={lv.name: lv.ctx for lv in runs}, trials=done,
                         spent_s=sum(float(t.metrics.get("trial_wall_s") or 0) for t in done),
                         failed_variants=dict(refused))
        budget_txt = f", budget {spec.budget_s / 60:.1f} min" if spec.budget_s else ""
        console.print(f"[bold]pgaccel lab[/bold] {spec.name} ({spec.size}): {len(runs)} "
                      f"variants x {len(wspecs)} workload runs, at least {spec.rounds} rounds"
                      f"{budget_txt}. Run {run_id}.")
        summary = exp.run()
    render_lab(console if as_json else out, summary)
    console.print(f"Results: {rec.run_dir}/run.json  (store: {rec.store.path}, run {run_id})")
    if as_json:
        print_json({"run_id": run_id, "run_dir": rec.run_dir, "spec": spec.name,
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
@STORE_OPT
@YES_OPT
@click.option("--json", "as_json", is_flag=True)
def calibrate(pg_bin, dsn, pgdata, run_as, workdir, port, keep, workload_name, clients,
              scale, duration, warmup, rounds, budget, store_path, yes, as_json) -> None:
    """A/A experiment: two identical variants, trials interleaved.  Reports this machine's
    noise floor (the trials' coefficient of variation) and the smallest difference an
    experiment with the given budget can detect (80% power, 95% confidence)."""
    from ..probe.host import probe_host
    budget_s = parse_budget(budget)
    wl = get_workload(workload_name)
    if getattr(wl, "kind", "single") == "steps":
        raise UsageError(f"{wl.name} is a multi-step workload.",
                         "Calibrate with a single-interval one such as select-only.")
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
        ctx = BenchContext(target, find_client("pgbench", target.inst), workdir=workdir)
        variants = [Variant("A"), Variant("A2")]
        rec = start_run(store_path, "calibrate", wl.name,
                        [VariantRecord(v.name) for v in variants], host=facts.to_dict(),
                        spec={"params": params.to_dict(), "rounds": rounds},
                        info={"target": target.describe()})
        exp = Experiment(ctx, variants, specs, rounds=rounds,
                         store=rec.store, run_id=rec.run_id, run_dir=rec.run_dir,
                         info=rec.info)
        summary = drive(exp)
    (a, ra), (b, rb) = samples(exp.trials, wl.name, "A"), samples(exp.trials, wl.name, "A2")
    walls = [float(t.metrics.get("trial_wall_s") or 0) for t in exp.trials]
    cal = calibration(a, b, sum(walls) / len(walls), budget_s, rounds_a=ra, rounds_b=rb)
    rec.store.finish_run(rec.run_id, "finished",
                         summary=replace(summary, calibration=cal).to_dict())
    rec.close()
    dest = console if as_json else out
    render_calibration(dest, cal, wl.name)
    if as_json:
        print_json({"run_id": rec.run_id, "workload": wl.name, **cal.to_dict()})
