"""What a PostgreSQL binary was built with, from ``pg_config`` output (pure)."""

from __future__ import annotations

import re
from typing import Any


def parse_pg_config(text: str) -> dict[str, str]:
    """``pg_config`` output (``KEY = value`` lines) -> dict."""
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition(" = ")
        if sep and re.fullmatch(r"[A-Z_-]+", k.strip()):
            out[k.strip()] = v.strip()
    return out


def build_summary(cfg: dict[str, str]) -> dict[str, Any]:
    """The build facts the tuner and report care about."""
    configure = cfg.get("CONFIGURE", "")
    flags = {opt: f"--with-{opt}" in configure
             for opt in ("lz4", "zstd", "liburing", "llvm", "openssl", "icu", "libnuma")}
    return {"version": cfg.get("VERSION"), "cc": cfg.get("CC"), "cflags": cfg.get("CFLAGS"),
            "configure": configure, "with": flags}
