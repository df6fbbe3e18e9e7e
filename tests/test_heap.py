"""pgaccel.heap: glibc's mmap threshold fixed, so a large buffer freed and made again is a
mapping of its own each time (given back when freed), not a hole in the main heap.  Read
from a fresh interpreter with glibc's own mallinfo2."""

import ctypes
import json
import subprocess
import sys

import pytest

PROBE = r"""
import ctypes, json, sys
class M(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = M
said = None
if sys.argv[1] == "fixed":
    from pgaccel.heap import keep_large_buffers_mapped
    said = keep_large_buffers_mapped()
elif sys.argv[1] == "cli":             # any pgaccel command, as a lab starts
    import contextlib, io
    from pgaccel.cli import cli
    with contextlib.redirect_stdout(io.StringIO()):
        cli(["builds", "--help"], standalone_mode=False)
a = bytearray(4 << 20)
del a                                  # the first large buffer: mapped, then unmapped
m0 = libc.mallinfo2()
b = bytearray(4 << 20)                 # the second: mapped again, or from the main heap?
m = libc.mallinfo2()
print(json.dumps({"said": said, "mapped": m.hblkhd - m0.hblkhd, "heap": m.arena - m0.arena}))
"""


def _glibc_with_mallinfo2() -> bool:
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.gnu_get_libc_version and libc.mallinfo2)
    except (OSError, AttributeError):
        return False


def _probe(mode: str) -> dict:
    r = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                       check=True, timeout=60)
    return json.loads(r.stdout)


@pytest.mark.skipif(not _glibc_with_mallinfo2(), reason="glibc 2.33+ only (mallinfo2)")
def test_a_large_buffer_made_again_is_mapped_not_kept_in_the_heap():
    default, fixed = _probe("default"), _probe("fixed")
    # glibc's own adjustment: after the first 4 MiB mapping is freed, the threshold rises and
    # the second 4 MiB comes from the main heap (where, freed, it would stay as a hole)
    assert default["mapped"] == 0 and default["heap"] >= 4 << 20
    # fixed at 128 KiB: the second is a mapping of its own, and the heap stays small
    assert fixed["said"] is True
    assert fixed["mapped"] >= 4 << 20 and fixed["heap"] == 0


@pytest.mark.skipif(not _glibc_with_mallinfo2(), reason="glibc 2.33+ only (mallinfo2)")
def test_every_command_fixes_it_at_start():
    """The cli group does it before any command, so a lab's rounds get it."""
    after = _probe("cli")
    assert after["mapped"] >= 4 << 20 and after["heap"] == 0
