"""Plans for a real server: what `tune`, `run` and `lab` ask before they tune or benchmark.

Each function here gathers a plan's inputs from a real installation or server (pg_config,
the parameter catalog, current values, ``postgres -C``, live counters) and hands them to the
pure planner (``tune.engine.plan_for_target``).  Where the server is:

* ``--dsn``: that server's pg_settings (its host facts are this machine's unless it is
  local: pass --memory/--cpus for a remote server's machine);
* ``--pgdata``: ``postgres -C`` on that data directory, the catalog from
  ``postgres --describe-config`` (no enum values);
* otherwise a throwaway cluster of the chosen installation is started just to read its
  pg_settings (the build's defaults and full catalog), stopped for
  ``postgres -C shared_memory_size_in_huge_pages``, and removed.

The server is opened with ``server.target.open_target(bench=False)``: no ``pgaccel_bench``
database is created or dropped, and a ``--pgdata`` cluster is neither started, stopped nor
restarted.
"""

from __future__ import annotations

import tempfile
from typing import Any, Callable, Iterable

from ..errors import NotFound, UsageError
from ..pg import versions
from ..pg.catalog import GucCatalog
from ..probe.facts import HostFacts
from ..probe.host import list_nics, probe_host
from ..server.binary import describe_config, pg_config, server_huge_pages
from ..server.discovery import choose_server
from ..session.store import Store
from ..server.target import LocalTarget, Target, open_target
from ..tune import measured
from ..tune.engine import default_settings, plan_for_target, show_form
from ..tune.inputs import TuneInputs, inputs_from_facts
from ..tune.pgtune import pgtune_settings, runnable
from ..decide.results import judged
from ..report.format import verdict_lines
from ..tune.plan import Change, Plan, TuneResult
from . import observe


def build_plan(*, pg_bin: str | None = None, dsn: str | None = None, pgdata: str | None = None,
               run_as: str | None = None, workdir: str | None = None, port: int | None = None,
               keep: bool = False, overrides: dict[str, Any] | None = None,
               layers: tuple[str, ...] = ("postgres",), os_root: str = "/") -> TuneResult:
    """Probe, read the server's catalog and settings, and plan (see module docstring).

    os_root: where /proc and /sys are read for the host facts ("/": this machine)."""
    ov = {k: v for k, v in (overrides or {}).items() if v is not None}
    notes: list[str] = []
    if dsn:
        with open_target(dsn=dsn, pgdata=pgdata, bench=False) as server:
            with server.database() as db:
                catalog, current = db.catalog()
            local, where = server.is_local, server.describe()
        if not local and not ("memory" in ov and "cpus" in ov):
            notes.append("The server is remote: host facts (memory, CPUs, disks, sysctls) are "
                         "this machine's. Pass --memory and --cpus for the server's machine.")
        pgc = {}
        if local:
            try:
                inst = choose_server(pg_bin, catalog.major)
                pgc = pg_config(inst)
            except NotFound:
                pass
        if ov.get("pg_version", catalog.major) != catalog.major:
            notes.append(f"Planning for PostgreSQL {ov['pg_version']}, the server is "
                         f"{catalog.major}: not validated against a real server.")
            catalog, current = None, default_settings(int(ov["pg_version"]))
        plan = plan_for_target(probe_host(os_root), ov, current, catalog, pg_config=pgc,
                               layers=layers)
        return TuneResult(plan, TuneInputs.from_dict(plan.inputs), catalog, where, notes)

    inst = choose_server(pg_bin)
    facts = probe_host(os_root, data_dir=pgdata or workdir or tempfile.gettempdir())
    other_version = ov.get("pg_version", inst.major) != inst.major
    if other_version:
        notes.append(f"--pg-version {ov['pg_version']} differs from the installed "
                     f"PostgreSQL {inst.major} ({inst.bindir}): binary validation skipped.")
        catalog = None   # (an empty catalog below only skips running --describe-config)
        plan = plan_for_installation(inst, facts, ov, catalog=GucCatalog(), layers=layers)
        target = f"PostgreSQL {ov['pg_version']} (planned, not installed)"
    else:
        with open_target(inst=inst, pgdata=pgdata, run_as=run_as, workdir=workdir, port=port,
                         keep=keep, bench=False) as server:
            if pgdata:       # postgres -C: the cluster is not started or stopped
                names = [n for n in versions.GUCS if versions.known(n, inst.major)]
                current = settings_from_datadir(server, names)
                catalog = describe_config(inst.path("postgres"), inst.major)
            else:            # the throwaway's pg_settings, then stopped for postgres -C
                server.start()
                with server.database() as db:
                    catalog, current = db.catalog()
                server.stop()
            plan = plan_for_installation(inst, facts, ov, catalog=catalog, current=current,
                                         pgdata=server.pgdata, user=server.user,
                                         layers=layers)
        target = (f"the cluster in {pgdata} (PostgreSQL {inst.version})" if pgdata else
                  f"PostgreSQL {inst.version} ({inst.bindir}); 'current' = its defaults")
    return TuneResult(plan, TuneInputs.from_dict(plan.inputs), catalog, target, notes)


