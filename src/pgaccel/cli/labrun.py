"""Running a lab spec, shared by `pgaccel lab` and `pgaccel run --stack`: resolve and start
the variants' servers, apply and put back their OS settings, verify each variant, run the
interleaved experiment and store it."""

from __future__ import annotations

import contextlib
import os
from typing import Any

from ..errors import PgaccelError, ServerError, UsageError
from ..specs.checks import settings_problems
from ..lab.experiment import Experiment
from ..decide.limits import connections_problem
from ..decide.looks import Looks
from ..decide.model import Variant, WorkloadSpec, trials_from_store
from ..specs.spec import LabSpec
from ..specs.tomlpos import SpecError
from ..lab.variants import LabVariant, VariantManager, choose_base, resolve_servers
from ..report import format as fmt
from ..report.lab import render_variants
from ..server.discovery import choose_server, find_client, find_installations, probe_dir
from ..server.target import open_target
from ..workloads.base import BenchContext, get_workload
from ..session.plan import computed_settings
from ..session.runs import VariantRecord, start_run
from .common import ask_terminal, console, print_json


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
        with ctx.target.database() as db:
            catalog, _ = db.catalog()
        bad = settings_problems(settings, catalog)
        conns = settings.get("max_connections") or (catalog.get("max_connections").reset_val
                                                      if catalog.get("max_connections") else None)
        few = connections_problem(conns, max_clients)
        if not bad and few:
            bad = [("max_connections", few)]
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
    elif kind == "settings_replaced":
        console.print(f"  {kw['variant']} on {kw['workload']}: " + "; ".join(kw["replaced"]),
                      markup=False, style="yellow")
    elif kind == "stop":
        console.print(f"  [dim]{kw['workload']}: {kw['rounds']} rounds; {kw['reason']}[/dim]")


def execute_spec(spec: LabSpec, wspecs: list[WorkloadSpec], facts, *, pg_bin, workdir,
                 run_as, keep, out_dir, store_path, yes: bool, check: bool = False,
                 as_json: bool = False, prior: dict[str, Any] | None = None, kind: str = "lab",
                 until_decided: bool = False
                 ) -> tuple[Any, str, str, str, list[str], Experiment] | None:
    """Run (or with ``check`` only verify) a parsed spec: servers resolved and started,
    OS settings applied and put back, every variant verified, trials interleaved and stored.
    Returns (summary, run id, run directory, store path, notes, the experiment); None after
    ``check``.
    ``pgaccel lab`` and ``pgaccel run --stack`` both run their experiments here."""
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
            return None
        if base in refused or len(lvs) - len(refused) < 2:
            raise PgaccelError(
                "Not enough variants are what they claim to run the comparison: "
                + "; ".join(f"{k}: {v}" for k, v in refused.items()),
                "Fix the spec or the machine (see the Variants table) and run again.")
        runs = [lv for lv in lvs if lv.name not in refused]
        rec = start_run(
            store_path, kind, spec.name,
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
        lasts, ended = Looks.restore((prior or {}).get("summary"))
        exp = Experiment(runs[0].ctx, [Variant(lv.name, dict(lv.settings), lv.spec.description)
                                       for lv in runs], wspecs, rounds=spec.rounds,
                         order=spec.order, seed=spec.seed, min_effect=spec.min_effect,
                         confidence=spec.confidence, max_rounds=spec.max_rounds,
                         budget_s=spec.budget_s, target_ci_width=spec.target_ci_width,
                         store=rec.store, run_id=run_id, run_dir=rec.run_dir, info=rec.info,
                         on_event=lab_events, hooks=manager,
                         contexts={lv.name: lv.ctx for lv in runs}, trials=done,
                         spent_s=sum(float(t.metrics.get("trial_wall_s") or 0) for t in done),
                         failed_variants=dict(refused), until_decided=until_decided,
                         # a resumed run keeps the last looks its workloads had fixed
                         # and those the budget ended early
                         last_looks=lasts, ended_looks=ended)
        budget_txt = f", budget {spec.budget_s / 60:.1f} min" if spec.budget_s else ""
        console.print(f"[bold]{spec.name}[/bold] ({spec.size}): {len(runs)} "
                      f"variants x {len(wspecs)} workload runs, at least {spec.rounds} rounds"
                      f"{budget_txt}. Run {run_id}.")
        summary = exp.run()
        return summary, run_id, rec.run_dir, rec.store.path, notes, exp
