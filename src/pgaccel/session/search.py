"""``pgaccel tune --search``: settings found by measurement, every step proven (docs/search.md).

1. Two throwaway servers of the installation side by side (``sidebyside.py``), the workload
   prepared on both; the incumbent starts as pgaccel's rules (``plan.tuned_plan``).
2. Optuna's TPE sampler proposes a candidate over the space (``tune/space.py``: the real
   catalog's knobs, ranges sized for the machine, the user's ``--space`` file, repaired into
   the memory budget).  The candidate is raced against the incumbent on paired side-by-side
   rounds (``lab/paired.paired_round``; the servers swap configs every round): the screen,
   then, if promoted, a confirmation on fresh rounds (``decide/race.py``, whose error control
   keeps the whole search's chance of a false "better" under 5%).  Optuna is told each
   candidate's log throughput relative to the rules.  Every candidate is journaled
   (``search.json``) and Optuna's own storage is SQLite in the search's directory, so an
   interrupted search resumes (``--resume ID``) from the candidates already measured.
3. The confirmation (``search_confirm.py``): fresh servers, ``run``'s protocol, the found
   settings against the server defaults, PGTune and pgaccel's rules; the effect the user is
   told is this run's.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from ..decide import race
from ..decide.model import TrialSpec, Variant, WorkloadSpec
from ..errors import PgaccelError, ServerError, UsageError
from ..lab.paired import paired_round
from ..lab.trial import snapshot_template
from ..report.search import importance_note
from ..pg.settings import effective
from ..probe.facts import HostFacts
from ..server.discovery import find_client
from ..server.target import open_target
from ..tune.inputs import TuneInputs
from ..tune.rules import memory_budget
from .search_space import build_space, distributions, pool_pages, reserve_pool, space_entry
from ..util import atomic_write_json
from ..workloads.base import BenchContext, RunParams, get_workload
from .request import ServerRequest

SCHEMA = 1


@dataclass(frozen=True)
class SearchRequest:
    server: ServerRequest
    workloads: tuple[str, ...] = ("tpcb-like",)   # each round runs every one of them
    params: RunParams = field(default_factory=lambda: RunParams(clients=4, duration=5.0,
                                                                warmup=2.0, scale=20))
    budget_s: float = 3600.0
    confirm_share: float = 0.25        # of the budget, for the final confirmation
    knobs: tuple[str, ...] = ()        # --knobs: only these
    space: dict[str, Any] = field(default_factory=dict)   # --space FILE, parsed
    risk_durability: bool = False
    huge_pages: bool = False           # --huge-pages: a pool for both servers, on vs off
    resume: str | None = None
    seed: int = 0
    rules: race.RaceRules = race.RaceRules()
    store_path: str | None = None


class SearchEvents:
    """What the command shows while a search runs (every method may be left as is)."""

    def say(self, text: str, style: str = "") -> None: ...

    def opened(self, search_id: str, directory: str, resumed: bool) -> None:
        """The journal is open (before any server): its id is what --resume takes."""

    def candidate(self, number: int, changes: dict[str, str], left_s: float) -> None: ...

    def looked(self, number: int, stage: str, look: race.Look) -> None: ...


def searches_dir() -> str:
    env = os.environ.get("PGACCEL_SEARCH_DIR")
    if env:
        return env
    from platformdirs import user_data_dir
    return os.path.join(user_data_dir("pgaccel"), "searches")


def load_search(ref: str) -> dict[str, Any]:
    """A search's journal by id (or its directory)."""
    path = ref if os.path.isdir(ref) else os.path.join(searches_dir(), ref)
    try:
        with open(os.path.join(path, "search.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        raise UsageError(f"No search {ref!r} in {searches_dir()}.",
                         "`ls` that directory for the searches made here, or run "
                         "`pgaccel tune --search`.") from None
    except ValueError as e:
        raise UsageError(f"The journal of search {ref!r} cannot be read ({e}).",
                         "Start a new search.") from None


class Search:
    """One search: its servers, journal and study (see the module docstring)."""

    def __init__(self, req: SearchRequest, facts: HostFacts, events: SearchEvents):
        self.req, self.facts, self.events = req, facts, events
        self.journal: dict[str, Any] = {}
        self.dir = ""

    # -- the journal ----------------------------------------------------------------------
    def _open_journal(self) -> None:
        if self.req.resume:
            self.journal = load_search(self.req.resume)
            if self.journal.get("status") == "finished":
                raise UsageError(f"Search {self.journal['id']} has finished.",
                                 f"`pgaccel tune --from-search {self.journal['id']}` uses "
                                 "its result; start a new search to look again.")
        else:
            sid = time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
            self.journal = {"schema": SCHEMA, "id": sid, "status": "running",
                            "workload": ",".join(self.req.workloads),
                            "workloads": list(self.req.workloads),
                            "huge_pages": self.req.huge_pages,
                            "params": self.req.params.to_dict(),
                            "budget_s": self.req.budget_s, "candidates": [],
                            "incumbent": {"number": None, "settings": None, "log_effect": 0.0},
                            "path": [], "spent_s": 0.0, "confirmations": 0}
        self.dir = os.path.join(searches_dir(), self.journal["id"])
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        self._save()
        self.events.opened(self.journal["id"], self.dir, bool(self.req.resume))

    def _save(self) -> None:
        atomic_write_json(os.path.join(self.dir, "search.json"), self.journal)

    # -- measuring ------------------------------------------------------------------------
    def _round(self, ctxs: list[BenchContext], wss: list[WorkloadSpec],
               inc: dict[str, object], cand: dict[str, object], rnd: int) -> float:
        """One side-by-side round of every workload; the mean of their log(candidate /
        incumbent), so the search's objective is the geometric mean of the workloads'
        ratios.  The servers swap configs every round."""
        a, b = (ctxs[0], ctxs[1]) if rnd % 2 == 0 else (ctxs[1], ctxs[0])
        names = [("incumbent", a, inc), ("candidate", b, cand)]
        if rnd % 4 in (1, 2):                 # ABBA over rounds: who takes the first slice
            names.reverse()
        out = []
        for ws in wss:
            need = ws.workload.required_settings(ws.params)
            items = [(ctx, TrialSpec(n, effective(variant=s, required=need).settings,
                                     ws.workload, ws.params, rnd)) for n, ctx, s in names]
            trials = {t.variant: t for t in paired_round(items)}
            out.append(math.log(trials["candidate"].throughput
                                / trials["incumbent"].throughput))
        return sum(out) / len(out)

    def _race(self, ctxs, wss, inc, cand, number: int, deadline: float
              ) -> tuple[str, list[dict], float]:
        """Screen, then maybe confirm; (final stage, looks, mean log ratio of the stage that
        decided).  A race the search's time runs out in ends there: dropped, or not better
        (never better on rounds it did not have)."""
        rules = self.req.rules
        looks: list[dict] = []
        rounds = [0]                          # rounds so far: the servers swap each round

        def stage(name: str, decide, last: int, out_of_time: str
                  ) -> tuple[race.Look | None, list[float]]:
            """Rounds until ``decide`` is not CONTINUE or ``last`` rounds; None when the
            search's time ran out first (after at least one round)."""
            d: list[float] = []
            look = race.Look(race.CONTINUE, math.nan, math.nan, math.nan, math.nan, 0)
            while look.decision == race.CONTINUE and len(d) < last:
                if d and time.monotonic() >= deadline:
                    looks.append({"stage": name, "decision": out_of_time, "rounds": len(d),
                                  "log_ratios": list(d)})
                    return None, d
                d.append(self._round(ctxs, wss, inc, cand, rounds[0]))
                rounds[0] += 1
                look = decide(d)
                self.events.looked(number, name, look)
            looks.append({"stage": name, **look.__dict__, "log_ratios": list(d)})
            return look, d

        look, d = stage("screen", lambda d: race.screen(d, rules), rules.screen_last,
                        "out of time")
        est = sum(d) / len(d)
        if (look is None or look.decision != race.PROMOTE
                or self.journal["confirmations"] >= rules.max_confirmations):
            return race.DROP, looks, est
        self.journal["confirmations"] += 1
        j = self.journal["confirmations"]
        look, d = stage("confirm", lambda d: race.confirm(d, j, rules), rules.confirm_last,
                        "out of time")
        looks[-1]["j"] = j
        return (race.NOT_BETTER if look is None else look.decision), looks, sum(d) / len(d)

    def run(self) -> dict[str, Any]:
        import optuna
        import scipy.stats  # noqa: F401 - imported lazily (decide/): missing, said first
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        from .plan import tuned_plan
        self._open_journal()
        if self.req.resume:              # what the search measured, not today's flags
            from dataclasses import replace
            j = self.journal
            self.req = replace(self.req, workloads=tuple(
                j.get("workloads") or j["workload"].split(",")),
                params=RunParams(**j["params"]), huge_pages=bool(j.get("huge_pages")))
        req = self.req
        wss = [WorkloadSpec(get_workload(w), req.params) for w in req.workloads]
        t0 = time.monotonic()
        spent_before = float(self.journal["spent_s"])
        search_s = req.budget_s * (1 - req.confirm_share) - spent_before
        with ExitStack() as stack:
            pool = stack.enter_context(ExitStack())   # closes last: after every server
            target = stack.enter_context(open_target(
                pg_bin=req.server.pg_bin, run_as=req.server.run_as,
                workdir=req.server.workdir, keep=req.server.keep))
            if target.kind != "throwaway":
                raise UsageError("tune --search measures on throwaway servers.",
                                 "Leave out --dsn and --pgdata.")
            ctx = BenchContext(target, find_client("pgbench", target.inst),
                               workdir=req.server.workdir)
            target.apply({})                     # started with its defaults
            plan = tuned_plan(target, self.facts, None, workloads=wss)
            rules_settings = dict(plan.postgres_settings())
            with target.database() as db:
                catalog, _ = db.catalog()
                major = db.major
            space, notes = build_space(self.facts, catalog, major, req)
            for n in notes:
                self.events.say(f"left out of the space: {n}", "dim")
            if req.huge_pages:
                from ..osknobs.state import OsState
                pages = pool_pages(space, rules_settings, major, OsState().default_kb())
                reserve_pool(pool, pages, lambda t: self.events.say(t, "dim"))
            inputs = TuneInputs.from_dict(plan.inputs)
            inc = dict(self.journal["incumbent"]["settings"] or rules_settings)
            self.journal.update(rules=rules_settings, knobs=space.names(),
                                space=[space_entry(k) for k in space.knobs],
                                server_version=target.inst.version)
            from .sidebyside import side_by_side_contexts
            variants = [Variant("incumbent", inc), Variant("candidate", inc)]
            ctxs, why = side_by_side_contexts(stack, ctx, variants, wss, self.facts,
                                              pg_bin=req.server.pg_bin,
                                              run_as=req.server.run_as,
                                              workdir=req.server.workdir,
                                              keep=req.server.keep)
            if not ctxs:
                raise UsageError(f"tune --search measures two servers side by side, and "
                                 f"here it cannot: {why}.", "Free memory or disk, or lower "
                                 "--scale.")
            pair = [ctxs["incumbent"], ctxs["candidate"]]
            self.events.say(f"preparing {', '.join(w.label for w in wss)} (scale "
                            f"{req.params.scale}) on two servers", "dim")
            for c in pair:
                c.target.apply(inc)
                c.target.ensure_bench_db()
                for w in wss:
                    w.workload.prepare(c, req.params)
                if any(w.workload.writes for w in wss):
                    snapshot_template(c.target)
            study = optuna.create_study(
                study_name=self.journal["id"], direction="maximize",
                storage=f"sqlite:///{os.path.join(self.dir, 'optuna.db')}",
                sampler=optuna.samplers.TPESampler(seed=req.seed, multivariate=True),
                load_if_exists=True)
            for t in study.get_trials(deepcopy=False,
                                      states=(optuna.trial.TrialState.RUNNING,)):
                study.tell(t.number, state=optuna.trial.TrialState.FAIL)   # interrupted
            dists = distributions(space)
            self.journal["status"] = "running"
            while time.monotonic() - t0 < search_s:
                trial = study.ask(dists)
                proposed = {**inc, **space.settings(trial.params)}

                def fits(s: dict[str, str]) -> bool:
                    used, limit, _ = memory_budget(s, inputs)
                    return used <= limit
                try:
                    cand, lowered = space.repair({k: str(v) for k, v in proposed.items()},
                                                 fits)
                except UsageError as e:
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    self.events.say(f"candidate {trial.number}: {e.message}", "yellow")
                    continue
                changes = {k: v for k, v in cand.items() if str(inc.get(k)) != str(v)}
                entry: dict[str, Any] = {"number": trial.number, "params": trial.params,
                                         "settings": cand, "changes": changes,
                                         "repaired": lowered}
                if not changes:
                    study.tell(trial, self.journal["incumbent"]["log_effect"])
                    entry.update(stage="same as the incumbent")
                    self.journal["candidates"].append(entry)
                    self._save()
                    continue
                left = search_s - (time.monotonic() - t0)
                self.events.candidate(trial.number, changes, left)
                try:
                    stage, looks, est = self._race(pair, wss, inc, cand, trial.number,
                                                   t0 + search_s)
                except ServerError as e:          # the server refused the candidate
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    entry.update(stage="refused", why=e.message)
                    self.journal["candidates"].append(entry)
                    self.events.say(f"candidate {trial.number} refused: {e.message}",
                                    "yellow")
                    for c in pair:               # back to a state the next round starts from
                        c.target.apply(inc)
                    continue
                value = self.journal["incumbent"]["log_effect"] + est
                study.tell(trial, value)
                entry.update(stage=stage, looks=looks, log_effect=value)
                self.journal["candidates"].append(entry)
                if stage == race.BETTER:
                    inc = cand
                    self.journal["incumbent"] = {"number": trial.number, "settings": cand,
                                                 "log_effect": value}
                    self.journal["path"].append({"number": trial.number,
                                                 "log_effect": value})
                    self.events.say(f"candidate {trial.number} is the new incumbent "
                                    f"({math.exp(value) - 1:+.1%} over the rules, the "
                                    "search's estimate)", "bold green")
                self.journal["spent_s"] = spent_before + time.monotonic() - t0
                self._save()
            try:
                self.journal["importance"] = {} if importance_note(self.journal) else {
                    k: float(v) for k, v in optuna.importance.get_param_importances(
                        study).items()}
            except (ValueError, RuntimeError, ImportError):
                self.journal["importance"] = {}
        self.journal["spent_s"] = spent_before + time.monotonic() - t0
        self.journal["status"] = "searched"
        self._save()
        return self.journal

    def finish(self, confirmation: dict[str, Any]) -> None:
        self.journal["confirmation"] = confirmation
        self.journal["status"] = "finished"
        self._save()


def found_settings(journal: dict[str, Any]) -> dict[str, str] | None:
    """What the search found over pgaccel's rules (None: the rules stayed best)."""
    inc = journal.get("incumbent") or {}
    if inc.get("number") is None:
        return None
    rules = journal.get("rules") or {}
    return {k: v for k, v in (inc.get("settings") or {}).items()
            if str(rules.get(k)) != str(v)}


def run_search(req: SearchRequest, facts: HostFacts, events: SearchEvents) -> Search:
    """The search phase (see :class:`Search`); raises what the servers raise, after
    journaling what was measured."""
    s = Search(req, facts, events)
    try:
        s.run()
    except PgaccelError:
        if s.dir:
            s.journal["status"] = "failed"
            s._save()
        raise
    except KeyboardInterrupt:
        if s.dir:
            s.journal["status"] = "interrupted"
            s._save()
        raise
    return s


__all__ = ["SearchRequest", "SearchEvents", "Search", "run_search", "found_settings",
           "load_search", "searches_dir"]
