"""The typed results of judging an experiment (frozen dataclasses, pure data).

``to_dict()`` gives the JSON stored in run.json, summary.json and the results store
(docs/formats.md), and ``from_dict()`` reads it back (older or newer documents may carry
fewer or more keys), so a stored run renders like a fresh one.  ``judge.py`` makes them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from .states import StateSplit
from ..util import JSON_SCHEMA, known_fields
from .effect import Comparison


# -- typed results -------------------------------------------------------------------------
@dataclass(frozen=True)
class VariantSummary:
    """One variant on one measure (workload or step, client count)."""
    n: int                       # valid trials
    median: float
    cv: float
    min: float
    max: float
    values: list[float] = field(default_factory=list)   # the valid trials' throughputs
    latency_p95_ms: float | None = None                 # median over trials
    invalid: int = 0                                    # trials left out as invalid
    note: str = ""                                      # why the first invalid one was
    server_cpu_us_per_op: float | None = None           # medians over the valid trials
    client_cpu_us_per_op: float | None = None
    client_cpu_share: float | None = None
    ctx_switches_per_op: float | None = None
    wal_bytes_per_op: float | None = None
    noisy_trials: int = 0                               # valid trials on a noisy host
    noise_why: str = ""                                 # the worst one's reason (judge)
    stalled_trials: int = 0                             # valid trials with a slice of no op
    stall_why: str = ""                                 # the first one: round, slices, seconds
    drift_per_round: float | None = None                # trend across rounds (stats.drift)
    drift_total: float | None = None
    drift_p: float | None = None
    drifting: bool = False                              # significant and >= 5% in total
    # the same trend of the load generator's CPU per operation (whose work does not change)
    client_cpu_drift_total: float | None = None
    client_cpu_drift_p: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "VariantSummary":
        return cls(**known_fields(cls, d))


@dataclass(frozen=True)
class WorkloadResult:
    """One measure: a single-interval workload, or one step of a multi-step workload."""
    workload: str                # the store's name: "select-only", "scan/count@0"
    name: str                    # the registered workload's name
    key: str                     # the spec's label for it (default: ``name``)
    step: str | None             # None for single-interval workloads
    clients: int
    unit: str
    variants: dict[str, VariantSummary] = field(default_factory=dict)
    comparisons: dict[str, Comparison] = field(default_factory=dict)   # variant vs base
    cpu_comparisons: dict[str, Comparison] = field(default_factory=dict)  # server µs/op
    # the trend across rounds shared by every config (stats.shared_drift)
    drift_per_round: float | None = None
    drift_total: float | None = None
    drift_p: float | None = None
    drifting: bool = False
    # wall seconds a round of its trials took (every config; a step's: every step's too)
    round_s: float | None = None
    # rounds whose CPUs ran slow for every config alike: round -> the smallest rise
    # (metrics/noise.shared_slow_rounds)
    slow_rounds: dict[int, float] = field(default_factory=dict)
    # its trials' work per operation in two groups (decide/states.split_states)
    states: StateSplit | None = None
    # the load generator's CPU per operation across the same rounds (its work per operation
    # does not change): total and p of its shared drift, to tell a host that sped up or slowed
    # down from data that changed
    client_cpu_drift_total: float | None = None
    client_cpu_drift_p: float | None = None

    def level(self, default: float) -> float:
        """The level its intervals were computed at (a run that looked after every round
        judges each measure at its own last look's level); ``default`` without one."""
        for c in self.comparisons.values():
            return c.confidence
        return default

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "name": self.name, "key": self.key,
                "step": self.step, "clients": self.clients, "unit": self.unit,
                "variants": {k: v.to_dict() for k, v in self.variants.items()},
                "comparisons": {k: c.to_dict() for k, c in self.comparisons.items()},
                "cpu_comparisons": {k: c.to_dict() for k, c in self.cpu_comparisons.items()},
                "drift_per_round": self.drift_per_round, "drift_total": self.drift_total,
                "drift_p": self.drift_p, "drifting": self.drifting, "round_s": self.round_s,
                "slow_rounds": {str(k): v for k, v in self.slow_rounds.items()},
                "states": self.states.to_dict() if self.states else None,
                "client_cpu_drift_total": self.client_cpu_drift_total,
                "client_cpu_drift_p": self.client_cpu_drift_p}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "WorkloadResult":
        return cls(workload=d["workload"], name=d.get("name", d["workload"]),
                   key=d.get("key", d.get("name", d["workload"])), step=d.get("step"),
                   clients=d.get("clients"), unit=d.get("unit", ""),
                   variants={k: VariantSummary.from_dict(v)
                             for k, v in (d.get("variants") or {}).items()},
                   comparisons={k: Comparison.from_dict(c)
                                for k, c in (d.get("comparisons") or {}).items()},
                   cpu_comparisons={k: Comparison.from_dict(c)
                                    for k, c in (d.get("cpu_comparisons") or {}).items()},
                   drift_per_round=d.get("drift_per_round"), drift_total=d.get("drift_total"),
                   drift_p=d.get("drift_p"), drifting=bool(d.get("drifting", False)),
                   round_s=d.get("round_s"),
                   slow_rounds={int(k): v for k, v in (d.get("slow_rounds") or {}).items()},
                   states=StateSplit.from_dict(d.get("states")),
                   client_cpu_drift_total=d.get("client_cpu_drift_total"),
                   client_cpu_drift_p=d.get("client_cpu_drift_p"))


