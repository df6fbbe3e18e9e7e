"""Was the host quiet while a trial measured? (pure, over ``Measure.metrics`` output)

A trial's interval has the machine's CPU time split between the server's processes, the
load generator, and everything else (other programs, other tenants' work the hypervisor
charges as steal).  ``host_noise`` turns the counters into shares of the machine's CPU
time and flags the trial when either outside share is large enough to have moved its
throughput: other processes above ``OTHER_LIMIT`` of the machine, or steal time above
``STEAL_LIMIT``.  pgaccel's own sampler and bookkeeping (a few percent of one CPU) count as
"other", which is why the limit is not lower.

Some slow-downs show in neither count.  Two per-trial checks look for them, each against the
median of the same config's trials, after what the trial's round shared with the other
configs is taken out (``round_rise``):

* ``slow_probe``: the CPU speed probe (metrics/hostspeed.py, a fixed loop timed in thread
  CPU time while the trial ran) took more than ``SLOW_LIMIT`` longer: the hypervisor ran this
  VM's CPUs slower (a neighbour on the same cores), and every process needed more CPU for
  the same work.  The probe does not depend on the server's settings.  Over 254 trials of
  25 runs here (November 24: 5 `run --quick`, 20 lab experiments) it stayed within 1% of
  its config's median in 91% of trials and within 3% in 96%; the largest, +7.8%, came with
  a normal throughput.
* ``slow_cpu``: the load generator needed more than ``SLOW_LIMIT`` more CPU per operation.
  In quick run 20261123-202938-d663 (before the probe) tpcb-like fell from 3,220-3,712 tps
  to 2,704-3,079 in both configs for a minute while pgbench's CPU per transaction rose from
  101-108 µs to 122-128 µs and steal stayed at 3%.  This one does depend on the server:
  pgbench spends more CPU per transaction when the server answers more slowly (more
  wake-ups per transaction).  In quick run 20261124-001509-1043 the tuned config's first four
  tpcb-like trials needed up to 12% more pgbench CPU while the probe stayed within 1%: the
  machine was waiting on something else (more iowait), not running slower.  So its message
  says what was measured, and the probe says whether the CPUs were the cause.
* ``cross_cpu``: more reschedule interrupts per operation than ``CROSS_CPU_LIMIT`` above the
  config's quietest trials (their lower quartile: half of a config's trials can be the
  crossed ones), and more than ``CROSS_CPU_REL`` above them (a workload that writes wakes
  across CPUs all the time: tpcb-like had 1.55-1.78 per transaction in every trial here): processes that wake each other (a load generator thread and its
  backends, a backend and the WAL writer) were on different CPUs, and every such wake-up
  is an interrupt, which a VM pays for with an exit to the hypervisor.  With pgbench ``-c 4
  -j 2`` here, runs where a thread's two backends ended up on different CPUs had 0.13-0.16
  per transaction against none in the others, and ran 20-30% slower (select-only; the
  reason pgaccel now runs one pgbench thread per connection, workloads/base.load_threads).
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

OTHER_LIMIT = 0.10
STEAL_LIMIT = 0.05
SLOW_LIMIT = 0.15
CROSS_CPU_LIMIT = 0.05     # reschedule interrupts per operation above the quietest trials
CROSS_CPU_REL = 0.25       # ... and at least this much of their rate
STALL_MIN_OPS = 20         # a slice without an operation is a stall where its median has this many


def host_noise(m: dict[str, Any]) -> dict[str, Any] | None:
    """``{"other_cpu_share", "steal_share", "loadgen_share", "noisy", "why"}`` or None when
    the counters are missing."""
    total = m.get("host_cpu_total_s")
    busy = m.get("host_cpu_busy_s")
    if not total or busy is None:
        return None
    server = m.get("server_cpu_s") or 0.0
    # the load generator spends no CPU on the measured machine when it runs on client hosts
    # (--client-host) or when the machine is the server's own host (--server-host)
    client = (0.0 if m.get("client_hosts") or m.get("server_host_cpu")
              else (m.get("client_cpu_s") or 0.0))
    steal = m.get("host_steal_s") or 0.0
    other = max(0.0, busy - steal - server - client) / total
    steal_share = steal / total
    why = []
    if other > OTHER_LIMIT:
        why.append(f"other processes used {other:.0%} of the machine's CPU")
    if steal_share > STEAL_LIMIT:
        why.append(f"the hypervisor took {steal_share:.0%} of the CPU time (steal)")
    return {"other_cpu_share": round(other, 4), "steal_share": round(steal_share, 4),
            "loadgen_share": round(client / total, 4), "noisy": bool(why),
            "why": "; ".join(why)}


def _above_median(values: Sequence[float | None], limit: float) -> list[float | None]:
    """Per value: how far above the median of the known (positive) values it is, when that
    is more than ``limit``; None otherwise, and for all with fewer than 3 known values."""
    known = [x for x in values if x is not None and x > 0]
    if len(known) < 3:
        return [None for _ in values]
    med = statistics.median(known)
    rises = [(x / med - 1) if x is not None and x > 0 else 0.0 for x in values]
    return [r if r > limit else None for r in rises]


def round_rise(series: Mapping[str, Sequence[tuple[int, float | None]]]
               ) -> dict[str, dict[int, float]]:
    """Per config and round: how far above their own trials' medians the *other* configs of
    that round ran (the median of their ratios; 1.0: at their medians).  ``series``: per
    config, (round, value) of its trials on one measure; a config with fewer than 3 known
    values gives no ratio, and a round no other config has a ratio in is left out.

    Dividing a trial's value by its round's rise compares the trial with its own round: the
    part of a slowdown that every config of the round shared is what the paired comparison
    cancels, and only the rest says that this config's trial was disturbed.  On a 16-CPU VM
    (run 20261127-223053-8e20, issue 41) tpcb-like's tuned trial of round 4 had a probe 16%
    above its config's median while the baseline's probe of that round was 3% above its own:
    tuned's trial ran 12% slower than its round, not 16%, and was flagged only for the part
    both shared."""
    ratios: dict[int, dict[str, float]] = {}
    for cfg, trials in series.items():
        known = [v for _, v in trials if v is not None and v > 0]
        if len(known) < 3:
            continue
        med = statistics.median(known)
        for rnd, v in trials:
            if v is not None and v > 0:
                ratios.setdefault(rnd, {})[cfg] = v / med
    out: dict[str, dict[int, float]] = {}
    for rnd, by_cfg in sorted(ratios.items()):
        for cfg in series:
            others = [r for c, r in by_cfg.items() if c != cfg]
            if others:
                out.setdefault(cfg, {})[rnd] = statistics.median(others)
    return out


def _against_round(values: Sequence[float | None],
                   rise: Sequence[float | None] | None) -> list[float | None]:
    """``values`` each divided by its round's rise (:func:`round_rise`; None or missing: 1)."""
    if rise is None:
        return list(values)
    return [v / f if v is not None and f else v for v, f in zip(values, rise)]


