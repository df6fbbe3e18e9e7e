"""The end of ``pgaccel tune --search``: a confirmation run on fresh servers (``run``'s
protocol, side by side, rounds until decided) of the server defaults, PGTune, pgaccel's rules
and, when the search found something, the found settings; its verdicts are the effect the
user is told, never the search's own estimate (docs/search.md)."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import replace
from typing import Any, Callable

from ..decide.model import WorkloadSpec
from ..workloads.base import get_workload
from .budget import budget_check
from .search import Search, SearchRequest, found_settings
from .search_space import reserve_pool


def found_uses_pool(journal: dict[str, Any]) -> bool:
    """Did the search find huge_pages=on (searched only with a reserved pool)?"""
    return str((found_settings(journal) or {}).get("huge_pages", "")).lower() == "on"


def confirmation_request(journal: dict[str, Any], req: SearchRequest, left_s: float):
    """The final run: server defaults, PGTune, pgaccel's rules and the found settings side
    by side on fresh servers, rounds until decided within ``left_s`` (at least 4 minutes,
    and at least what 3 rounds of every workload need)."""
    from .request import ConfigRequest, Protocol, RunRequest
    # a found huge_pages=on runs on a pool reserved for it alone: the others as they run on
    # a host without one (off; their try would take its pages)
    others = {"huge_pages": "off"} if found_uses_pool(journal) else {}
    configs: tuple[ConfigRequest, ...] = (
        ConfigRequest("baseline", dict(others), "server defaults"),
        ConfigRequest("pgtune", dict(others), "PGTune's formulas", settings_from="pgtune"),
        ConfigRequest("tuned", dict(others), "pgaccel's rules", settings_from="pgaccel"))
    if found_settings(journal):          # else the rules stayed best: nothing else to measure
        found = dict(journal["incumbent"]["settings"])
        configs += (ConfigRequest("found", found, f"found by search {journal['id']}"),)
    run = RunRequest("run", f"search {journal['id']}: confirmation", req.server,
                     tuple(WorkloadSpec(get_workload(w), req.params)
                           for w in req.workloads),
                     Protocol(rounds=3, max_rounds=30, budget_s=max(240.0, left_s),
                              until_decided=True, side_by_side=True),
                     configs=configs, store_path=req.store_path,
                     record={"search": journal["id"]})
    # at least what every workload's 3 rounds need (session/budget.py): a search that spent
    # its share gets a longer confirmation rather than verdicts cut short
    need = budget_check(run).suggest_s
    if need > (run.protocol.budget_s or 0):
        run = replace(run, protocol=replace(run.protocol, budget_s=need))
    return run


def confirm_search(search: Search, runner_events: Any,
                   render: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Run the confirmation and keep its verdicts in the search's journal."""
    from ..decide.judge import head_to_head
    from .runner import Runner
    j = search.journal
    left = search.req.budget_s - j.get("spent_s", 0.0)
    req = confirmation_request(j, search.req, left)
    with ExitStack() as pool:
        if found_uses_pool(j):
            from ..osknobs.state import OsState
            from ..tune.hugepages import estimate_pages
            kb = OsState().default_kb()
            reserve_pool(pool, estimate_pages(dict(j["incumbent"]["settings"]),
                                              int(str(j.get("server_version", "0"))
                                                  .split(".")[0]), kb * 1024),
                         lambda t: None)
        outcome = Runner(req, search.facts, runner_events).run()
    assert outcome is not None
    exp, s = outcome.experiment, outcome.summary
    rows = {other: [r.to_dict() for r in head_to_head(exp.trials, exp.workloads, other,
                                                      "found", exp.min_effect, s.confidence)]
            for other in ("tuned", "pgtune")} if found_settings(j) else {}
    conf = {"run_id": outcome.run_id, "run_dir": outcome.run_dir,
            "found_vs": rows, "summary": s.to_dict()}
    search.finish(conf)
    return {"outcome": outcome, **conf}


__all__ = ["confirmation_request", "confirm_search", "found_uses_pool"]
