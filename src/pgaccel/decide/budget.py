"""What a run's minimum rounds cost, and whether its time budget holds them (pure).

A run's budget (`run --budget`, a lab spec's ``budget``) is shared out as the run goes: each
workload gets the budget left divided by the workloads still to run (``lab/experiment.py``)
and stops adding rounds when another would end past its share
(``schedule.should_continue``), below its minimum too, since the budget is a promise.  A
budget too small for the minimum leaves a workload with fewer rounds than its paired
comparison needs (``effect.MIN_PAIRS``), and its verdict can only say "not enough evidence".
:func:`check_budget` says so before the run starts, and what budget would hold them.

A workload's share pays for, in this order (``Experiment._run_workload``):

1. its data on every server it runs on: built (``pgbench -i``) or, when a workload before
   it left the same data, found there; a workload that writes also snapshots a template;
2. the burn-in: side by side a whole round thrown away, one at a time one trial (one per
   config for a workload that writes);
3. its minimum rounds, each a trial per config: restore (a workload that writes), CHECKPOINT,
   prewarm, the warm-up and the measured seconds, on one server or in slices beside the
   others (the same seconds either way).

The constants are what pgaccel's recorded runs spent on the 2-core VM this was written on
(PostgreSQL 15, November 26; docs/statistics.md, "What the minimum rounds cost"): a
side-by-side round's config took its warm-up and measured seconds plus 0.7-1.6 s for
select-only (scale 1-20) and 1.7-4.5 s for tpcb-like (scale 5-20); building pgbench's data
7-9.5 s a server at scale 20.  ``schedule.estimate_trial_s`` (the progress bar's) puts 4 s
where a trial here spends about 1 s, and leaves out steps 1 and 2, which cost a quick run
31-36 s for its first workload and 26-29 s for its second, a third of its minimum.  A host
slower than this one needs more: the verdicts then say that the budget ended first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from .model import WorkloadSpec

# a trial beyond its warm-up and measured seconds: CHECKPOINT, prewarm, pgbench's start
TRIAL_FIXED_S = 1.0
TRIAL_PER_SCALE_S = 0.03
RESTORE_PER_SCALE_S = 0.15          # a writing workload's data copied back from its template
BUILD_FIXED_S = 0.5                 # a server's data: found there (fingerprint) ...
BUILD_PER_SCALE_S = 0.35            # ... or built by pgbench -i
TEMPLATE_PER_SCALE_S = 0.1          # a writing workload's template snapshot
# the budget suggested is the one needed times this, in whole minutes: a round here varied
# by +-5% within a run, the data's preparation by +-20% between runs
MARGIN = 1.15


@dataclass(frozen=True)
class Load:
    """One workload at one client count, as the budget sees it."""
    label: str
    duration_s: float
    warmup_s: float
    scale: float = 1.0
    writes: bool = False
    builds: bool = True     # its data is built (False: a workload before it left the same)
    known: bool = True      # False: a step workload, whose steps run to their own end
    least_s: float = 0.0    # a step workload: its steps' set seconds per config (at least)


@dataclass(frozen=True)
class Need:
    """What one workload's minimum rounds cost."""
    label: str
    setup_s: float          # its data on every server, then the burn-in
    round_s: float
    rounds: int

    @property
    def total_s(self) -> float:
        return self.setup_s + self.rounds * self.round_s


@dataclass(frozen=True)
class BudgetCheck:
    """A budget against the minimum rounds of every workload (:func:`check_budget`)."""
    budget_s: float | None
    rounds: int
    configs: int
    workloads: int          # every workload, those of unknown cost too
    adaptive: bool          # a workload may use its whole share (rounds until decided)
    needs: tuple[Need, ...]
    unknown: tuple[str, ...]   # workloads whose cost is not estimated (step workloads)
    hold_s: float           # the smallest budget that holds every minimum
    # step workloads counted at their timed steps only (``Load.least_s``): hold_s is then a
    # floor, and a budget below it surely too small
    floors: tuple[Need, ...] = ()

    @property
    def ok(self) -> bool:
        return self.budget_s is None or self.budget_s >= self.hold_s

    @property
    def suggest_s(self) -> float:
        """A budget to give instead: :attr:`hold_s` with :data:`MARGIN`, in whole minutes."""
        return 60.0 * max(1, math.ceil(self.hold_s * MARGIN / 60.0 - 1e-9))

    @property
    def largest(self) -> Need | None:
        return max(self.needs + self.floors, key=lambda n: n.total_s, default=None)


