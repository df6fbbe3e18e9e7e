"""Each pgbench and its backends on one CPU (workloads/pinning.py): how the load is split
(a table), and on a real throwaway server that every backend of a share and its pgbench end
up on the share's CPU, with every share's transactions read back."""

from __future__ import annotations

import glob
import os
import subprocess
import time
from contextlib import ExitStack

import pytest

from pgaccel.lab.experiment import Experiment
from pgaccel.decide.model import Variant, WorkloadSpec
from pgaccel.lab.paired import session_names
from pgaccel.server.discovery import find_client
from pgaccel.server.target import open_target
from pgaccel.workloads.base import BenchContext, RunParams, get_workload
from pgaccel.workloads.pinning import Share, pin_backends, split_load, usable_cpus
from pgaccel.workloads.slices import PausedPgbench


@pytest.mark.parametrize("clients, threads, cpus, want", [
    (4, 4, [0, 1], [(0, 2, 2), (1, 2, 2)]),
    (5, 5, [0, 1], [(0, 3, 3), (1, 2, 2)]),
    (4, 1, [0, 1], [(0, 2, 1), (1, 2, 1)]),          # at least one thread each
    (4, 2, [3, 1], [(1, 2, 1), (3, 2, 1)]),          # CPUs in order, whatever was given
    (1, 1, [0, 1, 2, 3], [(0, 1, 1)]),               # no share without a client
    (3, 3, [0, 1, 2, 3], [(0, 1, 1), (1, 1, 1), (2, 1, 1)]),
    (8, 3, [0, 1], [(0, 4, 2), (1, 4, 1)]),          # threads add up to what was asked
    (6, 6, [0, 0, 1], [(0, 3, 3), (1, 3, 3)]),       # a CPU named twice is one CPU
    (0, 1, [0, 1], []),
    (2, 2, [], []),
])
def test_split_load(clients, threads, cpus, want):
    got = split_load(clients, threads, cpus)
    assert [(s.cpu, s.clients, s.threads) for s in got] == want
    if got:
        assert sum(s.clients for s in got) == clients
        assert sum(s.threads for s in got) == max(len(got), min(threads, clients))


def test_too_few_connections_in_time_is_said_and_what_was_placed_is_let_go():
    """A share of 2 clients with 1 session in sight: the one seen is placed while waiting,
    then, at the deadline, put back on every CPU (a stand-in process for the backend)."""
    shares = [Share(usable_cpus()[0], 2, 2)]
    stand_in = subprocess.Popen(["sleep", "30"])
    calls = []
    affinity_seen = []

    def backends():
        calls.append(1)
        affinity_seen.append(os.sched_getaffinity(stand_in.pid))
        return [(stand_in.pid, shares[0].app_name), (1, "somebody else")]
    before = os.sched_getaffinity(0)
    try:
        t0 = time.monotonic()
        why = pin_backends(shares, backends, timeout=0.2, poll=0.01)
        assert why == "1 of pgbench's 2 connections open after 0.2 s"
        assert time.monotonic() - t0 >= 0.2 and len(calls) > 2     # it waited, asking again
        assert {shares[0].cpu} in affinity_seen[1:]                 # placed while waiting
        assert os.sched_getaffinity(stand_in.pid) == set(usable_cpus())
        assert os.sched_getaffinity(0) == before
    finally:
        stand_in.kill()
        stand_in.wait()


def test_a_session_that_goes_is_not_counted_once_the_clients_are_there():
    """pgbench's own first connection (it reads the scale, then closes it) comes and goes:
    placement is done when each share has exactly its clients, twice in a row."""
    shares = [Share(usable_cpus()[0], 1, 1)]
    procs = [subprocess.Popen(["sleep", "30"]) for _ in range(2)]
    first, client = procs
    lists = [[(first.pid, shares[0].app_name)], [],
             [(client.pid, shares[0].app_name)], [(client.pid, shares[0].app_name)]]
    try:
        assert pin_backends(shares, lambda: lists.pop(0), timeout=5, poll=0.0) is None
        assert lists == []                                  # it waited for the second sight
        assert os.sched_getaffinity(client.pid) == {shares[0].cpu}
    finally:
        for q in procs:
            q.kill()
            q.wait()