def plan_for_options(*, pg_bin: str | None = None, dsn: str | None = None,
                     pgdata: str | None = None, run_as: str | None = None,
                     workdir: str | None = None, port: int | None = None, keep: bool = False,
                     overrides: dict[str, Any] | None = None,
                     sets: dict[str, str] | None = None, layers: tuple[str, ...] = ("postgres",),
                     os_root: str = "/", sample: float | None = None,
                     from_run: str | None = None, measure_storage: bool = False,
                     capture: str | None = None,
                     say: Callable[[str], None] = lambda msg: None) -> TuneResult:
    """`pgaccel tune`'s plan: :func:`build_plan` for the workload the server runs (its
    measured profile: ``capture`` a bundle's, else the live server's pg_stat_statements),
    refined by the measured rules asked for (:func:`measure`), with the user's ``--set``
    values (``sets``) over it."""
    ov = dict(overrides or {})
    prof, note, sampled = None, None, None
    if capture:
        from ..workloads.captured import PREFIX, Captured
        from .workprofile import profile_from_bundle
        w = Captured(PREFIX + capture)
        prof, note = profile_from_bundle(w), f"profile from the capture {w.path}"
        ov.setdefault("data_bytes", w.data_bytes(None))
    elif dsn or pgdata:
        prof, note, sampled = server_profile(dsn=dsn, pgdata=pgdata, pg_bin=pg_bin,
                                             run_as=run_as, sample=sample, say=say)
    if prof is not None:
        ov["profile"] = prof
    res = build_plan(pg_bin=pg_bin, dsn=dsn, pgdata=pgdata, run_as=run_as, workdir=workdir,
                     port=port, keep=keep, overrides=ov, layers=layers, os_root=os_root)
    if note:
        res.notes.append(note)
    res.profile = prof
    measure(res, sample=sample, from_run=from_run, measure_storage=measure_storage,
            dsn=dsn, pgdata=pgdata, pg_bin=pg_bin, run_as=run_as,
            workdir=workdir or tempfile.gettempdir(), say=say, sampled=sampled)
    if sets:
        from ..apply.conf import with_overrides
        res.plan.changes = with_overrides(res.plan.changes, sets, res.catalog)
    return res


