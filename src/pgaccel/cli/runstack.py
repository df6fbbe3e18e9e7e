"""`pgaccel run --stack`: study 000's layers (baseline → settings → os → build, and PGTune)
measured in one interleaved lab experiment, then every config profiled (perf and cachegrind)
so the report says why a layer is faster (session/stack.py holds the pure part)."""

from __future__ import annotations

import os
import shutil
from typing import Any

from ..errors import UsageError
from ..decide.judge import head_to_head
from ..decide.schedule import estimate_trial_s
from ..metrics.cpucost import PROFILE_WORKLOADS
from ..report.profile import render_profiles
from ..report.terminal import render_layers
from ..server.discovery import choose_server
from ..session.budget import hold_minimum
from ..session.labservers import lab_request
from ..session.preflight import check_specs, confirm_duration, throwaway_dir
from ..session.profiling import Config, profile_configs, relative
from ..session.request import Protocol, ServerRequest
from ..session.runner import Runner, estimate_s
from ..session.stack import layer_steps, layers_of, os_layer, stack_spec
from .common import ask_terminal, console, out, print_json, write_reports
from .progress import LabEvents

# the build layer's flavor when --build-flavor is not given: the lowest server CPU per
# transaction of every flavor on tpcb-like here (docs/builds.md)
DEFAULT_FLAVOR = "lto+pgo"


def run_stack(stack: str, *, server: ServerRequest, facts, params, workloads: list[str],
              protocol: Protocol, profile: str, with_pgtune: bool, flavor: str | None,
              out_dir, store_path, yes: bool, as_json: bool, cpu_profile: bool = True,
              budget_given: str | None = None, max_rounds_for=lambda b: None) -> None:
    if server.dsn or server.pgdata:
        raise UsageError(f"--stack {stack} runs on throwaway clusters (the OS and build "
                         "layers change the server and the host), not on --dsn or --pgdata.",
                         "Drop --dsn/--pgdata, or use --stack settings for an existing "
                         "server.")
    layers = list(layers_of(stack))
    notes = []
    inst = choose_server(server.pg_bin)
    os_table = None
    if "os" in layers:
        if os.geteuid() != 0:
            layers.remove("os")
            notes.append("The os layer is skipped: reserving huge pages and setting THP and "
                         "sysctls needs root (run pgaccel as root to measure it).")
        else:
            from ..session.plan import plan_for_installation
            plan = plan_for_installation(inst, facts, {"workload": profile},
                                         layers=("postgres", "linux"))
            os_table, left = os_layer(plan.layer("linux"), host_thp=facts.thp_enabled,
                                      compiler=bool(shutil.which("cc") or shutil.which("gcc")))
            notes += [f"the os layer leaves out {x}" for x in left]

    def request(p: Protocol):
        spec = stack_spec(stack, layers, workloads=workloads, clients=params.clients,
                          scale=params.scale, duration=params.duration, warmup=params.warmup,
                          protocol=p, os_table=os_table, build_major=inst.major,
                          flavor=flavor or DEFAULT_FLAVOR, with_pgtune=with_pgtune)
        return lab_request(spec, server, store_path=store_path, out_dir=out_dir, yes=yes,
                           profile=profile, side_by_side=p.side_by_side is not False,
                           pin=p.pin)
    # every layer's minimum rounds in the budget, before anything starts (session/budget.py)
    req, raised = hold_minimum(request(protocol), budget_given, max_rounds_for,
                               f"fewer layers or workloads, or --rounds {protocol.rounds} "
                               f"without --budget (exactly {protocol.rounds} rounds each, "
                               "however long they take)", rebuild=request)
    spec = req.spec
    if raised:
        notes.append(raised)
    check_specs(list(req.workloads), data_dir=throwaway_dir(server.workdir))
    confirm_duration(estimate_s(req, estimate_trial_s), yes=yes, what="run",
                     ask=ask_terminal())
    for n in notes:
        console.print(f"[yellow]{n}[/yellow]")
    console.print(f"[bold]pgaccel run --stack {stack}[/bold]: "
                  + ", ".join(v.name for v in spec.variants) + f" on PostgreSQL "
                  f"{inst.version} ({inst.bindir}), plans for {profile}")
    outcome = Runner(req, facts, LabEvents(spec)).run()
    assert outcome is not None
    summary, exp, run_dir = outcome.summary, outcome.experiment, outcome.run_dir
    steps = layer_summary(exp, summary, protocol.min_effect)
    built = (exp.info.get("verified") or {}).get("build", {}).get("server_version")
    if built and built != inst.version:
        notes.append(f"The build layer runs PostgreSQL {built}, the installed server is "
                     f"{inst.version}: its step includes the changes between those releases, "
                     "not only the compiler's.")
        console.print(f"[yellow]{notes[-1]}[/yellow]")
    outcome.record.add_to_run_json({"stack": stack, "profile": profile, "layers": steps,
                                    "stack_notes": notes,
                                    "target": f"throwaway clusters of {inst.bindir}",
                                    "server": {"version": inst.version}})
    profiles: list[dict[str, Any]] = []
    if cpu_profile:                       # the measured results are stored before this
        profiles, why = _profile_configs(exp, workloads, params, workdir=server.workdir,
                                         run_as=server.run_as)
        if why:
            notes.append(why)
            console.print(f"[yellow]{why}[/yellow]")
        outcome.record.add_to_run_json({"profiles": profiles, "stack_notes": notes})
    from ..report.lab import render_lab
    render_lab(console if as_json else out, summary, [t.to_dict() for t in exp.trials])
    render_layers(console if as_json else out, steps, summary.confidence)
    if profiles:
        render_profiles(console if as_json else out, profiles)
    write_reports(run_dir, outcome.store_path, outcome.run_id)
    if as_json:
        print_json({"run_id": outcome.run_id, "run_dir": run_dir, "stack": stack,
                    "layers": steps,
                    "profiles": [{k: v for k, v in p.items() if k != "live"} |
                                 {"live": _lean(p["live"])} for p in profiles],
                    "notes": notes + outcome.notes, **summary.to_dict()})


