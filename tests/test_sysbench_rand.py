"""sysbench's id distribution in the pgbench twin: the expression of workloads/sbrand.py
against sysbench's own formula (pure) and against ids drawn by the real sysbench binary
(a real server runs the pgbench script that draws them)."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest
from scipy import stats

from pgaccel.server.discovery import find_client
from pgaccel.server.target import open_target
from pgaccel.workloads.base import BenchContext, RunParams, get_workload
from pgaccel.workloads.pgbench import run_pgbench
from pgaccel.workloads.sbrand import id_set_lines, special
from pgaccel.workloads.sysbench import TESTS, pgbench_script

SIZE = 100_000
DRAWS = 20_000
BAND_LO, BAND_HI = 49_750, 50_501       # 752 ids: 0.75% of the rows


# -- sysbench's formula, by hand ----------------------------------------------------------
@pytest.mark.parametrize("u, bell, expected", [
    # u >= 0.25: the band, a + trunc(u * (t/100 + 1) + t/2 - t/200), t = 99,999
    (0.5, [], 1 + int(0.5 * 1000.99 + 49999.5 - 499.995)),       # 50,001
    (0.25, [], 1 + int(0.25 * 1000.99 + 49999.5 - 499.995)),     # 49,750: the band's start
    (0.999999, [], 1 + int(0.999999 * 1000.99 + 49999.5 - 499.995)),   # 50,501: its end
    # u < 0.25: the mean of the bell's uniforms times t
    (0.1, [0.5] * 12, 1 + int(0.5 * 99_999)),
    (0.2, [0.0] * 11 + [0.6], 1 + int(0.05 * 99_999)),
])
def test_special_by_hand(u, bell, expected):
    assert special(u, bell, 1, SIZE) == expected


def test_the_band_holds_three_quarters_of_a_percent_of_the_rows():
    lo, hi = special(0.25, [], 1, SIZE), special(1 - 1e-12, [], 1, SIZE)
    assert (lo, hi) == (BAND_LO, BAND_HI)


def test_uniform_is_pgbench_random():
    assert id_set_lines("id", ":table_size", "uniform") == ["\\set id random(1, :table_size)"]
    with pytest.raises(ValueError):
        id_set_lines("id", ":table_size", "gaussian")


def test_every_id_of_every_group_is_drawn_special():
    _, groups, trx, _ = TESTS["sysbench-read-write"]
    s = pgbench_script(groups, 1, trx)
    assert "random(1, :table_size)" not in s          # no uniform id left
    # one draw per statement that takes an id (10 point selects, 4 ranges, 2 updates, the
    # delete/insert pair), and the insert's k, as sysbench's get_id() calls
    assert s.count("CASE WHEN :id_u < 250000000") == 17
    assert s.count("CASE WHEN :k_u < 250000000") == 1
    assert "random(1, :table_size)" in pgbench_script(groups, 2, trx, "uniform")


def test_rand_type_is_checked():
    wl = get_workload("sysbench-read-write")
    with pytest.raises(Exception) as e:
        wl.rand_type(RunParams(options={"rand_type": "zipfian"}))
    assert "rand_type=special" in str(e.value)
    assert wl.rand_type(RunParams()) == "special"


# -- against the real sysbench ------------------------------------------------------------
LUA = """function thread_init()
  local out = io.open(os.getenv("PGACCEL_DRAWS"), "w")
  for i = 1, %d do out:write(sysbench.rand.default(1, %d), "\\n") end
  out:close()
end
function event() end
"""


def sysbench_draws(tmp_path) -> np.ndarray:
    script, out = tmp_path / "draws.lua", tmp_path / "sysbench.txt"
    script.write_text(LUA % (DRAWS, SIZE))
    subprocess.run(["sysbench", "--events=1", "--threads=1", str(script), "run"],
                   check=True, capture_output=True,
                   env={**os.environ, "PGACCEL_DRAWS": str(out)})
    return np.loadtxt(out, dtype=np.int64)


def pgbench_draws(tmp_path) -> np.ndarray:
    per_txn = 10
    lines = []
    for i in range(per_txn):
        lines += id_set_lines(f"d{i}", ":table_size", "special")
    values = ", ".join(f"(:d{i})" for i in range(per_txn))
    script = tmp_path / "draws.sql"
    script.write_text("\n".join(lines) + f"\nINSERT INTO draws VALUES {values};\n")
    with open_target() as tg:
        tg.apply({})
        tg.ensure_bench_db()
        ctx = BenchContext(tg, find_client("pgbench", tg.inst))
        with ctx.connect() as conn:
            conn.execute("DROP TABLE IF EXISTS draws")
            conn.execute("CREATE UNLOGGED TABLE draws (id bigint)")
        run_pgbench(ctx.pgbench, ctx.bench_conninfo(), scripts=[(str(script), 1)],
                    transactions=DRAWS // per_txn, defines={"table_size": SIZE}, log=False,
                    workdir=ctx.workdir)
        with ctx.connect() as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM draws").fetchall()]
    return np.asarray(ids, dtype=np.int64)


@pytest.mark.slow     # starts a server and runs sysbench and pgbench
@pytest.mark.skipif(shutil.which("sysbench") is None, reason="sysbench is not installed")
def test_pgbench_draws_ids_as_sysbench_does(tmp_path):
    sb, pg = sysbench_draws(tmp_path), pgbench_draws(tmp_path)
    assert len(sb) == len(pg) == DRAWS
    for x in (sb, pg):
        assert x.min() >= 1 and x.max() <= SIZE
        band = (x >= BAND_LO) & (x <= BAND_HI)
        # 75% from the band plus the bell's share of it (about 1.4%)
        assert 0.74 < band.mean() < 0.79
        # the bell: mean of 12 uniforms, sd t/12
        assert abs(x[~band].std() / (SIZE / 12) - 1) < 0.06
    # the band, seen as the ids drawn often (about 20 times each; the bell's ids there
    # about 0.25 times), ends where sysbench's formula says, in both (the end ids are drawn
    # less often than the rest: allow one id)
    for x in (sb, pg):
        ids, n = np.unique(x, return_counts=True)
        hot = ids[n >= 8]
        assert abs(hot.min() - BAND_LO) <= 1 and abs(hot.max() - BAND_HI) <= 1
    # one distribution: a two-sample Kolmogorov-Smirnov test does not tell them apart
    assert stats.ks_2samp(sb, pg).pvalue > 0.001
    # ... and it would tell uniform apart
    uni = np.random.default_rng(1).integers(1, SIZE + 1, DRAWS)
    assert stats.ks_2samp(sb, uni).pvalue < 1e-6
