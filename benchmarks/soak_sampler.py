"""Run a pgaccel command in this process, with a thread that records, every ``--interval``
seconds, what only the process itself can read: how many small-object blocks CPython holds
(``sys.getallocatedblocks``: live objects of up to 512 bytes) and glibc's main heap in use
and free (``mallinfo2``; absent on other C libraries).  benchmarks/soak.py runs the lab
through it, so a growth of the process's memory can be told apart: more live Python objects,
or the allocators keeping freed memory.

Usage:  python benchmarks/soak_sampler.py SAMPLES.jsonl INTERVAL pgaccel-args...
"""

from __future__ import annotations

import ctypes
import json
import sys
import threading
import time


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                                                "hblkhd", "usmblks", "fsmblks", "uordblks",
                                                "fordblks", "keepcost")]


def _mallinfo():
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
    except (OSError, AttributeError):
        return lambda: {}

    def read() -> dict:
        m = libc.mallinfo2()
        return {"heap_in_use": m.uordblks, "heap_free": m.fordblks, "heap_mmapped": m.hblkhd}
    return read


def main() -> int:
    path, interval, args = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    mallinfo = _mallinfo()
    t0 = time.monotonic()
    done = threading.Event()

    def record(out) -> None:
        out.write(json.dumps({"t": round(time.monotonic() - t0, 2),
                              "py_blocks": sys.getallocatedblocks(), **mallinfo()}) + "\n")
        out.flush()

    out = open(path, "w")

    def loop() -> None:
        while not done.wait(interval):
            record(out)
    threading.Thread(target=loop, daemon=True).start()
    from pgaccel.cli import main as pgaccel_main
    try:
        sys.argv = ["pgaccel", *args]
        return pgaccel_main()
    finally:
        done.set()
        record(out)
        out.close()


if __name__ == "__main__":
    sys.exit(main())
