"""`pgaccel bench` (one workload, optionally a client sweep) and `pgaccel workloads`."""

from __future__ import annotations

import os
from typing import Any

import click
from rich.table import Table

from ..errors import UsageError
from ..decide.judge import trial_row
from ..decide.model import WorkloadSpec
from ..decide.results import BenchRow
from ..decide.schedule import estimate_trial_s
from ..lab.trial import step_result_of
from ..metrics.registry import ROW_COSTS
from ..probe.host import probe_host
from ..report import format as fmt
from ..report.facts import client_hosts as client_hosts_summary
from ..report.terminal import render_client_hosts
from ..session.clienthosts import client_hosts_for, server_host_for
from ..session.preflight import check_specs, confirm_duration, new_cluster_dir
from ..session.request import ConfigRequest, Protocol, RunRequest, ServerRequest
from ..session.runner import Runner, estimate_s
from ..workloads.base import get_workload
from ..workloads.steps import StepWorkload, list_workloads, params_for
from .common import (CLIENT_HOST_OPT, SERVER_HOST_OPT, YES_OPT, Finite, ask_terminal,
                     clients_type, console, out, parse_list, parse_pairs, print_json,
                     scale_type, seconds, target_options, write_reports)
from .progress import ConsoleEvents


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list (with knobs) as JSON.")
def workloads(as_json: bool) -> None:
    """List the workloads `pgaccel bench --workload NAME` can run, with their knobs."""
    rows = list_workloads()
    if as_json:
        print_json(rows)
        return
    t = Table(title="Workloads", title_justify="left")
    for col in ("name", "kind", "unit", "writes", "what it does", "knobs (--option K=V)"):
        t.add_column(col, overflow="fold")
    for r in rows:
        knobs = ", ".join(k for k in (r.get("knobs") or {}))
        t.add_row(r["name"], r["kind"], r["unit"], "yes" if r["writes"] else "", r["summary"],
                  knobs)
    t.add_row("captured:DIR", "single", "stmt/s", "as captured",
              "your own server's statements: a bundle of `pgaccel capture --dsn DSN --data "
              "dump --out DIR` (pg_stat_statements over a window), replayed in the captured "
              "mix on a copy of its data", "clients, duration, warmup")
    out.print(t)
    console.print("[dim]Details: pgaccel workloads --json; docs/workloads.md (captured:DIR: "
                  "its section on capture and replay)[/dim]")


# the table's columns: BenchRow field, heading, formatter (the costs: metrics/registry.py)
_BENCH_COLUMNS = (("throughput", None, fmt.number), ("lat_p50", "p50 ms", fmt.ms),
                  ("lat_p95", "p95 ms", fmt.ms), ("lat_p99", "p99 ms", fmt.ms),
                  *((c.field, c.header, lambda x, c=c: fmt.cost(c, x)) for c in ROW_COSTS))


def render_bench(name: str, unit: str, rows: dict[int, BenchRow], dest=None) -> None:
    t = Table(title=f"{name} ({unit}; medians over trials)", title_justify="left")
    t.add_column("clients", justify="right")
    for _, head, _ in _BENCH_COLUMNS:
        t.add_column(head or unit, justify="right")
    t.add_column("top waits", justify="left")
    for c, r in rows.items():
        t.add_row(str(c), *(f(getattr(r, key)) for key, _, f in _BENCH_COLUMNS),
                  r.top_waits or fmt.DASH)
    (dest or out).print(t)
    for c, r in rows.items():
        if r.client_share and r.client_share > 0.4:
            console.print(f"[yellow]At {c} clients the load generator used "
                          f"{fmt.share(r.client_share)} of the CPU consumed: the client, not "
                          "the server, may be the limit (study 003). Fewer clients or a "
                          "separate client host give a cleaner server number.[/yellow]")


@click.command()
@target_options
@click.option("--workload", "-w", "workload_name", default="select-only", show_default=True,
              help="Workload name (see `pgaccel workloads`; captured:DIR replays a bundle "
                   "of `pgaccel capture`).")
