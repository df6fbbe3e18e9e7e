"""The workload interface and the registry of workloads.

A workload is a :class:`Workload` subclass that declares what it is (``name``, ``summary``,
``unit``, ``writes``, ``kind``, ``defaults``, ``knobs``, ``required_settings``) and knows how
to *prepare* its data in the ``pgaccel_bench`` database (idempotent: a fingerprint of its
parameters is stored in ``pgaccel_meta`` and data is reused while it matches) and how to
*run* one measured interval, returning a :class:`RunResult` (``kind = "single"``), or a
sequence of measured steps (``kind = "steps"``, :class:`~pgaccel.workloads.steps.StepWorkload`).
A module of this package registers its workloads with :func:`register` when imported;
:func:`get_workload` imports every module of the package, so adding a workload is adding
one file here.

Per-trial bookkeeping (restart, cache control, warm-up, metrics) is not the workload's
job: ``lab/trial.py`` does it the same way for every workload.  Workloads never import the
lab: what they measure with is ``metrics/measure.py``.
"""

from __future__ import annotations

import hashlib
import importlib
import pkgutil
from abc import ABC, abstractmethod
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import psycopg

from ..server.target import Target

META_DDL = """CREATE TABLE IF NOT EXISTS pgaccel_meta (
    workload text PRIMARY KEY, fingerprint text NOT NULL, prepared_at timestamptz DEFAULT now())"""


MAX_LOAD_THREADS = 256


def load_threads(threads: int | None, clients: int) -> int:
    """The load generator's threads (pgbench ``-j``): ``threads`` when given, else one per
    connection (at most :data:`MAX_LOAD_THREADS`), as an application with a thread per
    pooled connection runs.

    Fewer threads than connections make a measurement depend on where the scheduler puts
    each backend.  With ``-c 4 -j 2`` on a 2-CPU VM, a pgbench thread's two backends sat on
    different CPUs in about half of the runs, each wake-up across CPUs costing a reschedule
    interrupt (0.13-0.16 per transaction in those runs, none in the others), and those runs
    were 20-30% slower: select-only trials varied with a CV of 14.7% against 3.3% with
    ``-j 4``, where each thread and its backend stay together
    (``benchmarks/cpu_placement.py``, docs/measurements.md)."""
    if threads:
        return max(1, min(int(threads), int(clients)))
    return max(1, min(int(clients), MAX_LOAD_THREADS))


@dataclass
class RunParams:
    clients: int = 2
    threads: int | None = None          # default: one per client (load_threads)
    duration: float = 30.0
    warmup: float = 10.0                # upper bound; warm-up ends early once steady
    protocol: str = "prepared"
    rate: float | None = None
    scale: int = 10
    options: dict[str, Any] = field(default_factory=dict)  # workload-specific knobs

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RunResult:
    """One measured interval of a workload."""

    ops: int                             # transactions / queries / inserts done
    duration_s: float
    throughput: float                    # ops per second (steady part)
    latency_ms: dict[str, float] = field(default_factory=dict)  # mean p50 p95 p99 max
    series: list[float] = field(default_factory=list)             # ops per second
    latency_series: list[float] = field(default_factory=list)     # p50 per second (ms)
    client: dict[str, Any] = field(default_factory=dict)          # client_cpu_s, ...
    failed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class BenchContext:
    target: Target
    pgbench: str
    workdir: str | None = None
    log: Callable[[str], None] = lambda msg: None
    client_hosts: list = field(default_factory=list)   # remote.ClientHost: pgbench over SSH

    def __post_init__(self) -> None:
        # scratch files (pgbench logs, scripts) of a throwaway cluster live in its own
        # directory, so they go with it, also when the reaper cleans up after a kill -9
        if getattr(self.target, "kind", None) == "throwaway":
            self.workdir = self.target.cluster.base

    def bench_conninfo(self) -> str:
        return self.target.bench_conninfo()

    def connect(self) -> psycopg.Connection:
        from ..server.cluster import BENCH_DB
        return self.target.connect(BENCH_DB)

    def database(self):
        """The bench database's ``server.database.Database`` (a context manager)."""
        from ..server.database import Database
        return Database(self.connect())


