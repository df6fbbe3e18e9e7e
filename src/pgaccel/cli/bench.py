"""`pgaccel bench` (one workload, optionally a client sweep) and `pgaccel workloads`."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from ..errors import UsageError
from ..lab.experiment import Experiment, Variant, WorkloadSpec
from ..lab.trial import Trial
from ..server.discovery import find_client
from ..server.target import open_target
from ..workloads.base import BenchContext, get_workload
from ..workloads.steps import StepWorkload, list_workloads, params_for
from ..lab.stats import median_of
from ..session.runs import run_dir_for
from .common import console, out, parse_list, parse_pairs, print_json, target_options
from .progress import drive


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
    out.print(t)
    console.print("[dim]Details: pgaccel workloads --json; docs/workloads.md[/dim]")


def trial_row(ts: list[Trial]) -> dict[str, Any]:
    """Median of each headline metric over a clients value's trials."""
    def med(key, sub=None):
        vals = [(t.metrics.get(key) or {}).get(sub) if sub else t.metrics.get(key) for t in ts]
        return median_of([v for v in vals if isinstance(v, (int, float))])
    waits: dict[str, float] = {}
    for t in ts:
        for w in t.metrics.get("waits", []):
            waits[w["event"]] = waits.get(w["event"], 0) + w["share"] / len(ts)
    top = sorted(waits.items(), key=lambda kv: -kv[1])[:3]
    return {
        "trials": len(ts), "throughput": median_of([t.throughput for t in ts]),
        "lat_mean": med("latency_ms", "mean"), "lat_p50": med("latency_ms", "p50"),
        "lat_p95": med("latency_ms", "p95"), "lat_p99": med("latency_ms", "p99"),
        "server_us": med("server_cpu_us_per_op"), "client_us": med("client_cpu_us_per_op"),
        "client_share": med("client_cpu_share"), "ctx": med("ctx_switches_per_op"),
        "read_kb": med("read_kb_per_op"), "write_kb": med("write_kb_per_op"),
        "wal_b": med("wal_bytes_per_op"),
        "top_waits": ", ".join(f"{k} {v:.0%}" for k, v in top),
    }


def render_bench(name: str, unit: str, rows: dict[int, dict[str, Any]], dest=None) -> None:
    t = Table(title=f"{name} ({unit}; medians over trials)", title_justify="left")
    cols = [("clients", "clients"), ("throughput", unit), ("lat_p50", "p50 ms"),
            ("lat_p95", "p95 ms"), ("lat_p99", "p99 ms"), ("server_us", "srv µs/op"),
            ("client_us", "cli µs/op"), ("client_share", "client CPU"), ("ctx", "ctx/op"),
            ("read_kb", "read KB/op"), ("write_kb", "write KB/op"), ("wal_b", "WAL B/op"),
            ("top_waits", "top waits")]
    for _, head in cols:
        t.add_column(head, justify="left" if head == "top waits" else "right")
    fmt = {"throughput": "{:,.0f}", "client_share": "{:.0%}", "ctx": "{:.1f}",
           "read_kb": "{:.2f}", "write_kb": "{:.2f}", "wal_b": "{:,.0f}"}
    for c, r in rows.items():
        cells = [str(c)]
        for key, _ in cols[1:]:
            v = r.get(key)
            if isinstance(v, (int, float)):
                cells.append(fmt.get(key, "{:.2f}" if key.startswith("lat") else "{:.1f}").format(v))
            else:
                cells.append(str(v or "–"))
        t.add_row(*cells)
    (dest or out).print(t)
    for c, r in rows.items():
        if r.get("client_share") and r["client_share"] > 0.4:
            console.print(f"[yellow]At {c} clients the load generator used {r['client_share']:.0%}"
                          " of the CPU consumed: the client, not the server, may be the limit "
                          "(study 003). Fewer clients or a separate client host give a cleaner "
                          "server number.[/yellow]")


@click.command()
@target_options
@click.option("--workload", "-w", "workload_name", default="select-only", show_default=True,
              help="Workload name (see `pgaccel workloads`).")
@click.option("--clients", default="2", show_default=True,
              help="Clients, or a comma-separated sweep such as 1,2,4,8.")
@click.option("--threads", type=click.IntRange(1), help="pgbench threads (default min(clients, CPUs)).")
@click.option("--scale", type=click.IntRange(1),
              help="Data size (pgbench scale; tables for sysbench; default: the workload's).")
@click.option("--duration", type=click.FloatRange(2),
              help="Measured seconds per trial (default: the workload's).")
@click.option("--warmup", type=click.FloatRange(0),
              help="Maximum warm-up seconds (ends early once the rate is steady).")
@click.option("--trials", type=click.IntRange(1), default=1, show_default=True)
@click.option("--protocol", type=click.Choice(["simple", "extended", "prepared"]),
              help="Query protocol (default prepared).")
@click.option("--rate", type=click.FloatRange(0, min_open=True), help="Target rate (pgbench -R).")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="A server setting for the run (repeatable).")
@click.option("--option", "wopts", multiple=True, metavar="KEY=VALUE",
              help="A workload-specific knob (repeatable; see `pgaccel workloads --json`).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Run directory.")
