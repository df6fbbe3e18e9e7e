"""PostgreSQL-side counters: snapshots before and after a trial, and their deltas.

SQL that depends on the server version lives in ``pg/sql/NAME-MIN-MAX.sql``; the
file whose major-version range contains the server's is used, and a counter the version
does not have is simply absent from the result.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from ..pg.sql import load_sql

def _query_one(conn: psycopg.Connection, sql: str | None) -> dict[str, Any]:
    if not sql:
        return {}
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(sql)
        row = cur.fetchone()
    return dict(row) if row else {}


def snapshot(conn: psycopg.Connection) -> dict[str, Any]:
    """Cumulative counters of the server and of the connection's database."""
    major = conn.info.server_version // 10000
    snap: dict[str, Any] = {}
    db = _query_one(conn, load_sql("database", major))
    snap.update({f"db_{k}": v for k, v in db.items() if k != "wal_lsn"})
    snap["wal_lsn"] = str(db.get("wal_lsn")) if db.get("wal_lsn") is not None else None
    snap.update({f"ckpt_{k}": v for k, v in _query_one(conn, load_sql("checkpoints", major)).items()})
    snap.update({f"stat_{k}": v for k, v in _query_one(conn, load_sql("wal", major)).items()})
    snap.update({f"io_{k}": v for k, v in _query_one(conn, load_sql("io", major)).items()})
    return snap


def lsn_to_int(lsn: str) -> int:
    hi, lo = lsn.split("/")
    return (int(hi, 16) << 32) + int(lo, 16)


def delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """after - before for every numeric counter; WAL bytes from the LSN difference."""
    d: dict[str, Any] = {}
    for k, v in after.items():
        b = before.get(k)
        if k == "wal_lsn" or k == "db_db_size":
            continue
        if isinstance(v, (int, float)) and isinstance(b, (int, float)):
            d[k] = v - b
    if after.get("wal_lsn") and before.get("wal_lsn"):
        d["wal_bytes"] = lsn_to_int(after["wal_lsn"]) - lsn_to_int(before["wal_lsn"])
    d["db_size_bytes"] = after.get("db_db_size")
    hits, reads = d.get("db_blks_hit"), d.get("db_blks_read")
    if hits is not None and reads is not None and hits + reads > 0:
        d["buffer_hit_ratio"] = hits / (hits + reads)
    ckpt = [d.get("ckpt_timed"), d.get("ckpt_requested")]
    if all(x is not None for x in ckpt):
        d["checkpoints"] = sum(ckpt)
    return d


def wait_event_sql(major: int) -> str:
    sql = load_sql("wait_events", major)
    assert sql is not None
    return sql
