"""`pgaccel build` (a PostgreSQL server from source, in a flavor) and `pgaccel builds`."""

from __future__ import annotations

import os

import click
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from ..server import buildcache as cache
from ..buildlab.flavors import FLAVORS
from ..errors import UsageError
from ..report import format as fmt
from ..util import format_bytes
from .common import ask_terminal, console, out, print_json

FLAVOR_HELP = "; ".join(f"{n}: {f.what}" for n, f in FLAVORS.items())


@click.command()
@click.argument("version")
@click.option("--flavor", type=click.Choice(list(FLAVORS)), default="o2", show_default=True,
              help=f"How the compiler builds it. {FLAVOR_HELP}.")
@click.option("--with-liburing/--without-liburing", "liburing", default=None,
              help="io_uring support (io_method=io_uring); default: on where the version has "
                   "it (18 and newer).")
@click.option("--source", metavar="DIR|TARBALL",
              help="An upstream release tarball or a source tree (git checkout); default: "
                   "the release tarball from ftp.postgresql.org (checked against its "
                   "published SHA-256), else Debian's source package for the version, "
                   "fetched into a private apt state.")
@click.option("--source-url", metavar="URL",
              help="A mirror of PostgreSQL's download site, laid out like "
                   "https://ftp.postgresql.org/pub/source/ (vX.Y/postgresql-X.Y.tar.bz2 "
                   "beside its .sha256); only it is tried.")
@click.option("--jemalloc", is_flag=True,
              help="Run this build's server with libjemalloc preloaded (a copy of the build "
                   "named NAME-jemalloc; no second compile).")
@click.option("--jobs", "-j", type=click.IntRange(1, 256),
              help="Parallel compile jobs (default: the host's CPUs).")
@click.option("--yes", is_flag=True, help="Install missing build dependencies with apt "
              "without asking.")
@click.option("--fetch-only", is_flag=True,
              help="Download and verify the sources into the build cache, then stop: a "
                   "machine without network builds them with --source PATH.")
@click.option("--json", "as_json", is_flag=True, help="Print the build's description as JSON.")
def build(version, flavor, liburing, source, source_url, jemalloc, jobs, yes,
          fetch_only, as_json) -> None:
    """Build PostgreSQL VERSION (a major such as 18, or a release such as 17.4) into the build
    cache; `--build NAME` then runs it in every command."""
    from ..buildlab.make import Builder, Request, estimate_seconds
    from ..buildlab.sources import parse_request
    try:
        major, _ = parse_request(version)
    except ValueError as e:
        raise UsageError(f"pgaccel build {version}: {e}.") from None
    if source and source_url:
        raise UsageError("--source and --source-url name two sources: give one.")
    if source_url and not source_url.startswith(("http://", "https://", "file:")):
        raise UsageError(f"--source-url {source_url}: not a URL (http://, https:// or "
                         "file:).")
    if fetch_only and source:
        raise UsageError("--fetch-only downloads the sources; --source names sources already "
                         "here.", "Leave one of them out.")
    req = Request(version, flavor, liburing, source, jobs, jemalloc, source_url=source_url)
    if fetch_only:
        _fetch_only(req, yes, as_json)
        return
    njobs = jobs or os.cpu_count() or 1
    est = estimate_seconds(major, flavor, njobs)
    console.print(f"[bold]pgaccel build[/bold] PostgreSQL {version}, flavor {flavor}: about "
                  f"{fmt.minutes(est)} with {njobs} jobs (cached builds are reused).")
    ask = None if yes else ask_terminal()
    confirm = (lambda q: True) if yes else (ask or (lambda q: False))
    with Progress(TextColumn("{task.description:<10}"), BarColumn(),
                  TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(), TextColumn("ETA"),
                  TimeRemainingColumn(), console=console, transient=False) as progress:
        task = progress.add_task("fetch", total=1.0)

        def on_phase(phase: str, frac: float) -> None:
            progress.update(task, description=phase, completed=frac)

        def say(line: str) -> None:
            progress.console.print(f"  {line}", markup=False)

        b, built = Builder(req, on_phase=on_phase, say=say, confirm_install=confirm).run()
        progress.update(task, description="done", completed=1.0)
    if as_json:
        print_json({"build": b.to_dict(), "built_now": built})
        return
    d = b.to_dict()
    how = (f"built in {fmt.minutes(d['build_seconds'], 1)}" if built
           else "already built (cache hit: same version, flags and source)")
    out.print(f"[bold green]{b.name}[/bold green] {how}: {b.bindir}")
    out.print(f"  source: {_source_line(d['source'])}")
    out.print(f"  CFLAGS {d['cflags']!r}, LDFLAGS {d['ldflags']!r}, liburing "
              f"{'yes' if d['liburing'] else 'no'}, {format_bytes(d['size_bytes'] or 0)}")
    if d.get("training"):
        out.print(f"  training: {'; '.join(d['training']['workloads'])}")
    out.print(f"Use it with [bold]--build {b.name}[/bold] (run, bench, probe, tune, calibrate) "
              f"or `build = \"{b.name}\"` in a lab variant.")


