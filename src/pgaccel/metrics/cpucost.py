"""Deterministic CPU cost per transaction: one backend under valgrind's cachegrind.

Timing on a shared 2-core VM varies by 6-19% between trials; the instructions a backend
executes for a transaction do not.  ``pgaccel profile`` runs the workload's transactions in
PostgreSQL's single-user mode (``postgres --single``: one backend, no client, no network, no
other process) under ``valgrind --tool=cachegrind --cache-sim=yes --branch-sim=yes``, twice:
with N and with 2N transactions.  The difference divided by N is the cost of one
transaction, with the start-up and shutdown of the backend cancelled out.  Counted:
instructions, I1/LLi misses, data references, D1/LLd misses, conditional and indirect
branches and their mispredictions (cachegrind simulates the caches and a branch predictor;
the counts are of the simulated machine, not this CPU's hardware counters, which this VM
does not have).

Parsing is pure (:func:`parse_cachegrind`, :func:`per_transaction`); :func:`count` runs
valgrind as the server's OS user on a stopped cluster's data directory.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass

from ..errors import NotFound, ServerError

COUNTERS = ("instructions", "i1_misses", "lli_misses", "data_refs", "d1_misses", "lld_misses",
            "branches", "mispredicts")
_LINES = {"I   refs": "instructions", "I1  misses": "i1_misses", "LLi misses": "lli_misses",
          "D   refs": "data_refs", "D1  misses": "d1_misses", "LLd misses": "lld_misses",
          "Branches": "branches", "Mispredicts": "mispredicts"}
PROFILE_WORKLOADS = ("select-only", "tpcb-like")
_VALGRIND_LINE = re.compile(r"(==|--)\d+(==|--)")     # valgrind's own stderr lines


def parse_cachegrind(stderr: str) -> dict[str, int]:
    """The summary totals valgrind prints at exit (``==PID== I   refs: 1,234``)."""
    out: dict[str, int] = {}
    for line in stderr.splitlines():
        m = re.match(r"==\d+==\s+([A-Za-z0-9 ]+?):\s+([\d,]+)", line)
        if m and m.group(1).strip() in {k.strip() for k in _LINES}:
            key = next(v for k, v in _LINES.items() if k.split() == m.group(1).split())
            out[key] = int(m.group(2).replace(",", ""))
    return out


@dataclass(frozen=True)
class CpuCost:
    """Counts per transaction (floats: the difference of two runs divided by N)."""
    transactions: int
    instructions: float
    i1_misses: float
    lli_misses: float
    data_refs: float
    d1_misses: float
    lld_misses: float
    branches: float
    mispredicts: float

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def mispredict_rate(self) -> float:
        return self.mispredicts / self.branches if self.branches else 0.0


def per_transaction(small: dict[str, int], big: dict[str, int], n: int) -> CpuCost:
    """Cost of one transaction from runs of ``n`` and ``2n`` transactions."""
    missing = [c for c in COUNTERS if c not in small or c not in big]
    if missing:
        raise ServerError(f"cachegrind's summary lacks {', '.join(missing)}.",
                          "Check that valgrind ran with --cache-sim=yes --branch-sim=yes.")
    # a count that barely grows (last-level misses of a warm run) can come out a hair
    # below zero: it is zero
    return CpuCost(n, **{c: max(0.0, (big[c] - small[c]) / n) for c in COUNTERS})


def transactions_sql(workload: str, n: int, scale: int, seed: int = 1) -> str:
    """``n`` transactions of ``workload`` as single-user mode input (one per line), the
    same statements as pgbench's built-in scripts, with a fixed random sequence."""
    rng = random.Random(seed)
    rows = 100000 * scale
    lines = []
    for _ in range(n):
        aid = rng.randint(1, rows)
        if workload == "select-only":
            lines.append(f"SELECT abalance FROM pgbench_accounts WHERE aid = {aid};")
        elif workload == "tpcb-like":
            tid, bid = rng.randint(1, 10 * scale), rng.randint(1, scale)
            delta = rng.randint(-5000, 5000)
            lines.append(
                f"BEGIN; UPDATE pgbench_accounts SET abalance = abalance + {delta} WHERE aid = "
                f"{aid}; SELECT abalance FROM pgbench_accounts WHERE aid = {aid}; UPDATE "
                f"pgbench_tellers SET tbalance = tbalance + {delta} WHERE tid = {tid}; UPDATE "
                f"pgbench_branches SET bbalance = bbalance + {delta} WHERE bid = {bid}; INSERT "
                f"INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ({tid}, {bid}, "
                f"{aid}, {delta}, CURRENT_TIMESTAMP); END;")
        else:
            raise ValueError(f"no profile script for {workload!r}; one of "
                             f"{', '.join(PROFILE_WORKLOADS)}")
    return "\n".join(lines) + "\n"


def valgrind() -> str:
    path = shutil.which("valgrind")
    if path is None:
        raise NotFound("valgrind is not installed; the CPU profile runs the backend under "
                       "cachegrind.", "Run `apt-get install valgrind` (or ./install.sh).")
    return path


def run_cachegrind(postgres: str, pgdata: str, dbname: str, sql: str,
                   settings: dict[str, object], user_kwargs: dict) -> dict[str, int]:
    """One single-user backend of ``postgres`` on the stopped cluster ``pgdata`` under
    cachegrind, fed ``sql``; the summary counts."""
    opts = [a for k, v in settings.items() for a in ("-c", f"{k}={v}")]
    cmd = [valgrind(), "--tool=cachegrind", "--cache-sim=yes", "--branch-sim=yes",
           "--cachegrind-out-file=/dev/null", postgres, "--single", "-D", pgdata, *opts,
           dbname]
    r = subprocess.run(cmd, input=sql, capture_output=True, text=True, timeout=3600,
                       **user_kwargs)
    counts = parse_cachegrind(r.stderr)
    if r.returncode != 0 or "instructions" not in counts:
        # the backend's last words, not valgrind's summary that follows them
        own = [ln for ln in r.stderr.strip().splitlines() if not _VALGRIND_LINE.match(ln)]
        tail = " ".join(own[-3:])[:400]
        raise ServerError(f"The profiled backend failed (exit {r.returncode}): {tail}",
                          "Check the settings; `postgres --single` must start on the data "
                          "directory.")
    errors = [ln for ln in r.stdout.splitlines() if "ERROR:" in ln]
    if errors:
        raise ServerError(f"The profiled transactions failed: {errors[0].strip()[:300]}",
                          "The data must be prepared first (pgbench -i).")
    return counts


def count(postgres: str, pgdata: str, dbname: str, workload: str, n: int, scale: int,
          settings: dict[str, object], user_kwargs: dict) -> CpuCost:
    """CPU cost per transaction of ``workload`` (runs of n and 2n transactions)."""
    small = run_cachegrind(postgres, pgdata, dbname, transactions_sql(workload, n, scale),
                           settings, user_kwargs)
    big = run_cachegrind(postgres, pgdata, dbname, transactions_sql(workload, 2 * n, scale),
                         settings, user_kwargs)
    return per_transaction(small, big, n)
