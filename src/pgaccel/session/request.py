"""What a benchmarking command asks the runner for, as frozen data (pure): where the server
is, the configs to compare, the workloads, the protocol (rounds, order, budget, judging),
where results go.  ``run``, ``bench``, ``calibrate``, ``lab`` and ``run --stack`` each build a
:class:`RunRequest` from their flags and hand it to ``session.runner.Runner``; nothing else
opens a server, a results store or an experiment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..decide.model import WorkloadSpec
from ..specs.spec import LabSpec

RUN_KINDS = ("run", "bench", "calibrate", "lab")
SETTINGS_FROM = ("pgaccel", "pgtune")


@dataclass(frozen=True)
class ServerRequest:
    """The server: a throwaway cluster of ``pg_bin``'s installation (neither ``dsn`` nor
    ``pgdata``), the cluster in ``pgdata``, or the server at ``dsn``."""
    pg_bin: str | None = None
    dsn: str | None = None
    pgdata: str | None = None
    run_as: str | None = None
    workdir: str | None = None
    port: int | None = None
    keep: bool = False


@dataclass(frozen=True)
class ConfigRequest:
    """One config: its own settings, or settings computed on the opened server
    (``settings_from``: pgaccel's plan or PGTune's formulas, for the request's profile),
    with ``settings`` laid over them; ``drop_groups``: the computed settings of these
    groups (``tune.groups``) left out, the server's own values kept."""
    name: str
    settings: Mapping[str, object] = field(default_factory=dict)
    description: str = ""
    settings_from: str | None = None
    drop_groups: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.settings_from not in (None, *SETTINGS_FROM):
            raise ValueError(f"settings_from {self.settings_from!r}: one of {SETTINGS_FROM}")


@dataclass(frozen=True)
class Protocol:
    """How the configs are measured and judged (``lab.experiment.Experiment``'s knobs)."""
    rounds: int = 3                    # at least
    max_rounds: int | None = None
    budget_s: float | None = None
    until_decided: bool = False
    order: str = "abba"
    seed: int = 0
    min_effect: float = 0.02
    confidence: float = 0.95
    target_ci_width: float | None = None
    # a throwaway server per config where one fits (True), one server asked for (False,
    # `run --one-at-a-time`), or not a question this command asks (None)
    side_by_side: bool | None = None
    pin: bool = True                   # side by side: each pgbench and its backends on a CPU


@dataclass(frozen=True)
class RunRequest:
    """Everything one run needs.  Either ``configs`` (one server: ``run``, ``bench``,
    ``calibrate``) or a lab ``spec`` (a server per installation its variants name, OS
    settings, verification: ``lab``, ``run --stack``)."""
    kind: str                                          # one of RUN_KINDS (the store's kind)
    name: str                                          # the store's run name
    server: ServerRequest
    workloads: tuple[WorkloadSpec, ...]
    protocol: Protocol = Protocol()
    configs: tuple[ConfigRequest, ...] = ()
    spec: LabSpec | None = None
    profile: str | None = None                         # what computed settings plan for
    # (None: the class a captured workload's measured profile shows, else oltp)
    overrides: Mapping[str, object] = field(default_factory=dict)   # --set, every config
    client_hosts: tuple[Any, ...] = ()                 # workloads.remote.ClientHost
    server_host: Any = None                            # server.ssh.SshHost (--server-host)
    store_path: str | None = None
    out_dir: str | None = None
    record: Mapping[str, Any] = field(default_factory=dict)   # the run's spec in the store
    resume: Mapping[str, Any] | None = None            # a stored lab run carried on
    server_facts: bool = False        # run.json keeps the server's full facts, not its version
    yes: bool = False                                  # builds a spec needs, without asking
    check_only: bool = False                           # lab --check: verify, measure nothing

    def __post_init__(self) -> None:
        if self.kind not in RUN_KINDS:
            raise ValueError(f"kind {self.kind!r}: one of {RUN_KINDS}")
        if (self.spec is None) == (not self.configs):
            if self.spec is not None:
                raise ValueError("a request has configs or a lab spec, not both")
            raise ValueError("a request needs configs or a lab spec")
