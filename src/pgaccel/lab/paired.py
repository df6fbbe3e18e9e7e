"""A round side by side: one server per config, measured in alternating short slices.

One config after the other, a tpcb-like pair of trials here is 5-10% apart, because the
host's speed moves within seconds; that noise, not the number of rounds, is what kept
``run --quick`` from deciding tpcb-like in half its runs.  Side by side:

1. every server is brought to the state each trial starts from (``trial.start_state``:
   its config's settings checked, data restored, CHECKPOINT, prewarm), in the round's order;
2. each server gets one pgbench for the whole round, started and at once stopped
   (``workloads/slices.py``; for a workload that does not write, one per CPU, with its
   backends put on that CPU during the warm-up: ``workloads/pinning.py``); each warms up
   for ``params.warmup`` seconds in turn;
3. then ``params.duration`` seconds per config in slices of ``SLICE_S``, in ABBA order
   (A B B A A B ...; three or more rotate: ``turn_order``), only one pgbench running at a
   time, the others stopped with SIGSTOP; connections stay open all round;
4. a slice counts the transactions its pgbench's log shows ending inside it; a config's
   trial is its slices: throughput = transactions / seconds, its per-second series the
   slices' rates, its costs the sums over its slices (``metrics/sliced.py``).

Both configs see the same seconds of the host, so tpcb-like pairs were 1.7-3.3% apart where
one after the other put them 6.5-7.5% apart, with no offset between two identical configs in
28 rounds (``benchmarks/interleave_spread.py``), and 0.9-1.7% apart in five ``run --quick``
runs (docs/measurements.md, "Two servers side by side").  Which server runs which config
rotates every round (``Experiment``), so neither a cluster nor its place in the order stays
with one config.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any, Callable, Sequence

from ..errors import BenchError, ServerError
from ..metrics.sliced import SlicedMeasure
from ..probe import topology
from ..workloads.base import BenchContext
from ..workloads.pinning import (APP_PREFIX, BACKENDS_SQL, Share, pin_backends,
                                 split_load, unpin, usable_cpus)
from ..workloads.slices import PausedPgbench, Transactions, WindowStats, log_windows, wall_shift
from ..workloads.steps import StepResult, warnings_for
from ..decide.model import Trial, TrialSpec
from .trial import start_state, with_warnings

# a slice's length: the host's speed here moves within a second or two (steal), so the
# closer two configs' slices lie the more of it they share.  A/A labs side by side, 6 rounds
# each, interleaved in one hour (docs/measurements.md, "How long a slice"): rounds' pairs
# 4.4% (select-only) and 3.9% (tpcb-like) apart with 1 s slices, 2.2% and 2.3% with 0.25 s
# (RMS over 12 rounds), for 4% more wall time (7% of the measuring time between slices).
SLICE_S = 0.25
# the Insert Benchmark's load and query steps (paired_lsteps, paired_qsteps).  At 1 s against
# 0.25 s (four two-server A/A labs, November 27, benchmarks/slice_length.py --steps) the
# sliced steps' pairs were lower at 0.25 s in 6 of 7 steps.  With four servers (study 001's
# design) a slice pair's spread grows with how far apart the two slices lie (1, 2 or 3
# slices: load steps 10.4% -> 12.7-14.1%, qp100 6.8% -> 9.5%), so the slices were cut to
# 0.1 s (November 28): the four-server A/A put 23 of 24 step intervals inside +-5% (21 and 16
# of 24 at 0.25 s), median half-width 1.7% (2.3%, 3.3%), and the example decided 4 of 8 of
# pg18-sync's steps (2 of 8 at 0.25 s the evening before): one run each, docs/measurements.md.
# 0.05 s against 0.1 s (eight interleaved A/A labs, November 30): no clear gain, l.i0 wider.
STEP_SLICE_S = 0.1
# a workload that writes is not placed: on this 2-core VM the scheduler keeps tpcb-like's
# pgbench threads and backends apart (1.9-2.0 reschedule interrupts a transaction) and its
# trials stay steady; placed together it ran 55% faster and its A/A rounds spread more
# (benchmarks/pinning.py, docs/measurements.md)
WRITES_FREE = "it writes"
DESIGN = "side by side"


def turn_order(names: Sequence[str], turn: int) -> list[str]:
    """The configs' order in turn ``turn`` (0-based) of a round.  Two: the round's order,
    then reversed (A B, B A, A B ...), so each runs two slices in a row as often as the
    other.  Three or more: the round's order rotated by one each turn (A B C, B C A, C A B
    ...), so none runs two slices in a row and each holds every place equally often.  With
    the reversal, only the first and last ran two in a row, and the second of two ran about
    3% faster than a slice after another config's (the four-server A/A, lab
    20261128-092153-5fad: qp100 +3.0%, qp500 +2.6%, the load steps +2.9-3.9%), so the base,
    first or last in every round's order, came out ahead of the configs between by about 1%
    (docs/measurements.md, "Two slices in a row")."""
    n = len(names)
    if n <= 2:
        return list(names) if turn % 2 == 0 else list(reversed(names))
    k = turn % n
    return list(names[k:]) + list(names[:k])


def turns_of(n: int) -> str:
    """How ``n`` configs take their turns (``turn_order``), as run.json's measurement says."""
    return "ABBA" if n <= 2 else "rotated"


