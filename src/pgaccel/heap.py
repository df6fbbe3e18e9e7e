"""pgaccel's own process and the C allocator: large transient buffers go back to the system.

glibc serves an allocation above its mmap threshold (128 KiB at start) with a mapping of its
own, unmapped when freed.  But the first time such a mapping is freed, glibc raises the
threshold to its size (up to 32 MiB on 64-bit), so every later buffer of that size comes
from the main heap instead; freed there, it becomes a hole that stays with the process as
long as anything live lies above it.  A long lab makes such buffers every round (the lists
that hold pgbench's parsed per-transaction log, the text of run.json and of the store's
rows), so its heap kept growing with free memory: in a 25-minute soak, 11.4 of the heap's
14.5 MiB an hour was free memory the process held (docs/testing.md).

Setting the threshold with mallopt(3) fixes it: glibc then no longer adjusts it (nor the
trim threshold) on its own.  :func:`keep_large_buffers_mapped` does it once at start;
nothing is done on another C library (musl's allocator returns large buffers itself).
"""

from __future__ import annotations

import ctypes

M_MMAP_THRESHOLD = -3                 # glibc's malloc.h
THRESHOLD = 128 * 1024                # glibc's own starting value, kept fixed


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.gnu_get_libc_version           # glibc's own symbol: not musl or another libc
        libc.mallopt                        # (attribute lookups: presence checks)
    except (OSError, AttributeError):
        return None
    return libc


def keep_large_buffers_mapped(threshold: int = THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes; True when it was set."""
    libc = _glibc()
    if libc is None:
        return False
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return libc.mallopt(M_MMAP_THRESHOLD, threshold) == 1
