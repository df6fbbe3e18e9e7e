"""A step workload's results as its study reports them (pure): per step and variant the QPS,
the rQPS (QPS / the base's) with its verdict, and what an operation cost the host (server
CPU, context switches, KB written) against the base.  The terminal (``report/lab.py``) and
the HTML and Markdown reports (``report/html.py``) show the same numbers; a step whose base
has no valid trial says so instead of a ratio."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..decide.effect import EQUIVALENT, FASTER, NOT_ENOUGH, SLOWER, WORTH_ROUNDS
from ..decide.results import Summary, WorkloadResult
from ..decide.stats import geometric_mean
from ..metrics.registry import JUDGED_COST
from . import format as fmt
from .terminal import states_line

# the per-operation costs the Insert Benchmark's reports set beside rQPS: (metric, header)
STEP_COSTS = (("server_cpu_us_per_op", "CPU µs/op"), ("ctx_switches_per_op", "ctx/op"),
              ("write_kb_per_op", "KB written/op"))


@dataclass(frozen=True)
class StepCell:
    """One variant on one step."""
    qps: float | None                   # geometric mean of the valid trials: rQPS's terms
    n: int                              # valid trials
    invalid: int = 0
    note: str = ""                      # why its trials were invalid
    rqps: float | None = None           # the comparison's ratio (geometric means, paired)
    lo: float | None = None
    hi: float | None = None
    verdict: str | None = None
    costs: dict[str, float | None] = field(default_factory=dict)   # ``_level`` of the trials'
    cost_ratios: dict[str, float | None] = field(default_factory=dict)   # / the base's
    # server CPU per operation judged paired by round (its ratio is ``cost_ratios``'s): the
    # verdict, None where it was not judged
    cpu_verdict: str | None = None
    more_rounds: int | None = None      # undecided: further rounds that would probably decide


@dataclass(frozen=True)
class StepMatrix:
    """Every step of one step workload at one client count, every variant (base first)."""
    key: str
    workload: str
    clients: int
    base: str
    steps: list[str]
    units: dict[str, str]
    variants: list[str]
    cells: dict[tuple[str, str], StepCell]
    # what the study the spec reproduces found, (variant, step) -> text
    findings: dict[tuple[str, str], str] = field(default_factory=dict)
    level: float = 0.95                 # the level the steps' comparisons were judged at
    # steps whose trials ran in two states (decide/states.py): step -> what that says
    states: dict[str, str] = field(default_factory=dict)
    # variant -> what the workload concludes from its steps (``RqpsTable.conclusions``)
    conclusions: dict[str, str] = field(default_factory=dict)
    round_s: float | None = None        # a round of every step of every variant, seconds
    rounds: int = 0                     # the most rounds a step was judged on

    def finding(self, variant: str, step: str) -> str:
        return self.findings.get((variant, step), "")

    def cell(self, variant: str, step: str) -> StepCell | None:
        return self.cells.get((variant, step))

    def base_missing(self, step: str) -> str | None:
        """Why ``step`` has no comparison: its base has no valid trial (the reason), or
        None."""
        b = self.cell(self.base, step)
        if b is None or b.n == 0:
            why = (b.note if b else "") or "no trial"
            return f"no valid trial of {self.base} ({why})"
        return None


def _geomean(xs: Sequence[Any]) -> float | None:
    """The geometric mean (``stats.geometric_mean``): so a variant's QPS over the base's is
    its rQPS wherever every round paired.  A median beside it disagreed: 67,440 over 63,586
    is 1.06, where the rQPS printed beside it was 1.02 (run 20261130-011017-1398's qr100)."""
    return geometric_mean(x for x in xs if fmt.known(x))


def _level(xs: Sequence[Any]) -> float | None:
    """A cost's level over the trials: their geometric mean, as QPS's and as the paired
    comparison of CPU per operation takes it; the median where a trial's cost is 0 (a step
    that wrote nothing), which has no logarithm."""
    vals = [float(x) for x in xs if fmt.known(x)]
    if vals and all(v > 0 for v in vals):
        return _geomean(vals)
    return statistics.median(vals) if vals else None


def _costs(trials: Sequence[Mapping[str, Any]], w: WorkloadResult, variant: str
           ) -> dict[str, float | None]:
    """The level (``_level``) of each cost over ``variant``'s valid trials of ``w``; without
    trials, what the summary kept (medians, no KB written)."""
    valid = [t.get("metrics") or {} for t in trials
             if t.get("workload") == w.workload and t.get("clients") == w.clients
             and t.get("variant") == variant and (t.get("metrics") or {}).get("valid", True)]
    if not trials:
        v = w.variants.get(variant)
        return {k: getattr(v, k, None) if v else None for k, _ in STEP_COSTS}
    return {k: _level([m.get(k) for m in valid]) for k, _ in STEP_COSTS}


# below these the base's cost is no base for a ratio: a few hundred KB over a step's
# millions of operations (a loop step's statistics file) made "0.00" and a bar from 1 to 0
RATIO_FLOOR = {"write_kb_per_op": 0.01}


def _ratio(x: float | None, b: float | None, key: str = "") -> float | None:
    return (x / b if fmt.known(x) and fmt.known(b) and b and abs(b) >= RATIO_FLOOR.get(key, 0)
            else None)


def step_matrices(s: Summary, trials: Sequence[Mapping[str, Any]],
                  findings: Mapping[str, Mapping[str, str]] | None = None) -> list[StepMatrix]:
    """A matrix per step workload and client count, in the order the summary holds them;
    ``findings``: the spec's (variant -> step -> what the study found)."""
    found = {(v, st): text for v, steps in (findings or {}).items()
             for st, text in steps.items()}
    groups: dict[tuple[str, int], list[WorkloadResult]] = {}
    for w in s.steps:
        groups.setdefault((w.key, w.clients), []).append(w)
    out = []
    for (key, clients), ws in groups.items():
        names: list[str] = [s.base] if s.base else []
        for w in ws:
            names += [n for n in w.variants if n not in names]
        cells: dict[tuple[str, str], StepCell] = {}
        for w in ws:
            step = w.step or w.workload
            base_costs = _costs(trials, w, s.base)
            for name, v in w.variants.items():
                cmp = w.comparisons.get(name)
                costs = _costs(trials, w, name)
                ratios = {k: _ratio(costs[k], base_costs[k], k) for k, _ in STEP_COSTS}
                # CPU per operation as it was judged, paired by round: its ratio and verdict
                cpu = w.cpu_comparisons.get(name)
                if cpu is not None and fmt.known(cpu.ratio):
                    ratios[JUDGED_COST.key] = cpu.ratio
                cells[(name, step)] = StepCell(
                    qps=(_geomean(v.values) or v.median) if v.n else None, n=v.n, invalid=v.invalid,
                    note=v.note, rqps=cmp.ratio if cmp else None,
                    lo=cmp.ci_low if cmp else None, hi=cmp.ci_high if cmp else None,
                    verdict=cmp.verdict if cmp else None, costs=costs, cost_ratios=ratios,
                    cpu_verdict=cpu.verdict if cpu is not None else None,
                    more_rounds=cmp.more_rounds if cmp else None)
        out.append(StepMatrix(key, ws[0].name, clients, s.base,
                              [w.step or w.workload for w in ws],
                              {w.step or w.workload: w.unit for w in ws}, names, cells,
                              found, ws[0].level(s.confidence),
                              {w.step or w.workload: states_line(w.states)
                               for w in ws if w.states},
                              next((dict(r.conclusions) for r in s.rqps
                                    if r.workload == key and r.clients == clients), {}),
                              next((w.round_s for w in ws if w.round_s), None),
                              max((c.n_pairs or min(c.n_base, c.n_other)
                                   for w in ws for c in w.comparisons.values()), default=0)))
    return out


def undecided_note(m: StepMatrix, variant: str) -> str | None:
    """What more rounds would do for ``variant``'s undecided steps, and what they would
    take: "pg18-sync: 7 of 8 steps not decided after 5 rounds; about 3-36 more would
    probably decide 5 of them (the last about 1 h 30 min at 2 min 30 s a round: --max-rounds
    41 or more, ...); more rounds would probably not decide qr500, qp500 (any difference is
    small against this host's noise)"; None when every step is decided.  The further rounds
    are each comparison's ``more_rounds``, at the level it was judged at; looks after every
    round (decide/sequential.py) would judge the last at a stricter one."""
    cells = {st: m.cell(variant, st) for st in m.steps}
    judged = {st: c for st, c in cells.items() if c is not None and c.verdict}
    open_ = {st: c for st, c in judged.items() if c.verdict == NOT_ENOUGH}
    if variant == m.base or not open_:
        return None
    # no interval yet (fewer than the paired rounds a comparison needs): nothing to project
    early = [st for st, c in open_.items() if not (fmt.known(c.lo) and fmt.known(c.hi))]
    worth = {st: c.more_rounds for st, c in open_.items()
             if st not in early and c.more_rounds is not None and c.more_rounds <= WORTH_ROUNDS}
    never = [st for st in open_ if st not in worth and st not in early]
    after = f" after {m.rounds} rounds" if m.rounds else ""
    bits = [f"{variant}: {len(open_)} of {len(judged)} steps not decided{after}"]
    if early:
        bits.append(f"{', '.join(early)} had too few paired rounds for an interval")
    if worth:
        lo, hi = min(worth.values()), max(worth.values())
        span = f"{lo}" if lo == hi else f"{lo}-{hi}"
        total = m.rounds + hi
        # --max-rounds starts a new run (a resumed one keeps its plan): all its rounds count
        pace = (f"; a new run of them all takes about {fmt.duration(total * m.round_s)} at "
                f"{fmt.seconds(m.round_s)} a round of this workload" if m.round_s else "")
        bits.append(f"about {span} more would probably decide {len(worth)} of them "
                    f"(--max-rounds {total} or more, with a --budget that holds them{pace}; "
                    "adding rounds until decided holds each look to a stricter level, so it "
                    "takes some more rounds than one look at the end)")
    if never:
        bits.append(f"more rounds would probably not decide {', '.join(never)} (any "
                    "difference is small against this host's noise)")
    return "; ".join(bits)


def verdict_counts(m: StepMatrix, variant: str) -> dict[str, int]:
    """How many of the steps ``variant`` was judged on ended in each verdict."""
    out: dict[str, int] = {}
    for step in m.steps:
        c = m.cell(variant, step)
        if c is not None and c.verdict:
            out[c.verdict] = out.get(c.verdict, 0) + 1
    return out


def rqps_text(c: StepCell | None) -> str:
    return fmt.ratio(c.rqps) if c is not None and fmt.known(c.rqps) else fmt.DASH


def cost_text(m: StepMatrix, variant: str, step: str, key: str) -> str:
    """The base's cost itself, another variant's as a ratio to the base's."""
    c = m.cell(variant, step)
    if c is None:
        return fmt.DASH
    if variant == m.base:
        v = c.costs.get(key)
        if not fmt.known(v):
            return fmt.DASH
        # a small cost keeps its significant digits (0.0011 context switches per index row)
        return fmt.general(v) if 0 < abs(v) < 0.05 else fmt.number(v, 1)
    r = c.cost_ratios.get(key)
    if not fmt.known(r):
        return fmt.DASH
    said = COST_VERDICT_WORDS.get(c.cpu_verdict or "") if key == JUDGED_COST.key else None
    return fmt.ratio(r) + (f" {said}" if said else "")


# a judged cost's verdict beside its ratio: lower cost is "faster" (decide/effect.py)
COST_VERDICT_WORDS = {FASTER: "cheaper", SLOWER: "costlier", EQUIVALENT: "equivalent"}


def cost_note(m: StepMatrix) -> str | None:
    """What the words beside CPU's ratios mean, when any cell has one."""
    if not any(c.cpu_verdict for c in m.cells.values()):
        return None
    return (f"CPU µs/op is judged as rQPS is, paired by round at {fmt.level(m.level)}: "
            "\"cheaper\" or \"costlier\" where its interval rules out no change and the "
            "change is at least the minimum effect, \"equivalent\" where the whole interval "
            "lies within the minimum effect; a ratio without a word is undecided or was not "
            "judged.")


def chance_note(m: StepMatrix) -> str | None:
    """How many of the matrix's verdicts identical variants would turn "faster" or "slower"
    by chance: each step is judged on its own at ``level`` (no correction across steps), so
    with many steps one or two such verdicts are expected, not news."""
    n = sum(1 for c in m.cells.values() if c.verdict)
    if n < 2:
        return None
    chance = n * (1 - m.level)
    return (f"{n} step comparisons, each at {fmt.level(m.level)}: between identical variants "
            f"about {fmt.number(chance, 1)} of them would say faster or slower by chance; a "
            "lone verdict among many undecided steps is weak evidence.")