def server_profile(*, dsn, pgdata, pg_bin, run_as, sample,
                   say: Callable[[str], None] = lambda msg: None):
    """The live server's workload profile (``workprofile.profile_from_server``), a note on
    where it came from or why there is none, and, with ``sample``, the server's counters
    sampled over the same window for the measured rules ((stats, InForce) or None)."""
    from .workprofile import profile_from_server
    with open_target(pg_bin=pg_bin, dsn=dsn, pgdata=pgdata, run_as=run_as,
                     bench=False) as target:
        if not target.running():
            return None, (f"The cluster in {pgdata} is not running: no profile of what it "
                          "runs; planned from the workload class."), None
        sampled = None

        def during() -> None:
            nonlocal sampled
            say(f"Sampling pg_stat_statements and the server's counters for {sample:.0f} s "
                "...")
            st = observe.sample_server(target, sample)
            with target.database() as db:
                sb = db.show("shared_buffers")
            sampled = (st, measured.InForce(sb, "the sampled server's current value (SHOW "
                                                f"shared_buffers on {target.describe()})"))
        prof, note = profile_from_server(target, sample, say, during if sample else None)
        return prof, note, sampled


def measure(res: TuneResult, *, sample, from_run, measure_storage, dsn, pgdata, pg_bin,
            run_as, workdir, say: Callable[[str], None] = lambda msg: None,
            sampled=None) -> None:
    """Refine the plan with measured rules (each records the numbers it used); ``say``
    announces the steps that take a while; ``sampled``: the counters
    :func:`server_profile` already sampled over its window."""
    if sample and sampled is not None:
        measured.apply_measured(res.plan, sampled[0], res.inputs, shared_buffers=sampled[1])
    elif sample:
        if not (dsn or pgdata):
            raise UsageError("--sample needs a live server with real traffic.",
                             "Use it with --dsn or --pgdata (a throwaway cluster is idle).")
        with open_target(pg_bin=pg_bin, dsn=dsn, pgdata=pgdata, run_as=run_as,
                         bench=False) as target:
            if not target.running():
                raise UsageError(f"--sample: the cluster in {pgdata} is not running.",
                                 "Start it, let it serve its usual load, and sample again.")
            say(f"Sampling server counters for {sample:.0f} s ...")
            st = observe.sample_server(target, sample)
            with target.database() as db:
                sb = db.show("shared_buffers")
            in_force = measured.InForce(sb, "the sampled server's current value "
                                            f"(SHOW shared_buffers on {target.describe()})")
        measured.apply_measured(res.plan, st, res.inputs, shared_buffers=in_force)
    if from_run:
        with Store() as store:
            st = observe.from_stored_run(store, from_run)
            run = store.get_run(from_run)
        measured.apply_measured(res.plan, st, res.inputs,
                                shared_buffers=run_shared_buffers(run, stored_run_doc(run)))
    if measure_storage:
        directory = pgdata or workdir
        say(f"Measuring random reads with fio in {directory} (about 10 s) ...")
        m = observe.fio_random_read(directory)
        measured.apply_changes(res.plan, measured.storage_rules(m))


def stored_run_doc(run: dict) -> dict | None:
    """run.json of a stored run (what the store does not keep, e.g. the server facts), from
    the directory it was written to (its --out, recorded in the store, or the default run
    directory); None when it is not there any more."""
    import json
    import os
    from .runs import run_dir_for
    out_dir = (run.get("spec") or {}).get("out_dir") if isinstance(run.get("spec"), dict) \
        else None
    try:
        with open(os.path.join(run_dir_for(out_dir, run["id"]), "run.json")) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("run_id") == run["id"] else None


def run_shared_buffers(run: dict, doc: dict | None, variant: str = "baseline"
                       ) -> measured.InForce:
    """The shared_buffers the ``variant`` trials of a stored run (``Store.get_run``) ran
    with: the variant's own setting, else the server's value that run.json (``doc``)
    recorded (a variant without it ran with the server's value: the baseline's {} are the
    server's defaults).  Pure; never the plan's value."""
    rid = run.get("id")
    v = next((x for x in run.get("variants") or [] if x.get("name") == variant), None)
    val = ((v or {}).get("settings") or {}).get("shared_buffers")
    if val is not None:
        return measured.InForce(str(val), f"the {variant!r} variant of run {rid} set it")
    server = (doc or {}).get("server") or {}
    if server.get("shared_buffers"):
        return measured.InForce(str(server["shared_buffers"]),
                                f"the server's value recorded in run {rid}, which the "
                                f"{variant!r} variant ran with")
    return measured.InForce(None, f"run {rid} records neither a {variant!r} setting nor "
                                  "the server's value")