@click.option("--store", "store_path", envvar="PGACCEL_STORE", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON on stdout.")
def bench(pg_bin, dsn, pgdata, run_as, workdir, port, keep, workload_name, clients, threads,
          scale, duration, warmup, trials, protocol, rate, sets, wopts, out_dir, store_path,
          as_json) -> None:
    """Benchmark one workload: throughput, latency percentiles (from pgbench's transaction
    log), server and client CPU per operation, context switches, I/O, WAL, top wait events.

    Every trial starts from the same state: restart, data restored for writers, CHECKPOINT,
    caches prewarmed, a warm-up that ends once the rate is steady."""
    from ..lab.store import Store
    wl = get_workload(workload_name)
    settings = parse_pairs(sets, "--set", lower=True)
    options = parse_pairs(wopts, "--option")
    client_list = parse_list(clients, int)
    if not client_list or min(client_list) < 1:
        raise UsageError("--clients needs positive integers.", "Example: --clients 1,2,4,8")
    with open_target(pg_bin=pg_bin, dsn=dsn, pgdata=pgdata, run_as=run_as, workdir=workdir,
                     port=port, keep=keep) as target:
        console.print(f"[bold]pgaccel bench {wl.name}[/bold] on {target.describe()}")
        given = {k: v for k, v in (("threads", threads), ("duration", duration),
                                   ("warmup", warmup), ("protocol", protocol), ("rate", rate),
                                   ("scale", scale)) if v is not None}
        specs = [WorkloadSpec(wl, params_for(wl, {**given, "clients": c, "options": options}))
                 for c in client_list]
        if isinstance(wl, StepWorkload):
            settings = {**wl.required_settings(specs[0].params), **settings}
        target.apply(settings)
        ctx = BenchContext(target, find_client("pgbench", target.inst), workdir=workdir)
        if isinstance(wl, StepWorkload):
            return _bench_steps(ctx, wl, specs, as_json)
        exp = Experiment(ctx, [Variant("current", settings)], specs, rounds=trials)
        store = Store(store_path)
        exp.store = store
        exp.run_id = store.create_run("bench", wl.name, spec={"clients": client_list,
                                                              "scale": scale})
        store.add_variant(exp.run_id, "current", settings=settings)
        exp.run_dir = run_dir_for(out_dir, exp.run_id)
        exp.info = {"kind": "bench", "target": target.describe()}
        drive(exp)
        store.close()
    rows = {c: trial_row([t for t in exp.trials if t.clients == c]) for c in client_list}
    render_bench(wl.name, wl.unit, rows, console if as_json else out)
    console.print(f"Results: {exp.run_dir}/run.json")
    if as_json:
        print_json({"run_id": exp.run_id, "workload": wl.name, "unit": wl.unit,
                    "results": {str(c): r for c, r in rows.items()},
                    "trials": [t.to_dict() for t in exp.trials]})


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def _details(step: dict[str, Any]) -> str:
    """A step's own scalar results (degree, speedup, target rate ...) and its note."""
    extra = {k: v for k, v in (step.get("extra") or {}).items()
             if isinstance(v, (int, float, str)) and not isinstance(v, bool)
             and k not in ("query", "answer", "step")}
    text = ", ".join(f"{k}={_fmt(v)}" for k, v in list(extra.items())[:6])
    note = step.get("note")
    return f"{text}; {note}" if note and text else (note or text)


def _bench_steps(ctx, wl, specs, as_json) -> None:
    """Multi-step workloads (insert-benchmark, parallel-scan, ...): their own step table."""
    results, conclusions = {}, {}
    ctx.target.ensure_bench_db()
    for spec in specs:
        c = spec.params.clients
        console.print(f"preparing {wl.name} ({c} clients) ...")
        wl.prepare(ctx, spec.params)
        steps = wl.run_steps(ctx, spec.params, on_progress=lambda step, frac: None)
        results[c] = [st.to_dict() for st in steps]
        conclusions[c] = wl.summarize(steps)
    for c, steps in results.items():
        t = Table(title=f"{wl.name}, {c} clients", title_justify="left")
        for col in ("step", "throughput", "unit", "srv µs/op", "cli µs/op", "ctx/op",
                    "read KB/op", "write KB/op", "valid", "details"):
            t.add_column(col, overflow="fold", no_wrap=col != "details",
                         min_width=30 if col == "details" else None)
        for s in steps:
            m = s.get("metrics") or {}
            def f(k, fmt="{:.1f}"):
                v = m.get(k)
                return fmt.format(v) if isinstance(v, (int, float)) else "–"
            t.add_row(str(s.get("step")), f"{s.get('throughput') or 0:,.1f}", str(s.get("unit")),
                      f("server_cpu_us_per_op"), f("client_cpu_us_per_op"),
                      f("ctx_switches_per_op"), f("read_kb_per_op", "{:.2f}"),
                      f("write_kb_per_op", "{:.2f}"),
                      "yes" if s.get("valid", True) else "NO", _details(s))
        (console if as_json else out).print(t)
        for k, v in (conclusions.get(c) or {}).items():
            if isinstance(v, dict):
                v = ", ".join(f"{kk}={_fmt(vv)}" for kk, vv in v.items())
            (console if as_json else out).print(f"  [bold]{k}[/bold]: {v}")
        for st in steps:
            for w in st.get("warnings") or []:
                console.print(f"[yellow]{st['step']}: {w}[/yellow]")
    if as_json:
        print_json({"workload": wl.name, "results": results, "summary": conclusions})