@dataclass(frozen=True)
class Overall:
    """A variant against the base over every measure: the geometric mean of the ratios."""
    geomean_ratio: float
    ci_low: float
    ci_high: float
    workloads: int               # how many measures went into it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Overall":
        return cls(**known_fields(cls, d))


@dataclass(frozen=True)
class RqpsRow:
    variant: str
    qps: dict[str, float | None]          # step -> median QPS
    rqps: dict[str, float | None]         # step -> QPS / the base's

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RqpsTable:
    """Relative QPS per step of one multi-step workload (``stats.rqps_table``)."""
    workload: str
    clients: int
    rows: list[RqpsRow] = field(default_factory=list)    # the base first
    # variant -> what the workload concludes from its steps' median QPS (``conclusion``),
    # where it says something: in-server-loop's share of a query spent outside the server
    conclusions: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = {"workload": self.workload, "clients": self.clients,
             "rows": [r.to_dict() for r in self.rows]}
        return {**d, "conclusions": dict(self.conclusions)} if self.conclusions else d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RqpsTable":
        return cls(d["workload"], d["clients"],
                   [RqpsRow(r["variant"], dict(r["qps"]), dict(r["rqps"]))
                    for r in d.get("rows") or []], dict(d.get("conclusions") or {}))


@dataclass(frozen=True)
class HeadToHead:
    """``other`` judged directly against ``base`` on one workload."""
    workload: str
    clients: int
    base: str
    other: str
    comparison: Comparison

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "clients": self.clients, "base": self.base,
                "other": self.other, **self.comparison.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "HeadToHead":
        return cls(d["workload"], d["clients"], d["base"], d["other"],
                   Comparison.from_dict(d))


@dataclass(frozen=True)
class Calibration:
    """What an A/A experiment says about this machine's noise and what a budget detects."""
    cv_a: float
    cv_b: float
    noise_floor_cv: float
    aa: Comparison
    trial_s: float
    budget_s: float
    trials_per_variant: int
    min_detectable_effect: float
    trials_needed: dict[str, int]          # "2%" -> trials per variant
    pair_sd: float | None = None           # paired: the rounds' log ratios' spread (both above)
    setup_s: float = 0.0                   # of budget_s: the data and burn-in before the rounds

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["aa"] = self.aa.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Calibration":
        return cls(**{**known_fields(cls, d), "aa": Comparison.from_dict(d["aa"]),
                      "trials_needed": dict(d.get("trials_needed") or {})})


