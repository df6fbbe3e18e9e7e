"""The side-by-side half of :class:`~pgaccel.lab.experiment.Experiment`: whether a
workload's rounds run side by side, which server runs which config in a round, and running
a round (``paired.paired_round``) into kept trials."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..errors import ServerError
from ..workloads.base import BenchContext
from ..decide.model import TrialSpec, WorkloadSpec
from .paired import paired_round
from .paired_steps import interleaved_steps

if TYPE_CHECKING:
    from ..decide.model import Variant


class PairedRounds:
    """Mixed into ``Experiment``, whose fields and methods (``side_by_side``, ``variants``,
    ``active``, ``ctx_for``, ``settings_for``, ``hooks``, ``info``, ``on_event``,
    ``_refuse``, ``_keep``) it uses."""

    side_by_side: bool
    pin: bool
    rotation: dict[str, str]
    variants: "list[Variant]"

    def paired(self, ws: WorkloadSpec) -> bool:
        """Whether ``ws``'s rounds run side by side: asked for, a pgbench workload measured
        on this machine, and a server of its own for every variant.  (A workload that cannot
        runs every config on the base's server, ``Experiment.ctx_for``.)"""
        if not self.side_by_side or ws.is_steps or len(self.active()) < 2:
            return False
        ctxs = [self.contexts.get(v.name, self.ctx) for v in self.active()]
        return (len({id(c) for c in ctxs}) == len(ctxs)
                and not any(c.client_hosts for c in ctxs)
                and all(ws.workload.pgbench_kw(c, ws.params) is not None for c in ctxs))

    def _round_contexts(self, names: list[str], rnd: int) -> dict[str, BenchContext]:
        """The servers of the configs still measured rotate over them from round to round,
        so no cluster stays with one config (round -1, the burn-in, is round 0's); only
        within a rotation group (``rotation``: a lab's variants on other installations or
        with a huge page pool of their own keep their server)."""
        groups: dict[str, list] = {}
        for v in self.active():
            groups.setdefault(self.rotation.get(v.name, ""), []).append(v)
        out: dict[str, BenchContext] = {}
        for members in groups.values():
            pool = [self.ctx_for(v.name) for v in members]
            i = max(rnd, 0) % len(pool)
            pool = pool[i:] + pool[:i]
            out.update({v.name: c for v, c in zip(members, pool) if v.name in names})
        return out

    def _paired_round(self, ws: WorkloadSpec, names: list[str], rnd: int) -> list[str] | None:
        """One round of ``names`` side by side (``paired.paired_round``); ``rnd`` -1 is a
        burn-in, not kept.  Returns the variants measured (none for a burn-in), or None when
        one was refused (``_refuse``: the caller runs the round again without it)."""
        ctxs = self._round_contexts(names, rnd)
        items = []
        for n in names:
            if self.hooks is not None:
                self.hooks.before_trial(n, ctxs[n], together=True)
            items.append((ctxs[n], TrialSpec(n, self.settings_for(n, ws), ws.workload,
                                             ws.params, rnd)))
        label = " & ".join(names)
        if rnd < 0:
            self.on_event("burn_in", workload=ws.label, variant=label)
        else:
            self.on_event("trial_start", workload=ws.label, variant=label, round=rnd,
                          trials=len(names))

        def progress(phase: str, frac: float) -> None:
            self.on_event("phase", workload=ws.label, variant=label, phase=phase, frac=frac)
        t0 = time.monotonic()
        try:
            trials = paired_round(items, note=progress, pin=self.pin)
        except ServerError as e:
            self._refuse(getattr(e, "variant", names[0]), e.message, e)
            return None
        wall = time.monotonic() - t0
        if rnd < 0:
            for t in trials:
                self.info.setdefault("burn_in", {}).setdefault(ws.label, []).append({
                    "variant": t.variant, "throughput": t.throughput, "design": "side by side",
                    "server_cpu_us_per_op": t.metrics.get("server_cpu_us_per_op"),
                    "client_cpu_us_per_op": t.metrics.get("client_cpu_us_per_op")})
            return []
        return self._check_and_keep(ws, ctxs, rnd, {t.variant: [t] for t in trials}, wall)

    def _check_and_keep(self, ws: WorkloadSpec, ctxs: dict[str, BenchContext], rnd: int,
                        trials: dict[str, list], wall: float) -> list[str] | None:
        """A side-by-side round's trials checked (``hooks.after_trial`` on the server each
        variant ran on) and kept, each trial its share of the round's ``wall`` so the
        round's trials add up to it; None when a variant was refused."""
        for n, ts in trials.items():
            problems = (self.hooks.after_trial(n, ctxs[n], ts)
                        if self.hooks is not None else [])
            if problems:
                self._refuse(n, "; ".join(problems))
                return None
        count = sum(len(ts) for ts in trials.values())
        for n, ts in trials.items():
            self._keep(ws, n, rnd, ts, wall / max(1, count))
        return list(trials)


    # -- step workloads: the same step of every variant in turn (paired_steps.py) --------
    def steps_paired(self, ws: WorkloadSpec) -> bool:
        """Whether ``ws`` (a step workload) runs its steps side by side: asked for, a
        workload whose steps come one at a time, and a server of its own per variant."""
        if (not self.side_by_side or not ws.is_steps or len(self.active()) < 2
                or not getattr(ws.workload, "interleaves", False)):
            return False
        ctxs = [self.contexts.get(v.name, self.ctx) for v in self.active()]
        return (len({id(c) for c in ctxs}) == len(ctxs)
                and not any(c.client_hosts for c in ctxs))

    def _steps_round(self, ws: WorkloadSpec, names: list[str], rnd: int) -> list[str] | None:
        """One round of a step workload side by side; the variants measured, or None when
        one was refused (the caller runs the round again without it)."""
        ctxs = self._round_contexts(names, rnd)
        for n in names:
            if self.hooks is not None:
                self.hooks.before_trial(n, ctxs[n], together=True)
        label = " & ".join(names)
        self.on_event("trial_start", workload=ws.label, variant=label, round=rnd,
                      trials=len(names))

        def progress(variant: str, step: str, frac: float) -> None:
            self.on_event("phase", workload=ws.label, variant=variant, phase=step, frac=frac)
        t0 = time.monotonic()
        try:
            trials = interleaved_steps([(ctxs[n], n, self.settings_for(n, ws)) for n in names],
                                       ws, rnd, note=progress, pin=self.pin)
        except ServerError as e:
            self._refuse(getattr(e, "variant", names[0]), e.message, e)
            return None
        return self._check_and_keep(ws, ctxs, rnd, trials, time.monotonic() - t0)