@click.option("--clients", default="2", show_default=True,
              help="Clients, or a comma-separated sweep such as 1,2,4,8.")
@click.option("--threads", type=clients_type(),
              help="pgbench threads (default: one per client).")
@click.option("--scale", type=scale_type(),
              help="Data size (pgbench scale; tables for sysbench; default: the workload's).")
@click.option("--duration", type=seconds(2),
              help="Measured seconds per trial (default: the workload's).")
@click.option("--warmup", type=seconds(0),
              help="Maximum warm-up seconds (ends early once the rate is steady).")
@click.option("--trials", type=click.IntRange(1, 10000), default=1, show_default=True)
@click.option("--protocol", type=click.Choice(["simple", "extended", "prepared"]),
              help="Query protocol (default prepared).")
@click.option("--rate", type=Finite(0, min_open=True), help="Target rate (pgbench -R).")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="A server setting for the run (repeatable).")
@click.option("--option", "wopts", multiple=True, metavar="KEY=VALUE",
              help="A workload-specific knob (repeatable; see `pgaccel workloads --json`).")
@CLIENT_HOST_OPT
@SERVER_HOST_OPT
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Run directory.")
@click.option("--store", "store_path", envvar="PGACCEL_STORE", type=click.Path(dir_okay=False))
@YES_OPT
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON on stdout.")
def bench(pg_bin, dsn, pgdata, run_as, workdir, port, keep, workload_name, clients, threads,
          scale, duration, warmup, trials, protocol, rate, sets, wopts, client_hosts,
          server_host, out_dir, store_path, yes, as_json) -> None:
    """Benchmark one workload: throughput, latency percentiles (from pgbench's transaction
    log), server and client CPU per operation, context switches, I/O, WAL, top wait events.

    Every trial starts from the same state: restart, data restored for writers, CHECKPOINT,
    caches prewarmed, a warm-up that ends once the rate is steady."""
    wl = get_workload(workload_name)
    settings = parse_pairs(sets, "--set", lower=True)
    options = parse_pairs(wopts, "--option")
    client_list = parse_list(clients, int)
    if not client_list or min(client_list) < 1:
        raise UsageError("--clients needs positive integers.", "Example: --clients 1,2,4,8")
    given = {k: v for k, v in (("threads", threads), ("duration", duration),
                               ("warmup", warmup), ("protocol", protocol), ("rate", rate),
                               ("scale", scale)) if v is not None}
    specs = tuple(WorkloadSpec(wl, params_for(wl, {**given, "clients": c,
                                                   "options": options}))
                  for c in client_list)
    hosts = client_hosts_for(client_hosts, [wl], dsn)
    shost = server_host_for(server_host, dsn)
    req = RunRequest(
        "bench", wl.name, ServerRequest(pg_bin=pg_bin, dsn=dsn, pgdata=pgdata, run_as=run_as,
                                        workdir=workdir, port=port, keep=keep),
        specs, Protocol(rounds=trials), configs=(ConfigRequest("current", settings),),
        overrides=settings, client_hosts=tuple(hosts), server_host=shost,
        store_path=store_path, out_dir=out_dir,
        record={"clients": client_list, "scale": scale, "options": options,
                "params": specs[0].params.to_dict(),
                "out_dir": os.path.abspath(out_dir) if out_dir else None})
    check_specs(list(specs), data_dir=new_cluster_dir(dsn, pgdata, workdir))
    confirm_duration(estimate_s(req, estimate_trial_s), yes=yes, what="benchmark",
                     ask=ask_terminal())
    facts = probe_host(data_dir=pgdata or workdir or "/")
    outcome = Runner(req, facts, ConsoleEvents(f"pgaccel bench {wl.name}")).run()
    assert outcome is not None
    server, trials_done = outcome.info["server"], outcome.trials
    if isinstance(wl, StepWorkload):
        _render_steps(wl, trials_done, client_list, as_json, outcome.run_id, server)
        write_reports(outcome.run_dir, run_id=outcome.run_id)
        return
    rows = {c: trial_row([t for t in trials_done if t.clients == c]) for c in client_list}
    render_bench(wl.name, wl.unit, rows, console if as_json else out)
    from ..report.fidelity import fidelity_of, render_fidelity
    render_fidelity(console if as_json else out, fidelity_of(t.to_dict() for t in trials_done))
    if hosts:
        render_client_hosts(client_hosts_summary([t.to_dict() for t in trials_done], server),
                            console if as_json else out)
    write_reports(outcome.run_dir, run_id=outcome.run_id)
    if as_json:
        print_json({"run_id": outcome.run_id, "workload": wl.name, "unit": wl.unit,
                    "server": server, "results": {str(c): r.to_dict() for c, r in rows.items()},
                    "trials": [t.to_dict() for t in trials_done]})


