"""The preparing half of :class:`~pgaccel.lab.experiment.Experiment`: a workload's data
made once per server (a template of it where the workload writes), the workload sized to
the host where it asks to be, and the burn-in trials before the first round."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import BenchError, ServerError
from ..server.database import Database
from ..decide.model import TrialSpec, WorkloadSpec
from .trial import run_trial, snapshot_template

if TYPE_CHECKING:
    from ..decide.model import Trial, Variant


class Preparing:
    """Mixed into ``Experiment``, whose fields and methods (``variants``, ``active``,
    ``base``, ``ctx_for``, ``settings_for``, ``hooks``, ``info``, ``trials``, ``burn_in``,
    ``on_event``, ``_done``, ``paired``) it uses."""

    variants: "list[Variant]"
    trials: "list[Trial]"
    info: dict[str, Any]
    burn_in: bool

    def _prepare(self, ws: WorkloadSpec) -> None:
        wl = ws.workload
        self.on_event("prepare", workload=ws.label)
        seen: set[int] = set()
        for v in self.active():
            ctx = self.ctx_for(v.name)
            if id(ctx) in seen:
                continue
            seen.add(id(ctx))
            if self.hooks is not None:
                self.hooks.before_trial(v.name, ctx)
            ctx.target.apply(self.settings_for(v.name, ws))
            ctx.target.ensure_bench_db()
            built = wl.prepare(ctx, ws.params)
            if wl.writes:
                snapshot_template(ctx.target)
            with Database(ctx.connect()) as db:
                size = db.database_size()
            self.info.setdefault("prepared", {}).setdefault(ws.label, {})[v.name] = {
                "fingerprint": wl.fingerprint(ws.params), "built": built,
                "db_bytes": int(size), "server": ctx.target.describe()}
            self.on_event("prepared", workload=ws.label, built=built, variant=v.name)
        self._size_to_host(ws)

    def _size_to_host(self, ws: WorkloadSpec) -> None:
        """A workload that sizes itself to the host (the Insert Benchmark's
        ``load_seconds``) measures it once, on the base's server, before the first round;
        a resumed run takes the sizes its stored trials ran with, so every round of a
        workload runs the same rows."""
        size = getattr(ws.workload, "size_to_host", None)
        if size is None:
            return
        kept = [t.metrics["sized"] for t in self.trials if t.metrics.get("sized")
                and t.workload.startswith(ws.name + "/") and t.clients == ws.params.clients]
        if kept:
            got = kept[0]
            ws.params.options.update({k: got[k] for k in got.get("given") or {}})
        elif not ws.workload.sizes_to_host(ws.params):
            return
        else:
            ctx = self.ctx_for(self.base.name)
            if self.hooks is not None:       # the base's server up (alone) again
                self.hooks.before_trial(self.base.name, ctx)
            ctx.target.apply(self.settings_for(self.base.name, ws))
            got = size(ctx, ws.params)
            if got is None:
                return
        self.info.setdefault("sized", {})[ws.label] = got
        self.on_event("sized", workload=ws.label, resumed=bool(kept), **got)

    def _burn_in(self, ws: WorkloadSpec, order: list[str]) -> None:
        """Trials run exactly as measured ones and then thrown away, before the first round.

        On this VM class the first trial after the data is prepared ran 15-24% below the
        median of the same config's later trials in 3 of 5 `run --quick` runs (select-only;
        about -2% in the other two), with more CPU per operation in the server *and* in
        pgbench; counted, it favours whichever config comes second in round 1.  For that one
        burn-in of the first config is enough.  A workload that writes also leaves state
        that belongs to a config: the WAL segments its checkpoints keep for reuse (as many
        as its min_wal_size and recent WAL volume say).  With 2 s warm-ups the tuned
        config's first two tpcb-like trials ran 2,812 and 3,284 tps against a median of
        3,589 for its later eight, with stalls inside the trial (run 20261123-201141-1103),
        while the first config, burnt in, was flat.  So a writing workload burns in every
        config, in the reverse of round 1's order (the first config last, right before its
        first measured trial).  Not for step workloads (a trial is a whole benchmark) and
        not when the workload has already been measured (a resumed run)."""
        if not self.burn_in or ws.is_steps or self._done(ws) or not order:
            return
        names = list(reversed(order)) if ws.workload.writes else order[:1]
        for vname in names:
            v = next(x for x in self.variants if x.name == vname)
            self.on_event("burn_in", workload=ws.label, variant=vname)
            if self.hooks is not None:
                self.hooks.before_trial(vname, self.ctx_for(vname))
            try:
                t = run_trial(self.ctx_for(vname), TrialSpec(vname, self.settings_for(vname, ws),
                                                             ws.workload, ws.params, -1))
            except (ServerError, BenchError):
                return        # the measured trial will meet (and report) the same problem
            self.info.setdefault("burn_in", {}).setdefault(ws.label, []).append({
                "variant": vname, "throughput": t.throughput,
                "server_cpu_us_per_op": t.metrics.get("server_cpu_us_per_op"),
                "client_cpu_us_per_op": t.metrics.get("client_cpu_us_per_op")})