def slice_order(names: Sequence[str], per_config: int) -> list[str]:
    """Every turn of a round in order (``turn_order``), ``per_config`` slices each:
    A B B A A B ...; three configs: A B C B C A C A B ..."""
    out: list[str] = []
    for i in range(per_config):
        out += turn_order(names, i)
    return out


def run_slices(order: Sequence[str], procs: dict[str, PausedPgbench],
               meas: dict[str, SlicedMeasure], windows: dict[str, list[tuple[float, float]]],
               note: Callable[[str, float], None], slice_s: float) -> float:
    """The measured slices of a round: in ``order``, each name's pgbench resumed for
    ``slice_s`` seconds inside its measure's ``begin``/``end``, its window appended to ``windows``
    (monotonic clock).  Returns the shift from the monotonic to the wall clock, taken once:
    pgbench (14+) logs the monotonic clock plus an offset taken when it started, so a step
    of the wall clock during the round moves neither."""
    shift = wall_shift()
    for i, name in enumerate(order):
        p, m = procs[name], meas[name]
        m.begin()
        t0 = time.monotonic()      # the window holds every commit logged while it ran:
        p.resume()                 # one in flight at the last pause ends at once on resume
        time.sleep(slice_s)
        p.pause()
        t1 = time.monotonic()
        m.end()
        if not p.running():
            raise BenchError(f"pgbench for {name!r} ended inside a slice.",
                             "Look at the server log; run again, or measure one at a time "
                             "(--one-at-a-time).")
        windows[name].append((t0, t1))
        note("measure", (i + 1) / len(order))
    return shift


def sampled(ws: WindowStats) -> dict[str, Any]:
    """A trial's metrics on a sampled log (``pgbench_logs.log_place``): the share of
    transactions logged and the relative standard error that puts on its count; none for
    a whole log."""
    if ws.sampling >= 1.0:
        return {}
    return {"log_sampling": ws.sampling, "log_lines": ws.logged,
            "count_error": round(ws.count_error, 6)}


def sliced_step(step: str, unit: str, log: Transactions, windows: Sequence[tuple[float, float]],
                shift: float, meas: SlicedMeasure, *, none: str, design: str, slice_s: float,
                per_op: int = 1, **more: Any) -> StepResult:
    """A step taken in slices, as a :class:`StepResult`: its pgbench's ``log``
    (``PausedPgbench.finish``) over its ``windows`` (monotonic; ``shift`` to the wall
    clock) and ``meas`` (its costs over them), ``per_op`` operations a transaction (the
    Insert Benchmark's rows a commit); ``more`` goes into its metrics.  No transaction in
    its windows: BenchError ``none``."""
    ws = log_windows(log, [(a + shift, b + shift) for a, b in windows])
    if ws.ops == 0:
        raise BenchError(none, "Look at the server log; the server may be overloaded or "
                         "stuck.")
    ops = ws.ops * per_op
    m = {**meas.metrics(ops), "design": design, "slices": len(ws.rates), "slice_s": slice_s,
         "failed": ws.failed, **sampled(ws), **more,
         "slice_windows": [[round(a + shift, 3), round(b + shift, 3)] for a, b in windows]}
    return StepResult(step=step, ops=ops, seconds=ws.seconds,
                      throughput=ops / ws.seconds if ws.seconds > 0 else 0.0, unit=unit,
                      metrics=m, latency_ms=ws.latency_ms,
                      series=[r * per_op for r in ws.rates], warnings=warnings_for(m))


