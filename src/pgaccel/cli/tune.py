"""`pgaccel tune` and `pgaccel rollback`: click options and their checks, one call into
``session/`` (``session.plan.plan_for_options``; ``session.apply.run_apply``,
``saved_states``, ``run_rollback``), and the result rendered by ``report/tune.py``.

Where the server's catalog and current values come from (``--dsn``, ``--pgdata``, a
throwaway cluster) is ``session/plan.py``'s docstring; how a plan is applied and undone is
``apply/``'s (``local.py``, ``dsn.py``, ``osknobs/apply.py``, ``rollback.py``).
"""

from __future__ import annotations

import os

import click

from ..errors import UsageError
from ..report.tune import emit_apply, emit_plan, emit_rollback, emit_states
from ..session.apply import run_apply, run_rollback, saved_states, warn_interrupted
from ..session.plan import plan_for_options
from ..tune.inputs import STORAGE, WORKLOADS, parse_memory
from .common import console, out, parse_pairs, target_options, warn

FORMATS = ("table", "conf", "sql", "json", "sysctl", "tuned", "script", "patroni",
           "cloudnativepg", "ansible")
LAYERS = ("postgres", "linux", "build", "all")


def _layers(layer: str, fmt: str) -> tuple[str, ...]:
    if layer == "all":
        return ("postgres", "linux", "build")
    if fmt in ("sysctl", "tuned", "script"):
        return ("linux",) if layer == "postgres" else (layer, "linux")
    return (layer,)


@click.command()
@target_options
@click.option("--memory", metavar="SIZE", help="Plan for this much memory (e.g. 32GB).")
@click.option("--cpus", type=click.FloatRange(min=0.5), help="Plan for this many CPUs.")
@click.option("--pg-version", type=int, help="Plan for this PostgreSQL major version (13-18).")
@click.option("--storage", type=click.Choice(STORAGE), help="Storage class of the data disk.")
@click.option("--connections", type=click.IntRange(1, 262143),
              help="Expected connections (default: the server's max_connections).")
@click.option("--workload", type=click.Choice(WORKLOADS),
              help="The workload class to plan for (default: the one the server's "
                   "pg_stat_statements shows, with --dsn/--pgdata or --from-capture; else "
                   "oltp). The rules still read a measured profile.")
@click.option("--from-capture", "from_capture", metavar="DIR",
              type=click.Path(file_okay=False, exists=True),
              help="Plan for the workload a `pgaccel capture` bundle recorded (its profile: "
                   "time by statement duration, writes, spills, JIT, cache hits).")
@click.option("--layer", type=click.Choice(LAYERS), default="postgres", show_default=True,
              help="Which layer to plan.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table",
              show_default=True, help="table, conf (conf.d snippet), sql (ALTER SYSTEM), json, "
              "sysctl (sysctl.d file), tuned (tuned profile), script (shell script), patroni "
              "(dynamic configuration), cloudnativepg (Cluster patch), ansible (playbook for "
              "community.postgresql). The fleet formats leave out, and name, the parameters "
              "their tool manages itself.")
@click.option("--compare", type=click.Choice(["pgtune"]),
              help="Show PGTune's published formulas' values beside pgaccel's.")
@click.option("--set", "sets", metavar="NAME=VALUE", multiple=True,
              help="Override (or add) a PostgreSQL setting of the plan; repeatable.")
@click.option("--apply", "do_apply", is_flag=True,
              help="Apply the PostgreSQL settings: to --pgdata (in pgaccel.conf, included from "
                   "postgresql.conf; reload, restart when needed, verify, restore on failure), "
                   "to --dsn (ALTER SYSTEM, reload-level only; restart-level ones are listed) "
                   "or, without either, to a throwaway cluster (a trial, then removed).")
@click.option("--patroni", metavar="URL",
              help="With --apply: change the cluster's dynamic configuration through this "
                   "Patroni REST API (leaving out what Patroni manages), wait for every "
                   "member, restart pending ones replicas first; --dsn (user, password) "
                   "verifies each member. Credentials: PATRONI_RESTAPI_USERNAME/PASSWORD.")
