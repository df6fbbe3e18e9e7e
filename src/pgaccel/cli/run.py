"""`pgaccel run`: probe, tune, and prove it — baseline vs tuned, trials interleaved."""

from __future__ import annotations

import os

import click

from ..errors import UsageError
from ..report import format as fmt
from ..decide.model import WorkloadSpec
from ..decide.schedule import ORDERS, default_params, estimate_trial_s, max_rounds_for
from ..probe.host import probe_host
from ..report.terminal import render_client_hosts, render_head_to_head, render_summary
from ..report.facts import client_hosts as client_hosts_summary
from ..buildlab.flavors import FLAVORS
from ..session.apply import warn_interrupted
from ..session.budget import hold_minimum
from ..session.clienthosts import client_hosts_for, server_host_for
from ..session.preflight import check_specs, confirm_duration, new_cluster_dir
from ..session.request import ConfigRequest, Protocol, RunRequest, ServerRequest
from ..session.runner import Runner, estimate_s, with_head_to_head
from ..session.stack import STACKS
from ..tune.inputs import WORKLOADS
from ..workloads.base import RunParams, get_workload
from .common import (CLIENT_HOST_OPT, SERVER_HOST_OPT, YES_OPT, ask_terminal, clients_type,
                     console, out, parse_budget, parse_list, print_json, scale_type,
                     seconds, target_options, warn, write_reports)
from .progress import ConsoleEvents, design_line

RUN_WORKLOADS = ("select-only", "tpcb-like")
# a budget too small for the minimum rounds: what else would do (session/budget.py)
OTHER_WAYS = ("fewer configs or workloads, or --rounds {n} without --budget (exactly {n} "
              "rounds each, however long they take)")


def _budget(text: str | None, default: float) -> float:
    if not text:
        return default
    s = parse_budget(text)
    if s < 60:
        raise UsageError(f"--budget {text}: at least a minute is needed for one round.")
    return s


@click.command()
@target_options
@click.option("--quick", is_flag=True,
              help="Small and short: about 5-6 minutes on 2 cores (--budget 6m).")
@click.option("--workloads", "workload_names", default=",".join(RUN_WORKLOADS),
              show_default=True, help="Comma-separated workloads (see `pgaccel workloads`).")
@click.option("--scale", type=scale_type(), help="pgbench scale (default 20 quick, 50).")
@click.option("--clients", type=clients_type(), help="Client connections (default 2 x CPUs).")
@click.option("--rounds", type=click.IntRange(1, 10000),
              help="Exactly this many trials per config (default: at least 3 quick or 5, then "
                   "more until every verdict is decided, within --budget).")
@click.option("--budget", metavar="TIME",
              help="Time the rounds may take in all (default 6m quick, 25m; e.g. 10m). "
                   "Each workload adds rounds as far as its share of it reaches. One that "
                   "cannot hold every workload's minimum rounds is refused before anything "
                   "starts (the default is raised to one that can).")
@click.option("--duration", type=seconds(2), help="Measured seconds per trial.")
@click.option("--warmup", type=seconds(0), help="Maximum warm-up seconds per trial "
              "(ends early once the rate is steady).")
@click.option("--order", type=click.Choice(ORDERS), default="abba", show_default=True,
              help="Trial order: counterbalanced, random blocks, or plain round-robin.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--min-effect", type=click.FloatRange(0, 1), default=0.02, show_default=True,
              help="Smallest relative difference worth calling faster/slower.")
@click.option("--profile", "profile", default="oltp", show_default=True,
              type=click.Choice(WORKLOADS),
              help="Workload profile the tuned plan is made for.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Run directory (default: the user data dir, runs/RUN_ID).")
@click.option("--store", "store_path", envvar="PGACCEL_STORE", type=click.Path(dir_okay=False),
              help="Results database (default: user data dir; also $PGACCEL_STORE).")
