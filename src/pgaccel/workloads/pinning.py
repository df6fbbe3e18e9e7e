"""Each pgbench and the backends it talks to on one CPU (side-by-side rounds, lab/paired.py).

On this 2-core VM select-only's trials ran either flat (about 120,000 tps) or, for spells of
one to five seconds, at 60-80% of that, with 0.06-0.2 reschedule interrupts per transaction
against 0.000-0.004 in the flat ones: a pgbench thread and the backend it waits on had
landed on different CPUs, so every transaction woke the other CPU.  Spells hit either
config at random; in 4 of 7 quick runs of November 25 they put round pairs 14-28% apart.
Placed, two identical servers' rounds were 0.4-0.8% apart, left to the scheduler 9.6-23%
in the same hour (``benchmarks/pinning.py``, docs/measurements.md).

So, for a workload that does not write, the load is split into one pgbench per CPU (its
share of the clients and threads), each started on its CPU; it names its connections
(``application_name``) after that CPU, and once they are open the server's backends with
that name are put on the same CPU.  Nothing else of the server is placed: the checkpointer,
WAL writer, autovacuum and parallel workers go where the scheduler puts them.  A workload
that writes is left to the scheduler (``lab/paired.py``: tpcb-like's pairs sit apart there
all the time, steadily; placed together it is a different, 55% faster machine whose A/A
rounds spread more).

:func:`split_load` is pure; :func:`pin_backends` changes only the affinity of the bench's own
backends, and only on a local server.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

APP_PREFIX = "pgaccel-cpu"


@dataclass(frozen=True)
class Share:
    """One pgbench's part of the load: the CPU it and its backends run on."""
    cpu: int
    clients: int
    threads: int

    @property
    def app_name(self) -> str:
        return f"{APP_PREFIX}{self.cpu}"


def placement_order(cpus: Sequence[int],
                    cores: Sequence[Sequence[int]] | None = None) -> list[int]:
    """``cpus`` in the order shares take them: with ``cores`` (the CPUs of each core, as
    probe.topology.cores gives them), the first thread of every core, then the second of
    every core, ...: fewer clients than CPUs then spread over cores before two share one;
    without, in number order."""
    mine = sorted(set(cpus))
    if not cores:
        return mine
    out: list[int] = []
    groups = [[c for c in core if c in mine] for core in cores]
    for k in range(max((len(g) for g in groups), default=0)):
        out += [g[k] for g in groups if k < len(g) and g[k] not in out]
    return out + [c for c in mine if c not in out]


def split_load(clients: int, threads: int, cpus: Sequence[int],
               cores: Sequence[Sequence[int]] | None = None) -> list[Share]:
    """``clients`` connections and ``threads`` pgbench threads over ``cpus``, as even as can
    be: one share per CPU while there are clients for it (CPUs taken in
    :func:`placement_order`); each share's threads in proportion to its clients (at least
    one, at most its clients).  Shares are returned in CPU order."""
    cpus = placement_order(cpus, cores)
    if clients < 1 or not cpus:
        return []
    n = min(len(cpus), clients)
    counts = [clients // n + (1 if k < clients % n else 0) for k in range(n)]
    out, upto, given = [], 0, 0
    for cpu, c in zip(cpus, counts):
        upto += c                     # threads so far in proportion to clients so far
        t = max(1, min(c, round(threads * upto / clients) - given))
        given += t
        out.append(Share(cpu, c, t))
    return sorted(out, key=lambda s: s.cpu)


def usable_cpus() -> list[int]:
    """The CPUs this process may run on (taskset, cpusets)."""
    return sorted(os.sched_getaffinity(0))


# the sessions a round's pgbench opened: named after a share, and opened since it started
# (a backend of an earlier pgbench may still be leaving)
BACKENDS_SQL = ("SELECT pid, application_name FROM pg_stat_activity "
                "WHERE application_name LIKE %s AND backend_start >= to_timestamp(%s)")


def pin_backends(shares: Sequence[Share], backends: Callable[[], list[tuple[int, str]]], *,
                 timeout: float, poll: float = 0.02, settle: int = 2) -> str | None:
    """Put each backend named after a share (``backends()``: (pid, application_name) of the
    sessions pgbench opened) on that share's CPU, as they appear, until every share has
    exactly its clients' sessions and the same ones ``settle`` times in a row (each pgbench
    first opens a connection of its own to read the scale and closes it, so the first
    sessions seen may not be its clients'), waiting up to ``timeout`` seconds.  Returns None
    when all were placed, or why not; then the ones placed are put back on every CPU
    (:func:`unpin`), since a pgbench on one CPU talking to a backend elsewhere is the split
    pair placement is there to avoid.  Placing a backend again is harmless, so a later call
    with ``settle=1`` checks and completes the placement."""
    want = {s.app_name: s for s in shares}
    deadline = time.monotonic() + timeout
    placed: set[int] = set()
    last: frozenset[int] | None = None
    seen = 0
    while True:
        found = [(pid, name) for pid, name in backends() if name in want]
        for pid, name in found:
            try:
                os.sched_setaffinity(pid, {want[name].cpu})
            except ProcessLookupError:
                continue                      # gone: nothing of it left to place
            except OSError as e:
                unpin(placed)
                return (f"backend {pid} could not be placed on CPU {want[name].cpu} "
                        f"({e.strerror})")
            placed.add(pid)
        counts = Counter(name for _, name in found)
        exact = all(counts[s.app_name] == s.clients for s in shares)
        now = frozenset(pid for pid, _ in found)
        seen = seen + 1 if exact and (now == last or settle == 1) else (1 if exact else 0)
        last = now
        if seen >= settle:
            return None
        if time.monotonic() >= deadline:
            break
        time.sleep(poll)
    unpin(placed)
    need = sum(s.clients for s in shares)
    return f"{len(last or ())} of pgbench's {need} connections open after {timeout:g} s"


def pin_clients(pids: Sequence[Sequence[int | None]]) -> list[int] | None:
    """Backends placed by client (the lab's runs in turns, ``lab/paired_repeats.py``):
    ``pids`` holds each variant's backends client by client, and client i's of every
    variant goes on the i-th CPU from the highest this process may use (the CPU speed
    probe's first: ``hostspeed.probe_cpu``).  The CPUs of clients 0, 1, ..., or None when
    one could not be placed (then none is: all are left to the scheduler)."""
    try:
        cpus = sorted(usable_cpus(), reverse=True)
    except (AttributeError, OSError):
        return None
    done: list[int] = []
    for variant in pids:
        for i, pid in enumerate(variant):
            try:
                if pid is None:
                    raise OSError("not known")
                os.sched_setaffinity(pid, {cpus[i % len(cpus)]})
            except OSError:
                unpin(done)
                return None
            done.append(pid)
    width = max((len(p) for p in pids), default=0)
    return [cpus[i % len(cpus)] for i in range(width)]


def unpin(pids: Iterable[int]) -> None:
    """Let ``pids`` run on every CPU this process may use again (those still there)."""
    for pid in pids:
        try:
            os.sched_setaffinity(pid, usable_cpus())
        except OSError:
            pass
