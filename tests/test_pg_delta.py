"""PostgreSQL counter deltas (metrics/pg.py) on constructed snapshots, as the version-keyed
SQL returns them: pg_stat_io (16+), WAL from the LSNs, the buffer hit ratio, checkpoints."""

from __future__ import annotations

from pgaccel.metrics.pg import delta, lsn_to_int


def snap(**kw):
    base = {"db_blks_hit": 1000, "db_blks_read": 100, "db_db_size": 5_000_000,
            "wal_lsn": "0/1000000", "ckpt_timed": 3, "ckpt_requested": 1,
            "io_reads": 50, "io_writes": 20, "io_extends": 5, "io_hits": 900,
            "io_evictions": 0, "io_fsyncs": 2}
    base.update(kw)
    return base


def test_deltas_of_pg_stat_io_wal_hits_and_checkpoints():
    d = delta(snap(), snap(db_blks_hit=1900, db_blks_read=200, db_db_size=6_000_000,
                           wal_lsn="1/00000010", ckpt_timed=4, ckpt_requested=3,
                           io_reads=80, io_writes=20, io_fsyncs=5))
    assert (d["io_reads"], d["io_writes"], d["io_fsyncs"], d["io_hits"]) == (30, 0, 3, 0)
    assert d["wal_bytes"] == 0x1_00000010 - 0x1000000 == lsn_to_int("1/10") - lsn_to_int("0/1000000")
    assert d["buffer_hit_ratio"] == 900 / 1000
    assert d["checkpoints"] == 3 and d["db_size_bytes"] == 6_000_000
    assert "wal_lsn" not in d and "db_db_size" not in d


def test_counters_a_version_lacks_are_absent_not_zero():
    before = {k: v for k, v in snap().items() if not k.startswith("io_")}       # 15: no pg_stat_io
    after = dict(before, db_blks_hit=1000, db_blks_read=100)
    d = delta(before, after)
    assert not any(k.startswith("io_") for k in d)
    assert "buffer_hit_ratio" not in d                       # no block touched: no ratio
