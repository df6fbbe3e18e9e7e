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
from .common import (CLIENT_HOST_OPT, SERVER_HOST_OPT, YES_OPT, ask_terminal,
                     capture_with_progress, clients_type, console, out, parse_budget,
                     parse_list, print_json, scale_type, seconds, target_options, warn,
                     write_reports)
from .progress import ConsoleEvents, design_line

RUN_WORKLOADS = ("select-only", "tpcb-like")
# a budget too small for the minimum rounds: what else would do (session/budget.py)
OTHER_WAYS = ("fewer configs or workloads, or --rounds {n} without --budget (exactly {n} "
              "rounds each, however long they take)")


def _capture_for_run(capture_dsn: str, duration: str, *, dsn, pgdata, stack, workloads,
                     out_dir) -> str:
    """``run --capture``: the checks, then the capture (its bundle beside the runs); the
    workload to run (``captured:BUNDLE``)."""
    from ..report.capture import render_capture
    from ..session.capture import CaptureRequest
    from ..session.runs import captures_dir
    if dsn or pgdata:
        raise UsageError("--capture proves the plan on throwaway servers restored from the "
                         "capture, never on the captured server itself.",
                         "Drop --dsn/--pgdata.")
    if workloads != ",".join(RUN_WORKLOADS):
        raise UsageError("--capture replays what the server runs; --workloads names other "
                         "workloads.", "Drop --workloads, or run them in a run of their own.")
    if stack != "settings":
        raise UsageError("--capture proves the settings layer.", "Drop --stack.")
    secs = parse_budget(duration, "--capture-duration")
    if secs < 10:
        raise UsageError(f"--capture-duration {duration}: at least 10 seconds are needed to "
                         "see what the server runs.")
    req = CaptureRequest(dsn=capture_dsn, duration_s=secs, data="dump",
                         out=captures_dir(out_dir))
    console.print(f"Capturing what the server runs for {fmt.duration(secs)} (read-only), "
                  "then its data with pg_dump ...")
    path, m = capture_with_progress(req)
    render_capture(console, console, path, m)
    return f"captured:{path}"


def _slower_or_undecided(summary) -> bool:
    from ..decide.results import judged
    j = judged(summary.to_dict())
    return bool(j["slower"] or j["undecided"])


def _advise_apply(dest, summary: dict, run_id: str, dsn: str | None,
                  pgdata: str | None) -> None:
    """The command that applies what the run proved, or why nothing was: never a plan
    measured slower than, or not yet decided against, the defaults or PGTune."""
    from ..pg.secrets import scrub_secrets
    from ..decide.results import judged
    j = judged(summary)
    where = f"--dsn '{scrub_secrets(dsn)}'" if dsn else f"--pgdata {pgdata}"
    if j["slower"]:
        dest.print(f"Nothing to apply: pgaccel's plan was measured slower ("
                   f"{fmt.verdict_lines(j['slower'])}). Keep the server's settings; "
                   f"`pgaccel report {run_id}` shows the trials.", style="bold red", soft_wrap=True)
    elif j["undecided"] or not j["held"]:
        dest.print(f"Not proven yet: {fmt.verdict_lines(j['undecided']) or 'no verdict'}. Nothing "
                   "is advised until it is: run again with a larger --budget (or --rounds).",
                   style="yellow", soft_wrap=True)
    else:
        dest.print(f"Proven ({fmt.verdict_lines(j['held'])}). Apply it with:\n"
                   f"  pgaccel tune {where} --apply --proven {run_id}", style="bold green",
                   soft_wrap=True)


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
              show_default=True, help="Comma-separated workloads (see `pgaccel workloads`; "
              "captured:DIR replays a bundle of `pgaccel capture`).")
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
@click.option("--profile", "profile", default=None, type=click.Choice(WORKLOADS),
              help="The workload class the tuned plan (and PGTune's config) is made for "
                   "[default: the class a captured workload's measured profile shows "
                   "(captured:DIR), else oltp].")
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
@click.option("--explain", is_flag=True,
              help="Which settings made the verdict: beside the whole plan, the plan without "
                   "each group of its settings (memory, parallelism, jit, planner, wal, "
                   "bgwriter, autovacuum, connections) that changes anything, each group's "
                   "effect judged with the same statistics.")
