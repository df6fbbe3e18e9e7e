"""The one door to a server: :func:`open_target` turns the options (``--dsn``,
``--pgdata``, or neither: a throwaway cluster) into a :class:`Target`, and every command
and the apply code connect, reload, restart, read settings or the catalog through it.

Three kinds, one interface (``target_base.Target``):

* throwaway (``target_local.LocalTarget``): a cluster pgaccel creates, and removes on exit;
* ``--pgdata`` (``LocalTarget`` too): the user's cluster, started/stopped with pg_ctl as its
  owner (or restarted with the user's ``--restart-cmd``), read with ``postgres -C``;
* ``--dsn`` (``target_dsn.DsnTarget``): an existing server reached only by connecting.

What a benchmark variant may change differs.  Throwaway and ``--pgdata`` clusters are
restarted with the variant's settings on the postgres command line (no file is edited, and
a ``--pgdata`` cluster is restarted with its original options at the end).  On a ``--dsn``
server pgaccel changes nothing server-wide: only settings a session may set (context
``user``/``superuser``) are applied, through PGOPTIONS; the rest are reported as not tested.
Benchmarks write only to the ``pgaccel_bench`` database (and its template
``pgaccel_bench_template``), which pgaccel creates and drops.

Why four modules: this one is the door (the choice between the kinds, and the names
callers import); the base class, the local kind (``postgres -C``, start/stop/restart with
an optional restart command) and the ``--dsn`` kind each stay small enough to read at
once, and the door can import the kinds without the kinds importing it (no import cycle).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from ..errors import PgaccelError, UsageError
from ..pg.versions import checksum_initdb_args
from .cluster import Cluster
from .discovery import Installation, choose_server
from .target_base import TEMPLATE_DB, Target, explain_connect_error, host_is_local, safe_dsn
from .target_dsn import DsnTarget
from .target_local import LocalTarget

__all__ = ["DsnTarget", "LocalTarget", "TEMPLATE_DB", "Target",
           "explain_connect_error", "host_is_local", "open_target", "safe_dsn"]


@contextmanager
def open_target(*, pg_bin: str | None = None, dsn: str | None = None,
                pgdata: str | None = None, run_as: str | None = None,
                workdir: str | None = None, port: int | None = None,
                keep: bool = False, bench: bool = True, restart_cmd: str | None = None,
                inst: Installation | None = None, checksums: bool = False
                ) -> Iterator[Target]:
    """The target the options name, cleaned up on exit.

    bench=True (benchmarks): on exit a ``--dsn`` server's ``pgaccel_bench`` databases are
    dropped (unless ``keep``) and a ``--pgdata`` cluster, which variants restart with their
    ``-c`` options, is given back with its own configuration and run state.
    bench=False (``tune``: planning, sampling, ``--apply``, rollback): no ``pgaccel_bench``
    database is dropped (none is created), and a ``--pgdata`` cluster is left exactly as
    found: open_target neither starts, stops nor restarts it, on entry or exit (a caller
    that starts or stops it in between puts it back itself).

    A throwaway cluster is created (not started: ``target.start()`` or ``target.apply()``)
    and removed on exit either way (kept on disk with ``keep``).  ``restart_cmd``
    (``--restart-cmd``) goes with ``pgdata`` only; ``inst``: an installation the caller
    already chose (else ``pg_bin``, else the default one); ``checksums``: a throwaway
    cluster's data checksums, named to initdb either way (``versions.checksum_initdb_args``:
    18's initdb turns them on by default, 13-17's off)."""
    if dsn and pgdata:
        raise UsageError("--dsn and --pgdata name two different servers.", "Give one of them.")
    if restart_cmd and not pgdata:
        raise UsageError("--restart-cmd goes with --pgdata.",
                         "It restarts that cluster (e.g. through systemd).")
    target: Target
    if dsn:
        target = DsnTarget(dsn)
        try:
            yield target
        finally:
            if bench and not keep:
                try:
                    target.drop_bench_dbs()
                except PgaccelError:
                    pass
        return
    inst = inst or choose_server(pg_bin)
    if pgdata:
        cluster = Cluster.existing(inst, pgdata, port=port, run_as=run_as)
        target = LocalTarget(cluster, restart_cmd, restore_on_close=bench)
    else:
        cluster = Cluster.create_throwaway(
            inst, workdir=workdir, port=port, run_as=run_as,
            initdb_args=checksum_initdb_args(inst.major, checksums))
        cluster.keep = keep
        target = LocalTarget(cluster)
    try:
        yield target
    finally:
        target.close()
