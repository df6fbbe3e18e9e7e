"""Was the host quiet while a trial measured? (pure, over ``Measure.metrics`` output)

A trial's interval has the machine's CPU time split between the server's processes, the
load generator, and everything else (other programs, other tenants' work the hypervisor
charges as steal).  ``host_noise`` turns the counters into shares of the machine's CPU
time and flags the trial when either outside share is large enough to have moved its
throughput: other processes above ``OTHER_LIMIT`` of the machine, or steal time above
``STEAL_LIMIT``.  pgaccel's own sampler and bookkeeping (a few percent of one CPU) count as
"other", which is why the limit is not lower.

Some slow-downs show in neither count: the hypervisor runs this VM's CPUs slower for a while
(a neighbour on the same cores or caches), and every process needs more CPU for the same
work.  ``slow_cpu`` finds those trials from the load generator's CPU per operation, which
pgbench spends the same whatever the server's settings: in one `run --quick` here, a
minute-long episode took tpcb-like from 3,220-3,712 tps to 2,704-3,079 in both configs while
pgbench's CPU per transaction rose from 101-108 µs to 122-128 µs and steal stayed at 3%
(run 20261123-202938-d663); the settings themselves moved pgbench's CPU by about 5%.
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

OTHER_LIMIT = 0.10
STEAL_LIMIT = 0.05
SLOW_CPU_LIMIT = 0.15


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


def slow_cpu(client_us_per_op: Sequence[float | None], limit: float = SLOW_CPU_LIMIT
             ) -> list[str]:
    """Per trial of one config on one workload: why its CPUs ran slow, or "".  A trial is
    flagged when the load generator's CPU per operation is more than ``limit`` above the
    median of the config's trials; with fewer than 3 known values nothing is flagged."""
    known = [x for x in client_us_per_op if x is not None and x > 0]
    if len(known) < 3:
        return ["" for _ in client_us_per_op]
    med = statistics.median(known)
    out = []
    for x in client_us_per_op:
        rise = (x / med - 1) if x is not None and x > 0 else 0.0
        out.append(f"the load generator needed {rise:.0%} more CPU per operation than in "
                   "this config's other trials (the CPUs ran slower)" if rise > limit else "")
    return out
