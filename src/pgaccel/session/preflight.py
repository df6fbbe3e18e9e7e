"""Before a run, bench, lab or calibrate starts anything: the numbers checked
(``decide/limits.py``), this host's limits read (open files, free disk where a throwaway
cluster will live), the estimated duration shown, and a run past an hour confirmed.

Refusals name every problem at once and come before a cluster is created or a binary
started: a :class:`~pgaccel.errors.UsageError` (exit 2) for values and limits, a
:class:`~pgaccel.errors.DiskFull` (exit 7) when the data cannot fit."""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
from typing import Callable

from ..errors import DiskFull, UsageError
from ..decide.limits import (LONG_RUN_S, HostLimits, disk_problem, format_duration,
                          host_problems, param_problems)
from ..decide.model import WorkloadSpec


def host_limits(data_dir: str | None) -> HostLimits:
    """RLIMIT_NOFILE's hard limit and the free space of ``data_dir`` (its nearest existing
    ancestor; None: not known, e.g. a --dsn server elsewhere)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    free = None
    if data_dir:
        d = os.path.abspath(data_dir)
        while not os.path.exists(d) and d != os.path.dirname(d):
            d = os.path.dirname(d)
        try:
            free = shutil.disk_usage(d).free
        except OSError:
            free = None
    return HostLimits(None if hard == resource.RLIM_INFINITY else hard, free, data_dir or "")


def throwaway_dir(workdir: str | None) -> str:
    """Where a throwaway cluster's data will live."""
    return workdir or tempfile.gettempdir()


def new_cluster_dir(dsn: str | None, pgdata: str | None, workdir: str | None) -> str | None:
    """Where a new cluster's data will be loaded: the throwaway cluster's directory; None
    for a --dsn or --pgdata server (its data may be there already: no disk check)."""
    return None if dsn or pgdata else throwaway_dir(workdir)


def check_specs(specs: list[WorkloadSpec], *, data_dir: str | None,
                limits: HostLimits | None = None) -> None:
    """Refuse (UsageError) values no load generator takes or this host cannot give."""
    problems: list[str] = []
    for ws in specs:
        for p in param_problems(ws.params):
            if p not in problems:
                problems.append(p)
    if problems:
        raise UsageError("Cannot start: " + "; ".join(problems) + ".", "Nothing was started.")
    lim = limits or host_limits(data_dir)
    pairs = [(ws.workload, ws.params) for ws in specs]
    problems = host_problems(pairs, lim)
    if problems:
        raise UsageError("Cannot start: " + "; ".join(problems) + ".", "Nothing was started.")
    disk = disk_problem(pairs, lim) if data_dir else None
    if disk:
        raise DiskFull(f"Cannot start: {disk}.", "Nothing was started.")


def confirm_duration(estimate_s: float, *, yes: bool, what: str,
                     ask: Callable[[str], bool] | None) -> None:
    """A run estimated past an hour goes ahead only with ``--yes`` or the user's answer
    (``ask``: None when there is no terminal to ask on)."""
    if estimate_s <= LONG_RUN_S or yes:
        return
    question = f"This {what} is estimated to take {format_duration(estimate_s)}."
    if ask is None:
        raise UsageError(question + " Without a terminal to ask on, pgaccel does not start "
                         "runs over an hour unless told to.",
                         "Add --yes to start it anyway, or use fewer rounds, clients or a "
                         "shorter --duration.")
    if not ask(question + " Start it?"):
        raise UsageError("Not started.", "Use fewer rounds or a shorter --duration for a "
                         "shorter run, or --yes to skip this question.")