def plan_for_installation(inst, facts: HostFacts | None = None,
                          inputs_overrides: dict[str, Any] | None = None, *,
                          db=None, catalog: GucCatalog | None = None,
                          current: dict[str, str] | None = None, pgdata: str | None = None,
                          user=None, layers: Iterable[str] = ("postgres",)) -> Plan:
    """The plan for this machine and installation ``inst`` (thin).

    db: a ``server.database.Database`` of a server of ``inst``: its pg_settings give the full
    catalog and the current values (or pass ``catalog``/``current`` read earlier); without
    either the catalog comes from ``postgres --describe-config``, current values unknown.
    pgdata (+ user, the OsUser owning it): a stopped, initdb'd data directory of ``inst``;
    with the linux layer on 15+ the huge page count comes from ``postgres -C`` there."""
    if facts is None:
        from ..probe.host import probe_host
        facts = probe_host(data_dir=pgdata)
    pgc = pg_config(inst)
    if db is not None:
        catalog, current = db.catalog()
    elif catalog is None:
        catalog = describe_config(inst.path("postgres"), inst.major)
    ov = dict(inputs_overrides or {})
    same_version = ov.get("pg_version") in (None, inst.major)
    hp: Callable[[dict[str, str]], int | None] | None = None
    if pgdata and inst.major >= 15 and same_version:
        postgres = inst.path("postgres")
        hp = lambda settings: server_huge_pages(postgres, pgdata, settings, user)  # noqa: E731
    if not same_version:
        catalog, current = None, default_settings(int(ov["pg_version"]))
    layers = tuple(layers)
    nics = None
    if "linux" in layers:
        nics = list_nics()
    plan = plan_for_target(facts, ov, current, catalog, pg_config=pgc, layers=layers,
                           huge_pages=hp, nics=nics)
    if not same_version:
        plan.warnings.append(f"Planning for PostgreSQL {ov['pg_version']} but the installed "
                             f"binary is {inst.major}: values were not validated against a "
                             "real binary; 'current' shows that version's defaults.")
    return plan


def settings_from_datadir(target: LocalTarget, names: Iterable[str]) -> dict[str, str]:
    """Current values of a local cluster's parameters, as SHOW prints them, via
    ``postgres -D DIR -C name`` (works whether or not the cluster runs)."""
    raw = target.raw_values(names)
    return {n: show_form(v, versions.GUCS[n].unit if n in versions.GUCS else None)
            for n, v in raw.items()}


def _workload_inputs(profile: str | None, workloads: Iterable) -> dict[str, Any]:
    """The inputs a run's workloads give its plans: the class (``profile``, the run's
    --profile, else the measured one, else oltp), a captured workload's measured profile
    and the data's size."""
    from .workprofile import profile_for_workloads
    prof, size = profile_for_workloads(workloads)
    out: dict[str, Any] = {"workload": profile, "data_bytes": size}
    if prof is not None:
        out["profile"] = prof
    return out


def tuned_plan(target: Target, facts, profile: str | None, connections: int | None = None,
               workloads: Iterable = ()) -> Plan:
    """pgaccel's plan for this machine and the target's server (PostgreSQL layer), validated
    against that server's own pg_settings; for the workload class ``profile``, else the one
    a captured workload's measured profile shows (``workloads``: WorkloadSpecs), else oltp."""
    overrides: dict[str, Any] = _workload_inputs(profile, workloads)
    if connections:
        overrides["connections"] = connections
    with target.database() as db:
        if target.inst is None:  # --dsn: plan from that server's catalog and version
            catalog, current = db.catalog()
            overrides["pg_version"] = db.major
            return plan_for_target(facts, overrides, current, catalog)
        return plan_for_installation(target.inst, facts, overrides, db=db)