def slow_probe(probe_us: Sequence[float | None], limit: float = SLOW_LIMIT,
               rise: Sequence[float | None] | None = None) -> list[str]:
    """Per trial of one config on one workload: why its CPUs ran slow, or "" (the CPU speed
    probe more than ``limit`` above the median of the config's trials; with ``rise``, each
    trial's round's rise from :func:`round_rise`, after the part its round shared is taken
    out)."""
    than = ("than in this config's other trials" if rise is None else
            "than in this config's other trials, beyond what its round's other configs ran")
    return [f"the CPU speed probe ran {r:.0%} slower {than} (the host ran this machine's "
            "CPUs slower)" if r is not None else ""
            for r in _above_median(_against_round(probe_us, rise), limit)]


def shared_slow_rounds(probes: Mapping[str, Sequence[tuple[int, float | None]]],
                       limit: float = SLOW_LIMIT) -> dict[int, float]:
    """The rounds in which every config's CPU speed probe ran more than ``limit`` above its
    own trials' median, with the smallest of their rises: ``{round: rise}``.  ``probes``:
    per config, (round, probe µs) of its trials on one measure.  A round counts only when
    two or more configs have a probe in it.

    A slowdown that hits every config of a round alike is a fact about the round, not about
    one config's trial: the paired comparison (ratios within rounds) cancels it, and calling
    each config's trial noisy says the wrong thing (on a 16-CPU host, one round in three ran
    47-54% slower in every config of a quick run; on this VM the two configs' probes of a
    side-by-side round are within a few percent of each other while rounds differ by 30%)."""
    rises: dict[int, list[float | None]] = {}
    for trials in probes.values():
        rs = _above_median([p for _, p in trials], limit)
        for (rnd, p), r in zip(trials, rs):
            if p is not None and p > 0:
                rises.setdefault(rnd, []).append(r)
    return {rnd: round(min(rs), 4) for rnd, rs in sorted(rises.items())
            if len(rs) >= 2 and all(r is not None for r in rs)}