@click.option("--with-pgtune", is_flag=True,
              help="Also benchmark PGTune's published formulas for this machine as a third "
                   "config, and compare pgaccel's plan with it directly.")
@click.option("--stack", type=click.Choice(STACKS), default="settings", show_default=True,
              help="Layers to prove, each on top of the one before: settings (pgaccel's plan "
                   "vs defaults), os (+ huge pages, THP, sysctls; root), build (+ a pgaccel "
                   "build of the same major), full (all of them).")
@click.option("--build-flavor", type=click.Choice(list(FLAVORS)), metavar="FLAVOR",
              help="The build layer's flavor (default: lto+pgo; `pgaccel build --help`).")
@click.option("--cpu-profile/--no-cpu-profile", default=None,
              help="With --stack os|build|full (on by default there): after the trials, "
                   "profile every config (perf flame graph and counters, cachegrind "
                   "instructions per transaction) so the report says why one is faster.")
@click.option("--one-at-a-time", is_flag=True,
              help="Measure one config after the other on one server, instead of a "
                   "throwaway server per config side by side, taking turns in quarter-second "
                   "slices (the default for pgbench workloads on a throwaway cluster).")
@click.option("--no-pin", is_flag=True,
              help="Side by side: leave pgbench and the backends where the scheduler puts "
                   "them, instead of each pgbench on one CPU with its connections' backends "
                   "(on a 2-core VM, spells of split pairs made select-only trials 20-40% "
                   "slower at random; docs/measurements.md).")
