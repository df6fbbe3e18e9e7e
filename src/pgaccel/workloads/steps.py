"""Multi-step workloads, workload metadata, and the load generator's CPU share.

A *single* workload (``Workload.run``) measures one interval and the trial runner
(``lab/trial.py``) wraps it in restart / restore / prewarm / warm-up / Measure.

A *step* workload runs a fixed sequence of measured steps that build on each other (the
Insert Benchmark loads, indexes, then queries the same tables) or that sweep one factor
(parallel degree, database size).  It owns its data between steps, so the runner only:

1. applies ``required_settings(params)`` (merged over the variant's settings) and restarts;
2. calls ``prepare(ctx, params)`` (idempotent, as for every workload);
3. calls ``run_steps(ctx, params, on_progress)`` and gets one :class:`StepResult` per step,
   each already measured with ``metrics.measure.Measure`` (per-op CPU, context switches, I/O,
   WAL, waits), plus ``summarize(results)`` for the workload's own conclusions.

``describe(wl)`` gives the metadata ``pgaccel workloads --json`` lists, and
``params_for(wl, overrides)`` turns a workload's ``defaults`` plus user overrides into
``RunParams``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

from ..metrics import system as sysmetrics
from ..metrics.measure import Measure
from ..metrics.noise import host_noise
from .base import BenchContext, RunParams, Workload, load_all

# The client may use up to this share of all CPU consumed before we warn that the load
# generator, not the server, may be what limits the result (study 003: pgbench took ~20%
# of the CPUs and distorted the curve from 6 clients on an 8-CPU machine).
CLIENT_SHARE_WARN = 0.40

RUNPARAM_FIELDS = {f.name for f in dataclasses.fields(RunParams)} - {"options"}

COMMON_KNOBS = {
    "clients": "concurrent connections (client sweep: --clients 1,2,4,8)",
    "threads": "load-generator threads (default: one per client)",
    "duration": "measured seconds per run or per timed step",
    "warmup": "upper bound of the warm-up in seconds (ends early once the rate is steady)",
    "rate": "target transactions/s (pgbench -R / sysbench --rate); none = as fast as possible",
    "protocol": "pgbench query protocol: simple, extended or prepared",
}

ProgressFn = Callable[[str, float], None]   # (step name, fraction of the step done)


@dataclass
class StepResult:
    """One measured step of a step workload."""

    step: str
    ops: int                                  # inserts / queries / transactions done
    seconds: float                            # wall time of the measured part
    throughput: float                         # ops per second
    unit: str                                 # "inserts/s", "queries/s", "tps", ...
    metrics: dict[str, Any] = field(default_factory=dict)   # Measure.metrics(...)
    valid: bool = True                        # False: the step did not meet its own rule
    note: str = ""                            # why invalid, or what to know
    latency_ms: dict[str, float] = field(default_factory=dict)
    series: list[float] = field(default_factory=list)       # ops per second
    extra: dict[str, Any] = field(default_factory=dict)     # workload-specific numbers
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class StepWorkload(Workload):
    """A workload measured as a sequence of steps (see module docstring)."""

    kind = "steps"

    def step_names(self, params: RunParams) -> list[str]:
        raise NotImplementedError

    def run_steps(self, ctx: BenchContext, params: RunParams,
                  on_progress: ProgressFn | None = None) -> list[StepResult]:
        raise NotImplementedError

    def least_seconds(self, params: RunParams) -> float:
        """The seconds one run of the steps takes at least, known before it starts: its
        steps that run for a set time (0: none does; the others run to their own end).
        The budget check counts a round of every config at this (``decide/budget.py``)."""
        return 0.0

    # whether ``iter_steps`` measures each step only when asked for the next, so the lab can
    # run the same step of every variant in turn (``lab/paired_steps.py``)
    interleaves = False
    # whether ``iter_steps(plans=True)`` yields steps as plans the lab runs side by side in
    # turns within the step (the Insert Benchmark's in slices: ``lab/paired_qsteps.py``;
    # parallel-scan's run by run: ``RepeatPlan``)
    slices_queries = False

    def iter_steps(self, ctx: BenchContext, params: RunParams,
                   on_progress: ProgressFn | None = None) -> Iterator[StepResult]:
        """The steps' results one by one (all measured at the first, unless the workload
        ``interleaves``)."""
        yield from self.run_steps(ctx, params, on_progress)

    def summarize(self, results: list[StepResult]) -> dict[str, Any]:
        """The workload's own conclusions from its steps (e.g. the best parallel degree)."""
        return {}

    def conclusion(self, qps: dict[str, float | None]) -> str | None:
        """Its study's point in one sentence from one variant's QPS per step (the lab's rQPS
        table: the geometric mean of its trials; bench's step table: its one run), or None
        when it has none to draw."""
        return None

    def run(self, ctx: BenchContext, params: RunParams, duration: float, **kw: Any):
        from ..errors import UsageError
        raise UsageError(f"{self.name} is a multi-step workload; it has no single run.",
                         "Run it with run_steps (pgaccel bench runs its steps in order).")


