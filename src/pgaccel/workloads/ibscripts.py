"""The Insert Benchmark's sizes, configuration and pgbench scripts (pure): what
``insertbench.py`` runs, built as text.  See that module for the steps and why the scripts
look as they do (iibench.py's rows, batches, value ranges, delete form and commits)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources
from typing import Any, Callable

from ..errors import UsageError
from .base import RunParams
from .steps import option

STEPS = ["l.i0", "l.x", "l.i1", "l.i2", "qr100", "qp100", "qr500", "qp500", "qr1000", "qp1000"]
ROWS_PER_COMMIT = {"l.i0": 100, "l.i1": 50, "l.i2": 5}
VALID_FRACTION = 0.95
# iibench's value ranges (its defaults: cashregisters, products, customers, max_price) and
# its data column: data_length 10, data_random_pct 50 -> int(10 * 0.75 * 0.5) = 3 random
IIBENCH_RANGES = {"cashregisterid": (0, 999), "productid": (0, 9999),
                  "customerid": (0, 99999), "price": (0, 499)}
DATA_FIXED, DATA_RANDOM = "a" * 7, 3
SIZES: dict[str, dict[str, Any]] = {
    # rows per table; rows inserted+deleted per table in l.i1 / l.i2; seconds per q step
    "tiny": {"rows_per_table": 20_000, "i1_rows": 10_000, "i2_rows": 2_000, "query_seconds": 4},
    "small": {"rows_per_table": 250_000, "i1_rows": 100_000, "i2_rows": 20_000,
              "query_seconds": 15},
    "medium": {"rows_per_table": 5_000_000, "i1_rows": 1_000_000, "i2_rows": 200_000,
               "query_seconds": 300},
    "large": {"rows_per_table": 50_000_000, "i1_rows": 10_000_000, "i2_rows": 1_000_000,
              "query_seconds": 1800},
}
COUNT_ROWS_UP_TO = 5_000_000         # count(*) the queues before/after when this small


def table(client: int) -> str:
    return f"ib_purchases_{client + 1}"


def template(name: str) -> str:
    return resources.files("pgaccel.workloads").joinpath(
        "scripts", "insertbench", f"{name}.sql").read_text().strip("\n")


def fill(text: str, client: int, **kw: Any) -> str:
    text = text.replace("@T@", table(client)).replace("@C@", str(client))
    for k, v in kw.items():
        text = text.replace(f"@{k.upper()}@", str(v))
    return text


@dataclass
class IBConfig:
    tables: int
    rows_per_table: int
    i1_rows: int
    i2_rows: int
    query_seconds: float
    rowgen: str = "client"
    writer_rows_per_commit: int = 50
    protocol: str = "prepared"
    index_passes: int = 1
    load_analyze: str = "auto"


# what l.i0 leaves autovacuum's ANALYZE to (the ``load_analyze`` knob): ``auto``, the
# benchmark's way, or ``after``: held off l.i0's tables while it loads, then one ANALYZE of
# each once the step is done (``InsertBenchmark.finish_load``)
LOAD_ANALYZE = ("auto", "after")


def config(params: RunParams) -> IBConfig:
    size = option(params, "size", "small")
    if size not in SIZES:
        raise UsageError(f"size={size!r} is not an Insert Benchmark size.",
                         f"Choose one of {', '.join(SIZES)} or give rows_per_table etc.")
    base = SIZES[size]
    cfg = IBConfig(
        tables=max(1, params.clients),
        rows_per_table=option(params, "rows_per_table", base["rows_per_table"], int),
        i1_rows=option(params, "i1_rows", base["i1_rows"], int),
        i2_rows=option(params, "i2_rows", base["i2_rows"], int),
        query_seconds=option(params, "query_seconds", base["query_seconds"], float),
        rowgen=option(params, "rowgen", "client"),
        writer_rows_per_commit=option(params, "writer_rows_per_commit", 50, int),
        protocol=params.protocol,
        index_passes=option(params, "index_passes", 1, int),
        load_analyze=option(params, "load_analyze", "auto"))
    if cfg.rowgen not in ("server", "client"):
        raise UsageError(f"rowgen={cfg.rowgen!r}: use server or client.")
    if cfg.rows_per_table < 100 or cfg.writer_rows_per_commit < 1:
        raise UsageError("rows_per_table must be at least 100 and writer_rows_per_commit >= 1.")
    if cfg.load_analyze not in LOAD_ANALYZE:
        raise UsageError(f"load_analyze={cfg.load_analyze!r}: use auto (autovacuum analyzes "
                         "the tables while l.i0 loads them, the benchmark's way) or after "
                         "(once, when l.i0 is done).")
    if not 1 <= cfg.index_passes <= 10:
        raise UsageError(f"index_passes={cfg.index_passes}: l.x builds its indexes 1 to 10 "
                         "times.", "Give index_passes between 1 (the benchmark's) and 10.")
    return cfg


# -- scripts (pure) ------------------------------------------------------------------------
def client_chain(clients: int, body: Callable[[int], str], *, based: bool = False) -> str:
    """``body(c)`` for the client whose :client_id is c; ``based``: whose :client_id plus
    :client_base is c (a pgbench that runs clients c.. of the step, as a share placed on a CPU
    of its own does: ``workloads/slices.PausedPgbench``)."""
    if clients == 1:
        return body(0)
    me = ":client_id + :client_base" if based else ":client_id"
    out = []
    for c in range(clients):
        out.append(("\\if" if c == 0 else "\\elif") + f" {me} = {c}")
        out.append(body(c))
    out.append("\\endif")
    return "\n".join(out)


def insert_statements(rows: int, rowgen: str) -> tuple[str, str]:
    """(client-side \\set prelude, the INSERT statement with @T@) for ``rows`` rows: one
    statement either way (client: values written into its text, as iibench does)."""
    if rowgen == "server":
        return "", template("insert_server").replace("@ROWS@", str(rows))
    row_sets = template("insert_client_row")
    prelude = "\n".join(row_sets.replace("@R@", str(r)) for r in range(1, rows + 1))
    vals = ", ".join(f"(now(), :cr{r}, :cu{r}, :pr{r}, :pc{r}.00, '{DATA_FIXED}:da{r}')"
                     for r in range(1, rows + 1))
    return prelude, ("INSERT INTO @T@ (dateandtime, cashregisterid, customerid, productid, "
                     f"price, data) VALUES {vals};")


def write_protocol(cfg: "IBConfig") -> str:
    """The protocol of the write steps' pgbench: simple for client rows (the values are in
    the statement text, as iibench sends them; prepared would also cap a statement at 255
    parameters), the ``protocol`` knob for server rows."""
    return "simple" if cfg.rowgen == "client" else cfg.protocol


def write_script(clients: int, rows: int, rowgen: str, *, delete: bool, pace: bool) -> str:
    """One INSERT of ``rows`` rows (and, with ``delete``, one DELETE of the ``rows`` oldest),
    optionally paced to the schedule in :next_C / :period.

    Each statement commits on its own, as iibench's inserter and deleter (two connections in
    autocommit mode) do; its DELETE has iibench's form, ``... WHERE transactionid IN (SELECT
    ... ORDER BY transactionid LIMIT rows)`` from the lowest id not yet deleted, which the
    client tracks as iibench's statement maker does.  One difference stays: iibench runs the
    two statements on separate connections at the same time, pgaccel's client one after the
    other."""
    prelude, insert = insert_statements(rows, rowgen)      # one statement either way

    def body(c: int) -> str:
        lines = []
        if pace:
            lines.append(fill(template("pace"), c))
        lines.append(fill(insert, c))
        if delete:
            lines.append(fill(template("delete_oldest"), c, rows=rows))
            lines.append(f"\\set dmin_{c} :dhi_{c}")
        return "\n".join(lines)

    head = "-- generated by pgaccel: Insert Benchmark writer\n"
    return head + (prelude + "\n" if prelude else "") + client_chain(clients, body) + "\n"


def query_scripts(clients: int, kind: str) -> list[str]:
    """qr: the three index-covered range queries (one script each, chosen at random per
    query); qp: one SELECT of 10 random primary keys in [:lo_C, :hi_C].  Client c queries
    table c + 1, c being :client_id + :client_base (``-D client_base=0`` for one pgbench)."""
    names = ["range_market", "range_register", "range_pdc"] if kind == "qr" else ["point"]
    return [f"-- generated by pgaccel: Insert Benchmark {name}\n"
            + client_chain(clients, lambda c, n=name: fill(template(n), c), based=True)
            + "\n"
            for name in names]


def writer_valid(achieved_rows_per_s: float, target_rows_per_s: float) -> bool:
    return achieved_rows_per_s >= VALID_FRACTION * target_rows_per_s


def paced_seconds(done: int, tables: int, period: float, span: float) -> float:
    """The seconds paced writers are judged over (their rows / these seconds against the
    target rate) when ``done`` commits ended within ``span`` seconds of the start of their
    schedules, one per table (``tables``), each with a commit due every ``period``.

    A commit is on time when it ends within one period of being due (its pace then sleeps
    until the next is due), so the writers owe every commit due up to one period before the
    end: on time they are judged over exactly the seconds of their commits (100%, whatever
    the phase of the schedule against the end); behind, over the seconds of what they owed.

    Until November 29 they were judged up to their last commit's end, which counted one
    commit's own duration against them: in a 4-second step of 0.5-second periods, commits of
    0.25 s, every one on time, read 7 in 3.75 s: 93%, and the step was invalid.
    A writer whose commits take longer than a period falls further behind with each one and
    reads below 95% (commits of 0.55 s in 0.5-second periods: 86% in 4 s;
    ``tests/test_workloads_insertbench.py``)."""
    due = tables * max(0, math.floor(span / period + 1e-9) - 1)
    return max(done, due, 1) * period / tables


# the least a load step is cut to on a slow host (``host_sizes``): tables still larger than a q
# step's writers delete, queues long enough for a few hundred commits
SIZE_FLOOR = {"rows_per_table": 20_000, "i1_rows": 5_000, "i2_rows": 1_000}


def host_sizes(cfg: "IBConfig", inserts_per_s: float, seconds: float) -> dict[str, Any]:
    """The load steps' rows for a host that loads ``inserts_per_s`` rows a second (l.i0,
    measured): ``rows_per_table`` cut so l.i0 lasts about ``seconds`` a variant, ``i1_rows``
    and ``i2_rows`` by the same factor, so the steps keep their proportions.  Never more than
    ``cfg`` gives (a faster host keeps them), never below ``SIZE_FLOOR``; rounded to 100s.
    l.x builds its indexes over fewer rows then, so it builds them ``index_passes`` over that
    factor times (rounded up, at most 10): as many rows indexed as given, because l.x's
    noise is its turns' (an A/A on a 2.3 GHz VM, lab 20261129-140321-d1ae: its round pairs
    3.5-6.1% apart with 54% of the rows in two passes, 6.4-6.6% predicted from its turns).
    Returns the four sizes and ``factor``, the share of ``cfg``'s rows kept."""
    if inserts_per_s <= 0 or seconds <= 0:
        raise ValueError("inserts_per_s and seconds must be positive")
    want = inserts_per_s * seconds / max(1, cfg.tables)
    factor = min(1.0, want / cfg.rows_per_table)
    out: dict[str, Any] = {}
    for key in ("rows_per_table", "i1_rows", "i2_rows"):
        given = int(getattr(cfg, key))
        cut = max(SIZE_FLOOR[key], int(round(given * factor / 100.0)) * 100)
        out[key] = min(given, cut)
    out["factor"] = out["rows_per_table"] / cfg.rows_per_table
    out["index_passes"] = min(10, max(cfg.index_passes,
                                      math.ceil(cfg.index_passes / out["factor"] - 1e-9)))
    return out


def point_bounds(lo: int, hi: int, deleted_during_step: int) -> tuple[int, int]:
    """Ids that still exist at the end of a q step: the writers delete from the low end."""
    return min(hi, lo + deleted_during_step), hi