def session_names(ctx: BenchContext, since: float) -> list[tuple[int, str]]:
    """(pid, application_name) of the server's sessions named by a pgbench share and
    opened since ``since`` (epoch seconds)."""
    with ctx.connect() as conn:
        return [(int(pid), name) for pid, name in
                conn.execute(BACKENDS_SQL, (APP_PREFIX + "%", since)).fetchall()]


def host_shares(clients: int, threads: int) -> list[Share]:
    """``clients`` and ``threads`` split into one pgbench per CPU this process may use
    (``pinning.split_load``), on SMT hosts one thread of every core before a second."""
    cpus = usable_cpus()
    return split_load(clients, threads, cpus, topology.cores(cpus, topology.read_siblings()))


def _place(p: PausedPgbench, ctx: BenchContext, *, timeout: float, settle: int
           ) -> str | None:
    """``pinning.pin_backends`` for ``p``'s sessions on ``ctx``; when it fails, ``p``'s
    pgbench processes go back on every CPU too (all free rather than pairs split)."""
    problem = pin_backends(p.shares, lambda: session_names(ctx, p.started), timeout=timeout,
                           settle=settle)
    if problem:
        unpin([q.pid for q in p.procs])
    return problem


def _pinned(p: PausedPgbench, problem: str | None, asked: bool) -> dict[str, Any]:
    """What the trial's metrics say of the placement: CPU per share, or why not placed."""
    if not p.shares:
        return {"on": False, "why": WRITES_FREE} if asked else {"on": False}
    out: dict[str, Any] = {"on": problem is None,
                           "cpus": {str(s.cpu): s.clients for s in p.shares}}
    if problem:
        out["problem"] = problem
    return out


def warm_in_turn(names: Sequence[str], procs: dict[str, PausedPgbench],
                 ctxs: dict[str, BenchContext], warm: float
                 ) -> tuple[dict[str, float], dict[str, str | None]]:
    """Each of ``names``' pgbench resumed for ``warm`` seconds in turn, then stopped; where
    it has ``shares``, its sessions placed once they are there (and checked again at the
    end).  The seconds each warm-up took, and per name None when placed, else why not."""
    warmup_s: dict[str, float] = {}
    placed: dict[str, str | None] = {}
    for name in names:
        t0 = time.monotonic()
        p = procs[name]
        p.resume()
        if p.shares:                     # once pgbench's clients are there
            placed[name] = _place(p, ctxs[name], timeout=max(warm, 5.0), settle=2)
        time.sleep(max(0.0, warm - (time.monotonic() - t0)))
        if p.shares and placed[name] is None:     # still all there, all placed?
            placed[name] = _place(p, ctxs[name], timeout=0, settle=1)
        p.pause()
        warmup_s[name] = time.monotonic() - t0
    return warmup_s, placed