class Workload(ABC):
    """The interface every workload implements (see the module docstring)."""

    name: str = ""
    summary: str = ""
    unit: str = "tps"           # what throughput counts
    writes: bool = False        # True: each trial needs the prepared data restored
    kind: str = "single"        # "single": run() measures one interval; "steps": run_steps()
    defaults: dict[str, Any] = {}     # RunParams fields and options when the user gives none
    knobs: dict[str, str] = {}        # workload-specific options (--option K=V) -> meaning
    common_knobs: tuple[str, ...] | None = None   # which common RunParams knobs apply (None: all)
    remote_clients: bool = False      # can run its load from client hosts (--client-host)

    def required_settings(self, params: RunParams) -> dict[str, str]:
        """Server settings the workload needs (merged over a variant's settings)."""
        return {}

    def fingerprint(self, params: RunParams) -> str:
        key = json.dumps(self.data_key(params), sort_keys=True)
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def data_key(self, params: RunParams) -> dict[str, Any]:
        """What the prepared data depends on."""
        return {"workload": self.name, "scale": params.scale}

    def data_group(self) -> str:
        """Workloads sharing prepared data share this name (pgbench built-ins do)."""
        return self.name

    def data_bytes(self, params: RunParams) -> int | None:
        """About how large the prepared data is (None: this workload cannot say); the
        disk check before a run (``decide/limits.py``) uses it."""
        return None

    def is_prepared(self, ctx: BenchContext, params: RunParams) -> bool:
        with ctx.connect() as conn:
            conn.execute(META_DDL)
            row = conn.execute("SELECT fingerprint FROM pgaccel_meta WHERE workload = %s",
                               (self.data_group(),)).fetchone()
        return bool(row and row[0] == self.fingerprint(params))

    def mark_prepared(self, ctx: BenchContext, params: RunParams) -> None:
        with ctx.connect() as conn:
            conn.execute(META_DDL)
            conn.execute("INSERT INTO pgaccel_meta (workload, fingerprint) VALUES (%s, %s) "
                         "ON CONFLICT (workload) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,"
                         " prepared_at = now()", (self.data_group(), self.fingerprint(params)))

    def prepare(self, ctx: BenchContext, params: RunParams) -> bool:
        """Create the data unless it is there already; True when it was (re)built."""
        if self.is_prepared(ctx, params):
            return False
        self.build(ctx, params)
        self.mark_prepared(ctx, params)
        return True

    @abstractmethod
    def build(self, ctx: BenchContext, params: RunParams) -> None:
        """Create the workload's data from scratch."""

    def pgbench_kw(self, ctx: BenchContext, params: RunParams) -> dict[str, Any] | None:
        """A pgbench workload's run without its duration (``pgbench_cmd.pgbench_args``'
        keywords), so it can be measured in slices beside another server
        (``workloads/slices.py``, ``lab/paired.py``); None: it cannot be."""
        return None

    def round_begin(self, ctx: BenchContext) -> None:
        """Called on each server just before a side-by-side round's measured slices
        (``lab/paired.py``): a workload that reads the server's own counters back resets
        them here."""

    def round_end(self, ctx: BenchContext) -> dict[str, Any]:
        """Called after the round's slices: what goes into the trial's metrics (a
        ``warnings`` list joins the trial's warnings)."""
        return {}

    def run(self, ctx: BenchContext, params: RunParams, duration: float, *,
            stop_when: Callable[[list[float]], bool] | None = None,
            on_progress: Callable[[float, float], None] | None = None,
            log: bool = True) -> RunResult:
        raise NotImplementedError


REGISTRY: dict[str, Workload] = {}


def register(w: Workload) -> Workload:
    REGISTRY[w.name] = w
    return w


def load_all() -> dict[str, Workload]:
    """Import every module of this package (each registers its workloads); the registry."""
    package = __name__.rsplit(".", 1)[0]
    for mod in pkgutil.iter_modules(importlib.import_module(package).__path__):
        importlib.import_module(f"{package}.{mod.name}")
    return REGISTRY


# name prefix -> the workload a name with it stands for (``captured:DIR``: a bundle of
# `pgaccel capture`); the modules that make such workloads register here
RESOLVERS: dict[str, Callable[[str], Workload]] = {}


def get_workload(name: str) -> Workload:
    load_all()
    for prefix, resolve in RESOLVERS.items():
        if name.startswith(prefix):
            return resolve(name)
    if name not in REGISTRY:
        from ..errors import UsageError
        raise UsageError(f"Unknown workload {name!r}.",
                         f"Choose one of: {', '.join(sorted(REGISTRY))} (see `pgaccel workloads`).")
    return REGISTRY[name]