def trial_s(load: Load) -> float:
    """One config's trial of ``load``, in a round, from the start of its restore."""
    extra = RESTORE_PER_SCALE_S * load.scale if load.writes else 0.0
    return (load.warmup_s + load.duration_s + TRIAL_FIXED_S + TRIAL_PER_SCALE_S * load.scale
            + extra)


def need_of(load: Load, configs: int, rounds: int, *, side_by_side: bool) -> Need:
    """What ``load``'s first ``rounds`` rounds of ``configs`` configs cost, with its data
    and burn-in (the module docstring's steps 1-3)."""
    t = trial_s(load)
    servers = configs if side_by_side else 1
    data = BUILD_FIXED_S + (BUILD_PER_SCALE_S * load.scale if load.builds else 0.0)
    if load.writes:
        data += TEMPLATE_PER_SCALE_S * load.scale
    if side_by_side:
        burn_in = configs * t
    else:
        burn_in = t * (configs if load.writes else 1)
    return Need(load.label, servers * data + burn_in, configs * t, rounds)


def floor_of(load: Load, configs: int, rounds: int) -> Need:
    """A step workload's minimum rounds at its steps' set seconds only (the Insert
    Benchmark's q steps; its load steps run to their own end and count 0): every config's
    steps take turns, so a round is at least ``configs`` times them."""
    return Need(load.label, 0.0, configs * load.least_s, rounds)


def hold_s(totals: Sequence[float], workloads: int, adaptive: bool) -> float:
    """The smallest budget that holds every workload's minimum, ``totals`` in run order
    (a step workload counts its timed steps only, 0 without any, but still takes its share).  Workload ``i`` gets
    the budget left over the ``workloads - i`` still to run: when every workload may use
    its whole share (``adaptive``), that share is ``budget / workloads`` whatever came
    before, so the budget must be ``workloads`` times the largest minimum; when each stops
    at its minimum, workload ``i`` needs ``sum(totals[:i]) + (workloads - i) * totals[i]``."""
    n = max(int(workloads), len(totals), 1)
    if not totals:
        return 0.0
    if adaptive:
        return n * max(totals)
    return max(sum(totals[:i]) + (n - i) * t for i, t in enumerate(totals))


def check_budget(loads: Sequence[Load], configs: int, rounds: int, budget_s: float | None, *,
                 adaptive: bool, side_by_side: bool = True) -> BudgetCheck:
    """Whether ``budget_s`` (None: no budget) holds ``rounds`` rounds of ``configs`` configs
    of every workload of ``loads`` (in run order), and the budget that would."""
    needs = tuple(need_of(x, configs, rounds, side_by_side=side_by_side)
                  for x in loads if x.known)
    floors = tuple(floor_of(x, configs, rounds) for x in loads if not x.known and x.least_s)
    totals = [need_of(x, configs, rounds, side_by_side=side_by_side).total_s if x.known
              else floor_of(x, configs, rounds).total_s for x in loads]
    return BudgetCheck(budget_s, rounds, configs, len(loads), adaptive, needs,
                       tuple(x.label for x in loads if not x.known),
                       hold_s(totals, len(loads), adaptive), floors)


def loads_of(workloads: Iterable[WorkloadSpec]) -> list[Load]:
    """The run's workloads as :class:`Load`\\ s, in run order: a workload whose data (its
    ``data_group`` and fingerprint) a workload before it left on the servers finds it there
    (``Workload.prepare``); a step workload's cost is not estimated beyond the seconds its
    timed steps take (``StepWorkload.least_seconds``)."""
    out, have = [], {}
    for ws in workloads:
        wl, p = ws.workload, ws.params
        group, fp = wl.data_group(), wl.fingerprint(p)
        out.append(Load(ws.label, float(p.duration), float(p.warmup), float(p.scale or 0),
                        bool(wl.writes), builds=have.get(group) != fp,
                        known=not ws.is_steps,
                        least_s=float(wl.least_seconds(p)) if ws.is_steps else 0.0))
        have[group] = fp
    return out
