"""`pgaccel lab` (experiments from a TOML spec) and `pgaccel calibrate` (this machine's
noise floor).  The results store's commands are in ``store.py``; rendering in
``report/lab.py``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import click

from ..errors import UsageError
from ..decide.effect import MIN_PAIRS
from ..decide.judge import calibration, samples
from ..decide.model import WorkloadSpec
from ..decide.schedule import MAX_ROUNDS_CAP, default_params, estimate_trial_s
from ..report import format as fmt
from ..report.lab import render_calibration, render_lab
from ..session.budget import budget_check, budget_text, require_budget, short_budget
from ..session.clienthosts import client_hosts_for
from ..session.labservers import lab_request
from ..session.preflight import (check_specs, confirm_duration, new_cluster_dir,
                                 throwaway_dir)
from ..session.request import ConfigRequest, Protocol, RunRequest, ServerRequest
from ..session.runner import Runner, estimate_s
from ..session.runs import resumable_lab_run, same_host
from ..specs.parse import load_spec, parse_spec
from ..specs.spec import SIZES
from ..workloads.base import RunParams, get_workload
from .common import (BUILD_OPT, CLIENT_HOST_OPT, STORE_OPT, YES_OPT, ask_terminal,
                     clients_type, console, out, parse_budget, print_json, resolves_build,
                     scale_type, seconds, target_options, write_reports)
from .progress import ConsoleEvents, LabEvents, design_line


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
@click.option("--max-rounds", type=click.IntRange(1, MAX_ROUNDS_CAP), metavar="N",
              help="Add rounds until every comparison is decided, up to N rounds in all "
                   "(replaces the spec's max_rounds and its rule for adding rounds; the "
                   "budget still applies, so give a --budget that holds them).")
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
@click.option("--one-at-a-time", is_flag=True,
              help="One variant after the other on its server, not side by side in "
                   "slices (the lab's default wherever the variants can share the host).")
@click.option("--allow-unsafe-durability", "unsafe_durability", is_flag=True,
              help="Let variants turn off fsync, full_page_writes or synchronous_commit on "
                   "the lab's throwaway clusters (a crash there can lose or corrupt their "
                   "data); the report names every variant that ran so.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@resolves_build
def lab(spec_path, size, resume_id, check, budget, max_rounds, pg_bin, workdir, run_as, keep,
        out_dir, store_path, yes, one_at_a_time, unsafe_durability, as_json) -> None:
    """Run the experiment a TOML spec describes: variants (settings, server binaries, OS
    settings) against workloads, trials interleaved, every variant verified, each
    difference judged with a confidence interval (95% unless the spec says otherwise).
    See examples/*.toml."""
    from ..probe.host import probe_host
    prior: dict[str, Any] | None = None
    if resume_id:
        prior = resumable_lab_run(store_path, resume_id)
        saved = prior["spec"] or {}
        out_dir = out_dir or saved.get("out_dir")   # the run directory it began in
        spec = parse_spec(saved["text"], saved.get("path", "<stored spec>"),
                          size or saved.get("size", "medium"),
                          unsafe_durability=unsafe_durability)
        rounds_began(spec, saved)
    elif spec_path:
        spec = load_spec(spec_path, size or "medium", unsafe_durability=unsafe_durability)
    else:
        raise UsageError("Name a spec file, or --resume RUN.",
                         "Examples are in the examples/ directory.")
    if budget:
        spec.budget_s = parse_budget(budget)
    if max_rounds is not None:
        until_decided(spec, max_rounds, resumed=prior is not None)
    req = lab_request(spec, ServerRequest(pg_bin=pg_bin, workdir=workdir, run_as=run_as,
                                          keep=keep),
                      store_path=store_path, out_dir=out_dir, resume=prior, yes=yes,
                      check_only=check, side_by_side=not one_at_a_time)
    if spec.budget_s and not prior:    # every minimum in the budget, before anything starts
        named = (f"--budget {budget}" if budget else
                 f"{spec.path}'s budget ({budget_text(spec.budget_s)} at --size {spec.size})")
        require_budget(req, named, "fewer variants or workloads (each client count is one), "
                       "or fewer rounds in the spec's [run] table")
    check_specs(list(req.workloads), data_dir=throwaway_dir(workdir))
    if not check:
        confirm_duration(estimate_s(req, estimate_trial_s), yes=yes, what="lab run",
                         ask=ask_terminal())
    facts = probe_host(data_dir=workdir or "/")
    if prior and not same_host(prior, facts):
        console.print(f"[bold yellow]Run {prior['id']} began on another host "
                      f"({prior['host_fingerprint']}); trials from both machines will be "
                      "pooled.[/bold yellow]")
    outcome = Runner(req, facts, LabEvents(spec, as_json=as_json)).run()
    if outcome is None:
        return
    render_lab(console if as_json else out, outcome.summary,
               [t.to_dict() for t in outcome.trials], spec.findings)
    from ..report.fidelity import fidelity_of, render_fidelity
    render_fidelity(console if as_json else out,
                    fidelity_of(t.to_dict() for t in outcome.trials))
    write_reports(outcome.run_dir, outcome.store_path, outcome.run_id)
    if as_json:
        print_json({"run_id": outcome.run_id, "run_dir": outcome.run_dir, "spec": spec.name,
                    "size": spec.size, "notes": outcome.notes,
                    **outcome.summary.to_dict()})


def rounds_began(spec: Any, saved: dict[str, Any]) -> None:
    """A resumed run's rounds as it began them: a ``--max-rounds`` given then is not in the
    spec's stored text, only in the resolved spec stored beside it."""
    began = saved.get("resolved") or {}
    if began.get("until_decided") and began.get("max_rounds"):
        spec.max_rounds, spec.until_decided = began["max_rounds"], True


def until_decided(spec: Any, max_rounds: int, resumed: bool) -> None:
    """``--max-rounds``: rounds are added until every comparison is decided, up to
    ``max_rounds`` in all (the looks' levels are planned from it: decide/sequential.py)."""
    if resumed:
        raise UsageError("--max-rounds cannot change a resumed lab run: its looks were "
                         "planned from the last round it began with, and its verdicts are "
                         "judged at those levels.",
                         "Resume without --max-rounds, or start a new run with it.")
    if max_rounds < spec.rounds:
        raise UsageError(f"--max-rounds {max_rounds} is below the {spec.rounds} rounds "
                         f"{spec.path} runs at --size {spec.size}.",
                         f"Give --max-rounds {spec.rounds} or more.")
    spec.max_rounds, spec.until_decided = max_rounds, True


# -- pgaccel calibrate ---------------------------------------------------------------------
@click.command()
@target_options
@click.option("--workload", "-w", "workload_name", default="select-only", show_default=True,
              help="Workload name (see `pgaccel workloads`; captured:DIR replays a bundle "
                   "of `pgaccel capture`).")
@click.option("--quick", is_flag=True,
              help="Calibrate `run --quick`'s design (its scale, trial length and budget) "
                   "instead of `run`'s.")
@click.option("--clients", type=clients_type(),
              help="Client connections (default: run's, 2 x CPUs).")
@click.option("--scale", type=scale_type(), help="pgbench scale (default: run's, 20 quick, 50).")
@click.option("--duration", type=seconds(2),
              help="Measured seconds per trial (default: run's, 5 quick, 25).")
@click.option("--warmup", type=seconds(0),
              help="Maximum warm-up seconds (ends early once the rate is steady; default: "
                   "run's, 2 quick, 12).")
@click.option("--rounds", type=click.IntRange(2, 10000), default=5, show_default=True,
              help="Trials per (identical) variant.")
@click.option("--budget",
              help="Budget to report the smallest detectable difference for (default: run's, "
                   "6m quick, 25m).")
@click.option("--min-effect", type=click.FloatRange(0, 1), default=0.02, show_default=True,
              help="The A/A's margin: A and A2 are equivalent when the whole interval of "
                   "their difference lies within it (as run's --min-effect).")
@click.option("--one-at-a-time", is_flag=True,
              help="Calibrate the one-after-the-other design (run and lab --one-at-a-time, "
                   "a named server) instead of side by side.")
@CLIENT_HOST_OPT
@STORE_OPT
@YES_OPT
@click.option("--json", "as_json", is_flag=True)
def calibrate(pg_bin, dsn, pgdata, run_as, workdir, port, keep, workload_name, quick,
              clients, scale, duration, warmup, rounds, budget, min_effect, one_at_a_time,
              client_hosts, store_path, yes, as_json) -> None:
    """A/A experiment: two identical variants, measured the way the next `run` or `lab`
    will measure them (side by side on a server each where it can, else one at a time).
    Reports this machine's noise floor (the trials' coefficient of variation, the rounds'
    pair spread) and the smallest difference an experiment with the given budget can
    detect (80% power, 95% confidence).  Its clients, scale and trial length are run's
    defaults on this host (--quick: run --quick's) unless given."""
    from ..probe.host import probe_host
    wl = get_workload(workload_name)
    if getattr(wl, "kind", "single") == "steps":
        raise UsageError(f"{wl.name} is a multi-step workload.",
                         "Calibrate with a single-interval one such as select-only.")
    hosts = client_hosts_for(client_hosts, [wl], dsn)
    facts = probe_host(data_dir=pgdata or workdir or "/")
    # the design the user's next `run` uses: on 16 CPUs its 32 clients are noisier than 2
    d = default_params(quick, int(facts.effective_cpus) or 1)
    budget_s = parse_budget(budget) if budget else d["budget"]
    params = RunParams(clients=clients or d["clients"], duration=duration or d["duration"],
                       warmup=d["warmup"] if warmup is None else warmup,
                       scale=scale or d["scale"])
    req = RunRequest(
        "calibrate", wl.name, ServerRequest(pg_bin=pg_bin, dsn=dsn, pgdata=pgdata,
                                            run_as=run_as, workdir=workdir, port=port,
                                            keep=keep),
        (WorkloadSpec(wl, params),), Protocol(rounds=rounds, side_by_side=not one_at_a_time),
        configs=(ConfigRequest("A"), ConfigRequest("A2")), client_hosts=tuple(hosts),
        store_path=store_path, record={"params": params.to_dict(), "rounds": rounds})
    # the budget whose smallest detectable difference is reported: one that cannot hold the
    # rounds a paired comparison needs detects nothing (session/budget.py)
    short = budget_check(req, budget_s, rounds=MIN_PAIRS)
    if not short.ok:
        named = f"--budget {budget}" if budget else f"run's budget of {fmt.minutes(budget_s)}"
        raise short_budget(short, named, "")
    check_specs(list(req.workloads), data_dir=new_cluster_dir(dsn, pgdata, workdir))
    confirm_duration(estimate_s(req, estimate_trial_s), yes=yes, what="calibration",
                     ask=ask_terminal())
    outcome = Runner(req, facts, ConsoleEvents(
        "pgaccel calibrate", f": A/A, {wl.name}, {rounds} rounds, {params.clients} clients, "
        f"scale {params.scale}, {fmt.seconds(params.duration)} each",
        start=lambda exp, run_id, design: [(design_line(design), "dim")])).run()
    assert outcome is not None
    (a, ra), (b, rb) = (samples(outcome.trials, wl.name, "A"),
                        samples(outcome.trials, wl.name, "A2"))
    walls = [float(t.metrics.get("trial_wall_s") or 0) for t in outcome.trials]
    # the budget's data and burn-in, as the budget check counts them, come before any trial
    setup = short.needs[0].setup_s if short.needs else 0.0
    cal = calibration(a, b, sum(walls) / len(walls), budget_s, min_effect=min_effect,
                      rounds_a=ra, rounds_b=rb, setup_s=setup)
    outcome.amend(replace(outcome.summary, calibration=cal))
    dest = console if as_json else out
    render_calibration(dest, cal, wl.name)
    # a replay's fidelity as bench, lab and run say it: a noise floor of another mix than
    # the captured one is no floor for it
    from ..report.fidelity import fidelity_of, render_fidelity
    render_fidelity(dest, fidelity_of(t.to_dict() for t in outcome.trials))
    write_reports(outcome.run_dir, run_id=outcome.run_id)
    if as_json:
        print_json({"run_id": outcome.run_id, "workload": wl.name, **cal.to_dict()})