@click.option("--apply-os", is_flag=True,
              help="Apply the Linux layer (sysctls, transparent huge pages, block-device "
                   "scheduler and read-ahead) on this machine. Root only.")
@click.option("--dry-run", is_flag=True,
              help="With --apply/--apply-os: show the diff (or ALTER SYSTEM statements), "
                   "change nothing.")
@click.option("--restart-cmd", metavar="CMD",
              help="With --pgdata: restart with this command instead of pg_ctl (e.g. "
                   "'systemctl restart postgresql@15-main').")
@click.option("--allow-unsafe-durability", is_flag=True,
              help="Allow settings that turn off fsync, full_page_writes or synchronous_commit "
                   "(a crash can lose or corrupt data). pgaccel never proposes them.")
@click.option("--state-dir", metavar="DIR", type=click.Path(file_okay=False),
              envvar="PGACCEL_STATE_DIR",
              help="Where applied states (backups + manifest) are kept (default: the user "
                   "state dir, tune-states/; also $PGACCEL_STATE_DIR).")
@click.option("--sample", type=click.FloatRange(1), metavar="SECONDS",
              help="Measured rules: sample the server's pg_stat_statements and its WAL, "
                   "checkpoint, temp-file and buffer counters for SECONDS (use with --dsn or "
                   "a running --pgdata); without it the profile is pg_stat_statements since "
                   "its last reset.")
@click.option("--from-run", metavar="RUN",
              help="Measured rules from the baseline trials of a stored `pgaccel run`.")
@click.option("--measure-storage", is_flag=True,
              help="Measure 8 kB random reads with fio (about 10 s) on the data directory's "
                   "disk and set random_page_cost / effective_io_concurrency from them.")
@click.option("--os-root", metavar="DIR", default="/", hidden=True,
              help="Root of /proc and /sys for the Linux layer (a constructed tree in tests).")
@click.option("--search", "search", is_flag=True,
              help="Search for better settings by measurement on throwaway servers: each "
                   "candidate raced against the best so far side by side, then a "
                   "confirmation against the defaults, PGTune and pgaccel's rules "
                   "(docs/search.md).")
@click.option("--workloads", "search_workload", metavar="NAME,...", default="tpcb-like",
              show_default=True, help="With --search: the workloads the settings are for "
              "(each round runs them all; the objective is the geometric mean of their "
              "ratios; captured:DIR replays a bundle of `pgaccel capture`).")
@click.option("--budget", "search_budget", metavar="DURATION", default="60m",
              show_default=True, help="With --search: the whole search and its confirmation "
              "(e.g. 30m, 2h).")
@click.option("--knobs", "search_knobs", metavar="NAME,...",
              help="With --search: only these settings.")
@click.option("--space", "search_space", metavar="FILE", type=click.Path(dir_okay=False),
              help="With --search: a TOML file that narrows or widens the space "
                   "(only, exclude, [knobs.NAME] low/high/choices).")
@click.option("--resume", "search_resume", metavar="ID",
              help="With --search: carry on an interrupted search.")
@click.option("--scale", "search_scale", type=click.IntRange(1), default=20, show_default=True,
              help="With --search: the workload's data scale.")
@click.option("--huge-pages", "search_huge_pages", is_flag=True,
              help="With --search: reserve a huge page pool for both servers (as root; put "
                   "back afterwards, also after a kill -9 at the next start) and search "
                   "huge_pages on against off (without it: try against off).")
@click.option("--proven", "proven", metavar="RUN",
              help="The settings a stored `pgaccel run` proved (its tuned config; refused "
                   "where that run measured it slower), as the plan: render or --apply them. "
                   "`run --capture` ends with this command.")
@click.option("--yes", is_flag=True,
              help="With --apply: apply the rules' plan although the server's measured "
                   "workload is one no run proved them on.")
