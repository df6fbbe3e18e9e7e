"""PostgreSQL-side counters: the delta of two snapshots a trial takes before and after
(``server.database.Database.counters``; SQL per version in ``pg/sql``, a counter the version
does not have is absent), pure."""

from __future__ import annotations

from typing import Any

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