def timed_seconds(params: RunParams, warm_cap: float) -> tuple[int, int]:
    """A timed step's pgbench runs, as ``-T`` takes them: its warm-up (0 for none, else
    ``params.warmup`` up to ``warm_cap``, at least 1 s) and its measured seconds (at least
    1).  The step runs them and ``least_seconds`` counts them."""
    warm = max(1, int(round(min(params.warmup, warm_cap)))) if params.warmup > 0 else 0
    return warm, max(1, int(round(params.duration)))


# -- metadata ------------------------------------------------------------------------------
def describe(wl: Workload) -> dict[str, Any]:
    """What ``pgaccel workloads --json`` shows for one workload."""
    specific = dict(wl.knobs)
    knobs = {k: v for k, v in COMMON_KNOBS.items()
             if k not in specific and (wl.common_knobs is None or k in wl.common_knobs)}
    knobs.update(specific)
    return {"name": wl.name, "summary": wl.summary, "kind": wl.kind, "unit": wl.unit,
            "writes": bool(wl.writes), "defaults": dict(wl.defaults), "knobs": knobs}


def applied_knobs(wl: Workload) -> list[str]:
    """The run parameters ``wl`` reads (``RunParams`` field names, clients and options
    always): what a report may say about its run.  The Insert Benchmark reads no scale and
    no duration, so its run.json says neither."""
    return ["clients", *[k for k in describe(wl)["knobs"]
                         if k in RUNPARAM_FIELDS and k != "clients"], "options"]


def takes_clients(wl: Workload) -> bool:
    """Whether ``wl`` reads its client count (parallel-scan runs on one connection: its
    parallel workers are the server's, and a lab of it is a lab of 1 client)."""
    return "clients" in describe(wl)["knobs"]


def list_workloads() -> list[dict[str, Any]]:
    registry = load_all()
    return [describe(registry[name]) for name in sorted(registry)]


def params_for(wl: Workload, overrides: dict[str, Any] | None = None) -> RunParams:
    """RunParams from the workload's defaults with ``overrides`` on top.

    Keys that are RunParams fields set those; any other key goes into ``options``; an
    ``options`` dict in either is merged in as well."""
    merged: dict[str, Any] = {}
    options: dict[str, Any] = {}
    for source in (wl.defaults, overrides or {}):
        for k, v in source.items():
            if v is None:
                continue
            if k == "options":
                options.update(v)
            elif k in RUNPARAM_FIELDS:
                merged[k] = v
            else:
                options[k] = v
    return RunParams(**merged, options=options)


def option(params: RunParams, name: str, default: Any, cast: Callable[[Any], Any] = str) -> Any:
    """A workload option with a default, converted (options may arrive as CLI strings)."""
    val = params.options.get(name)
    if val is None or val == "":
        return default
    try:
        return cast(val)
    except (TypeError, ValueError):
        from ..errors import UsageError
        raise UsageError(f"Option {name}={val!r} is not valid.",
                         f"Give a {getattr(cast, '__name__', 'valid')} value.") from None


# -- the load generator's CPU share --------------------------------------------------------
def client_cpu_warning(client_cpu_s: float | None, total_cpu_s: float | None,
                       threshold: float = CLIENT_SHARE_WARN) -> str | None:
    """A warning when the load generator used more than ``threshold`` of all CPU consumed
    (``total_cpu_s``: the host's busy CPU seconds over the same interval)."""
    if not client_cpu_s or not total_cpu_s or total_cpu_s <= 0:
        return None
    share = client_cpu_s / total_cpu_s
    if share <= threshold:
        return None
    return (f"The load generator used {share:.0%} of all CPU consumed during the run "
            f"(more than {threshold:.0%}): the client, not the server, may be limiting the "
            "result. Run fewer client threads, run the client on another machine, or compare "
            "with the in-server-loop workload.")


class HostCpu:
    """Busy CPU seconds of the whole host between ``__enter__`` and ``__exit__``."""

    def __enter__(self) -> "HostCpu":
        self.before = sysmetrics.system_snapshot()
        self.busy_s = 0.0
        return self

    def __exit__(self, *exc: Any) -> None:
        self.busy_s = sysmetrics.system_delta(self.before, sysmetrics.system_snapshot())[
            "host_cpu_busy_s"]