def paired_round(items: Sequence[tuple[BenchContext, TrialSpec]], *,
                 note: Callable[[str, float], None] = lambda phase, frac: None,
                 pin: bool = True) -> list[Trial]:
    """One round of ``items`` (a server and a trial spec per config, in the round's order),
    side by side as the module docstring says; a :class:`Trial` per config.  ``pin``: for a
    workload that does not write, each pgbench and its backends on one CPU
    (``workloads/pinning.py``)."""
    specs = [s for _, s in items]
    params, wl = specs[0].params, specs[0].workload
    k = max(1, int(round(params.duration / SLICE_S)))
    warm = max(0, int(round(params.warmup)))
    starts: dict[str, tuple[list[str], dict[str, Any]]] = {}
    for ctx, spec in items:
        try:
            starts[spec.variant] = start_state(ctx, spec, note=note)
        except ServerError as e:
            e.variant = spec.variant          # which config was refused
            raise
    order = slice_order([s.variant for s in specs], k)
    # pgbench's -T clock runs while it is stopped; the round ends pgbench itself
    # (PausedPgbench.finish), so -T is only a limit, a day away
    total = 86400
    by_name = {s.variant: (ctx, s) for ctx, s in items}
    windows: dict[str, list[tuple[float, float]]] = {s.variant: [] for s in specs}
    with ExitStack() as stack:
        procs: dict[str, PausedPgbench] = {}
        for ctx, spec in items:
            kw = spec.workload.pgbench_kw(ctx, spec.params)
            shares = (host_shares(kw["clients"], kw["threads"])
                      if pin and not wl.writes else None)
            p = PausedPgbench(ctx.pgbench, ctx.bench_conninfo(), kw, total,
                              session_options=ctx.target.session_options,
                              workdir=ctx.workdir, shares=shares,
                              expect_seconds=params.duration + 2 * max(warm, 5.0),
                              siblings=len(items))
            stack.callback(p.close)
            procs[spec.variant] = p
        note("warm-up", 0.0)
        warmup_s, placed = warm_in_turn([s.variant for s in specs], procs,
                                        {n: c for n, (c, _) in by_name.items()}, warm)
        meas = {}
        for spec in specs:
            ctx = by_name[spec.variant][0]
            spec.workload.round_begin(ctx)
            meas[spec.variant] = stack.enter_context(
                SlicedMeasure(ctx, procs[spec.variant].cpu))
        note("measure", 0.0)
        shift = run_slices(order, procs, meas, windows, note, SLICE_S)
        for spec in specs:                  # the counters' end before pgbench ends
            meas[spec.variant].__exit__(None, None, None)
        ends = {s.variant: s.workload.round_end(by_name[s.variant][0]) for s in specs}
        logs = {name: p.finish(timeout=60) for name, p in procs.items()}
    out = []
    for spec in specs:
        name = spec.variant
        ws = log_windows(logs[name], [(a + shift, b + shift) for a, b in windows[name]])
        if ws.ops == 0:
            raise BenchError(f"{wl.name} completed no operations in {name!r}'s slices.",
                             "Look at the server log; the server may be overloaded or stuck.")
        not_applied, warm_info = starts[name]
        m: dict[str, Any] = {
            "throughput": ws.throughput, "throughput_all": ws.throughput,
            "steady_range": [0, len(ws.rates)], "ops": ws.ops, "duration_s": ws.seconds,
            "failed": ws.failed, "latency_ms": ws.latency_ms, **sampled(ws),
            "design": DESIGN, "slices": len(ws.rates), "slice_s": SLICE_S,
            "with": [s.variant for s in specs if s.variant != name],
            "server": by_name[name][0].target.describe(),
            "pinned": _pinned(procs[name], placed.get(name), pin),
            "slice_windows": [[round(a + shift, 3), round(b + shift, 3)]
                              for a, b in windows[name]],
            **meas[name].metrics(ws.ops), **warm_info,
            **{k: v for k, v in ends[name].items() if k != "warnings"},
        }
        # a checkpoint's place on the slices' series: how many of this config's slices had
        # ended by then
        m["checkpoint_s"] = [sum(1 for _, b in windows[name] if b <= c)
                             for c in meas[name].checkpoints_monotonic()]
        with_warnings(m, ends[name].get("warnings"))
        out.append(Trial(variant=name, workload=wl.name, round=spec.round,
                         clients=params.clients, started_at=meas[name].started,
                         throughput=ws.throughput, unit=wl.unit, metrics=m,
                         series=ws.rates, latency_series=ws.p50_ms,
                         warmup_s=warmup_s[name], not_applied=not_applied))
    return out
