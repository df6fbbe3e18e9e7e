"""Asking a PostgreSQL installation without a running server (thin: one subprocess each).

* ``postgres -D DIR -C NAME`` (:func:`config_values`): the value a data directory's
  configuration gives a parameter, with optional ``-c`` overrides — how pgaccel reads a
  ``--pgdata`` cluster's settings and, on 15+, the exact huge page count
  (:func:`server_huge_pages`);
* ``postgres --describe-config`` (:func:`describe_config`): the binary's parameter catalog;
* ``pg_config`` (:func:`pg_config`): how the binary was built.

Programs that read a data directory run as its owner (``user``, an ``osuser.OsUser``) so
that they work when pgaccel is root.
"""

from __future__ import annotations

import subprocess
from typing import Iterable

from ..errors import NotFound, ServerError
from ..pg.build import parse_pg_config
from ..pg.catalog import GucCatalog, parse_describe_config
from .discovery import Installation
from .osuser import as_user_kwargs, current_user


def postgres_c(postgres: str, pgdata: str, name: str, *, settings: dict | None = None,
               opts: Iterable[str] = (), user=None,
               timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``postgres -D pgdata [opts] -C name [-c k=v ...]`` as ``user``."""
    cmd = [postgres, "-D", pgdata, *opts, "-C", name]
    for k, v in (settings or {}).items():
        cmd += ["-c", f"{k}={v}"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          **as_user_kwargs(user or current_user()))


def config_values(postgres: str, pgdata: str, names: Iterable[str], *, user=None,
                  opts: Iterable[str] = ()) -> dict[str, str]:
    """Raw values (in the parameter's unit) of ``names`` for a data directory; parameters
    the binary does not know, or that fail, are left out."""
    out = {}
    for name in names:
        try:
            r = postgres_c(postgres, pgdata, name, opts=opts, user=user, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0 and r.stdout.strip():
            out[name] = r.stdout.strip().splitlines()[-1]
    return out


def server_huge_pages(postgres: str, pgdata: str, settings: dict[str, str],
                      user=None) -> int | None:
    """``shared_memory_size_in_huge_pages`` for these settings (PG15+, stopped cluster);
    None when the server cannot say (before 15, huge pages unsupported, a refused
    setting)."""
    try:
        r = postgres_c(postgres, pgdata, "shared_memory_size_in_huge_pages",
                       settings=settings, user=user)
    except (OSError, subprocess.TimeoutExpired):
        return None
    try:
        n = int(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else -1
    except (ValueError, IndexError):
        return None
    return n if n > 0 else None


def describe_config(postgres: str, major: int | None = None) -> GucCatalog:
    """The binary's parameter catalog from ``postgres --describe-config``."""
    try:
        r = subprocess.run([postgres, "--describe-config"], capture_output=True, text=True,
                           timeout=60)
    except FileNotFoundError:
        raise NotFound(f"{postgres} does not exist.", "Choose an installation with --pg-bin.")
    if r.returncode != 0 or not r.stdout.strip():
        raise ServerError(f"`{postgres} --describe-config` failed: {r.stderr.strip()[:200]}",
                          "Check that the installation is complete.")
    return parse_describe_config(r.stdout, major, f"describe-config {postgres}")


def pg_config(inst: Installation) -> dict[str, str]:
    """``pg_config`` output as a dict (CONFIGURE, CFLAGS, CC, VERSION, ...); {} if absent."""
    if "pg_config" not in inst.programs:
        return {}
    try:
        r = subprocess.run([inst.path("pg_config")], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_pg_config(r.stdout) if r.returncode == 0 else {}
