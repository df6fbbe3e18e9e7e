"""`pgaccel probe`: what this host and its PostgreSQL are."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from ..metrics import steadiness
from ..probe.facts import HostFacts
from ..report import format as fmt
from ..session.probing import collect
from ..util import format_bytes
from ..session.apply import warn_interrupted
from .common import console, out, print_json, target_options, warn


@click.command()
@target_options
@click.option("--json", "as_json", is_flag=True, help="Print the facts as JSON.")
@click.option("--no-server", is_flag=True,
              help="Do not start or connect to a server (host and installation facts only).")
def probe(pg_bin, dsn, pgdata, run_as, workdir, port, keep, as_json, no_server) -> None:
    """Show host facts (CPU, how steadily each CPU delivers work per 0.1 s over 2 s, memory,
    cgroup limits, huge pages, disks, kernel) and PostgreSQL facts (installations, build,
    non-default settings, huge pages needed).

    Without --dsn/--pgdata the server facts come from a throwaway cluster of the newest
    installation found, i.e. that build's defaults."""
    warn_interrupted(warn, pgdata=pgdata)
    data = collect(pg_bin, dsn, pgdata, run_as, workdir, port, keep, server=not no_server)
    if as_json:
        print_json(data)
        return
    render(data)


def render(data: dict[str, Any]) -> None:
    h = HostFacts.from_dict(data["host"])
    t = Table(title="Host", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    smt = (f" on {h.physical_cores} cores" if h.physical_cores
           and h.physical_cores < h.logical_cpus else "")
    cpu = (f"{h.cpu_model or '?'} ({h.arch}), {h.logical_cpus} logical CPUs{smt}, "
           f"{h.numa_nodes} NUMA node(s)")
    if h.arch == "aarch64":
        cpu += f", LSE atomics: {'yes' if h.lse_atomics else 'no'}"
    t.add_row("CPU", cpu)
    mem = f"{format_bytes(h.memory_total_bytes)} total, {format_bytes(h.memory_available_bytes)} available"
    t.add_row("Memory", mem)
    cg = h.cgroup
    lim = []
    if cg.memory_limit_bytes:
        lim.append(f"memory {format_bytes(cg.memory_limit_bytes)}")
    if cg.cpu_limit:
        lim.append(f"CPU {fmt.short(cg.cpu_limit)}")
    if cg.cpuset_cpus:
        lim.append(f"cpuset {cg.cpuset_cpus} CPUs")
    t.add_row("cgroup", f"v{cg.version}: " + (", ".join(lim) or "no limits") if cg.version
              else "none found")
    hp = ", ".join(f"{format_bytes(p.size_bytes)}: {p.total} reserved ({p.free} free)"
                   for p in h.hugepages) or "none"
    t.add_row("Huge pages", hp)
    t.add_row("THP", f"enabled={h.thp_enabled}, defrag={h.thp_defrag}")
    for d in h.block_devices:
        t.add_row(f"Disk {d.name}", f"{d.kind}, rotational={d.rotational}, scheduler="
                  f"{d.scheduler}, read-ahead {d.read_ahead_kb} kB"
                  + (f", {format_bytes(d.size_bytes)}" if d.size_bytes else ""))
    t.add_row("CPU steadiness", steadiness.text(data.get("cpu_steadiness")) or "not measured")
    t.add_row("Kernel", h.kernel)
    t.add_row("io_uring", h.io_uring)
    t.add_row("sysctl", ", ".join(f"{k}={v}" for k, v in sorted(h.sysctls.items())))
    out.print(t)

    t = Table(title="PostgreSQL installations", title_justify="left")
    for col in ("version", "bin directory", "found by", "server"):
        t.add_column(col)
    # the builds of `pgaccel build` are among the installations, last (found_by names them)
    chosen = (data.get("installation") or {}).get("bindir")
    for i in data["installations"]:
        server = ("client only" if not i["is_server"] else
                  "yes (chosen)" if i["bindir"] == chosen else "yes")
        t.add_row(i["version"], i["bindir"], i["found_by"], server)
    out.print(t)
    b = data.get("build")
    if b:
        w = ", ".join(k for k, v in b["with"].items() if v) or "none of lz4/zstd/liburing/llvm"
        out.print(f"[bold]Build[/bold] {b['version']}: CC={b['cc']}  CFLAGS={b['cflags']}\n"
                  f"  built with: {w}")
    s = data.get("server")
    if s:
        out.print(f"\n[bold]Server[/bold] {s['version']} ({s.get('target')})")
        for k in ("shared_buffers", "max_connections", "huge_pages",
                  "shared_memory_size", "shared_memory_size_in_huge_pages", "huge_page_size",
                  "io_method"):
            if k in s:
                out.print(f"  {k} = {s[k]}")
        t = Table(title="Non-default settings", title_justify="left")
        for col in ("name", "setting", "unit", "source", "context"):
            t.add_column(col)
        for r in s["non_default_settings"]:
            t.add_row(r["name"], str(r["setting"]), r["unit"] or "", r["source"], r["context"])
        out.print(t)
    console.print("[dim]JSON: pgaccel probe --json[/dim]")