@click.option("--from-search", "from_search", metavar="ID",
              help="The settings a finished search found, as the plan's --set (render or "
                   "--apply them like any plan).")
def tune(pg_bin, dsn, pgdata, run_as, workdir, port, keep, memory, cpus, pg_version, storage,
         connections, workload, from_capture, layer, fmt, compare, sets, do_apply, patroni,
         apply_os, dry_run,
         restart_cmd, allow_unsafe_durability, state_dir, sample, from_run, measure_storage,
         os_root, search, search_workload, search_budget, search_knobs, search_space,
         search_resume, search_scale, search_huge_pages, proven, yes, from_search) -> None:
    """Propose settings for PostgreSQL, Linux and the build, each with its reason.

    Without --apply/--apply-os nothing is changed: the output is a plan (a table, a conf.d
    snippet, ALTER SYSTEM statements, a sysctl.d file, a tuned profile or a script).
    With them, every change is backed up first and can be undone: `pgaccel rollback`."""
    if search:
        if dsn or pgdata or do_apply or apply_os or from_search or from_capture or proven:
            raise UsageError("--search measures on throwaway servers and changes nothing.",
                             "Apply its result afterwards: pgaccel tune --from-search ID "
                             "--apply (with --pgdata or --dsn).")
        from .search import run_tune_search
        return run_tune_search(pg_bin=pg_bin, run_as=run_as, workdir=workdir, keep=keep,
                               workload=search_workload, budget=search_budget,
                               knobs=search_knobs, space=search_space, resume=search_resume,
                               scale=search_scale, risk=allow_unsafe_durability,
                               huge_pages=search_huge_pages)
    if from_search:
        from ..session.search import found_settings, load_search
        j = load_search(from_search)
        if j.get("status") != "finished":
            raise UsageError(f"Search {from_search} has not finished (it is {j.get('status')}).",
                             f"Carry it on: pgaccel tune --search --resume {from_search}.")
        sets = tuple(f"{k}={v}" for k, v in (found_settings(j) or {}).items()) + tuple(sets)
    applying = do_apply or apply_os
    if compare and fmt not in ("table", "json"):
        raise UsageError("--compare pgtune works with --format table or json.")
    if dry_run and not applying:
        raise UsageError("--dry-run goes with --apply or --apply-os.",
                         "Without them `pgaccel tune` changes nothing anyway.")
    if restart_cmd and not pgdata:
        raise UsageError("--restart-cmd goes with --pgdata.",
                         "It restarts that cluster (e.g. through systemd).")
    if applying and (compare or fmt not in ("table", "json")):
        raise UsageError("--apply/--apply-os show their result as a table or --format json.",
                         "Drop --compare/--format, or run without --apply to render the plan.")
    if patroni and not do_apply:
        raise UsageError("--patroni goes with --apply (and --dry-run to see the change).",
                         "To write a file for patronictl instead, use --format patroni.")
    if patroni and (pgdata or apply_os):
        raise UsageError("--patroni changes the cluster through Patroni; --pgdata and "
                         "--apply-os change one machine.", "Use one or the other.")
    if apply_os and dsn:
        raise UsageError("--apply-os changes this machine, --dsn names a server elsewhere.",
                         "Run `pgaccel tune --apply-os` on the server's own host.")
    if memory is not None:
        parse_memory(memory)              # refused before any cluster starts
    overrides = parse_pairs(sets, "--set", lower=True)
    _refuse_early(overrides, allow_unsafe_durability, apply_os and not dry_run)
    layers = _layers(layer, fmt)
    if apply_os and "linux" not in layers:
        layers = (*layers, "linux") if do_apply else ("linux",)
    ov = {"memory": memory, "cpus": cpus, "pg_version": pg_version, "storage": storage,
          "connections": connections, "workload": workload}
    where = dict(pg_bin=pg_bin, dsn=dsn, pgdata=pgdata, run_as=run_as, workdir=workdir,
                 port=port)
    if not applying:
        warn_interrupted(warn, pgdata=pgdata, state_dir=state_dir)
    res = plan_for_options(**where, keep=keep, overrides=ov, sets=overrides, layers=layers,
                           os_root=os_root, sample=sample, from_run=from_run,
                           measure_storage=measure_storage, capture=from_capture,
                           say=console.print)
    if proven:
        from ..session.plan import apply_proven
        if from_search:
            raise UsageError("--proven and --from-search each name the settings to use.",
                             "Give one of them.")
        res.notes += apply_proven(res, proven)
    if not applying:
        emit_plan(res, fmt, compare, out=out, err=console)
        return
    if do_apply and (dsn or pgdata) and not proven and not yes and not dry_run:
        _refuse_unproven(res, dsn)
    report = run_apply(res, **where, do_apply=do_apply, apply_os=apply_os, dry_run=dry_run,
                       restart_cmd=restart_cmd, allow_unsafe_durability=allow_unsafe_durability,
                       state_dir=state_dir, os_root=os_root, patroni=patroni)
    emit_apply(report, fmt, res, out=out, err=console)


