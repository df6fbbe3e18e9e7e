"""A lab spec's servers, for the runner (``pgaccel lab`` and ``run --stack``): every variant
resolved to an installation (built on demand where it names a build), a throwaway cluster
per installation, computed settings (``settings_from``, for the request's profile) checked
against each server's catalog, the OS settings resolved, applied for each trial and put back
(``lab/variants.py``'s ``VariantManager``), and every variant verified before a trial runs.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

from ..decide.limits import connections_problem
from ..decide.looks import Looks
from ..decide.model import Variant, WorkloadSpec, trials_from_store
from ..errors import PgaccelError, ServerError, UsageError
from ..lab.paired import turns_of
from ..lab.variants import LabVariant, VariantManager, choose_base, resolve_servers
from ..server.discovery import choose_server, find_client, find_installations, probe_dir
from ..server.target import open_target
from ..specs.checks import settings_problems
from ..specs.spec import LabSpec
from ..specs.tomlpos import SpecError
from ..workloads.base import BenchContext, get_workload
from .runs import VariantRecord

from .request import Protocol, RunRequest, ServerRequest

if TYPE_CHECKING:
    from .events import RunEvents


def workload_specs(spec: LabSpec) -> list[WorkloadSpec]:
    """The spec's workloads, one per client count."""
    from ..workloads.steps import params_for
    out = []
    for e in spec.workloads:
        wl = get_workload(e.name)
        for c in e.clients:
            out.append(WorkloadSpec(wl, params_for(wl, {**e.overrides, "clients": c}),
                                    key=e.label))
    return out


def lab_request(spec: LabSpec, server: ServerRequest, *, store_path: str | None = None,
                out_dir: str | None = None, resume: dict[str, Any] | None = None,
                yes: bool = False, check_only: bool = False, kind: str = "lab",
                profile: str | None = None, side_by_side: bool = True, pin: bool = True
                ) -> RunRequest:
    """The runner's request for a lab spec: its variants on their servers, its workloads,
    its [run] table as the protocol; ``side_by_side``: a server per variant and rounds in
    slices where the variants can share the host (``share_host``)."""
    return RunRequest(
        kind, spec.name, server, tuple(workload_specs(spec)),
        Protocol(rounds=spec.rounds, max_rounds=spec.max_rounds, budget_s=spec.budget_s,
                 until_decided=spec.until_decided, order=spec.order, seed=spec.seed,
                 min_effect=spec.min_effect, confidence=spec.confidence,
                 target_ci_width=spec.target_ci_width, side_by_side=side_by_side,
                 pin=pin),
        spec=spec, profile=profile, store_path=store_path, out_dir=out_dir,
        record={"text": spec.text, "path": spec.path, "size": spec.size,
                "resolved": spec.to_dict(),
                "out_dir": os.path.abspath(out_dir) if out_dir else None},
        resume=resume, yes=yes, check_only=check_only)


def check_static(spec: LabSpec, runnable: list) -> None:
    """Setting names (and unit-free values) against each server's --describe-config,
    before any server starts."""
    from ..server.binary import describe_config
    cats: dict[str, Any] = {}
    for r in runnable:
        key = r.inst.bindir
        if key not in cats:
            try:
                cats[key] = describe_config(r.inst.path("postgres"), r.inst.major)
            except PgaccelError:
                cats[key] = None
        if cats[key] is not None:
            bad = settings_problems(r.variant.settings, cats[key])
            if bad:
                raise SpecError(f"{spec.variant_where(r.variant.name, 'settings', bad[0][0])}: "
                                f"variant {r.variant.name!r}: " + "; ".join(w for _, w in bad),
                                "Fix or remove the setting (`postgres --describe-config` "
                                "lists what this server knows).")