def test_each_share_and_its_backends_run_on_its_cpu_and_all_their_transactions_count():
    cpus = usable_cpus()
    params = RunParams(clients=3, duration=2, warmup=1, scale=1)
    wl = get_workload("select-only")
    with ExitStack() as stack:
        t = stack.enter_context(open_target())
        ctx = BenchContext(t, find_client("pgbench", t.inst))
        t.start()
        t.ensure_bench_db()
        wl.prepare(ctx, params)
        kw = wl.pgbench_kw(ctx, params)
        shares = split_load(kw["clients"], kw["threads"], cpus)
        # a session of the same name opened before this round's pgbench is not one of its
        old = stack.enter_context(ctx.connect())
        old.execute(f"SET application_name = '{shares[0].app_name}'")
        old_pid = old.info.backend_pid
        time.sleep(1.2)
        p = PausedPgbench(ctx.pgbench, ctx.bench_conninfo(), kw, 60, shares=shares)
        stack.callback(p.close)
        assert [os.sched_getaffinity(q.pid) for q in p.procs] == [{s.cpu} for s in shares]
        p.resume()
        assert pin_backends(shares, lambda: session_names(ctx, p.started), timeout=10) is None
        placed = {}
        for pid, name in session_names(ctx, p.started):
            placed.setdefault(name, []).append(os.sched_getaffinity(pid))
        assert placed == {s.app_name: [{s.cpu}] * s.clients for s in shares}
        assert os.sched_getaffinity(old_pid) == set(cpus)
        time.sleep(0.5)
        ends, lats, failed, _ = p.finish(timeout=30)
        assert ends.size > 100 and not failed.any()
        # every share's pgbench logged: its log files are there, one per thread
        logs = glob.glob(os.path.join(p.dir, "tx*-.*"))
        assert len(logs) == sum(s.threads for s in shares)


def test_shares_number_their_clients_from_client_base(tmp_path):
    """A script that numbers its clients from a ``client_base`` define (the Insert
    Benchmark's queries: client c reads table c + 1) gets each share's first client there:
    3 clients over 2 shares are clients 0, 1 and 2, not 0, 1 and 0 again."""
    cpus = usable_cpus()
    shares = [Share(cpus[0], 2, 1), Share(cpus[-1], 1, 1)]
    script = tmp_path / "who.sql"
    script.write_text("INSERT INTO who VALUES (:client_id + :client_base)\n")
    kw = {"builtin": None, "scripts": [(str(script), 1)], "clients": 3, "threads": 2,
          "rate": None, "protocol": "simple", "defines": {"client_base": 0},
          "extra_args": None}
    with ExitStack() as stack:
        t = stack.enter_context(open_target())
        ctx = BenchContext(t, find_client("pgbench", t.inst))
        t.start()
        t.ensure_bench_db()
        conn = stack.enter_context(ctx.connect())
        conn.execute("CREATE TABLE who (c int)")
        p = PausedPgbench(ctx.pgbench, ctx.bench_conninfo(), kw, 60, shares=shares,
                          workdir=str(tmp_path))
        stack.callback(p.close)
        p.resume()
        time.sleep(0.5)
        p.finish(timeout=30)
        seen = conn.execute("SELECT c, count(*) FROM who GROUP BY c ORDER BY c").fetchall()
        assert [c for c, _ in seen] == [0, 1, 2]
        assert all(n > 10 for _, n in seen)


def test_a_side_by_side_round_says_where_its_load_ran():
    """Placed by default; ``pin=False`` leaves it to the scheduler, and says so.
    It takes long (about 31 s on a 2-core VM: two throwaway servers with scale-1 data and two
    side-by-side experiments, pinned and not, each a burn-in round and a round of 2-s trials
    after 1-s warm-ups)."""
    params = RunParams(clients=3, duration=2, warmup=1, scale=1)
    with ExitStack() as stack:
        ctxs = []
        for _ in range(2):
            t = stack.enter_context(open_target())
            ctxs.append(BenchContext(t, find_client("pgbench", t.inst)))
        for pin in (True, False):
            exp = Experiment(ctxs[0], [Variant("a", {}), Variant("b", {})],
                             [WorkloadSpec(get_workload("select-only"), params)], rounds=1,
                             side_by_side=True, contexts={"a": ctxs[0], "b": ctxs[1]},
                             pin=pin)
            exp.run()
            want = ({"on": True, "cpus": {str(s.cpu): s.clients
                                          for s in split_load(3, 3, usable_cpus())}}
                    if pin else {"on": False})
            assert [t.metrics["pinned"] for t in exp.trials] == [want, want]
