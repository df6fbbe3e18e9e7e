"""The ``pgaccel`` command.  Each subcommand lives in its own module beside this one."""

from __future__ import annotations

import importlib

import click

from .. import __version__
from .common import run_main

# module name -> attribute holding the click command
SUBCOMMANDS = [
    ("probe", "probe"),
    ("tune", "tune"),
    ("tune", "rollback"),
    ("bench", "bench"),
    ("bench", "workloads"),
    ("run", "run"),
    ("lab", "lab"),
    ("lab", "calibrate"),
    ("lab", "history"),
    ("lab", "show"),
    ("lab", "compare"),
]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="pgaccel")
def cli() -> None:
    """pgaccel: probe a PostgreSQL host, tune the whole stack, prove every gain by benchmark.

    Start with `pgaccel run --quick`: it creates a throwaway PostgreSQL cluster, benchmarks the
    server's default settings against pgaccel's tuned plan, and says what the plan is worth on
    this machine.
    """


for _mod, _attr in SUBCOMMANDS:
    try:
        _m = importlib.import_module(f".{_mod}", __name__)
    except ModuleNotFoundError as _e:  # a subcommand module not written yet
        if _e.name and _e.name.endswith(f"cli.{_mod}"):
            continue
        raise
    if hasattr(_m, _attr):
        cli.add_command(getattr(_m, _attr))


def main() -> None:
    run_main(cli)
