"""The one owner of a run: a :class:`~pgaccel.session.request.RunRequest` in, a
:class:`RunOutcome` out.

:meth:`Runner.run` does, for every benchmarking command alike:

1. open the servers: for configs, the requested target (a throwaway cluster, ``--pgdata`` or
   ``--dsn``) and, side by side, a throwaway cluster per other config
   (``sidebyside.py``); for a lab spec, a throwaway cluster per installation its variants
   name, their OS settings and verification (``labservers.py``);
2. compute the configs' settings on the opened server (``settings_from``: pgaccel's plan or
   PGTune's, for the request's profile), drop what the target cannot set and check that
   every config leaves room for the clients (``decide/limits.py``);
3. record the run: the results store and run.json, through one handle
   (``runs.RunHandle``) that later amendments go through too;
4. run the interleaved experiment (``lab/experiment.py``), judged as it goes;
5. close every server and put the OS back (an ``ExitStack``; also after an error).

What the user sees is left to the command: the runner tells a :class:`~pgaccel.session.events.RunEvents` (the
server it opened, the plan, the design, each line worth saying) and lets it drive the
experiment (a progress bar or one line per trial).
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ..decide.limits import connections_problem
from ..decide.model import Trial, Variant, WorkloadSpec
from ..decide.results import Summary
from ..errors import UsageError
from ..lab.experiment import Experiment
from ..lab.paired import turns_of
from ..metrics import steadiness
from ..pg.build import build_summary
from ..probe.facts import HostFacts
from ..report import format as fmt
from ..server.binary import pg_config
from ..server.discovery import find_client
from ..tune.groups import group_of, without
from ..server.target import Target, open_target
from ..workloads.base import BenchContext
from .events import RunEvents
from .request import ConfigRequest, RunRequest
from .runs import RunHandle, VariantRecord, start_run


@dataclass
class RunOutcome:
    """What a run gave: its summary, where it is kept, and the experiment's trials."""
    summary: Summary
    record: RunHandle
    experiment: Experiment
    info: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    plan: Any = None                     # pgaccel's plan (tune.plan.Plan), where computed

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def run_dir(self) -> str:
        return self.record.run_dir

    @property
    def store_path(self) -> str:
        return self.record.store_path

    @property
    def trials(self) -> list[Trial]:
        return self.experiment.trials

    def amend(self, summary: Summary) -> None:
        """A summary computed after the experiment (a head-to-head, a calibration), kept in
        the store and in run.json alike."""
        self.summary = summary
        self.record.amend(summary.to_dict())


