"""Run variants against workloads, trials interleaved, and judge the differences.

The loop is the same for ``pgaccel run`` (baseline vs tuned) and ``pgaccel lab``: for each
workload, prepare its data once, snapshot it as a template when the workload writes, then
run the trials in a counterbalanced order (``schedule.trial_order``), each one through
``trial.run_trial``.  Every finished trial is written to the results store at once, so an
interrupted run keeps what it measured; the run directory gets ``run.json`` rewritten
atomically after every trial.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import Interrupted, PgaccelError
from ..util import atomic_write_json
from ..workloads.base import BenchContext, RunParams, Workload
from . import stats
from .schedule import trial_order
from .trial import Trial, TrialSpec, run_trial, snapshot_template

Event = Callable[..., None]


@dataclass
class Variant:
    name: str
    settings: dict[str, object] = field(default_factory=dict)
    description: str = ""


@dataclass
class WorkloadSpec:
    workload: Workload
    params: RunParams

    @property
    def label(self) -> str:
        return f"{self.workload.name} c={self.params.clients}"


def estimate_trial_s(spec: WorkloadSpec) -> float:
    """Rough seconds per trial: restart, data restore, prewarm, warm-up, measurement."""
    restore = 0.1 * spec.params.scale if spec.workload.writes else 0.0
    return 4.0 + restore + 0.03 * spec.params.scale + spec.params.warmup + spec.params.duration


@dataclass
class Experiment:
    ctx: BenchContext
    variants: list[Variant]
    workloads: list[WorkloadSpec]
    rounds: int = 3
    order: str = "abba"
    seed: int = 0
    min_effect: float = 0.02
    run_dir: str | None = None
    store: Any = None            # lab.store.Store or None
    run_id: str | None = None
    on_event: Event = lambda kind, **kw: None
    trials: list[Trial] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)   # plan, facts, ... for run.json
    failed_variants: dict[str, str] = field(default_factory=dict)

    @property
    def base(self) -> Variant:
        return self.variants[0]

    def total_estimate_s(self) -> float:
        return sum(estimate_trial_s(w) * self.rounds * len(self.variants) for w in self.workloads)

    # -- running ------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        status = "finished"
        try:
            for ws in self.workloads:
                self._run_workload(ws)
        except (KeyboardInterrupt, Interrupted):
            status = "interrupted"
            raise
        except PgaccelError:
            status = "failed"
            raise
        finally:
            summary = self.summary()
            self._save(status, summary)
        return summary

    def _run_workload(self, ws: WorkloadSpec) -> None:
        ctx, wl = self.ctx, ws.workload
        self.on_event("prepare", workload=ws.label)
        ctx.target.apply(dict(self.base.settings))
        ctx.target.ensure_bench_db()
        built = wl.prepare(ctx, ws.params)
        if wl.writes:
            snapshot_template(ctx.target)
        self.on_event("prepared", workload=ws.label, built=built)
        names = [v.name for v in self.variants]
        by_name = {v.name: v for v in self.variants}
        for rnd, vname in trial_order(names, self.rounds, self.order, self.seed):
            if vname in self.failed_variants:
                continue
            v = by_name[vname]
            self.on_event("trial_start", workload=ws.label, variant=vname, round=rnd)
            spec = TrialSpec(vname, v.settings, wl, ws.params, rnd)
            trial = run_trial(ctx, spec, on_progress=lambda phase, frac: self.on_event(
                "phase", workload=ws.label, variant=vname, phase=phase, frac=frac))
            trial.metrics["clients"] = ws.params.clients
            self.trials.append(trial)
            if self.store is not None and self.run_id:
                self.store.add_trial(
                    self.run_id, variant=vname, workload=wl.name, round=rnd,
                    clients=ws.params.clients,
                    started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(trial.started_at)),
                    duration_s=trial.metrics.get("duration_s"), metrics=trial.metrics,
                    primary_metric="throughput", primary_value=trial.throughput,
                    series={"throughput": trial.series, "latency_p50_ms": trial.latency_series})
            self.on_event("trial_done", workload=ws.label, variant=vname, round=rnd,
                          trial=trial)
            self._save("running", None)

    # -- judging ------------------------------------------------------------------------
    def values(self, workload: str, variant: str, clients: int | None = None) -> list[float]:
        return [t.throughput for t in self.trials if t.workload == workload
                and t.variant == variant and (clients is None or t.clients == clients)]

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"base": self.base.name, "min_effect": self.min_effect,
                               "workloads": []}
        comps_by_variant: dict[str, list[stats.Comparison]] = {}
        for ws in self.workloads:
            name, c = ws.workload.name, ws.params.clients
            entry: dict[str, Any] = {"workload": name, "clients": c, "unit": ws.workload.unit,
                                     "variants": {}, "comparisons": {}}
            base_vals = self.values(name, self.base.name, c)
            for v in self.variants:
                vals = self.values(name, v.name, c)
                if not vals:
                    continue
                s = stats.summarize(vals)
                lat = [t.metrics.get("latency_ms", {}).get("p95") for t in self.trials
                       if t.workload == name and t.variant == v.name and t.clients == c]
                costs = self._median_costs(name, v.name, c)
                entry["variants"][v.name] = {
                    "n": s.n, "median": s.median, "cv": s.cv, "min": s.min, "max": s.max,
                    "values": vals, "latency_p95_ms": _median([x for x in lat if x]),
                    **costs}
                if v is not self.base and len(base_vals) >= 1:
                    cmp = stats.compare(base_vals, vals, min_effect=self.min_effect,
                                        seed=self.seed)
                    entry["comparisons"][v.name] = cmp.to_dict()
                    comps_by_variant.setdefault(v.name, []).append(cmp)
            out["workloads"].append(entry)
        out["overall"] = {}
        for vname, comps in comps_by_variant.items():
            good = [c for c in comps if math.isfinite(c.ratio) and c.ratio > 0]
            if good:
                r, lo, hi = stats.geometric_mean_ratio(good)
                out["overall"][vname] = {"geomean_ratio": r, "ci_low": lo, "ci_high": hi,
                                         "workloads": len(good)}
        return out

    def _median_costs(self, workload: str, variant: str, clients: int) -> dict[str, Any]:
        keys = ("server_cpu_us_per_op", "client_cpu_us_per_op", "client_cpu_share",
                "ctx_switches_per_op", "wal_bytes_per_op")
        ts = [t for t in self.trials if t.workload == workload and t.variant == variant
              and t.clients == clients]
        return {k: _median([t.metrics.get(k) for t in ts if t.metrics.get(k) is not None])
                for k in keys}

    # -- saving -------------------------------------------------------------------------
    def _save(self, status: str, summary: dict[str, Any] | None) -> None:
        if self.run_dir:
            doc = {"run_id": self.run_id, "status": status, **self.info,
                   "variants": [v.__dict__ for v in self.variants],
                   "workloads": [{"workload": w.workload.name, "params": w.params.to_dict()}
                                 for w in self.workloads],
                   "rounds": self.rounds, "order": self.order,
                   "trials": [t.to_dict() for t in self.trials],
                   "summary": summary if summary is not None else self.summary()}
            atomic_write_json(f"{self.run_dir}/run.json", doc)
            if summary is not None:
                atomic_write_json(f"{self.run_dir}/summary.json", summary)
        if self.store is not None and self.run_id and status != "running":
            self.store.finish_run(self.run_id, status, summary=summary)


def _median(xs: list[Any]) -> float | None:
    xs = sorted(float(x) for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def default_params(quick: bool, cpus: int) -> dict[str, Any]:
    """`pgaccel run` defaults: --quick fits in 5 minutes on 2 cores, the default in 20."""
    clients = max(2, 2 * cpus)
    if quick:
        return {"scale": 20, "rounds": 3, "duration": 10.0, "warmup": 8.0, "clients": clients}
    return {"scale": 50, "rounds": 5, "duration": 25.0, "warmup": 12.0, "clients": clients}