def layer_summary(exp, summary, min_effect: float) -> list[dict[str, Any]]:
    """Per workload, each layer against the one before it and against baseline."""
    names = [v.name for v in exp.variants]
    out = []
    for before, after in layer_steps(names):
        prev = {(h.workload, h.clients): h for h in head_to_head(
            exp.trials, exp.workloads, before, after, min_effect, summary.confidence)}
        for w in summary.workloads:
            c_base = w.comparisons.get(after)
            c_prev = prev.get((w.workload, w.clients))
            out.append({"workload": w.workload, "clients": w.clients, "layer": after,
                        "previous": before,
                        "vs_previous": c_prev.comparison.to_dict() if c_prev else None,
                        "vs_baseline": c_base.to_dict() if c_base else None})
    return out


# the os layer runs the settings layer's binary and settings: cachegrind simulates neither
# TLBs nor huge pages, so its profile would repeat the settings row
NOT_PROFILED = {"os": "the os layer runs the same binary and settings as the settings layer; "
                      "what it changes (huge pages, THP, writeback) is invisible to cachegrind "
                      "and to perf's software events, so it is not profiled separately"}
LIVE_SECONDS = 5.0
PROFILE_TRANSACTIONS = 1000


def _profile_configs(exp, workloads: list[str], params, *, workdir, run_as
                     ) -> tuple[list[dict[str, Any]], str | None]:
    """Every config but the os layer, on the run's profiled workloads: perf live window and
    cachegrind.  A machine without perf or valgrind gets the reason instead."""
    from ..errors import PgaccelError
    wls = [w for w in workloads if w in PROFILE_WORKLOADS]
    if not wls:
        return [], (f"No config profile: pgaccel profiles {', '.join(PROFILE_WORKLOADS)}, "
                    f"and this run has {', '.join(workloads)}.")
    configs = [Config(v.name, exp.ctx_for(v.name).target.inst.bindir, dict(v.settings))
               for v in exp.variants if v.name not in NOT_PROFILED]
    live = LIVE_SECONDS
    try:
        from ..metrics.perfprof import perf_binary
        perf_binary()
    except PgaccelError:
        live = 0.0
    console.print(f"Profiling {len(configs)} configs on {', '.join(wls)} (why each is "
                  f"faster): {'perf and ' if live else ''}cachegrind")
    try:
        rows = profile_configs(configs, wls, scale=params.scale, clients=params.clients,
                               live_seconds=live, transactions=PROFILE_TRANSACTIONS,
                               workdir=workdir, run_as=run_as,
                               say=lambda m: console.print(f"  [dim]{m}[/dim]"))
    except PgaccelError as e:
        return [], f"The config profile failed, the measured results stand: {e.message}"
    why = None if live else "perf is not installed: the profile has cachegrind counts only."
    return relative(rows, exp.variants[0].name), why


def _lean(live: dict[str, Any] | None) -> dict[str, Any] | None:
    """A live profile without its folded stacks (they are in run.json)."""
    return {k: v for k, v in live.items() if k != "folded"} if live else None
