"""The ``pgaccel`` command.  Each subcommand lives in its own module beside this one and is
imported only when it runs, so `pgaccel probe` does not pay for scipy or matplotlib."""

from __future__ import annotations

import importlib

import click

from .. import __version__
from .common import run_main

# command name -> (module beside this one, attribute holding the click command)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "probe": ("probe", "probe"),
    "tune": ("tune", "tune"),
    "rollback": ("tune", "rollback"),
    "bench": ("bench", "bench"),
    "workloads": ("bench", "workloads"),
    "run": ("run", "run"),
    "lab": ("lab", "lab"),
    "calibrate": ("lab", "calibrate"),
    "history": ("store", "history"),
    "show": ("store", "show"),
    "compare": ("store", "compare"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in SUBCOMMANDS:
            return None
        module, attr = SUBCOMMANDS[name]
        return getattr(importlib.import_module(f".{module}", __name__), attr)


@click.group(cls=LazyGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="pgaccel")
def cli() -> None:
    """pgaccel: probe a PostgreSQL host, tune the whole stack, prove every gain by benchmark.

    Start with `pgaccel run --quick`: it creates a throwaway PostgreSQL cluster, benchmarks the
    server's default settings against pgaccel's tuned plan, and says what the plan is worth on
    this machine.
    """


def main() -> None:
    run_main(cli)
