"""Run variants against workloads, trials interleaved; ``judge.py`` says what they show.

The loop is the same for ``pgaccel run`` (baseline vs tuned), ``pgaccel bench`` and
``pgaccel lab``: for each workload, prepare its data once per server, snapshot it as a
template when the workload writes, then run rounds of trials in a counterbalanced order
(``schedule.trial_order``), each through ``trial.run_trial`` (or, for a multi-step
workload, ``trial.run_steps_trial``).  Every finished trial is written to the results store at
once, so an interrupted run keeps what it measured and ``pgaccel lab --resume`` skips the
(round, variant, workload) triples already there; ``run.json`` is rewritten atomically
after every trial.

**Equal starting data.**  A workload that writes changes its data: the second trial of a
tpcb-like run would start from tables the first one updated, bloated and half-vacuumed,
so the order of trials would leak into the result.  Each trial of a writing workload
therefore starts from a fresh copy of the data: ``CREATE DATABASE ... TEMPLATE`` of a
snapshot taken right after preparing.  A template copy is a file-level copy inside the
same server (seconds for hundreds of MB, no extra space beyond the template, no second
cluster); re-running ``pgbench -i`` would take minutes and regenerate data, and copying a
whole data directory would need the server stopped and twice the disk.  Variants that
need other binaries run on their own cluster (a data directory is tied to its major
version) with the same data prepared from the same parameters (same fingerprint).

**Rounds.**  At least ``rounds`` rounds run; with ``until_decided`` more follow until every
comparison (``judge.comparisons``, at the run's confidence) has a decisive verdict, with a
``target_ci_width`` until every interval is that narrow; never past ``max_rounds`` or the
time ``budget_s`` (shared out over the workloads still to run;
``schedule.should_continue``).

**Verified variants.**  ``run_trial`` refuses a variant whose settings the server does not
show; ``hooks.after_trial`` (the lab's ``variants.VariantManager``) adds huge pages, THP and
server version.  A refused variant is dropped from the summary with the reason; when the
base (or all but one variant) is refused the run stops with the error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from .. import __version__
from ..errors import Interrupted, PgaccelError, ServerError
from ..util import atomic_write_json
from ..pg.settings import effective
from ..workloads.base import BenchContext
from ..workloads.steps import applied_knobs
from ..decide import judge
from ..decide.looks import Looks
from ..util import with_schema
from ..decide.schedule import estimate_trial_s, no_room, should_continue, trial_order
from ..decide.model import Trial, TrialSpec, Variant, WorkloadSpec
from ..decide.effect import NOT_ENOUGH
from ..decide.results import Summary
from .paired_rounds import PairedRounds
from .preparing import Preparing
from .trial import run_steps_trial, run_trial

Event = Callable[..., None]


@dataclass
class Experiment(PairedRounds, Preparing):
    """Runs the trials of ``variants`` (the first is the base) on ``workloads``.

    Everything is given to the constructor: the judging parameters (``min_effect``,
    ``confidence``, ``seed``), the adaptive rounds (``rounds`` at least, ``max_rounds``,
    ``budget_s``, ``target_ci_width``), where results go (``store`` + ``run_id``: a trial
    per row as it finishes; ``run_dir``: run.json and summary.json; ``info``: what else
    run.json carries) and, for a resumed run, the ``trials`` already measured, the time
    ``spent_s`` on them and the variants refused beforehand (``failed_variants``).
    :meth:`run` returns the :class:`Summary`."""
    ctx: BenchContext
    variants: list[Variant]
    workloads: list[WorkloadSpec]
    rounds: int = 3                      # the minimum number of rounds
    order: str = "abba"
    seed: int = 0
    min_effect: float = 0.02
    confidence: float = 0.95
    max_rounds: int | None = None
    budget_s: float | None = None
    target_ci_width: float | None = None
    until_decided: bool = False          # add rounds (within max_rounds/budget) until decided
    burn_in: bool = True                 # one unrecorded trial after preparing (see _burn_in)
    side_by_side: bool = False           # a server per variant, rounds in slices (paired.py)
    pin: bool = True                     # side by side: pgbench and backends on one CPU
    # a lab's variants each have a server of their own (other builds, versions, initdb
    # choices): a workload that cannot go side by side still runs on each variant's own
    own_servers: bool = False
    # side by side: variant -> its rotation group (lab/sharing.py); servers swap configs
    # only within a group (none given: all one group)
    rotation: dict[str, str] = field(default_factory=dict)
    store: Any = None                    # session.store.Store or None
    run_id: str | None = None
    run_dir: str | None = None
    info: dict[str, Any] = field(default_factory=dict)   # plan, facts, ... for run.json
    on_event: Event = lambda kind, **kw: None
    hooks: Any = None                    # before_trial(name, ctx), after_trial(...) -> problems
    contexts: dict[str, BenchContext] = field(default_factory=dict)  # variant -> its server
    overrides: dict[str, object] = field(default_factory=dict)   # the run's --set (all configs)
    trials: list[Trial] = field(default_factory=list)
    spent_s: float = 0.0                 # time a resumed run had already spent
    failed_variants: dict[str, str] = field(default_factory=dict)   # refused: name -> why
    stop_reasons: dict[str, str] = field(default_factory=dict)
    # with until_decided and a budget: workload label -> the last round it looks at, fixed
    # after its first round from the time left (decide/looks.py); max_rounds otherwise
    last_looks: dict[str, int] = field(default_factory=dict)
    ended_looks: dict[str, int] = field(default_factory=dict)   # ended sooner by the budget
    _paired_now: bool = field(default=False, repr=False)       # this workload side by side
    _steps_now: bool = field(default=False, repr=False)        # ... its steps in turns

    @property
    def base(self) -> Variant:
        return self.variants[0]

    def ctx_for(self, variant: str) -> BenchContext:
        """The variant's server; with servers opened to go side by side, a workload that
        cannot (neither ``paired`` nor ``steps_paired``) runs every variant on the base's,
        one at a time."""
        if (self.side_by_side and not (self._paired_now or self._steps_now)
                and not self.own_servers):
            return self.ctx
        return self.contexts.get(variant, self.ctx)

    def settings_for(self, vname: str, ws: WorkloadSpec) -> dict[str, object]:
        """The settings ``vname`` runs ``ws`` with, in ``pg.settings``' one precedence:
        the config's own, the workload's requirements over them, the run's overrides over
        both; what a higher level replaced is noted once in run.json (``settings_replaced``)
        and told (``settings_replaced`` event)."""
        v = next(x for x in self.variants if x.name == vname)
        eff = effective(variant=v.settings, required=ws.workload.required_settings(ws.params),
                        overrides=self.overrides)
        if eff.replaced:
            notes = self.info.setdefault("settings_replaced", {}).setdefault(ws.label, {})
            if vname not in notes:
                notes[vname] = eff.replaced
                self.on_event("settings_replaced", workload=ws.label, variant=vname,
                              replaced=eff.replaced)
        return eff.settings

    def active(self) -> list[Variant]:
        return [v for v in self.variants if v.name not in self.failed_variants]

    def total_estimate_s(self) -> float:
        return sum(estimate_trial_s(w) * (self.rounds * len(self.variants)
                                          + self._burn_ins(w))
                   for w in self.workloads)

    def _burn_ins(self, ws: WorkloadSpec) -> int:
        """How many burn-in trials ``ws`` gets (see _burn_in)."""
        if not self.burn_in or ws.is_steps:
            return 0
        return len(self.variants) if ws.workload.writes or self.paired(ws) else 1

    # -- running ------------------------------------------------------------------------
    def run(self) -> Summary:
        status = "finished"
        t0 = time.monotonic()
        try:
            for i, ws in enumerate(self.workloads):
                share = None
                if self.budget_s is not None:
                    left = self.budget_s - self.spent_s - (time.monotonic() - t0)
                    share = max(0.0, left) / (len(self.workloads) - i)
                self._run_workload(ws, share)
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

    def _done(self, ws: WorkloadSpec) -> set[tuple[int, str]]:
        """(round, variant) pairs of ``ws`` already measured (whole step sequences only)."""
        c = ws.params.clients
        if not ws.is_steps:
            return {(t.round, t.variant) for t in self.trials
                    if t.workload == ws.name and t.clients == c}
        groups: dict[tuple[int, str], list[Trial]] = {}
        for t in self.trials:
            if t.workload.startswith(ws.name + "/") and t.clients == c:
                groups.setdefault((t.round, t.variant), []).append(t)
        return {k for k, ts in groups.items()
                if len(ts) >= int(ts[0].metrics.get("steps_total") or 0)}

    def _run_workload(self, ws: WorkloadSpec, budget_s: float | None) -> None:
        names = [v.name for v in self.variants]
        self._paired_now = self.paired(ws)
        steps_now = self._steps_now = self.steps_paired(ws)
        done = self._done(ws)
        if ws.is_steps:     # drop half-finished step sequences of an interrupted run
            self.trials = [t for t in self.trials if not (
                t.workload.startswith(ws.name + "/") and t.clients == ws.params.clients
                and (t.round, t.variant) not in done)]
        prepared = False
        t_ws = time.monotonic()
        round_s: list[float] = []
        rnd = 0
        while True:
            others = [v.name for v in self.active() if v is not self.base]
            lp = self.looks_policy
            elapsed, pace = time.monotonic() - t_ws, (sum(round_s) / len(round_s)
                                                      if round_s else None)
            # no room for another round before the last look: this look becomes the last
            ended = bool(pace and no_room(elapsed, budget_s, pace) and lp.end(ws.label, rnd))
            comps = judge.comparisons(self.trials, ws, self.base.name, others,
                                      min_effect=self.min_effect,
                                      confidence=lp.level_of(ws.label))
            go, why = should_continue(
                comps, self.target_ci_width, elapsed, budget_s, pace, rnd,
                min_rounds=self.rounds, max_rounds=lp.last_of(ws.label),
                until_decided=self.until_decided, max_from_budget=lp.from_budget(ws.label))
            if not go:
                if ended and any(c.verdict == NOT_ENOUGH for c in comps.values()):
                    why += f"; round {rnd} became its last look"
                self.stop_reasons[ws.label] = why
                self.on_event("stop", workload=ws.label, reason=why, rounds=rnd)
                return
            t_r, ran = time.monotonic(), False
            order = trial_order(names, rnd + 1, self.order, self.seed, start_round=rnd)
            if steps_now or self._paired_now:     # every variant's server in one round
                run_round = self._steps_round if steps_now else self._paired_round
                todo = [n for _, n in order if n not in self.failed_variants]
                if any((rnd, n) not in done for n in todo):
                    if not prepared:
                        self._prepare(ws)
                        prepared = True
                        if self._paired_now and self.burn_in and not self._done(ws):
                            while self._paired_round(ws, todo, -1) is None:   # refused one
                                todo = [n for n in todo if n not in self.failed_variants]
                        t_r = time.monotonic()
                    measured = run_round(ws, todo, rnd)
                    if measured is None:      # one was refused: the round without it
                        continue
                    done |= {(rnd, n) for n in measured}
                    ran = True
                order = []
            for r, vname in order:
                if vname in self.failed_variants or (r, vname) in done:
                    continue
                if not prepared:
                    self._prepare(ws)
                    prepared = True
                    self._burn_in(ws, [n for _, n in order if n not in self.failed_variants])
                    t_r = time.monotonic()      # a round's pace: its trials, not the setup
                if self._one_trial(ws, vname, r):
                    done.add((r, vname))
                ran = True
            if ran:
                round_s.append(time.monotonic() - t_r)
                if budget_s is not None:      # fix the last look (decide/looks.py)
                    left = budget_s - (time.monotonic() - t_ws)
                    last = self.looks_policy.fix(ws.label, left, round_s[-1], rnd + 1)
                    if last is not None:
                        self.on_event("last_look", workload=ws.label, last=last,
                                      round_s=round_s[-1], left_s=left,
                                      capped=not self.looks_policy.from_budget(ws.label))
            rnd += 1

    def _one_trial(self, ws: WorkloadSpec, vname: str, rnd: int) -> bool:
        """Run, check and store one trial; False when the variant was refused."""
        v = next(x for x in self.variants if x.name == vname)
        ctx = self.ctx_for(vname)
        self.on_event("trial_start", workload=ws.label, variant=vname, round=rnd)
        if self.hooks is not None:
            self.hooks.before_trial(vname, ctx)

        def progress(phase: str, frac: float) -> None:
            self.on_event("phase", workload=ws.label, variant=vname, phase=phase, frac=frac)
        t0 = time.monotonic()
        try:
            settings = self.settings_for(vname, ws)
            if ws.is_steps:
                trials = run_steps_trial(ctx, vname, settings, ws, rnd, progress)
            else:
                trials = [run_trial(ctx, TrialSpec(vname, settings, ws.workload, ws.params,
                                                   rnd), on_progress=progress)]
        except ServerError as e:
            self._refuse(vname, e.message, e)
            return False
        problems = self.hooks.after_trial(vname, ctx, trials) if self.hooks is not None else []
        if problems:
            self._refuse(vname, "; ".join(problems))
            return False
        self._keep(ws, vname, rnd, trials, (time.monotonic() - t0) / len(trials))
        return True

    def _keep(self, ws: WorkloadSpec, vname: str, rnd: int, trials: list[Trial],
              wall: float) -> None:
        """Add a variant's finished trials, store them and tell (``trial_done``)."""
        for t in trials:
            t.metrics.update(clients=ws.params.clients, unit=t.unit, trial_wall_s=wall)
            if ws.label in self.info.get("sized", {}):      # a resumed run reads it back
                t.metrics["sized"] = self.info["sized"][ws.label]
            self.trials.append(t)
            if self.store is not None and self.run_id:
                valid = t.metrics.get("valid", True) is not False
                self.store.add_trial(
                    self.run_id, variant=vname, workload=t.workload, round=rnd,
                    clients=ws.params.clients,
                    started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t.started_at)),
                    duration_s=t.metrics.get("duration_s"), metrics=t.metrics,
                    status="ok" if valid else "invalid",
                    primary_metric="throughput", primary_value=t.throughput,
                    series={"throughput": t.series, "latency_p50_ms": t.latency_series})
        self.on_event("trial_done", workload=ws.label, variant=vname, round=rnd,
                      trial=trials[0], trials=trials)
        self._save("running", None)

    def _refuse(self, vname: str, reason: str, exc: ServerError | None = None) -> None:
        self.failed_variants[vname] = reason
        self.on_event("refused", variant=vname, reason=reason)
        left = self.active()
        if vname == self.base.name or (len(self.variants) >= 2 and len(left) < 2):
            if exc is not None:
                raise exc
            raise ServerError(f"Variant {vname!r} is not what it claims: {reason}.",
                              "The variant is not reported; fix the spec or the machine and "
                              "run again.")

    # -- judging (decide/judge.py), at the levels of the looks (decide/looks.py) ---------------
    @property
    def looks_policy(self) -> Looks:
        """When each workload is judged and at what level; it fixes ``last_looks``."""
        return Looks(self.confidence, self.rounds, self.max_rounds, self.until_decided,
                     self.last_looks, self.ended_looks)

    @property
    def looks(self) -> bool:
        """Whether the run looks after every round from ``rounds`` to its last look."""
        return self.looks_policy.on

    def last_look_of(self, label: str) -> int | None:
        return self.looks_policy.last_of(label)

    def level_after(self, rounds_done: int, label: str | None = None) -> float:
        return self.looks_policy.level_after(rounds_done, label)

    def summary(self) -> Summary:
        """What the trials so far say (``judge.summarize`` over the variants not refused):
        each workload judged at the level of the look after the rounds it has."""
        lp = self.looks_policy
        s = judge.summarize(self.trials, self.base.name, [v.name for v in self.active()],
                            self.workloads, min_effect=self.min_effect,
                            confidence=lp.judged,
                            levels={w.label: lp.level_of(w.label) for w in self.workloads},
                            refused=self.failed_variants, stop_reasons=self.stop_reasons)
        return replace(s, **lp.summary_fields([w.label for w in self.workloads]))

    # -- saving -------------------------------------------------------------------------
    def _save(self, status: str, summary: Summary | None) -> None:
        if self.run_dir:
            judged = (summary if summary is not None else self.summary()).to_dict()
            doc = with_schema({
                "run_id": self.run_id, "status": status, "pgaccel_version": __version__,
                **self.info,
                "variants": [v.__dict__ for v in self.variants],
                "workloads": [{"workload": w.workload.name, "key": w.name,
                               "params": w.params.to_dict(),
                               "applies": applied_knobs(w.workload)} for w in self.workloads],
                "rounds": self.rounds, "order": self.order,
                "trials": [t.to_dict() for t in self.trials],
                "summary": judged})
            atomic_write_json(f"{self.run_dir}/run.json", doc)
            if summary is not None:
                atomic_write_json(f"{self.run_dir}/summary.json", judged)
        if self.store is not None and self.run_id and status != "running":
            self.store.finish_run(self.run_id, status,
                                  summary=summary.to_dict() if summary is not None else None)

