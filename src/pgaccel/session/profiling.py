"""Profiling servers, shared by `pgaccel profile` and `pgaccel run --stack`:

* :func:`live_window`: the workload runs for a few seconds against the running server while
  ``perf`` counts and samples every server process (metrics/perfprof.py);
* :func:`cpu_cost`: the server is stopped and one single-user backend runs a fixed number of
  transactions under cachegrind (metrics/cpucost.py); the server is started again after;
* :func:`profile_configs`: both, for every config of a run, on throwaway clusters;
* :func:`profile_workload`: both for one workload and one set of settings (`pgaccel profile`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..metrics import cpucost, perfprof
from ..server.cluster import BENCH_DB
from ..server.osuser import as_user_kwargs
from ..workloads.base import BenchContext, RunParams, Workload

# settings that single-user mode under valgrind cannot take from a variant: huge pages need
# a reserved pool the run has already released (and valgrind maps its own memory)
NOT_UNDER_VALGRIND = {"huge_pages": "try"}


WARMUP_S = 5.0


def live_window(ctx: BenchContext, wl: Workload, params: RunParams, seconds: float,
                warmup: float = WARMUP_S) -> perfprof.LiveProfile:
    """Run ``wl`` for ``seconds`` with perf attached to the postmaster, after the same
    cache state a trial starts from: the relations prewarmed into shared buffers (so the
    kernel is not zeroing fresh shared memory pages inside the window) and ``warmup``
    seconds of the workload."""
    from ..metrics.measure import prewarm
    prewarm(ctx)
    if warmup:
        wl.run(ctx, params, warmup, log=False)
    pid = ctx.target.postmaster_pid()
    if pid is None:
        from ..errors import ServerError
        raise ServerError("The server's postmaster pid is not known, so perf cannot attach.",
                          "Profile a server pgaccel started (a throwaway cluster).")
    with perfprof.PerfWindow(pid) as window:
        result = wl.run(ctx, params, seconds, log=True)
    return window.result(result.ops)


def cpu_cost(ctx: BenchContext, wl: Workload, transactions: int, scale: int,
             settings: dict[str, Any]) -> cpucost.CpuCost:
    """Instructions and simulated misses per transaction of one backend with ``settings``
    (the cluster is stopped for the count and started again)."""
    target = ctx.target
    target.stop()
    try:
        safe = {**{k: v for k, v in settings.items() if k not in NOT_UNDER_VALGRIND},
                **{k: v for k, v in NOT_UNDER_VALGRIND.items() if k in settings}}
        return cpucost.count(target.inst.path("postgres"), target.pgdata, BENCH_DB, wl.name,
                             transactions, scale, safe, as_user_kwargs(target.user))
    finally:
        target.start()


@dataclass(frozen=True)
class Config:
    """One config to profile: a name, the server's bin directory, its settings."""
    name: str
    bindir: str
    settings: dict[str, Any]


def profile_configs(configs: list[Config], workloads: list[str], *, scale: int, clients: int,
                    live_seconds: float, transactions: int, workdir: str | None,
                    run_as: str | None, say: Callable[[str], None] = lambda m: None
                    ) -> list[dict[str, Any]]:
    """Every config × workload: a live window under perf (when ``live_seconds``) and the
    cachegrind count.  One throwaway cluster per bin directory, its data prepared once per
    workload; each config's settings are applied with a restart.  Returns JSON-ready rows
    (config, workload, server_version, per_transaction, mispredict_rate, live)."""
    from ..server.discovery import find_client
    from ..server.target import open_target
    from ..workloads.base import get_workload

    rows: list[dict[str, Any]] = []
    by_bin: dict[str, list[Config]] = {}
    for c in configs:
        by_bin.setdefault(c.bindir, []).append(c)
    for bindir, group in by_bin.items():
        with open_target(pg_bin=bindir, workdir=workdir, run_as=run_as) as target:
            target.apply({})
            target.ensure_bench_db()
            ctx = BenchContext(target, find_client("pgbench", target.inst), workdir=workdir)
            for wname in workloads:
                wl = get_workload(wname)
                params = RunParams(clients=clients, scale=scale)
                say(f"profile: preparing {wname} (scale {scale}) on {target.inst.version}")
                wl.prepare(ctx, params)
                for c in group:
                    settings = {k: v for k, v in c.settings.items()
                                if k not in NOT_UNDER_VALGRIND}
                    target.apply(settings)
                    live = None
                    if live_seconds:
                        say(f"profile: {c.name} {wname}: {live_seconds:g} s under perf")
                        live = live_window(ctx, wl, params, live_seconds)
                    say(f"profile: {c.name} {wname}: {transactions} and {2 * transactions} "
                        "transactions under cachegrind")
                    cost = cpu_cost(ctx, wl, transactions, scale, settings)
                    rows.append({"config": c.name, "workload": wname,
                                 "server_version": target.inst.version, "bindir": bindir,
                                 "transactions": transactions,
                                 "per_transaction": cost.to_dict(),
                                 "mispredict_rate": cost.mispredict_rate,
                                 "live": live.to_dict() if live else None})
    return rows


def relative(rows: list[dict[str, Any]], base: str) -> list[dict[str, Any]]:
    """Each row's instructions per transaction against ``base``'s for the same workload
    (``instructions_vs_base``: -0.19 is 19% fewer); rows without a base row get None."""
    ref = {r["workload"]: r["per_transaction"]["instructions"] for r in rows
           if r["config"] == base}
    out = []
    for r in rows:
        b = ref.get(r["workload"])
        mine = r["per_transaction"]["instructions"]
        out.append({**r, "instructions_vs_base": (mine / b - 1.0) if b else None})
    return out


@dataclass(frozen=True)
class WorkloadProfile:
    """What `pgaccel profile` measured: the live window (or None) and the cachegrind count."""
    workload: str
    version: str
    live: perfprof.LiveProfile | None
    cost: cpucost.CpuCost


def profile_workload(wl: Workload, settings: dict[str, str], *, transactions: int, scale: int,
                     clients: int, live_seconds: float, pg_bin: str | None,
                     run_as: str | None, workdir: str | None,
                     say: Callable[[str], None] = lambda _m: None) -> WorkloadProfile:
    """Prepare ``wl`` on a throwaway cluster with ``settings``, then the live window under
    perf (unless ``live_seconds`` is 0) and the cachegrind count of one backend."""
    from ..server.discovery import find_client
    from ..server.target import open_target
    params = RunParams(clients=clients, scale=scale)
    live = None
    with open_target(pg_bin=pg_bin, run_as=run_as, workdir=workdir) as target:
        target.apply(dict(settings))
        say(f"{wl.name} on {target.describe()}: preparing scale {scale}")
        target.ensure_bench_db()
        ctx = BenchContext(target, find_client("pgbench", target.inst), workdir=workdir)
        wl.prepare(ctx, params)
        version = target.inst.version
        if live_seconds:
            say(f"prewarm, {WARMUP_S:g} s warm-up, then {live_seconds:g} s of {wl.name} with "
                f"{clients} clients under perf")
            live = live_window(ctx, wl, params, live_seconds)
        say(f"counting {transactions} and {2 * transactions} transactions of one backend "
            "under cachegrind (about 50 times slower than native)")
        cost = cpu_cost(ctx, wl, transactions, scale, settings)
    return WorkloadProfile(wl.name, version, live, cost)