def _details(step: dict[str, Any]) -> str:
    """A step's own scalar results (degree, speedup, target rate ...) and its note."""
    extra = {k: v for k, v in (step.get("extra") or {}).items()
             if isinstance(v, (int, float, str)) and not isinstance(v, bool)
             and k not in ("query", "answer", "step")}
    text = ", ".join(f"{k}={fmt.general(v)}" for k, v in list(extra.items())[:6])
    note = step.get("note")
    return f"{text}; {note}" if note and text else (note or text)


def step_table_title(name: str, key: str) -> str:
    """A step table's title from its results key ("2", or "1 (trial 2)" past the first
    trial): "insert-benchmark, 1 client, trial 2"."""
    n, _, trial = key.partition(" (trial ")
    who = f"{n} client" + ("" if n == "1" else "s")
    return f"{name}, {who}" + (f", trial {trial.rstrip(')')}" if trial else "")


def _render_steps(wl, trials, client_list, as_json, run_id, server=None) -> None:
    """Multi-step workloads (insert-benchmark, parallel-scan, ...): their own step table
    per client count and trial, and the workload's conclusions."""
    results, conclusions = {}, {}
    for c in client_list:
        mine = [t for t in trials if t.clients == c]
        for rnd in sorted({t.round for t in mine}):
            steps = sorted((step_result_of(t) for t in mine if t.round == rnd),
                           key=lambda r: r.metrics.get("step_index", 0))
            key = str(c) if rnd == 0 else f"{c} (trial {rnd + 1})"
            results[key] = [st.to_dict() for st in steps]
            conclusions[key] = wl.summarize(steps)
    for c, steps in results.items():
        t = Table(title=step_table_title(wl.name, c), title_justify="left")
        costs = [c for c in ROW_COSTS if c.format != "share"]      # per operation
        for col in ("step", "throughput", "unit", *(c.header for c in costs), "valid"):
            t.add_column(col, overflow="fold", no_wrap=True)
        for s in steps:
            m = s.get("metrics") or {}
            t.add_row(str(s.get("step")), fmt.number(s.get("throughput") or 0, 1),
                      str(s.get("unit")), *(fmt.cost(c, m.get(c.key)) for c in costs),
                      "yes" if s.get("valid", True) else "NO")
        (console if as_json else out).print(t)
        # each step's own results under the table, whole: as a column they were squeezed to
        # nothing in 120 columns
        for s in steps:
            details = _details(s)
            if details:
                (console if as_json else out).print(f"  {s.get('step')}: {details}")
        said = wl.conclusion({s["step"]: s.get("throughput") for s in steps
                              if s.get("valid", True)})
        if said:
            (console if as_json else out).print(f"  {said}")
        for k, v in (conclusions.get(c) or {}).items():
            if isinstance(v, dict):
                v = ", ".join(f"{kk}={fmt.general(vv)}" for kk, vv in v.items())
            elif isinstance(v, float):
                v = fmt.general(v)
            (console if as_json else out).print(f"  [bold]{k}[/bold]: {v}")
        for st in steps:
            for w in st.get("warnings") or []:
                console.print(f"[yellow]{st['step']}: {w}[/yellow]")
    if as_json:
        print_json({"run_id": run_id, "workload": wl.name, "server": server,
                    "results": results, "summary": conclusions})