class Runner:
    """Runs one :class:`RunRequest` (see the module docstring)."""

    def __init__(self, request: RunRequest, facts: HostFacts,
                 events: RunEvents | None = None):
        self.req, self.facts = request, facts
        self.events = events or RunEvents()

    def run(self) -> RunOutcome | None:
        """The outcome; None after a lab spec's check (``check_only``)."""
        import scipy.stats  # noqa: F401 - lazy in decide/: missing, said before a server starts
        with ExitStack() as stack:
            if self.req.spec is not None:
                from .labservers import open_lab
                lab = open_lab(self.req, self.facts, stack, self.events)
                if lab is None:
                    return None
                return self._measure(stack, **lab)
            return self._measure(stack, **self._open_configs(stack))

    # -- one server (run, bench, calibrate) ---------------------------------------------
    def _open_configs(self, stack: ExitStack) -> dict[str, Any]:
        req, ev = self.req, self.events
        s = req.server
        target = stack.enter_context(open_target(
            pg_bin=s.pg_bin, dsn=s.dsn, pgdata=s.pgdata, run_as=s.run_as, workdir=s.workdir,
            port=s.port, keep=s.keep))
        ev.opened(target.describe())
        if req.server_host is not None:   # plan for, and measure, the server's own machine
            from .clienthosts import attach_server_host
            self.facts = attach_server_host(target, req.server_host)
            ev.say(f"server host {req.server_host.label}: {self.facts.logical_cpus} CPUs, "
                   f"{fmt.size(self.facts.memory_total_bytes)} RAM, measured over ssh")
        target.apply({})
        variants, plan, notes = self._configs(target)
        with target.database() as db:
            server = db.facts() if req.server_facts else {
                "version": db.version, "bindir": getattr(target.inst, "bindir", None)}
            current_conns = db.show("max_connections")
        clients = max(ws.params.clients for ws in req.workloads)
        for v in variants:
            few = connections_problem(v.settings.get("max_connections", current_conns),
                                      clients)
            if few:
                raise UsageError(f"--clients {clients}: {v.name}'s {few}.",
                                 "Use fewer clients.")
        ctx = BenchContext(target, find_client("pgbench", target.inst), workdir=s.workdir,
                           client_hosts=list(req.client_hosts))
        if req.client_hosts:
            from .clienthosts import describe_hosts
            server["client_hosts"] = describe_hosts(list(req.client_hosts),
                                                    target.admin_conninfo())
            for h in server["client_hosts"]:
                ev.say(f"client host {h['host']}: {h['pgbench']}, SELECT 1 round trip "
                       f"{fmt.ms(h['rtt_ms'])} ms")
        contexts: dict[str, BenchContext] = {}
        design: dict[str, Any] = {}
        if req.protocol.side_by_side is False:
            design = {"design": "one at a time", "why": "asked for with --one-at-a-time"}
        elif req.protocol.side_by_side:
            from .sidebyside import side_by_side_contexts
            contexts, why_not = side_by_side_contexts(
                stack, ctx, variants, list(req.workloads), self.facts, pg_bin=s.pg_bin,
                run_as=s.run_as, workdir=s.workdir, keep=s.keep)
            design = ({"design": "side by side", "servers": len(contexts),
                       "pin": req.protocol.pin, "turns": turns_of(len(contexts))}
                      if contexts else
                      {"design": "one at a time", "why": why_not})
        info: dict[str, Any] = {"target": target.describe(), "server": server}
        if plan is not None:
            info.update(plan=plan.to_dict(), not_tested=notes["not_tested"],
                        build=build_summary(pg_config(target.inst)) if target.inst else None)
        if design:
            info["measurement"] = design
        bindir = target.inst.bindir if target.inst else None
        records = [VariantRecord(v.name, v.settings,
                                 server.get("version") if req.server_facts else None,
                                 bindir if req.server_facts else None)
                   for v in variants]
        return {"ctx": ctx, "variants": variants, "contexts": contexts, "records": records,
                "info": info, "design": design, "plan": plan, "notes": notes["said"],
                "experiment_kw": {}}

    def _configs(self, target: Target) -> tuple[list[Variant], Any, dict[str, Any]]:
        """The configs' settings on this server: computed ones for the request's profile,
        less what this target cannot set; pgaccel's plan where one was made."""
        from .plan import pgtune_variant, tuned_plan
        plan, not_tested, said = None, [], []
        out = []
        need_plan = any(c.settings_from for c in self.req.configs)
        if need_plan:
            plan = tuned_plan(target, self.facts, self.req.profile,
                              workloads=self.req.workloads)
        changed = ({ch.name for ch in plan.layer("postgres")
                    if not ch.advice_only and ch.changes_value} if plan is not None else set())
        for c in self.req.configs:
            if c.drop_groups and c.name.startswith("without-") and not any(
                    group_of(n) == c.name.removeprefix("without-") for n in changed):
                continue          # --explain: the plan changes nothing of this group
            settings = self._settings_of(c, target, plan, said)
            skip = target.unsettable(settings) if settings else []
            if skip and c.settings_from == "pgaccel":
                not_tested = skip
            settings = {k: v for k, v in settings.items() if k not in skip}
            out.append(Variant(c.name, settings, c.description))
        if plan is not None:
            changes = [ch.to_dict() for ch in plan.layer("postgres")
                       if not ch.advice_only and ch.changes_value]   # what differs
            self.events.plan(changes, not_tested)
        return out, plan, {"not_tested": not_tested, "said": said}

    def _settings_of(self, c: ConfigRequest, target: Target, plan: Any,
                     said: list[str]) -> dict[str, object]:
        from .plan import pgtune_variant
        if c.settings_from == "pgaccel":
            base: dict[str, object] = dict(without(plan.postgres_settings(), c.drop_groups))
        elif c.settings_from == "pgtune":
            base, dropped = pgtune_variant(target, plan)
            for why in dropped:
                said.append(f"PGTune on this server: {why}")
                self.events.say(said[-1], "yellow")
        else:
            base = {}
        return {**base, **dict(c.settings)}

    # -- recording and measuring (every kind) ---------------------------------------------
    def _measure(self, stack: ExitStack, *, ctx: BenchContext, variants: list[Variant],
                 contexts: dict[str, BenchContext], records: list[VariantRecord],
                 info: dict[str, Any], design: dict[str, Any], plan: Any,
                 notes: list[str], experiment_kw: dict[str, Any],
                 record: dict[str, Any] | None = None) -> RunOutcome:
        req, p = self.req, self.req.protocol
        remote = req.server_host is not None or bool(req.server.dsn)
        steady = steadiness.measure(           # before the first round, every CPU busy
            cpu_limit=self.facts.cgroup.cpu_limit if not req.server_host else None,
            where="pgaccel's machine, not the server's" if remote else "")
        if steady.get("unsteady"):
            self.events.say("CPU steadiness: " + steadiness.text(steady) + ".", "yellow")
        info = {**info, "cpu_steadiness": steady}
        rec = start_run(req.store_path, req.kind, req.name, records,
                        host=self.facts.to_dict(), out_dir=req.out_dir,
                        resume=req.resume["id"] if req.resume else None,
                        spec={**req.record, **(record or {})}, info=info)
        stack.callback(rec.close)
        exp = Experiment(ctx, variants, list(req.workloads), rounds=p.rounds, order=p.order,
                         seed=p.seed, min_effect=p.min_effect, confidence=p.confidence,
                         max_rounds=p.max_rounds, budget_s=p.budget_s,
                         target_ci_width=p.target_ci_width, until_decided=p.until_decided,
                         store=rec.store, run_id=rec.run_id, run_dir=rec.run_dir,
                         info=rec.info, contexts=contexts,
                         side_by_side=bool(contexts) and design.get("design") == "side by side",
                         pin=p.pin, overrides=dict(req.overrides), **experiment_kw)
        self.events.starting(exp, rec.run_id, design)
        summary = self.events.drive(exp)
        return RunOutcome(summary, rec, exp, info=rec.info, notes=notes, plan=plan)