def lab_servers(req: RunRequest, facts, stack: contextlib.ExitStack, events: RunEvents,
                only: list[str] | None = None) -> tuple[list[LabVariant], str, list[str]]:
    """Resolve servers, start one throwaway cluster per bin directory, compute and check
    every variant's settings.  Returns (variants, the base first; base; notes)."""
    spec, s = req.spec, req.server
    assert spec is not None
    # the installed servers: a variant's cached build is realize_builds' choice
    insts = find_installations(s.pg_bin, builds=False)
    try:
        default = choose_server(s.pg_bin)
    except PgaccelError:
        default = None
    wanted = [v for v in spec.variants if only is None or v.name in only]
    if any(v.build or v.flavor or v.version for v in wanted):
        from .builds import realize_builds
        may_build = not req.check_only
        wanted = realize_builds(wanted, insts, yes=req.yes and may_build,
                                ask=events.asker if may_build else None,
                                say=lambda text: events.say(text), check=req.check_only)
    resolved = resolve_servers(wanted, insts, default,
                               probe=lambda d: probe_dir(d, "spec bin"))
    notes = [v.substituted for v in wanted if v.substituted]
    notes += [r.skipped for r in resolved if r.skipped]
    runnable = [r for r in resolved if not r.skipped]
    base, note = choose_base(spec.base, [r.variant.name for r in runnable])
    if note:
        notes.append(note)
    if len(runnable) < 2:
        raise UsageError(f"{spec.path}: only {len(runnable)} variant(s) can run on this machine "
                         "(a comparison needs two). " + " ".join(notes),
                         "Install the missing servers or add variants this machine can run.")
    check_static(spec, runnable)
    if any(r.variant.os for r in runnable) and os.geteuid() != 0:
        raise UsageError("This spec sets OS settings (nr_hugepages, thp), which need root.",
                         "Run pgaccel lab as root, or drop the os tables.")
    clients = max(ws.params.clients for ws in req.workloads)
    ctxs: dict[tuple, BenchContext] = {}
    lvs = []
    from .plan import computed_settings
    for r in runnable:
        key = server_key(r.inst, r.variant)
        if key not in ctxs:
            ctxs[key] = open_server(stack, r.inst, r.variant, s)
        ctx = ctxs[key]
        settings = dict(r.variant.settings)
        if r.variant.settings_from:
            computed, dropped = computed_settings(r.variant.settings_from, ctx.target, facts,
                                                  req.profile, req.workloads)
            settings = {**computed, **settings}
            notes += [f"variant {r.variant.name!r} ({r.variant.settings_from}): {d}"
                      for d in dropped]
        with ctx.target.database() as db:
            catalog, current = db.catalog()
        bad = settings_problems(settings, catalog)
        few = connections_problem(settings.get("max_connections")
                                  or current.get("max_connections"), clients)
        if not bad and few:
            bad = [("max_connections", few)]
        if bad:
            raise SpecError(f"{spec.variant_where(r.variant.name, 'settings', bad[0][0])}: "
                            f"variant {r.variant.name!r}: " + "; ".join(w for _, w in bad),
                            "Fix or remove the setting; the running server's pg_settings "
                            "lists what it accepts.")
        lvs.append(LabVariant(r.variant, r.inst, ctx, settings))
    order = [lv for lv in lvs if lv.name == base] + [lv for lv in lvs if lv.name != base]
    return order, base, notes


def server_key(inst, variant) -> tuple:
    """What makes a variant's throwaway server: its installation and initdb's choices."""
    return (inst.bindir, bool(variant.data_checksums))


def open_server(stack: contextlib.ExitStack, inst, variant, s: ServerRequest) -> BenchContext:
    """A throwaway cluster of ``inst`` for ``variant`` (its initdb choices), removed when
    ``stack`` closes."""
    target = stack.enter_context(open_target(pg_bin=inst.bindir, workdir=s.workdir,
                                             run_as=s.run_as, keep=s.keep,
                                             checksums=bool(variant.data_checksums)))
    target.apply({})
    return BenchContext(target, find_client("pgbench", inst), workdir=s.workdir)


def share_host(req: RunRequest, lvs: list[LabVariant], facts, stack: contextlib.ExitStack
               ) -> tuple[dict[str, Any], dict[str, str]]:
    """A server of its own for every variant, so rounds run side by side (``lab/paired.py``),
    or why not: asked for one at a time, no workload that runs in slices, variants that set
    the host differently (``lab/sharing.py``), not enough memory or disk, or a server that
    could not be created.  Returns (the design, each variant's rotation group)."""
    from ..lab.sharing import host_conflict, rotation_groups
    from .sidebyside import room_problem
    s, ctx = req.server, lvs[0].ctx
    why = None
    slices = any(not ws.is_steps and ws.workload.pgbench_kw(ctx, ws.params) is not None
                 for ws in req.workloads)
    steps = sorted({ws.workload.name for ws in req.workloads
                    if ws.is_steps and getattr(ws.workload, "interleaves", False)})
    if req.protocol.side_by_side is False:
        why = "asked for with --one-at-a-time"
    elif not (slices or steps):
        turns = [t for t in (getattr(ws.workload, "turns", lambda: None)()
                             for ws in req.workloads) if t]
        why = turns[0] if turns else (
            "no workload of this spec can take turns (a pgbench workload in slices, or "
            "a step workload step by step)")
    else:
        why = (host_conflict({lv.name: lv.os_target for lv in lvs})
               or room_problem([lv.settings for lv in lvs], list(req.workloads), facts,
                               s.workdir or ctx.target.cluster.base))
    if why:
        return {"design": "one at a time", "why": why}, {}
    new: dict[str, BenchContext] = {}
    used: set[int] = set()
    with contextlib.ExitStack() as opened:
        try:
            for lv in lvs:
                if id(lv.ctx) in used:
                    new[lv.name] = open_server(opened, lv.inst, lv.spec, s)
                used.add(id(lv.ctx))
        except PgaccelError as e:
            return {"design": "one at a time",
                    "why": f"a server per variant could not be created ({e.message})"}, {}
        stack.enter_context(opened.pop_all())
    for lv in lvs:
        lv.ctx = new.get(lv.name, lv.ctx)
    groups = rotation_groups(
        {lv.name: (*server_key(lv.inst, lv.spec), tuple(sorted(lv.server_env.items())))
         for lv in lvs},
        {lv.name: bool(lv.os_target.get("nr_hugepages")) for lv in lvs})
    return {"design": "side by side", "servers": len(lvs), "pin": req.protocol.pin,
            "slices": slices, "steps": steps, "turns": turns_of(len(lvs))}, groups


