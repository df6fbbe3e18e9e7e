"""The server's code on huge pages (study 000: ".text on huge pages" cut iTLB misses 10x).

``ext/hugetext.c`` is a small LD_PRELOAD library: in the postmaster, before main(), it moves
the 2 MB-aligned part of the executable's code onto anonymous transparent huge pages (the
backends are forked, so they share them).  :func:`library` compiles it once per source into
a directory the server's OS user can read; ``osknobs.procfs.text_huge_kb`` reads from a
process's smaps how much of its code is on huge pages; :func:`problems` says why it cannot
work.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
from importlib import resources

from ..errors import NotFound

SOURCE = "hugetext.c"


def _source() -> str:
    return resources.files("pgaccel.server").joinpath("ext", SOURCE).read_text()


def _root() -> str:
    root = os.path.join(tempfile.gettempdir(), f"pgaccel-ext-{os.geteuid()}")
    os.makedirs(root, mode=0o755, exist_ok=True)
    st = os.lstat(root)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise NotFound(f"{root} is not a directory owned by this user and writable only by "
                       "it.", f"Remove {root} and run again.")
    os.chmod(root, 0o755)
    return root


def library() -> str:
    """Path of the compiled library (built on first use; a C compiler is needed)."""
    src = _source()
    digest = hashlib.sha256(src.encode()).hexdigest()[:12]
    path = os.path.join(_root(), f"hugetext-{digest}.so")
    if os.path.exists(path):
        return path
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise NotFound("No C compiler: the code-on-huge-pages library is compiled here.",
                       "Install gcc (Debian/Ubuntu: build-essential) or leave "
                       "text_hugepages out.")
    tmp = tempfile.mkdtemp(prefix="hugetext-", dir=_root())
    try:
        c = os.path.join(tmp, SOURCE)
        with open(c, "w") as f:
            f.write(src)
        so = os.path.join(tmp, "hugetext.so")
        r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", so, c], capture_output=True,
                           text=True)
        if r.returncode != 0:
            raise NotFound("Compiling the code-on-huge-pages library failed: "
                           + " | ".join(r.stderr.strip().splitlines()[-3:]),
                           "Check the C compiler, or leave text_hugepages out.")
        os.chmod(so, 0o755)
        os.replace(so, path)                 # atomic: a concurrent build is harmless
        return path
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def preload(env_value: str | None, lib: str) -> str:
    """An LD_PRELOAD value with ``lib`` added to what is there (e.g. libjemalloc)."""
    parts = [p for p in re.split(r"[: ]+", env_value or "") if p]
    return " ".join(parts + ([lib] if lib not in parts else []))


def problems(thp_mode: str | None) -> list[str]:
    """Why the remap cannot give huge pages on this host (empty: it can)."""
    if thp_mode == "never":
        return ["the server's code on huge pages needs transparent huge pages 'madvise' or "
                "'always' (THP is 'never'): set os.thp = \"madvise\" in the same variant"]
    if thp_mode is None:
        return ["this kernel has no transparent huge pages, which the server's code on huge "
                "pages needs"]
    return []
