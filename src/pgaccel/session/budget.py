"""A request's time budget against its minimum rounds, before anything starts: the numbers
are ``decide/budget.py``'s; here they are read from a :class:`RunRequest` and said as the
one paragraph a command stops with (``run``, ``run --stack``, ``lab``, ``calibrate``)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable

from ..decide.budget import BudgetCheck, check_budget, loads_of
from ..decide.effect import MIN_PAIRS
from ..errors import UsageError
from ..report import format as fmt
from .request import Protocol, RunRequest


def budget_text(secs: float) -> str:
    """A budget as ``--budget`` takes it: 360 -> ``6m``, 4500 -> ``1h15m``."""
    m = int(math.ceil(secs / 60 - 1e-9))
    return f"{m}m" if m < 60 else f"{m // 60}h{m % 60:02d}m" if m % 60 else f"{m // 60}h"


def configs_of(req: RunRequest) -> int:
    return len(req.configs) if req.configs else len(req.spec.variants) if req.spec else 1


def side_by_side(req: RunRequest) -> bool:
    """Whether the request asks for a server per config (what it gets is decided once the
    servers are open; side by side costs the more: a whole burn-in round)."""
    s = req.server
    return (req.protocol.side_by_side is not False and not s.dsn and not s.pgdata
            and not req.client_hosts)


def budget_check(req: RunRequest, budget_s: float | None = None, *,
                 rounds: int | None = None) -> BudgetCheck:
    """``req``'s minimum rounds (``rounds``: instead of the protocol's) against its budget
    (``budget_s``: instead of the protocol's)."""
    p = req.protocol
    n = p.rounds if rounds is None else rounds
    # adding rounds past the minimum (until decided, or an interval narrow enough), a
    # workload may use its whole share of the budget
    adds = ((p.until_decided or p.target_ci_width is not None)
            and (p.max_rounds is None or p.max_rounds > n))
    return check_budget(loads_of(req.workloads), configs_of(req), n,
                        p.budget_s if budget_s is None else budget_s, adaptive=adds,
                        side_by_side=side_by_side(req))


def short_budget(check: BudgetCheck, named: str, instead: str) -> UsageError:
    """The paragraph a run stops with when ``check`` fails: ``named`` is the budget as the
    user gave it ("--budget 4m", "the spec's budget (6m)"), ``instead`` the other ways out
    after "give a budget of N or more, ..." (fewer configs, --rounds without --budget, ...;
    empty: none)."""
    big = check.largest
    wl = "workload" if check.workloads == 1 else "workloads"
    what = (f"the {check.rounds} round{'s' if check.rounds != 1 else ''} each of "
            f"{check.workloads} {wl} × {check.configs} configs need")
    detail = ""
    if big is not None:
        if big in check.floors:
            detail = (f" ({big.label}: rounds of at least {fmt.seconds(big.round_s)}, its "
                      "timed steps of every config in turn")
        else:
            detail = (f" ({big.label}: its data on the servers and a burn-in, about "
                      f"{fmt.seconds(big.setup_s)}, then rounds of about "
                      f"{fmt.seconds(big.round_s)}")
        if check.workloads > 1:
            detail += ("; each workload gets an equal share of the budget"
                       + (" and may use all of it adding rounds until decided"
                          if check.adaptive else ""))
        detail += ")"
    floored = {n.label for n in check.floors}
    counted = [u for u in check.unknown if u in floored]
    uncounted = [u for u in check.unknown if u not in floored]
    unknown = ((f" {', '.join(counted)} counted at {'its' if len(counted) == 1 else 'their'}"
                " timed steps only (the others run to their own end, at a rate not known "
                "before)." if counted else "")
               + (f" {', '.join(uncounted)} not counted (a step workload's length is not "
                  "known before it runs)." if uncounted else ""))
    need = (f"at least {fmt.duration_up(check.hold_s)}" if check.floors
            else f"about {fmt.duration(check.hold_s)}")
    return UsageError(
        f"{named} cannot hold {what}: {need} here{detail}; the "
        f"budget would stop a workload short of them (fewer than {MIN_PAIRS} paired rounds "
        f"decide nothing).{unknown}",
        f"Give a budget of {budget_text(check.suggest_s)} or more"
        + (f", {instead}." if instead else "."))


def require_budget(req: RunRequest, named: str, instead: str) -> BudgetCheck:
    """Stop (UsageError) when ``req``'s budget cannot hold its minimum rounds; the check."""
    check = budget_check(req)
    if not check.ok:
        raise short_budget(check, named, instead)
    return check


def hold_minimum(req: RunRequest, given: str | None, cap: Callable[[float], int | None],
                 instead: str, rebuild: Callable[[Protocol], RunRequest] | None = None
                 ) -> tuple[RunRequest, str]:
    """``req`` with a budget that holds every workload's minimum rounds, before anything
    starts (``run``, ``run --stack``).  A ``--budget`` given (``given``, as typed) that
    cannot is refused with :func:`short_budget`; the command's default budget is raised to
    the one that would, and the line returned says so (empty: nothing changed).  ``cap``:
    the maximum rounds for a budget; ``rebuild``: the request for a new protocol (default:
    ``req`` with it)."""
    p = req.protocol
    if not p.budget_s:
        return req, ""
    check = budget_check(req)
    if check.ok:
        return req, ""
    if given:
        raise short_budget(check, f"--budget {given}", instead)
    new = check.suggest_s
    protocol = replace(p, budget_s=new, max_rounds=cap(new))
    line = (f"Budget {budget_text(new)}: the default {budget_text(p.budget_s)} cannot hold "
            f"the {check.rounds} rounds each of {check.workloads} workload(s) x "
            f"{check.configs} configs need (about {fmt.duration(check.hold_s)} here, with "
            "each workload's data and burn-in).")
    return (rebuild(protocol) if rebuild else replace(req, protocol=protocol)), line
