"""The training run of a profile-guided build: the instrumented server runs the workloads
pgaccel benchmarks by default, on a throwaway cluster, and every backend writes its profile
when it exits."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import IO, Callable

from ..server.cluster import SUPERUSER, Cluster
from ..server.discovery import probe_dir
from ..server.osuser import chown_tree, server_user
from .apt import BuildError

TRAIN_SECONDS = 20
TRAIN_SCALE = 10
TRAIN_CLIENTS = 2


def train(prefix: str, profile_dir: str, log: IO[str], say: Callable[[str], None]) -> dict:
    """Run the training workloads on the instrumented installation at ``prefix``; returns
    what ran (for the build's manifest)."""
    inst = probe_dir(os.path.join(prefix, "bin"), "build")
    if inst is None or not inst.is_server:
        raise BuildError(f"The instrumented build at {prefix} has no runnable server.", None)
    user = server_user(None)
    chown_tree(profile_dir, user)   # the server writes the profile as its own user
    ran = []
    with Cluster.create_throwaway(inst) as cl:
        cl.start({"shared_buffers": "256MB", "max_wal_size": "2GB"})
        env = {**os.environ, "PGHOST": cl.sockdir, "PGPORT": str(cl.port), "PGUSER": SUPERUSER,
               "PGDATABASE": "postgres"}
        pgbench = inst.path("pgbench")

        def sh(args: list[str], what: str) -> None:
            say(f"training: {what}")
            log.write(f"\n$ {' '.join(args)}\n")
            log.flush()
            r = subprocess.run(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                               stdin=subprocess.DEVNULL)
            if r.returncode != 0:
                raise BuildError(f"The training run failed at {what} (exit {r.returncode}).",
                                 None)
            ran.append(what)

        t = str(TRAIN_SECONDS)
        c = str(TRAIN_CLIENTS)
        sh([pgbench, "-i", "-q", "-s", str(TRAIN_SCALE)], f"pgbench -i -s {TRAIN_SCALE}")
        sh([pgbench, "-S", "-M", "prepared", "-c", c, "-j", c, "-T", t],
           f"pgbench select-only, {c} clients, {t} s")
        sh([pgbench, "-c", c, "-j", c, "-T", t], f"pgbench tpcb-like, {c} clients, {t} s")
        sysbench = shutil.which("sysbench")
        if sysbench:
            common = [f"--pgsql-host={cl.sockdir}", f"--pgsql-port={cl.port}",
                      f"--pgsql-user={SUPERUSER}", "--pgsql-db=postgres", "--db-driver=pgsql",
                      "--tables=1", "--table-size=100000"]
            sh([sysbench, "oltp_read_write", *common, "prepare"], "sysbench prepare")
            sh([sysbench, "oltp_read_write", *common, f"--threads={c}", f"--time={t}", "run"],
               f"sysbench oltp_read_write, {c} threads, {t} s")
        cl.stop()
    files = sum(len(fs) for _, _, fs in os.walk(profile_dir))
    if files == 0:
        raise BuildError("The training run wrote no profile data.", None)
    return {"workloads": ran, "profile_files": files}