def _refuse_unproven(res, dsn: str | None) -> None:
    """The rules' plan reaches a live server whose measured workload they were never proven
    on (anything but short OLTP statements) only with --yes."""
    from ..tune.workload import classify
    kind, why = classify(res.profile)
    if kind in (None, "oltp"):
        return
    from ..pg.secrets import scrub_secrets
    where = f"--dsn '{scrub_secrets(dsn)}'" if dsn else "--pgdata DIR"
    raise UsageError(
        f"This server's workload is {kind} ({why}), and no run has proven pgaccel's plan on "
        "it: its rules were measured on short OLTP statements.",
        f"Prove it first: `pgaccel run --capture {where.split(' ', 1)[1] if dsn else 'DSN'}` "
        "replays a capture of this server on throwaway servers against its defaults and "
        f"PGTune, then `pgaccel tune {where} --apply --proven RUN`; or pass --yes to apply "
        "the rules unproven.")


def _refuse_early(overrides: dict[str, str], allow_unsafe: bool, os_writes: bool) -> None:
    """What can be refused before probing and planning: unsafe --set values, --apply-os
    without root."""
    from ..apply.conf import check_changes
    from ..osknobs.apply import check_allowed
    from ..tune.plan import Change
    check_changes([Change("postgres", n, v, "") for n, v in overrides.items()], None,
                  allow_unsafe)
    if os_writes:
        check_allowed(os.geteuid() == 0)


@click.command()
@click.argument("state", required=False)
@click.option("--list", "list_", is_flag=True, help="List the saved states.")
@click.option("--dsn", metavar="DSN",
              help="Connection for a --dsn state (its manifest keeps the DSN without a "
                   "password; PGPASSWORD and .pgpass also work).")
@click.option("--force", is_flag=True,
              help="Restore even if the configuration changed after the apply (the current "
                   "files are saved in the state directory first).")
@click.option("--state-dir", metavar="DIR", type=click.Path(file_okay=False),
              envvar="PGACCEL_STATE_DIR", help="Where the states are kept.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def rollback(state, list_, dsn, force, state_dir, as_json) -> None:
    """Return a server (and this machine's Linux settings) to a saved state.

    STATE is a state id (or a unique prefix) from `pgaccel rollback --list`; the default is
    the latest applied one. The target goes back to how it was before that apply: it and
    every later apply on the same target are undone, the configuration files are restored
    byte for byte (checked), and the server is reloaded or restarted and verified."""
    if list_:
        if state:
            raise UsageError("--list takes no STATE.")
        root, states = saved_states(state_dir)
        emit_states(root, states, as_json, out=out)
        return
    rep = run_rollback(state, state_dir=state_dir, dsn=dsn, force=force)
    emit_rollback(rep, as_json, out=out)
