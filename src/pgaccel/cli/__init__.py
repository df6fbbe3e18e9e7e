"""The ``pgaccel`` command.  Each subcommand lives in its own module beside this one and is
imported only when it runs, so `pgaccel probe` does not pay for scipy or matplotlib."""

from __future__ import annotations

import importlib

from .. import __version__
from ..errors import missing_dependency

try:
    import click

    from .common import run_main
except ImportError as e:     # click or rich not installed: one paragraph, exit 3
    from ..errors import is_missing_dependency
    if not is_missing_dependency(e):
        raise
    missing_dependency(e)

# command name -> (module beside this one, attribute holding the click command, one line for
# `pgaccel --help`; the listing is drawn from here so that --help imports no command)
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "probe": ("probe", "probe", "Host and PostgreSQL facts: CPU, memory, cgroups, huge pages, "
              "disks, builds, settings."),
    "tune": ("tune", "tune", "The plan for PostgreSQL, Linux and the build; --apply / "
             "--apply-os carry it out."),
    "rollback": ("tune", "rollback", "Return a server and this machine's Linux settings to a "
                 "saved state."),
    "run": ("run", "run", "Probe, tune and prove it: defaults vs the tuned plan, trials "
            "interleaved."),
    "bench": ("bench", "bench", "Benchmark one workload, optionally over a client sweep."),
    "workloads": ("bench", "workloads", "List the workloads and their knobs."),
    "lab": ("lab", "lab", "Run the experiment a TOML spec describes (see examples/)."),
    "calibrate": ("lab", "calibrate", "A/A run: this machine's noise floor and smallest "
                  "detectable effect."),
    "profile": ("profile", "profile", "Why a config is fast: perf counters and a flame "
                "graph under load, cachegrind's instructions per transaction."),
    "build": ("build", "build", "Build PostgreSQL 15-18 from source in a flavor (o2, native, "
              "lto, pgo, ...)."),
    "builds": ("build", "builds", "List (or remove) the builds in the build cache."),
    "history": ("store", "history", "List the stored runs, newest first."),
    "show": ("store", "show", "Show one stored run: variants, results, trials."),
    "compare": ("store", "compare", "Compare two stored runs workload by workload."),
    "report": ("report", "report", "Write a stored run's report, or a search's page, "
               "again (HTML, Markdown, JSON)."),
    "capture": ("capture", "capture", "What a live server runs, as a workload bundle "
                "(pg_stat_statements, schema, sizes); reads only."),
}


class LazyGroup(click.Group):
    """Imports a command's module only when that command runs (or its own --help is
    asked for): `pgaccel --help` and `--version` load neither SciPy nor psycopg."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in SUBCOMMANDS:
            return None
        module, attr, _ = SUBCOMMANDS[name]
        return getattr(importlib.import_module(f".{module}", __name__), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, line) for name, (_, _, line) in SUBCOMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="pgaccel")
def cli() -> None:
    """pgaccel: probe a PostgreSQL host, tune the whole stack, prove every gain by benchmark.

    Start with `pgaccel run --quick`: it creates a throwaway PostgreSQL cluster, benchmarks the
    server's default settings against pgaccel's tuned plan, and says what the plan is worth on
    this machine.
    """
    from ..heap import keep_large_buffers_mapped
    keep_large_buffers_mapped()       # a long lab's transients go back to the system (heap.py)
    _recover_os_values()
    _recover_capture_logging()


def _recover_os_values() -> None:
    """OS values a killed pgaccel run changed (huge pages, THP, sysctls) are put back at
    the next start (``osknobs.journal``)."""
    from ..osknobs.journal import journal_dir
    import os
    if not os.path.isdir(journal_dir()):
        return
    from ..osknobs.journal import recover
    for message in recover():
        click.echo(f"pgaccel: {message}", err=True)


def _recover_capture_logging() -> None:
    """Statement logging a killed `capture --log` turned on is put back at the next start
    (``session/capturelog``)."""
    import os
    from ..session.capturelog import journal_dir
    if not os.path.isdir(journal_dir()) or not os.listdir(journal_dir()):
        return
    from ..session.capturelog import recover
    for message in recover():
        click.echo(f"pgaccel: {message}", err=True)


def main() -> None:
    run_main(cli)