def _fetch_only(req, yes: bool, as_json: bool) -> None:
    from ..buildlab.make import Builder
    ask = None if yes else ask_terminal()
    confirm = (lambda q: True) if yes else (ask or (lambda q: False))
    src = Builder(req, say=lambda line: console.print(f"  {line}", markup=False),
                  confirm_install=confirm).fetch()
    d = {**src.origin, "sha256": src.sha256, "version": src.version}
    if as_json:
        print_json({"source": d, "path": src.tarball})
        return
    out.print(f"[bold green]PostgreSQL {src.version}[/bold green] sources fetched and "
              f"verified: {src.tarball}")
    out.print(f"  source: {_source_line(d)}")
    out.print(f"Build them here with `pgaccel build {src.version}` (they are reused), or on "
              f"a machine without network: copy the file, then `pgaccel build {src.version} "
              "--source PATH`.")


def _host(url: str | None) -> str | None:
    from urllib.parse import urlsplit
    return urlsplit(url).netloc or url if url else None


def _source_line(s: dict | None) -> str:
    if not s:
        return "?"
    if s.get("kind") == "debian":
        return (f"Debian {s['package']} {s['debian_version']} from {s['suite']}, "
                f"sha256 {s['sha256']}")
    if s.get("kind") == "upstream":
        return f"{s['url']}, sha256 {s['sha256']} (matches the published .sha256)"
    return f"{s.get('kind')} {s.get('path')} ({s.get('sha256')})"


@click.command()
@click.option("--remove", "remove_name", metavar="NAME", help="Remove this build.")
@click.option("--json", "as_json", is_flag=True)
def builds(remove_name, as_json) -> None:
    """List the builds in the cache (or remove one)."""
    root = cache.builds_dir()
    if remove_name:
        b = cache.remove(remove_name, root)
        out.print(f"Removed {b.name} ({b.path}).")
        return
    bs = cache.list_builds(root)
    if as_json:
        print_json({"builds_dir": root, "builds": [b.to_dict() for b in bs]})
        return
    t = Table(title=f"Builds in {root}", title_justify="left")
    for col in ("name", "version", "flavor", "CFLAGS", "liburing", "size", "build time",
                "source"):
        t.add_column(col)
    for b in bs:
        d = b.to_dict()
        src = d["source"] or {}
        t.add_row(b.name, d["version"], d["flavor"], d["cflags"], "yes" if d["liburing"] else "no",
                  format_bytes(d["size_bytes"] or 0),
                  fmt.minutes(d['build_seconds'] or 0, 1),
                  src.get("suite") or _host(src.get("url")) or src.get("kind") or "?")
    out.print(t)
    if not bs:
        console.print("No builds yet: `pgaccel build 18` builds the newest PostgreSQL 18.")
