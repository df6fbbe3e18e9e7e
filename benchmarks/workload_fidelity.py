"""Each workload beside its public original, on one cluster: throughput, server µs/op and
client µs/op side by side (issue 15).

* **sysbench oltp_read_write**: the real sysbench binary (its pgsql driver, the installed
  version) against pgaccel's pgbench twin (``driver=pgbench``), in interleaved trials
  (ABBA order: sysbench, twin, twin, sysbench, ...), each from the same restored data,
  CHECKPOINT and warm cache (``lab.trial.run_trial``, as every pgaccel trial).
* **Insert Benchmark l.i0 / l.i1 beside the public client** (``--only iibench``): iibench.py
  of mdcallag/mytools at ``IIBENCH_COMMIT`` (downloaded once, or ``--iibench PATH``; run by
  a private virtualenv with psycopg2) with the flags the benchmark's iq.sh/np.sh give it,
  one process per table, against pgaccel's insert-benchmark steps, interleaved ABBA on
  fresh tables; the server's CPU is measured the same way for both (``Measure``), the
  clients' from this process's children.
* **Insert Benchmark l.i0 / l.i1**: rows from the client as iibench sends them (the default)
  against rows generated in the server (``rowgen=server``), interleaved the same way.

* **Where sysbench and its twin differ, statement by statement** (``--only statements``):
  both drivers run the same number of transactions with pg_stat_statements loaded; per
  statement kind, calls, plans, execution and planning time per transaction side by side.

Usage:  python benchmarks/workload_fidelity.py [--rounds 4] [--duration 20] [--clients 2]
        [--only sysbench,iibench,insertbench,statements] [--iibench PATH] [--json out.json]
Prints medians over the rounds and the ratio twin / original.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from pgaccel.decide.model import TrialSpec
from pgaccel.lab.trial import run_trial, snapshot_template
from pgaccel.metrics.measure import Measure
from pgaccel.workloads.pgbench import libpq_env
from pgaccel.server.discovery import find_client
from pgaccel.server.target import open_target
from pgaccel.workloads.base import BenchContext, RunParams, get_workload

FIELDS = ("throughput", "server_cpu_us_per_op", "client_cpu_us_per_op", "ctx_switches_per_op")


def abba(names: list[str], rounds: int) -> list[tuple[int, str]]:
    out = []
    for r in range(rounds):
        out += [(r, n) for n in (names if r % 2 == 0 else list(reversed(names)))]
    return out


def sysbench_pair(ctx, a) -> dict:
    wl = get_workload("sysbench-read-write")
    base = {"table_size": a.table_size, "rand_type": a.rand_type}
    params = {d: RunParams(clients=a.clients, duration=a.duration, warmup=a.warmup,
                           scale=a.tables, options={**base, "driver": d})
              for d in ("sysbench", "pgbench")}
    ctx.target.apply({})
    ctx.target.ensure_bench_db()
    wl.prepare(ctx, params["sysbench"])
    snapshot_template(ctx.target)
    out: dict[str, list] = {"sysbench": [], "pgbench": []}
    for rnd, d in abba(["sysbench", "pgbench"], a.rounds):
        t = run_trial(ctx, TrialSpec(d, {}, wl, params[d], rnd))
        out[d].append({"throughput": t.throughput, **{k: t.metrics.get(k) for k in FIELDS[1:]}})
        print(f"  sysbench-read-write round {rnd} {d}: {t.throughput:.0f} tps, server "
              f"{t.metrics.get('server_cpu_us_per_op', 0):.0f} µs/txn", file=sys.stderr)
    return {"original": "sysbench", "twin": "pgbench", "trials": out}


def insertbench_pair(ctx, a) -> dict:
    wl = get_workload("insert-benchmark")
    out: dict[str, dict[str, list]] = {"l.i0": {"client": [], "server": []},
                                       "l.i1": {"client": [], "server": []}}
    for rnd, g in abba(["client", "server"], a.rounds):
        params = RunParams(clients=a.clients, options={
            "rows_per_table": a.ib_rows, "i1_rows": a.ib_rows // 2, "rowgen": g,
            "steps": "l.i0,l.x,l.i1"})
        ctx.target.apply({})
        ctx.target.ensure_bench_db()
        for res in wl.run_steps(ctx, params):
            if res.step in out:
                m = res.metrics
                out[res.step][g].append({"throughput": res.throughput,
                                         **{k: m.get(k) for k in FIELDS[1:]}})
                print(f"  insert-benchmark round {rnd} {g} {res.step}: "
                      f"{res.throughput:.0f} rows/s, server "
                      f"{m.get('server_cpu_us_per_op', 0):.2f} µs/row", file=sys.stderr)
    return {"original": "client", "twin": "server", "steps": out}


# The public Insert Benchmark client: iibench.py of https://github.com/mdcallag/mytools at
# this commit (2025-08-23, the newest that touches it; Postgres mode needs only psycopg2).
IIBENCH_COMMIT = "bbdf6295"
IIBENCH_URL = ("https://raw.githubusercontent.com/mdcallag/mytools/"
               f"{IIBENCH_COMMIT}/bench/ibench/iibench.py")
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "pgaccel-bench")


def iibench_client(path: str | None) -> tuple[str, str]:
    """(a Python with psycopg2, iibench.py): downloaded and installed once into CACHE."""
    os.makedirs(CACHE, exist_ok=True)
    script = path or os.path.join(CACHE, f"iibench-{IIBENCH_COMMIT}.py")
    if not os.path.exists(script):
        try:
            urllib.request.urlretrieve(IIBENCH_URL, script + ".part")
            os.replace(script + ".part", script)
        except OSError as e:
            raise SystemExit(
                f"Could not download iibench.py ({e}). Clone https://github.com/mdcallag/"
                f"mytools, check out {IIBENCH_COMMIT} and pass --iibench "
                "mytools/bench/ibench/iibench.py.")
    venv = os.path.join(CACHE, "iibench-venv")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", "psycopg2-binary>=2.9"], check=True)
    return py, script


def iibench_step(ctx, a, py: str, script: str, step: str, workdir: str) -> dict | None:
    """One step of the public client on every table (pi1..piN, one process each, at once,
    as the benchmark's np.sh starts them), measured like a pgaccel step: the server's CPU
    with Measure, the clients' CPU from this process's children.  Flags as iq.sh/np.sh
    pass them, but with data of 10 characters (pgaccel's) instead of 10-20."""
    env = libpq_env(ctx.bench_conninfo())
    common = ["--dbms=postgres", f"--db_name={env.get('PGDATABASE', '')}",
              f"--db_host={env.get('PGHOST', '')}", f"--db_user={env.get('PGUSER', '')}",
              "--secs_per_report=1", "--data_length_min=10", "--data_length_max=10",
              "--inserts_per_second=0", "--query_threads=0"]
    rows = {"l.i0": a.ib_rows, "l.x": 100, "l.i1": a.ib_rows // 2}[step]
    flags = {"l.i0": ["--setup", "--num_secondary_indexes=0", "--rows_per_commit=100"],
             "l.x": ["--num_secondary_indexes=3", "--secondary_at_end",
                     "--rows_per_commit=100"],
             "l.i1": ["--num_secondary_indexes=3", "--delete_per_insert",
                      "--rows_per_commit=50"]}[step]
    def inserted() -> int:
        """Rows inserted into the pi tables so far, once the exited backends' counts are in."""
        last, t_end = -1, time.monotonic() + 5
        while time.monotonic() < t_end:
            with ctx.connect() as conn:
                n = conn.execute("SELECT coalesce(sum(n_tup_ins), 0) FROM pg_stat_user_tables"
                                 " WHERE relname ~ '^pi[0-9]+$'").fetchone()[0]
            if n == last:
                return int(n)
            last = n
            time.sleep(0.7)
        return int(last)
    ids0 = inserted()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with Measure(ctx, sample_waits=False) as meas:
        procs = [subprocess.Popen(
            [py, script, *common, *flags, f"--max_rows={rows}", f"--table_name=pi{n}",
             f"--my_id={n}", f"--seed={1000 + n}"], cwd=workdir, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for n in range(1, a.clients + 1)]
        outs = [p.communicate()[0] for p in procs]
    wall = time.monotonic() - t0
    for p, out in zip(procs, outs):
        if p.returncode != 0:
            raise SystemExit(f"iibench.py {step} failed ({p.returncode}):\n{out[-3000:]}")
    if step == "l.x":
        return None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    client_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    ops = inserted() - ids0
    if ops < rows * a.clients:
        raise SystemExit(f"iibench.py {step} inserted {ops} rows, not {rows * a.clients}")
    m = meas.metrics(ops, {"client_cpu_s": client_s})
    return {"throughput": ops / wall, **{k: m.get(k) for k in FIELDS[1:]}}


def iibench_pair(ctx, a) -> dict:
    """The public client (iibench.py) against pgaccel's insert-benchmark, l.i0 and l.i1,
    interleaved ABBA on one cluster, fresh tables each time."""
    py, script = iibench_client(a.iibench)
    wl = get_workload("insert-benchmark")
    out: dict[str, dict[str, list]] = {"l.i0": {"iibench": [], "pgaccel": []},
                                       "l.i1": {"iibench": [], "pgaccel": []}}
    work = tempfile.mkdtemp(prefix="pgaccel-iibench-")
    for rnd, who in abba(["iibench", "pgaccel"], a.rounds):
        ctx.target.apply({})
        ctx.target.ensure_bench_db()
        with ctx.connect() as conn:         # the other driver's tables go first
            for n in range(1, a.clients + 1):
                conn.execute(f"DROP TABLE IF EXISTS pi{n}")
                conn.execute(f"DROP TABLE IF EXISTS ib_purchases_{n}")
            conn.execute("CHECKPOINT")
        if who == "iibench":
            got = {}
            for step in ("l.i0", "l.x", "l.i1"):
                r = iibench_step(ctx, a, py, script, step, work)
                if r is not None:
                    got[step] = r
        else:
            params = RunParams(clients=a.clients, options={
                "rows_per_table": a.ib_rows, "i1_rows": a.ib_rows // 2,
                "steps": "l.i0,l.x,l.i1"})
            got = {res.step: {"throughput": res.throughput,
                              **{k: res.metrics.get(k) for k in FIELDS[1:]}}
                   for res in wl.run_steps(ctx, params) if res.step in out}
        for step, r in got.items():
            out[step][who].append(r)
            print(f"  insert-benchmark round {rnd} {who} {step}: {r['throughput']:.0f} "
                  f"rows/s, server {r.get('server_cpu_us_per_op') or 0:.2f} µs/row",
                  file=sys.stderr)
    return {"original": "iibench", "twin": "pgaccel", "steps": out}


STMT_SQL = """SELECT regexp_replace(query, 'sbtest[0-9]+', 'sbtestN', 'g') AS q,
       sum(calls), sum(plans), sum(total_exec_time), sum(total_plan_time), sum(rows),
       sum(shared_blks_hit + shared_blks_read)
  FROM pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
 GROUP BY 1 ORDER BY 4 DESC"""


def statements(ctx, a) -> dict:
    """Per statement kind, per transaction: calls, plans, exec and plan ms, rows, buffers."""
    wl = get_workload("sysbench-read-write")
    ctx.target.apply({"shared_preload_libraries": "pg_stat_statements",
                      "pg_stat_statements.track_planning": "on"})
    ctx.target.ensure_bench_db()
    base = {"table_size": a.table_size, "rand_type": a.rand_type}
    params = {d: RunParams(clients=a.clients, scale=a.tables, options={**base, "driver": d})
              for d in ("sysbench", "pgbench")}
    wl.prepare(ctx, params["sysbench"])
    with ctx.connect() as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    out: dict = {}
    n = a.statement_transactions
    for d in ("sysbench", "pgbench"):
        with ctx.connect() as conn:
            conn.execute("SELECT pg_stat_statements_reset()")
        r = wl.run_count(ctx, params[d], n)
        with ctx.connect() as conn:
            rows = conn.execute(STMT_SQL).fetchall()
        txns = n * a.clients
        out[d] = {q: {k: float(v) / txns for k, v in zip(
                          ("calls", "plans", "exec_ms", "plan_ms", "rows", "buffers"),
                          (c, p, e, pl, rw, b))}
                  for q, c, p, e, pl, rw, b in rows if c}
        out[d]["_ops"] = r.ops
    print(f"\nsysbench vs twin, per transaction ({n} per client, {a.clients} clients)")
    print(f"{'statement':60s} {'calls':>11s} {'plans':>11s} {'exec ms':>15s} "
          f"{'plan ms':>15s}")
    keys = sorted(set(out["sysbench"]) | set(out["pgbench"]), key=str)
    for k in keys:
        if k == "_ops":
            continue
        x, y = out["sysbench"].get(k, {}), out["pgbench"].get(k, {})
        print(f"{k[:60]:60s} {x.get('calls', 0):5.2f}/{y.get('calls', 0):5.2f} "
              f"{x.get('plans', 0):5.2f}/{y.get('plans', 0):5.2f} "
              f"{x.get('exec_ms', 0):7.4f}/{y.get('exec_ms', 0):7.4f} "
              f"{x.get('plan_ms', 0):7.4f}/{y.get('plan_ms', 0):7.4f}")
    for d in ("sysbench", "pgbench"):
        tot = sum(v["exec_ms"] + v["plan_ms"] for k, v in out[d].items() if k != "_ops")
        print(f"{d}: {tot:.4f} ms of execution + planning per transaction")
    ctx.target.apply({})
    return out


def med(rows: list[dict], key: str) -> float | None:
    xs = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(xs) if xs else None


def table(title: str, a_name: str, b_name: str, a_rows: list, b_rows: list) -> dict:
    print(f"\n{title}  (median of {len(a_rows)} trials each)")
    print(f"{'':22s} {a_name:>14s} {b_name:>14s} {'ratio':>8s}")
    res = {}
    for k in FIELDS:
        x, y = med(a_rows, k), med(b_rows, k)
        ratio = (y / x) if x and y else None
        res[k] = {a_name: x, b_name: y, "ratio": ratio}
        print(f"{k:22s} {x if x is not None else float('nan'):14.1f} "
              f"{y if y is not None else float('nan'):14.1f} "
              f"{ratio if ratio is not None else float('nan'):8.3f}")
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--table-size", type=int, default=100_000)
    ap.add_argument("--ib-rows", type=int, default=300_000, help="rows per table in l.i0")
    ap.add_argument("--statement-transactions", type=int, default=2000)
    ap.add_argument("--rand-type", default="special", choices=("special", "uniform"),
                    help="sysbench's id distribution, for both drivers")
    ap.add_argument("--iibench", help="iibench.py from mytools (default: download it)")
    ap.add_argument("--only", default="sysbench,iibench,insertbench")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args(argv)
    only = set(a.only.split(","))
    results: dict = {"args": vars(a)}
    t0 = time.time()
    with open_target() as tg:
        ctx = BenchContext(tg, find_client("pgbench", tg.inst))
        if "sysbench" in only:
            sb = sysbench_pair(ctx, a)
            results["sysbench-read-write"] = table(
                "sysbench oltp_read_write: the real sysbench vs pgaccel's pgbench twin",
                "sysbench", "pgbench twin", sb["trials"]["sysbench"], sb["trials"]["pgbench"])
            results["sysbench-read-write"]["trials"] = sb["trials"]
        if "statements" in only:
            results["statements"] = statements(ctx, a)
        if "iibench" in only:
            ii = iibench_pair(ctx, a)
            for step, rows in ii["steps"].items():
                results[f"iibench {step}"] = table(
                    f"Insert Benchmark {step}: the public client (iibench.py "
                    f"{IIBENCH_COMMIT}) vs pgaccel", "iibench.py", "pgaccel",
                    rows["iibench"], rows["pgaccel"])
                results[f"iibench {step}"]["trials"] = rows
        if "insertbench" in only:
            ib = insertbench_pair(ctx, a)
            for step, rows in ib["steps"].items():
                results[f"insert-benchmark {step}"] = table(
                    f"Insert Benchmark {step}: rows as iibench sends them vs rows made in "
                    "the server", "client rows", "server rows", rows["client"], rows["server"])
                results[f"insert-benchmark {step}"]["trials"] = rows
    print(f"\n({time.time() - t0:.0f} s)", file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
