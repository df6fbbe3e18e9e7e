"""How many huge pages PostgreSQL's shared memory needs.

From 15 on the server says it exactly: ``postgres -D DATA -C shared_memory_size_in_huge_pages
-c shared_buffers=...`` on a stopped, initdb'd cluster (no memory is allocated).  The plan's
postmaster settings are passed along because max_connections, wal_buffers and friends size
shared memory too.  Before 15 the size is estimated from the settings (fitted to the 15
binary's own numbers: within ~1% from 128MB to 128GB of shared_buffers) and a larger
margin is added.
"""

from __future__ import annotations

import math

from ..pg.values import setting_bytes
from ..pg import versions

KB, MB = 1024, 1024**2
ESTIMATE_MARGIN = 0.03      # extra for the <15 estimate


def margin(pages: int, page_bytes: int = 2 * 1024 ** 2) -> int:
    """Spare pages on top of what the server needs: 2%, at least 8 MB worth (4 pages of
    2 MB; one page of 1 GB)."""
    return max(math.ceil(8 * 1024 ** 2 / page_bytes), math.ceil(pages * 0.02))


def pages_for(shared_memory_bytes: int, hugepage_bytes: int) -> int:
    return math.ceil(shared_memory_bytes / hugepage_bytes)


def estimate_shared_memory_bytes(settings: dict[str, str], major: int) -> int:
    """Approximate ``shared_memory_size`` for these settings (any version).

    shared_buffers x 1.0215 (buffer descriptors, mapping table, checkpoint sort array)
    + wal_buffers (auto: 1/32 of shared_buffers, 64kB..16MB) + 4MB fixed
    + ~46kB per process slot (connections, autovacuum and background workers)."""
    def val(name: str, fallback: str) -> str:
        return str(settings.get(name, versions.default(name, major) or fallback))

    sb = setting_bytes(val("shared_buffers", "16384"), "8kB")
    wb = setting_bytes(val("wal_buffers", "-1"), "8kB")
    if wb <= 0:
        wb = min(max(sb // 32, 64 * KB), 16 * MB)
    slots = (int(val("max_connections", "100")) + int(val("autovacuum_max_workers", "3"))
             + int(val("max_worker_processes", "8")) + 5)
    return int(sb * 1.0215) + wb + 4 * MB + slots * 46 * KB


def estimate_pages(settings: dict[str, str], major: int, hugepage_bytes: int) -> int:
    return pages_for(int(estimate_shared_memory_bytes(settings, major) * (1 + ESTIMATE_MARGIN)),
                     hugepage_bytes)


