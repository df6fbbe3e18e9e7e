"""How much client CPU the Insert Benchmark load generator needs per operation.

Operations per client-CPU-second of the pgbench processes that drive the Insert Benchmark,
for l.i0-style inserts (rows generated server-side with generate_series, and client-side
with pgbench \\set) and for the qr/qp queries.  If one client CPU second drives far more
operations than the server completes per second, the harness is not the bottleneck.

Client CPU is the pgbench process's own user+system time (wait4 rusage); server CPU is the
postmaster's process tree, both over the same step (pgaccel.metrics.measure.Measure).

Usage:  python benchmarks/insertbench_client_cost.py [--runs 3] [--rows 100000]
        [--clients 2] [--query-seconds 5] [--json out.json]
Each run loads fresh tables; the figure reported is the median over runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from pgaccel.server.discovery import find_client
from pgaccel.server.target import open_target
from pgaccel.workloads.base import BenchContext, RunParams, get_workload
from pgaccel.workloads.ibscripts import config


def one_run(ctx: BenchContext, clients: int, rows: int, query_seconds: float) -> dict:
    wl = get_workload("insert-benchmark")
    out: dict = {}
    for rowgen in ("server", "client"):
        params = RunParams(clients=clients, options={
            "rows_per_table": rows, "query_seconds": query_seconds, "rowgen": rowgen,
            "steps": "l.i0"})
        (load,) = wl.run_steps(ctx, params)
        m = load.metrics
        out[f"l.i0/{rowgen}"] = {
            "ops": load.ops, "ops_per_s": load.throughput,
            "ops_per_client_cpu_s": load.ops / m["client_cpu_s"],
            "client_cpu_us_per_op": m["client_cpu_us_per_op"],
            "server_cpu_us_per_op": m["server_cpu_us_per_op"]}
    # queries on the last load (rows generated client-side; the tables are the same shape)
    cfg = config(RunParams(clients=clients, options={"rows_per_table": rows,
                                                     "query_seconds": query_seconds}))
    wl.create_indexes(ctx, cfg)
    wl.vacuum_checkpoint(ctx, cfg)
    for kind in ("qr", "qp"):
        res = wl.query_step(ctx, cfg, kind, 100)
        qcpu = res.extra["query_client_cpu_s"]
        out[kind] = {"ops": res.ops, "ops_per_s": res.throughput,
                     "ops_per_client_cpu_s": res.ops / qcpu,
                     "client_cpu_us_per_op": qcpu * 1e6 / res.ops,
                     "server_cpu_us_per_op": res.metrics["server_cpu_us_per_op"],
                     "valid": res.valid}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rows", type=int, default=100_000, help="rows per table in l.i0")
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--query-seconds", type=float, default=5)
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args(argv)
    runs = []
    t0 = time.time()
    with open_target() as tg:
        tg.apply({})
        tg.ensure_bench_db()
        ctx = BenchContext(tg, find_client("pgbench", tg.inst))
        for i in range(a.runs):
            runs.append(one_run(ctx, a.clients, a.rows, a.query_seconds))
            print(f"run {i + 1}/{a.runs} done ({time.time() - t0:.0f} s)", file=sys.stderr)
    summary = {}
    print(f"{'operation':12s} {'ops/client-CPU-s':>17s} {'client us/op':>13s} "
          f"{'server us/op':>13s} {'ops/s':>10s}   (median of {a.runs} runs)")
    for key in runs[0]:
        med = {f: statistics.median(r[key][f] for r in runs)
               for f in ("ops_per_client_cpu_s", "client_cpu_us_per_op",
                         "server_cpu_us_per_op", "ops_per_s")}
        summary[key] = {**med, "runs": [r[key] for r in runs]}
        print(f"{key:12s} {med['ops_per_client_cpu_s']:17,.0f} "
              f"{med['client_cpu_us_per_op']:13.2f} {med['server_cpu_us_per_op']:13.2f} "
              f"{med['ops_per_s']:10,.0f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "results": summary}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