@CLIENT_HOST_OPT
@SERVER_HOST_OPT
@YES_OPT
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
def run(pg_bin, dsn, pgdata, run_as, workdir, port, keep, quick, workload_names, scale,
        clients, rounds, budget, duration, warmup, order, seed, min_effect, profile,
        out_dir, store_path, with_pgtune, stack, build_flavor, cpu_profile, one_at_a_time,
        no_pin, client_hosts, server_host, yes, as_json) -> None:
    """Probe this host, make pgaccel's tuned plan, and benchmark it against the server's
    defaults: trials interleaved (counterbalanced), each from the same data and cache state,
    judged with a 95% confidence interval.

    Runs on a throwaway cluster unless --dsn or --pgdata names a server.  With --dsn only
    session-level settings are varied (nothing server-wide is changed)."""
    wls = [get_workload(n) for n in parse_list(workload_names)]
    if not wls:
        raise UsageError("--workloads is empty.", "Name at least one workload.")
    warn_interrupted(warn, pgdata=pgdata)
    hosts = client_hosts_for(client_hosts, wls, dsn)
    shost = server_host_for(server_host, dsn)
    if (hosts or shost) and stack != "settings":
        raise UsageError("--client-host and --server-host work with --stack settings: the "
                         "other layers "
                         "restart or rebuild the server on this machine.",
                         "Drop --client-host/--server-host, or prove the settings layer only.")
    facts = probe_host(data_dir=pgdata or workdir or "/")
    d = default_params(quick, int(facts.effective_cpus) or 1)
    params = RunParams(clients=clients or d["clients"], duration=duration or d["duration"],
                       warmup=d["warmup"] if warmup is None else warmup,
                       scale=scale or d["scale"])
    n_rounds = rounds or d["rounds"]
    adaptive = rounds is None                 # more rounds until decided, within the budget
    budget_s = _budget(budget, d["budget"]) if adaptive or budget else None
    # a longer --budget buys more rounds (the default budget: the default maximum)
    def cap(b: float | None) -> int:
        return max(max_rounds_for(b, d["max_rounds"], d["budget"]), n_rounds) \
            if adaptive and b else n_rounds
    max_rounds = cap(budget_s)
    protocol = Protocol(rounds=n_rounds, max_rounds=max_rounds, budget_s=budget_s,
                        until_decided=adaptive, order=order, seed=seed, min_effect=min_effect,
                        side_by_side=not one_at_a_time, pin=not no_pin)
    server = ServerRequest(pg_bin=pg_bin, dsn=dsn, pgdata=pgdata, run_as=run_as,
                           workdir=workdir, port=port, keep=keep)
    if stack != "settings":
        from .runstack import run_stack
        return run_stack(stack, server=server, facts=facts, params=params,
                         workloads=[w.name for w in wls], protocol=protocol, profile=profile,
                         with_pgtune=with_pgtune, flavor=build_flavor, out_dir=out_dir,
                         store_path=store_path, yes=yes, as_json=as_json,
                         cpu_profile=cpu_profile is not False, budget_given=budget,
                         max_rounds_for=cap)
    if build_flavor:
        raise UsageError("--build-flavor chooses the build layer's flavor.",
                         "Use it with --stack build or --stack full.")
    if cpu_profile:
        raise UsageError("--cpu-profile profiles the configs of a layered run.",
                         "Use it with --stack os, build or full, or profile one config with "
                         "`pgaccel profile`.")
    specs = tuple(WorkloadSpec(w, params) for w in wls)
    configs = [ConfigRequest("baseline", {}, "server defaults"),
               ConfigRequest("tuned", {}, "pgaccel tune plan", settings_from="pgaccel")]
    if with_pgtune:
        configs.insert(1, ConfigRequest("pgtune", {}, "PGTune's formulas",
                                        settings_from="pgtune"))
    req = RunRequest(
        "run", "baseline-vs-tuned", server, specs, protocol, configs=tuple(configs),
        profile=profile, client_hosts=tuple(hosts), server_host=shost,
        store_path=store_path, out_dir=out_dir, server_facts=True,
        record={"params": params.to_dict(), "rounds": n_rounds, "order": order,
                "workloads": [w.name for w in wls],
                "out_dir": os.path.abspath(out_dir) if out_dir else None})
    req, raised = hold_minimum(req, budget, cap, OTHER_WAYS.format(n=n_rounds))
    budget_s, max_rounds = req.protocol.budget_s, req.protocol.max_rounds
    check_specs(list(specs), data_dir=new_cluster_dir(dsn, pgdata, workdir))
    confirm_duration(estimate_s(req, estimate_trial_s), yes=yes, what="run",
                     ask=ask_terminal())

    def start(exp, run_id, design):
        howmany = (f"at least {n_rounds} rounds, then more until decided as far as the "
                   f"budget reaches (at most {max_rounds})" if adaptive else
                   f"{n_rounds} rounds")
        limit = (f", budget {fmt.minutes(budget_s)}" if budget_s else
                 f" (estimated {fmt.minutes(exp.total_estimate_s(), 1)})")
        return [(f"{len(wls)} workload(s) x {len(exp.variants)} configs, {howmany}, "
                 f"{params.clients} clients, {fmt.seconds(params.duration)} each{limit}. "
                 f"Run {run_id}.", ""), *([(raised, "yellow")] if raised else []),
                (design_line(design), "dim")]
    outcome = Runner(req, facts, ConsoleEvents("pgaccel run", start=start)).run()
    assert outcome is not None
    summary = outcome.summary
    if with_pgtune:
        summary = with_head_to_head(outcome, "pgtune", "tuned")
    dest = console if as_json else out
    render_summary(dest, summary)
    from ..report.fidelity import fidelity_of, render_fidelity
    render_fidelity(dest, fidelity_of(t.to_dict() for t in outcome.trials))
    if hosts:
        render_client_hosts(client_hosts_summary([t.to_dict() for t in outcome.trials],
                                                 outcome.info["server"]), dest)
    if with_pgtune:
        render_head_to_head(dest, summary.tuned_vs_pgtune, summary.confidence)
    write_reports(outcome.run_dir, outcome.store_path, outcome.run_id)
    if as_json:
        print_json({"run_id": outcome.run_id, "run_dir": outcome.run_dir,
                    **summary.to_dict()})