def pgtune_variant(target: Target, plan: Plan) -> tuple[dict[str, object], list[str]]:
    """PGTune's settings for the same inputs as the plan, minus any the server refuses
    and any this target cannot set for a measurement (a --dsn server: only per-session
    settings); the reasons for what was left out."""
    with target.database() as db:
        catalog, _ = db.catalog()
    settings, dropped = runnable(pgtune_settings(TuneInputs.from_dict(plan.inputs)), catalog)
    skip = set(target.unsettable(settings))
    settings = {k: v for k, v in settings.items() if k not in skip}
    return dict(settings), list(dropped)


def computed_settings(kind: str, target, facts, profile: str | None = None,
                      workloads: Iterable = ()) -> tuple[dict[str, str], list[str]]:
    """A variant's ``settings_from``: PGTune's or pgaccel's settings for this machine, this
    server version and workload ``profile`` (None: measured from a captured workload among
    ``workloads``, else oltp; values the server would refuse are dropped or, for PGTune,
    replaced by its own fallback, with the reason)."""
    if kind == "pgaccel":
        plan = tuned_plan(target, facts, profile, workloads=workloads)
        return plan.postgres_settings(), list(plan.warnings)
    with target.database() as db:
        catalog, current = db.catalog()
        major = db.major
    inp = inputs_from_facts(facts, pg_version=major, current=current,
                            **_workload_inputs(profile, workloads))
    return runnable(pgtune_settings(inp), catalog)


# -- a plan a run proved ------------------------------------------------------------------

def apply_proven(res: TuneResult, run_ref: str) -> list[str]:
    """Make ``res.plan``'s PostgreSQL layer the settings a stored run judged (its ``tuned``
    config), refused when that run found them slower anywhere; the notes to show.  The
    plan's inputs carry the run's id (``proven_by``), so an apply's manifest records it."""
    with Store() as store:
        run = store.get_run(run_ref)
    rid = run["id"]
    tuned = next((v for v in run.get("variants") or [] if v.get("name") == "tuned"), None)
    if tuned is None or not tuned.get("settings"):
        raise UsageError(f"Run {rid} has no tuned config to apply.",
                         "Name a `pgaccel run` run (see `pgaccel history`).")
    verdicts = judged(run.get("summary"))
    if not verdicts["held"] and not verdicts["slower"] and not verdicts["undecided"]:
        raise UsageError(f"Run {rid} has no verdict on its tuned config (interrupted before "
                         "its first comparison?).", "Finish it (pgaccel run --resume) or "
                         "run it again.")
    if verdicts["slower"]:
        raise UsageError(
            f"Run {rid} measured its tuned config slower: {verdict_lines(verdicts['slower'])}. "
            "pgaccel never applies what it measured slower.",
            "Look at why (pgaccel report " + rid + "), or apply the rules unproven with "
            "`pgaccel tune --apply` and --yes.")
    settings = {k: str(v) for k, v in tuned["settings"].items()}
    fresh = {c.name: c for c in res.plan.changes if c.layer == "postgres"}
    changes = [c for c in res.plan.changes if c.layer != "postgres"]
    for name, value in settings.items():
        old = fresh.get(name)
        why = f"proven by run {rid}" + (f": {old.reason}" if old is not None else "")
        if old is not None and old.proposed != value:
            why += f" (today's rules would say {old.proposed})"
        changes.append(Change("postgres", name, value, why, f"pgaccel run {rid}",
                              current=old.current if old else None,
                              restart=bool(old.restart) if old else bool(
                                  res.catalog and res.catalog.restart(name)),
                              context=old.context if old else (
                                  res.catalog.context(name) if res.catalog else None),
                              rule="proven"))
    res.plan.changes = changes
    res.plan.inputs = {**res.plan.inputs, "proven_by": rid}
    notes = [f"The settings run {rid} proved: " + verdict_lines(verdicts["held"])]
    if verdicts["undecided"]:
        notes.append("Not decided in that run: " + verdict_lines(verdicts["undecided"]))
    return notes
