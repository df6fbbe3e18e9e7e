"""`pgaccel profile`: where a transaction's CPU goes.  A live window under perf (server CPU,
context switches and page faults per transaction, hardware counters where the machine has
them, a flame graph; ``metrics/perfprof.py``), then the deterministic count of one backend
under cachegrind (``metrics/cpucost.py``)."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

import os
import time

from ..errors import UsageError
from ..report import format as fmt
from ..metrics import cpucost, perfprof
from ..report.flamegraph import svg as flame_svg
from ..report.profile import render_live
from ..session.profiling import profile_workload
from ..util import atomic_write, atomic_write_json
from ..workloads.base import get_workload
from .common import (BUILD_OPT, console, out, print_json, resolves_build, scale_type)


def _settings(pairs: tuple[str, ...]) -> dict[str, str]:
    out_: dict[str, str] = {}
    for p in pairs:
        name, sep, value = p.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--set {p!r}: expected NAME=VALUE (e.g. --set shared_buffers=1GB).")
        out_[name.strip()] = value.strip()
    return out_


@click.command()
@click.option("--workload", "-w", "workload_name", default="select-only", show_default=True,
              type=click.Choice(cpucost.PROFILE_WORKLOADS))
@click.option("--transactions", "-n", type=click.IntRange(10, 1_000_000), default=2000,
              show_default=True, help="Transactions counted (the backend runs N, then 2N).")
@click.option("--scale", type=scale_type(), default=10, show_default=True)
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="A server setting for the profiled backend (repeatable).")
@click.option("--pg-bin", metavar="DIR", envvar="PGACCEL_PG_BIN",
              help="PostgreSQL bin directory to profile (also $PGACCEL_PG_BIN).")
@BUILD_OPT
@click.option("--run-as", metavar="USER", help="Unprivileged OS user running the server.")
@click.option("--workdir", metavar="DIR", type=click.Path(file_okay=False),
              help="Where the throwaway cluster is created (default: the temp dir).")
@click.option("--live-seconds", type=click.FloatRange(0, 3600), default=10.0,
              show_default=True, help="Seconds of the workload under perf (0: leave the live "
              "window out).")
@click.option("--clients", "-c", type=click.IntRange(1, 1000), default=2, show_default=True,
              help="Clients during the live window.")
@click.option("--out", "-o", "out_dir", metavar="DIR", type=click.Path(file_okay=False),
              help="Where profile.json and flamegraph.svg go (default: pgaccel's data dir, "
              "profiles/).")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON on stdout.")
@resolves_build
def profile(workload_name, transactions, scale, sets, pg_bin, run_as, workdir, live_seconds,
            clients, out_dir, as_json) -> None:
    """Count what one transaction costs the server's CPU: instructions, cache misses and
    branch mispredictions per transaction of one backend under valgrind's cachegrind (a
    simulated CPU, so the counts do not depend on this machine's noise: two builds or two
    configs that differ by 2% in instructions really differ).  The backend runs in
    single-user mode on a throwaway cluster, so client and network costs are not in it.

    Before that, unless --live-seconds 0, the workload runs for a few seconds while perf
    counts every server process (CPU time, context switches, page faults per transaction;
    hardware counters where the machine has a PMU) and samples their call stacks into a flame
    graph (flamegraph.svg)."""
    settings = _settings(sets)
    cpucost.valgrind()
    if live_seconds:
        perfprof.perf_binary()
    wl = get_workload(workload_name)
    said: list[str] = []

    def say(msg: str) -> None:
        console.print(("" if said else "[bold]pgaccel profile[/bold] ") + escape(msg))
        said.append(msg)

    prof = profile_workload(wl, settings, transactions=transactions, scale=scale,
                            clients=clients, live_seconds=live_seconds, pg_bin=pg_bin,
                            run_as=run_as, workdir=workdir, say=say)
    live, cost, version = prof.live, prof.cost, prof.version
    doc = {"workload": wl.name, "scale": scale, "settings": settings,
           "server_version": version, "per_transaction": cost.to_dict(),
           "mispredict_rate": cost.mispredict_rate,
           "live": live.to_dict() if live else None}
    where = out_dir or os.path.join(_profiles_dir(),
                                    time.strftime("%Y%m%d-%H%M%S-") + wl.name)
    os.makedirs(where, exist_ok=True)
    atomic_write_json(os.path.join(where, "profile.json"), doc)
    if live:
        atomic_write(os.path.join(where, "flamegraph.svg"), flame_svg(
            live.folded, title=f"{wl.name}, PostgreSQL {version}: server CPU samples"))
    if as_json:
        print_json({**doc, "out_dir": where})
        return
    if live:
        render_live(out, live, f"{wl.name}: live window ({fmt.short(live.seconds)} s, {fmt.number(live.ops)} "
                    f"transactions, {clients} clients)")
    t = Table(title=f"{wl.name}: CPU cost per transaction (PostgreSQL {version}, cachegrind)",
              title_justify="left")
    t.add_column("counter")
    t.add_column("per transaction", justify="right")
    rows = [("instructions", cost.instructions), ("I1 misses", cost.i1_misses),
            ("LL instruction misses", cost.lli_misses), ("data references", cost.data_refs),
            ("D1 misses", cost.d1_misses), ("LL data misses", cost.lld_misses),
            ("branches", cost.branches), ("mispredicted branches", cost.mispredicts)]
    for name, v in rows:
        t.add_row(name, fmt.number(v))
    t.add_row("mispredict rate", fmt.percent(cost.mispredict_rate, 2))
    out.print(t)
    console.print(f"Written: {where}/profile.json"
                  + (f", flame graph {where}/flamegraph.svg" if live else ""))


def _profiles_dir() -> str:
    from platformdirs import user_data_dir
    return os.path.join(user_data_dir("pgaccel"), "profiles")
