"""What every subcommand shares: error handling, signals, target options, output."""

from __future__ import annotations

import errno
import functools
import math
import os
import signal
import sys
from typing import Any, Callable, Mapping

import click
from rich.markup import escape
from rich.console import Console

from ..errors import (DiskFull, Interrupted, PgaccelError, UsageError, is_missing_dependency,
                      missing_dependency)
from ..report import format as _fmt
from ..util import json_text, with_schema

def _width(stream) -> int | None:
    """Rich's own width on a terminal; 120 columns when piped (its default 80 folds tables)."""
    try:
        return None if stream.isatty() else 120
    except (AttributeError, ValueError):
        return 120


console = Console(stderr=True, highlight=False, width=_width(sys.stderr))
out = Console(highlight=False, width=_width(sys.stdout))


def warn(message: str) -> None:
    """One warning line on stderr (plain text: no rich markup is read from it)."""
    console.print(message, markup=False, style="yellow", soft_wrap=True)


def write_reports(run_dir: str, store: str | None = None, run_id: str | None = None) -> None:
    """Write report.html and report.md beside run.json and say where, one unbroken line;
    ReportError (exit 9) when the report cannot be written (the results are kept)."""
    from ..session.runs import write_run_reports
    reports = write_run_reports(str(run_dir), run_id)
    tail = f"  (store: {store}, run {run_id})" if store else ""
    console.print(f"Results: {run_dir}/run.json, report {reports['html']}{tail}",
                  markup=False, soft_wrap=True)


def _sigterm(signum, frame):  # turn SIGTERM into an exception so cleanup code runs
    raise Interrupted("pgaccel was stopped by SIGTERM.",
                      "Finished results were kept; throwaway clusters were removed.")


def _scrub(text: str) -> str:
    """Error text without any password a DSN quoted in it carried (server.target_base)."""
    from rich.markup import escape

    from ..pg.secrets import scrub_secrets
    return escape(scrub_secrets(text))


def run_main(cli: click.Group) -> None:
    signal.signal(signal.SIGTERM, _sigterm)
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        console.print("[red]pgaccel: interrupted.[/red] Throwaway clusters were removed; "
                      "finished results were kept.")
        sys.exit(130)
    except KeyboardInterrupt:
        console.print("[red]pgaccel: interrupted (Ctrl-C).[/red] Throwaway clusters were "
                      "removed; finished results were kept.")
        sys.exit(130)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except PgaccelError as e:
        msg = _scrub(e.message + (f" {e.hint}" if e.hint else ""))
        console.print(f"[bold red]pgaccel:[/bold red] {msg}", soft_wrap=True)
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.exit(1)
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        where = f" writing {e.filename}" if e.filename else ""
        console.print(f"[bold red]pgaccel:[/bold red] the disk is full{where} ({e.strerror}). "
                      "Free space there (or point --workdir, --out, --store or --state-dir "
                      "elsewhere) and run again; throwaway clusters were removed.",
                      soft_wrap=True)
        sys.exit(DiskFull.exit_code)
    except ImportError as e:   # a package a command imports lazily (scipy, psycopg, ...)
        if not is_missing_dependency(e):
            raise
        missing_dependency(e)
    except Exception as e:  # a server error nobody anticipated: still one clear paragraph
        psycopg = sys.modules.get("psycopg")   # not imported: not a psycopg error
        if psycopg is None or not isinstance(e, psycopg.Error):
            raise
        first = _scrub((str(e).strip().splitlines() or [type(e).__name__])[0])
        console.print(f"[bold red]pgaccel:[/bold red] the server reported an error: {first} "
                      "Check the server log and that the user has the rights the command "
                      "needs (e.g. CREATEDB for the pgaccel_bench database).", soft_wrap=True)
        sys.exit(4)


STORE_OPT = click.option("--store", "store_path", envvar="PGACCEL_STORE",
                         type=click.Path(dir_okay=False),
                         help="Results database (default: user data dir; also $PGACCEL_STORE).")


CLIENT_HOST_OPT = click.option(
    "--client-host", "client_hosts", multiple=True, metavar="ssh://[USER@]HOST[:PORT]",
    help="Run the load generator (pgbench) on this host over SSH (repeatable: the clients are "
         "split between hosts). Needs --dsn naming the server by an address the hosts reach, "
         "and pgbench on them; keys as your ssh uses them ($PGACCEL_SSH replaces the ssh "
         "command). See docs/fleet.md.")

SERVER_HOST_OPT = click.option(
    "--server-host", "server_host", metavar="ssh://[USER@]HOST[:PORT]",
    help="The machine the --dsn server runs on, over SSH: its facts (CPUs, memory, huge "
         "pages, disks) and, per trial, the server's CPU, the host's CPU and disk bytes come "
         "from there. See docs/fleet.md.")

YES_OPT = click.option("--yes", is_flag=True,
                       help="Start a run estimated to take over an hour without asking.")


class Finite(click.FloatRange):
    """A FloatRange that also refuses nan and inf (which every range comparison lets by)."""

    def convert(self, value, param, ctx):
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