def slow_cpu(client_us_per_op: Sequence[float | None], limit: float = SLOW_LIMIT,
             rise: Sequence[float | None] | None = None) -> list[str]:
    """Per trial of one config on one workload: why it looks slowed down, or "" (the load
    generator's CPU per operation more than ``limit`` above the median of the config's
    trials, after the part its round shared with the other configs when ``rise`` is given,
    as :func:`slow_probe`; with fewer than 3 known values nothing is flagged)."""
    than = ("than in this config's other trials" if rise is None else
            "than in this config's other trials, beyond what its round's other configs needed")
    return [f"the load generator needed {r:.0%} more CPU per operation {than} (slower CPUs, "
            "or a slower server: see the CPU speed probe)"
            if r is not None else ""
            for r in _above_median(_against_round(client_us_per_op, rise), limit)]


def stalled(series: Sequence[float], slice_s: float, sampling: float = 1.0
            ) -> tuple[int, float]:
    """How many of a trial's slices (or seconds: ``slice_s`` 1) completed no operation while
    its median slice completed at least :data:`STALL_MIN_OPS`, and their seconds: the server
    or the host stopped the load (a fault, a checkpoint's fsync, the hypervisor), which a
    median over the trial hides.  A trial too slow for that count says nothing: (0, 0.0).
    In a quick run here (20261127-112341-d63c) one tpcb-like trial's last 4 slices of 20
    were empty, about 3,800 transactions a second before them.  A series counted from a
    ``sampling`` share of pgbench's log (``pgbench_logs.log_place``) needs that many *logged*
    operations in its median slice: an empty slice of a sparse sample is chance."""
    vals = [x for x in series if x is not None and x == x]
    if (len(vals) < 4 or slice_s <= 0
            or statistics.median(vals) * slice_s * sampling < STALL_MIN_OPS):
        return 0, 0.0
    n = sum(1 for x in vals if x <= 0)
    return n, n * slice_s


def cross_cpu(resched_per_op: Sequence[float | None], limit: float = CROSS_CPU_LIMIT,
              rel: float = CROSS_CPU_REL) -> list[str]:
    """Per trial of one config on one workload: why its wake-ups crossed CPUs, or "" (more
    than ``limit`` reschedule interrupts per operation, and more than ``rel`` of their rate,
    above the lower quartile of the config's trials; with fewer than 3 known values nothing
    is flagged)."""
    known = [x for x in resched_per_op if x is not None and x >= 0]
    if len(known) < 3:
        return ["" for _ in resched_per_op]
    low = statistics.quantiles(known, n=4, method="inclusive")[0]
    return [f"{x:.2f} reschedule interrupts per operation against {low:.2f} in this config's "
            "quietest trials (processes that wake each other ran on different CPUs)"
            if x is not None and x - low > max(limit, rel * low) else ""
            for x in resched_per_op]
