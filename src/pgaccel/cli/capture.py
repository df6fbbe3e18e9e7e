"""``pgaccel capture --dsn DSN``: what a live server runs in a window, as a workload bundle
(docs/workloads.md).  Reads only; the statements that took most of the time on the
terminal, the bundle's path at the end."""

from __future__ import annotations

import click

from ..errors import UsageError
from .common import capture_with_progress, console, out, parse_budget


@click.command()
@click.option("--dsn", required=True, metavar="DSN",
              help="The server and database to capture (a libpq URI or key=value pairs).")
@click.option("--duration", default="10m", show_default=True, metavar="DURATION",
              help="How long to watch (e.g. 90s, 10m).")
@click.option("--out", "out_dir", metavar="DIR", type=click.Path(file_okay=False),
              help="The bundle's directory (new; default ./capture-DB-TIME).")
@click.option("--top", type=click.IntRange(1, 1000), default=50, show_default=True,
              help="Statements kept by their time; the rest are one row.")
@click.option("--data", type=click.Choice(["none", "dump"]), default="none",
              show_default=True, help="dump: the database's data too (pg_dump, parallel "
              "jobs), which a replay restores into its throwaway servers.")
@click.option("--jobs", type=click.IntRange(1, 64), default=2, show_default=True,
              help="With --data dump: pg_dump's parallel jobs.")
@click.option("--from-log", "from_log", metavar="FILE", type=click.Path(dir_okay=False),
              help="The server log of the window (csvlog, jsonlog or stderr, written with "
                   "log_min_duration_statement = 0): the statements' parameter values.")
@click.option("--log", "log", is_flag=True,
              help="Turn the server's statement logging on for the window (ALTER SYSTEM, "
                   "reload; put back after, also after a kill -9 at pgaccel's next start) "
                   "and read it through SQL: needs logging_collector = on and a superuser.")
@click.option("--with-values", is_flag=True,
              help="Keep the log's parameter values (--log or --from-log) in the bundle "
                   "(they are your data: without this flag none is kept).")
def capture(dsn, duration, out_dir, top, data, jobs, from_log, log, with_values) -> None:
    """Capture what a server runs: pg_stat_statements over a window, the schema, the
    relations' sizes and the settings, into a bundle (0600) a replay can use.  Changes
    nothing on the server (but its logging for the window, with --log); keeps no parameter
    value unless --with-values."""
    from ..report.capture import render_capture
    from ..session.capture import CaptureRequest
    secs = parse_budget(duration, "--duration")
    if secs <= 0:
        raise UsageError(f"--duration {duration}: a capture watches the server for a while, "
                         "and this window is empty.",
                         "Give a duration such as 90s or 10m (statements that ran before "
                         "the window are not counted).")
    req = CaptureRequest(dsn=dsn, duration_s=secs, out=out_dir, top=top, data=data,
                         jobs=jobs, from_log=from_log, log=log, with_values=with_values)
    path, m = capture_with_progress(req)
    render_capture(out, console, path, m)