# a trial counted from a sample of pgbench's log whose count errs more than this (one
# standard error, relative) says so (``pgbench_logs.MIN_SAMPLED_LINES``)
COUNT_ERROR_WARN = 0.005


def warnings_for(metrics: dict[str, Any]) -> list[str]:
    """Warnings from one measured interval's metrics (Measure.metrics output)."""
    w = client_cpu_warning(metrics.get("client_cpu_s"), metrics.get("host_cpu_busy_s"))
    out = [w] if w else []
    err = metrics.get("count_error")
    if isinstance(err, (int, float)) and err > COUNT_ERROR_WARN:
        out.append(f"its count is a {metrics.get('log_sampling'):g} sample of pgbench's log, "
                   f"{metrics.get('log_lines', 0):,} lines: ±{100 * err:.2g}% at one standard "
                   "error (the whole log would not have fitted in RAM)")
    noise = host_noise(metrics)
    if noise and noise["noisy"]:
        out.append(f"noisy host: {noise['why']}; this trial's throughput is less certain")
    return out


@dataclass(frozen=True)
class RepeatPlan:
    """A step of timed runs, ready to run: ``start()`` readies it (its connections, forced
    plan and warm-up; untimed), ``once()`` times one run in seconds, ``finish(times,
    result)`` closes it and completes the :class:`StepResult` measured around all its runs,
    ``abort()`` closes it after a failure.  The lab takes such steps of every variant in
    turns run by run (``lab/paired_repeats.py``), so a slow spell of the host falls on every
    variant's runs alike; alone, :func:`run_repeats` runs it.  A step of ``repeats`` runs,
    or with ``seconds``, of at least ``repeats`` runs and as many more as it takes every
    variant's runs to add up to ``seconds`` (:func:`enough_runs`)."""
    step: str
    unit: str
    repeats: int
    start: Callable[[], None]
    once: Callable[[], float]
    finish: Callable[[list[float], "StepResult"], "StepResult"]
    abort: Callable[[], None] = lambda: None
    # the server processes that run the statement, one per client, once started (None for
    # one not known); the lab places client i's of every variant on one CPU
    backend_pids: Callable[[], Sequence[int | None]] = lambda: ()
    seconds: float | None = None
    ops_per_run: int = 1         # what the per-operation costs count: a run, or its queries


@dataclass(frozen=True)
class PgbenchPlan:
    """A step of one pgbench run (``kw``: ``pgbench_cmd.pgbench_args``' arguments without
    the duration), ``warmup`` then ``seconds`` measured, for the lab to take in slices
    with the other variants' (``lab/paired_pgbench.py``), as ``run`` takes a workload;
    ``per_tx`` operations a pgbench transaction, ``finish`` completes the result.  A step
    whose pgbench ``writes`` is not placed on CPUs."""
    step: str
    unit: str
    kw: dict[str, Any]
    seconds: float
    warmup: float
    writes: bool = False
    per_tx: int = 1
    finish: Callable[["StepResult"], "StepResult"] = lambda r: r


MAX_RUNS = 100_000


def enough_runs(plan: RepeatPlan, times: Iterable[Sequence[float]]) -> bool:
    """Whether ``plan``'s step is done, given each variant's run times so far (every
    variant has had as many runs): ``repeats`` runs, and with ``seconds``, every variant's
    runs adding up to that (at most ``MAX_RUNS`` runs)."""
    times = list(times)
    n = min((len(t) for t in times), default=0)
    if n < plan.repeats:
        return False
    return (plan.seconds is None or n >= MAX_RUNS
            or all(sum(t) >= plan.seconds for t in times))


def run_repeats(ctx: BenchContext, plan: RepeatPlan) -> StepResult:
    """``plan`` on one server: its runs one after the other, measured as one step."""
    times: list[float] = []
    plan.start()
    try:
        def body():
            while not enough_runs(plan, [times]):
                times.append(plan.once())
            return len(times), sum(times), {}
        res = measured_step(ctx, plan.step, plan.unit, body)
    except BaseException:
        plan.abort()
        raise
    return plan.finish(times, res)


def measured_step(ctx: BenchContext, step: str, unit: str,
                  body: Callable[[], tuple[int, float, dict[str, Any]]], *,
                  sample_waits: bool = True) -> StepResult:
    """Run ``body`` inside ``Measure``; body returns (ops, seconds, client rusage dict)."""
    with Measure(ctx, sample_waits=sample_waits) as meas:
        ops, seconds, client = body()
    m = meas.metrics(ops, client)
    thr = ops / seconds if seconds > 0 else 0.0
    return StepResult(step=step, ops=ops, seconds=seconds, throughput=thr, unit=unit,
                      metrics=m, warnings=warnings_for(m))
