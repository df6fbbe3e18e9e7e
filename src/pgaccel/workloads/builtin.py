"""pgbench's built-in scripts: select-only, simple-update, tpcb-like.

Data: ``pgbench -i -s SCALE`` (100,000 accounts per scale unit; about 15 MB per unit), with
optional ``--partitions``.  The three scripts share it.
"""

from __future__ import annotations

import subprocess
from typing import Any, Callable

from ..errors import BenchError, DiskFull
from .base import BenchContext, RunParams, RunResult, Workload, load_threads, register
from .pgbench import libpq_env, run_pgbench


class PgbenchBuiltin(Workload):
    unit = "tps"
    remote_clients = True
    defaults = {"scale": 10, "duration": 20.0, "warmup": 10.0, "clients": 2}
    knobs = {"scale": "pgbench scale factor: 100,000 accounts (~15 MB) per unit",
             "partitions": "partition pgbench_accounts into N range partitions (pgbench -i "
                           "--partitions); 0 = none"}

    def __init__(self, name: str, builtin: str, writes: bool, summary: str):
        self.name, self.builtin, self.writes, self.summary = name, builtin, writes, summary

    def data_group(self) -> str:
        return "pgbench"

    def data_bytes(self, params: RunParams) -> int:
        # measured on PostgreSQL 15 (pgbench -i --foreign-keys): 17.3 MB per unit at scale
        # 5, 16.1 MB at scale 20 (pg_database_size / scale, fixed catalog share included)
        return int(8e6 + 16e6 * params.scale)

    def data_key(self, params: RunParams) -> dict:
        return {"workload": "pgbench", "scale": params.scale,
                "partitions": int(params.options.get("partitions", 0))}

    def build(self, ctx: BenchContext, params: RunParams) -> None:
        cmd = [ctx.pgbench, "-i", "-q", "-s", str(params.scale), "--foreign-keys"]
        parts = int(params.options.get("partitions", 0))
        if parts:
            cmd += [f"--partitions={parts}"]
        env = libpq_env(ctx.bench_conninfo())
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            err = (r.stderr or r.stdout).strip()
            if "No space left on device" in err:
                raise DiskFull("The disk filled up while loading pgbench data "
                               f"(scale {params.scale}).",
                               "Free space, use a smaller --scale, or use --workdir elsewhere.")
            raise BenchError(f"pgbench -i failed: {err.splitlines()[-1] if err else r.returncode}",
                             "Check the server log and that the disk has room.")

    def pgbench_kw(self, ctx: BenchContext, params: RunParams) -> dict[str, Any]:
        """What a pgbench run of this workload is made of (``pgbench_cmd.pgbench_args``
        without the duration); measuring in slices (``workloads/slices.py``) needs it."""
        return dict(builtin=self.builtin, scripts=None, clients=params.clients,
                    threads=load_threads(params.threads, params.clients), rate=params.rate,
                    protocol=params.protocol, defines=None, extra_args=None)

    def run(self, ctx: BenchContext, params: RunParams, duration: float, *,
            stop_when: Callable[[list[float]], bool] | None = None,
            on_progress: Callable[[float, float], None] | None = None,
            log: bool = True) -> RunResult:
        kw = self.pgbench_kw(ctx, params)
        r = run_pgbench(ctx.pgbench, ctx.bench_conninfo(), builtin=kw["builtin"],
                        clients=kw["clients"], threads=kw["threads"], duration=duration,
                        rate=kw["rate"], protocol=kw["protocol"], log=log,
                        session_options=ctx.target.session_options,
                        stop_when=stop_when, on_progress=on_progress, workdir=ctx.workdir,
                        hosts=ctx.client_hosts)
        return RunResult(ops=r.transactions, duration_s=r.duration_s, throughput=r.tps,
                         latency_ms=r.latency_ms, series=r.tps_series,
                         latency_series=r.latency_p50_series, client=r.client,
                         failed=r.failed, extra={"summary_tps": r.summary_tps})


SELECT_ONLY = register(PgbenchBuiltin(
    "select-only", "select-only", False,
    "pgbench built-in: one primary-key SELECT on pgbench_accounts per transaction"))
SIMPLE_UPDATE = register(PgbenchBuiltin(
    "simple-update", "simple-update", True,
    "pgbench built-in: UPDATE accounts, SELECT, INSERT history (no branch/teller updates)"))
TPCB_LIKE = register(PgbenchBuiltin(
    "tpcb-like", "tpcb-like", True,
    "pgbench built-in TPC-B-like: 3 UPDATEs, a SELECT and an INSERT per transaction"))