def estimate_s(req: RunRequest, per_trial: Callable[[WorkloadSpec], float]) -> float:
    """About how long the request's rounds take: every config's trials of every workload,
    up to its last possible round (``budget_s`` caps it)."""
    n = len(req.configs) if req.configs else len(req.spec.variants) if req.spec else 1
    rounds = max(req.protocol.max_rounds or 0, req.protocol.rounds)
    est = sum(per_trial(ws) for ws in req.workloads) * rounds * n
    return min(est, req.protocol.budget_s) if req.protocol.budget_s else est


def with_group_effects(outcome: RunOutcome, whole: str = "tuned") -> Summary:
    """The summary with each group's effect (``run --explain``): the whole plan judged
    against each ``without-GROUP`` config, paired by round like every comparison; kept in
    the store and run.json."""
    from ..decide.judge import head_to_head
    s, exp = outcome.summary, outcome.experiment
    rows = []
    for v in exp.variants:
        if v.name.startswith("without-"):
            rows += head_to_head(exp.trials, exp.workloads, v.name, whole, exp.min_effect,
                                 s.confidence)
    summary = replace(s, explained=rows)
    outcome.amend(summary)
    return summary


def with_head_to_head(outcome: RunOutcome, a: str, b: str) -> Summary:
    """The summary with ``b`` judged against ``a`` directly (``run --with-pgtune``: the plan
    against PGTune's), kept in the store and run.json."""
    from ..decide.judge import head_to_head
    s = outcome.summary
    exp = outcome.experiment
    summary = replace(s, tuned_vs_pgtune=head_to_head(exp.trials, exp.workloads, a, b,
                                                      exp.min_effect, s.confidence))
    outcome.amend(summary)
    return summary
