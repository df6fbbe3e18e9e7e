"""Was the host quiet while a trial measured? (pure, over ``Measure.metrics`` output)

A trial's interval has the machine's CPU time split between the server's processes, the
load generator, and everything else (other programs, other tenants' work the hypervisor
charges as steal).  ``host_noise`` turns the counters into shares of the machine's CPU
time and flags the trial when either outside share is large enough to have moved its
throughput: other processes above ``OTHER_LIMIT`` of the machine, or steal time above
``STEAL_LIMIT``.  pgaccel's own sampler and bookkeeping (a few percent of one CPU) count as
"other", which is why the limit is not lower.
"""

from __future__ import annotations

from typing import Any

OTHER_LIMIT = 0.10
STEAL_LIMIT = 0.05


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