@click.option("--without", "without_groups", metavar="GROUP,...",
              help="Prove pgaccel's plan without these groups of settings (the server's "
                   "own values for them), e.g. after --explain found one that costs.")
@click.option("--capture", "capture_dsn", metavar="DSN",
              help="Prove a plan for the server at DSN: capture what it runs (read-only, as "
                   "`pgaccel capture --data dump` does), plan from its measured profile, "
                   "and prove the plan against the server's defaults and PGTune on "
                   "throwaway servers restored from the dump; ends with the command that "
                   "applies what was proven.")
@click.option("--capture-duration", "capture_duration", default="10m", show_default=True,
              metavar="TIME", help="With --capture: how long to watch the server.")
@CLIENT_HOST_OPT
@SERVER_HOST_OPT
@YES_OPT
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
def run(pg_bin, dsn, pgdata, run_as, workdir, port, keep, quick, workload_names, scale,
        clients, rounds, budget, duration, warmup, order, seed, min_effect, profile,
        out_dir, store_path, with_pgtune, stack, build_flavor, cpu_profile, one_at_a_time,
        no_pin, explain, without_groups, capture_dsn, capture_duration, client_hosts,
        server_host, yes, as_json) -> None:
    """Probe this host, make pgaccel's tuned plan, and benchmark it against the server's
    defaults: trials interleaved (counterbalanced), each from the same data and cache state,
    judged with a 95% confidence interval.

    Runs on a throwaway cluster unless --dsn or --pgdata names a server.  With --dsn only
    session-level settings are varied (nothing server-wide is changed)."""
    if capture_dsn:
        workload_names = _capture_for_run(capture_dsn, capture_duration, dsn=dsn,
                                          pgdata=pgdata, stack=stack,
                                          workloads=workload_names, out_dir=out_dir)
        with_pgtune = True
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
    from ..tune.groups import ORDER, check_groups
    drop = tuple(parse_list(without_groups)) if without_groups else ()
    if check_groups(drop):
        raise UsageError(f"--without {without_groups}: no group {', '.join(check_groups(drop))}.",
                         f"Groups: {', '.join(ORDER)}, other.")
    configs = [ConfigRequest("baseline", {}, "server defaults"),
               ConfigRequest("tuned", {}, "pgaccel tune plan" + (
                   f" without its {', '.join(drop)} settings" if drop else ""),
                   settings_from="pgaccel", drop_groups=drop)]
    if explain:
        configs += [ConfigRequest(f"without-{g}", {}, f"pgaccel's plan without its {g} "
                                  "settings", settings_from="pgaccel",
                                  drop_groups=(*drop, g))
                    for g in (*ORDER, "other") if g not in drop]
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
    if explain:
        from ..report.terminal import render_group_effects
        from ..report.view import group_effects_rows, group_settings
        from ..session.runner import with_group_effects
        summary = with_group_effects(outcome)
        render_group_effects(dest, group_effects_rows(
            summary, group_settings(outcome.experiment.variants)), summary.confidence)
    elif _slower_or_undecided(summary):
        dest.print("Which settings did that? `pgaccel run --explain` (same options) measures "
                   "each group of the plan's settings beside the whole plan.", style="dim",
                   soft_wrap=True)
    write_reports(outcome.run_dir, outcome.store_path, outcome.run_id)
    if capture_dsn or dsn or pgdata:
        _advise_apply(dest, summary.to_dict(), outcome.run_id, capture_dsn or dsn, pgdata)
    if as_json:
        print_json({"run_id": outcome.run_id, "run_dir": outcome.run_dir,
                    **summary.to_dict()})