@dataclass(frozen=True)
class Summary:
    """What an experiment found: per measure and variant, and overall."""
    base: str
    min_effect: float = 0.02
    confidence: float = 0.95
    workloads: list[WorkloadResult] = field(default_factory=list)
    rqps: list[RqpsTable] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)       # variant -> why
    stop_reasons: dict[str, str] = field(default_factory=dict)  # workload label -> why
    overall: dict[str, Overall] = field(default_factory=dict)   # variant -> geometric mean
    tuned_vs_pgtune: list[HeadToHead] | None = None   # `pgaccel run --with-pgtune`
    # `pgaccel run --explain`: the whole plan against each without-GROUP config
    explained: list[HeadToHead] | None = None
    calibration: Calibration | None = None            # `pgaccel calibrate` (stored runs)
    # rounds added until decided: ``confidence`` is the stricter level of each look
    # (decide/sequential.py) that keeps the overall error at ``nominal_confidence``
    nominal_confidence: float | None = None
    looks: list[int] | None = None                    # [first, last] round looked at
    last_looks: dict[str, int] = field(default_factory=dict)   # workload label -> its last
    # labels whose last look the budget brought forward -> the last look planned for them
    planned_last_looks: dict[str, int] = field(default_factory=dict)

    @property
    def single(self) -> list[WorkloadResult]:
        """Single-interval workloads."""
        return [w for w in self.workloads if w.step is None]

    @property
    def steps(self) -> list[WorkloadResult]:
        """Steps of multi-step workloads."""
        return [w for w in self.workloads if w.step is not None]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "schema": JSON_SCHEMA, "base": self.base, "min_effect": self.min_effect,
            "confidence": self.confidence,
            "workloads": [w.to_dict() for w in self.workloads],
            "rqps": [r.to_dict() for r in self.rqps],
            "refused": dict(self.refused), "stop_reasons": dict(self.stop_reasons),
            "overall": {k: o.to_dict() for k, o in self.overall.items()}}
        if self.tuned_vs_pgtune is not None:
            d["tuned_vs_pgtune"] = [r.to_dict() for r in self.tuned_vs_pgtune]
        if self.explained is not None:
            d["explained"] = [r.to_dict() for r in self.explained]
        if self.calibration is not None:
            d["calibration"] = self.calibration.to_dict()
        if self.nominal_confidence is not None:
            d["nominal_confidence"] = self.nominal_confidence
            d["looks"] = list(self.looks or [])
            if self.last_looks:
                d["last_looks"] = dict(self.last_looks)
            if self.planned_last_looks:
                d["planned_last_looks"] = dict(self.planned_last_looks)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Summary":
        """A summary read back from JSON (run.json, summary.json, the store); keys that
        older documents lack take their defaults."""
        h2h = d.get("tuned_vs_pgtune")
        cal = d.get("calibration")
        return cls(base=d.get("base", ""), min_effect=d.get("min_effect", 0.02),
                   confidence=d.get("confidence", 0.95),
                   workloads=[WorkloadResult.from_dict(w) for w in d.get("workloads") or []],
                   rqps=[RqpsTable.from_dict(r) for r in d.get("rqps") or []],
                   refused=dict(d.get("refused") or {}),
                   stop_reasons=dict(d.get("stop_reasons") or {}),
                   overall={k: Overall.from_dict(o) for k, o in (d.get("overall") or {}).items()},
                   tuned_vs_pgtune=[HeadToHead.from_dict(r) for r in h2h] if h2h is not None
                   else None,
                   explained=[HeadToHead.from_dict(r) for r in d["explained"]]
                   if d.get("explained") is not None else None,
                   calibration=Calibration.from_dict(cal) if cal else None,
                   nominal_confidence=d.get("nominal_confidence"),
                   looks=list(d["looks"]) if d.get("looks") else None,
                   last_looks={k: int(v) for k, v in (d.get("last_looks") or {}).items()},
                   planned_last_looks={k: int(v) for k, v
                                       in (d.get("planned_last_looks") or {}).items()})


@dataclass(frozen=True)
class BenchRow:
    """Medians of the headline metrics over one client count's trials (`pgaccel bench`)."""
    trials: int
    throughput: float | None
    lat_mean: float | None
    lat_p50: float | None
    lat_p95: float | None
    lat_p99: float | None
    server_us: float | None
    client_us: float | None
    client_share: float | None
    ctx: float | None
    read_kb: float | None
    write_kb: float | None
    wal_b: float | None
    top_waits: str               # "LWLock:WALWrite 12%, ..." (the three largest shares)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judged(summary: dict | None, variant: str = "tuned") -> dict[str, list[str]]:
    """What a stored run's summary says of ``variant`` (pure): the comparisons where it was
    "slower", "undecided" (not enough evidence) and "held" (faster or equivalent), against
    the base (the server's defaults) and, where the run had one, head to head against
    PGTune; each entry {"workload", "other", "verdict", "ratio"}."""
    out: dict[str, list[dict[str, Any]]] = {"slower": [], "undecided": [], "held": []}

    def note(workload: str, other: str, c: dict) -> None:
        v = c.get("verdict")
        e = {"workload": workload, "other": other, "verdict": v,
             "ratio": c.get("ratio", 1.0)}
        out["slower" if v == "slower" else "held" if v in ("faster", "equivalent")
            else "undecided"].append(e)
    for w in (summary or {}).get("workloads") or []:
        c = (w.get("comparisons") or {}).get(variant)
        if c:
            note(w.get("workload", "?"), (summary or {}).get("base") or "baseline", c)
    for h in (summary or {}).get("tuned_vs_pgtune") or []:
        if h.get("other") == variant:
            note(h.get("workload", "?"), h.get("base", "pgtune"), h)
    return out