def seconds(lo: float) -> Finite:
    """Seconds from ``lo`` up to a week (what pgbench -T and sysbench --time accept)."""
    from ..decide.limits import MAX_SECONDS
    return Finite(lo, MAX_SECONDS)


def clients_type() -> click.IntRange:
    from ..decide.limits import MAX_CLIENTS
    return click.IntRange(1, MAX_CLIENTS)


def scale_type() -> click.IntRange:
    from ..decide.limits import MAX_SCALE
    return click.IntRange(1, MAX_SCALE)


def parse_budget(text: str, option: str = "--budget") -> float:
    """A duration option (90, "45s", "10m", "1h30m") in seconds, or a UsageError naming
    ``option``."""
    from ..specs.spec import parse_duration
    try:
        return parse_duration(text)
    except ValueError as e:
        raise UsageError(f"{option}: {e}") from None


def ask_terminal() -> Callable[[str], bool] | None:
    """A yes/no question on the terminal, or None when stdin is not one."""
    if not sys.stdin.isatty():
        return None
    return lambda q: click.confirm(q, err=True, default=False)


BUILD_OPT = click.option("--build", "build", metavar="NAME",
                         help="A server built by `pgaccel build` (e.g. 18-lto; `pgaccel "
                              "builds` lists them), instead of --pg-bin.")


def build_option(f: Callable, with_option: bool = True) -> Callable:
    """--build NAME: a build from `pgaccel build`, handed to the command as its --pg-bin."""
    @functools.wraps(f)
    def wrapper(*args, build=None, **kw):
        if build:
            env = os.environ.get("PGACCEL_PG_BIN")
            if kw.get("pg_bin") and kw["pg_bin"] != env:
                raise UsageError("--build and --pg-bin both say which server to run.",
                                 "Give one of them.")
            from ..server.buildcache import resolve
            kw["pg_bin"] = resolve(build).bindir
        return f(*args, **kw)
    return BUILD_OPT(wrapper) if with_option else wrapper


def resolves_build(f: Callable) -> Callable:
    """The innermost decorator of a command that lists BUILD_OPT among its own options."""
    return build_option(f, with_option=False)


def target_options(f: Callable) -> Callable:
    """--pg-bin, --build, --dsn, --pgdata, --run-as, --workdir, --port, --keep."""
    f = build_option(f, with_option=False)
    opts = [
        click.option("--pg-bin", metavar="DIR", envvar="PGACCEL_PG_BIN",
                     help="PostgreSQL bin directory to use (also $PGACCEL_PG_BIN)."),
        BUILD_OPT,
        click.option("--dsn", metavar="DSN",
                     help="An existing server (libpq URI or key=value; PG* variables, .pgpass "
                          "and service files honoured). Only the pgaccel_bench database is "
                          "written."),
        click.option("--pgdata", metavar="DIR", type=click.Path(file_okay=False),
                     help="A local cluster pgaccel may stop and start. Benchmarks pass settings "
                          "on the command line and edit no file; `tune --apply` writes only "
                          "its own pgaccel.conf (backed up, undone by `pgaccel rollback`)."),
        click.option("--run-as", metavar="USER",
                     help="When run as root: the unprivileged OS user that runs the server "
                          "(default: pgaccel, created if missing)."),
        click.option("--workdir", metavar="DIR", type=click.Path(file_okay=False),
                     help="Where throwaway clusters are created (default: the temp dir)."),
        click.option("--port", type=click.IntRange(1, 65535),
                     help="Port for the throwaway cluster (default: a free one)."),
        click.option("--keep", is_flag=True,
                     help="Keep the throwaway cluster's directory (data and log) afterwards."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def parse_pairs(items, flag: str = "--set", lower: bool = False) -> dict[str, str]:
    """Repeated NAME=VALUE options as a dict (setting names lower-cased: PostgreSQL's are
    case-insensitive)."""
    out: dict[str, str] = {}
    for item in items or ():
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            raise UsageError(f"{flag} {item!r} is not NAME=VALUE.",
                             f"Example: {flag} work_mem=64MB" if flag == "--set"
                             else f"Example: {flag} driver=pgbench")
        out[name.strip().lower() if lower else name.strip()] = value.strip()
    return out


def print_json(data: Any) -> None:
    """Print ``data`` as JSON on stdout.  A document (a mapping, or an object with
    ``to_dict()``) gets ``"schema"`` as its first key (docs/formats.md); a list is printed
    as it is."""
    if hasattr(data, "to_dict"):
        data = data.to_dict()
    if isinstance(data, Mapping):
        data = with_schema(data)
    click.echo(json_text(data))


def parse_list(text: str | None, cast=str) -> list:
    if not text:
        return []
    try:
        return [cast(x.strip()) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"Cannot read the list {text!r}.",
                         "Give comma-separated values, e.g. 1,2,4,8.") from None


def capture_with_progress(req) -> tuple[str, dict]:
    """``session.capture.capture`` with a progress bar: (bundle, manifest)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
    from ..session.capture import capture
    with Progress(TextColumn("capturing"), BarColumn(), TimeRemainingColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("", total=req.duration_s)
        return capture(req, lambda done, total: bar.update(task, completed=done))