def open_lab(req: RunRequest, facts, stack: contextlib.ExitStack, events: RunEvents
             ) -> dict[str, Any] | None:
    """The lab's servers verified and ready for the runner's experiment (its keyword
    arguments), or None after ``check_only``."""
    spec, prior = req.spec, req.resume
    assert spec is not None
    lvs, base, notes = lab_servers(req, facts, stack, events,
                                   only=(prior["spec"] or {}).get("active") if prior else None)
    for n in notes:
        events.say(n, "yellow")
    manager = VariantManager({lv.name: lv for lv in lvs})
    stack.callback(manager.restore)
    manager.resolve_os()
    design, groups = share_host(req, lvs, facts, stack)
    for lv in lvs:
        manager.verify(lv.name)
        if lv.verified.get("durability_off"):      # read back; only with the flag
            said = (f"{lv.name} runs with durability off ("
                    + ", ".join(lv.verified["durability_off"]) + ", asked with "
                    "--allow-unsafe-durability): a crash of its throwaway cluster could lose "
                    "its last commits, and its numbers are not those of a durable server.")
            events.say(said, "bold red")
            notes.append(said)
    events.variants(lvs, base)
    refused = {lv.name: "; ".join(lv.verified.get("problems", [])) for lv in lvs
               if not lv.verified.get("ok")}
    if req.check_only:
        events.checked(lvs, refused, notes)
        if refused:
            raise ServerError(f"{spec.path}: {len(refused)} of {len(lvs)} variants are not "
                              "what they claim: " + "; ".join(f"{k}: {v}" for k, v in
                                                              refused.items()) + ".",
                              "Fix the spec or the machine (see the Variants table).")
        return None
    if base in refused or len(lvs) - len(refused) < 2:
        raise PgaccelError(
            "Not enough variants are what they claim to run the comparison: "
            + "; ".join(f"{k}: {v}" for k, v in refused.items()),
            "Fix the spec or the machine (see the Variants table) and run again.")
    runs = [lv for lv in lvs if lv.name not in refused]
    done: list = []
    if prior:
        from .store import Store
        with Store(req.store_path) as store:
            done = trials_from_store(store.trials_for(prior["id"], with_series=True))
        events.say(f"Resuming {prior['id']}: {len(done)} trials already stored.")
    lasts, ended = Looks.restore((prior or {}).get("summary"))
    return {
        "ctx": runs[0].ctx,
        "variants": [Variant(lv.name, dict(lv.settings), lv.spec.description) for lv in runs],
        "contexts": {lv.name: lv.ctx for lv in runs},
        "records": [VariantRecord(lv.name, lv.settings, lv.verified.get("server_version"),
                                  lv.inst.bindir, lv.verified) for lv in lvs],
        "info": {"spec": spec.to_dict(), "notes": notes, "measurement": design,
                 "verified": {lv.name: lv.verified for lv in lvs}},
        "design": design, "plan": None, "notes": notes,
        "record": {"active": [lv.name for lv in runs]},
        "experiment_kw": {
            "hooks": manager, "trials": done, "own_servers": True,
            "rotation": {k: v for k, v in groups.items() if k not in refused},
            "spent_s": sum(float(t.metrics.get("trial_wall_s") or 0) for t in done),
            "failed_variants": dict(refused),
            # a resumed run keeps the last looks its workloads had fixed and those the
            # budget ended early
            "last_looks": lasts, "ended_looks": ended},
    }
