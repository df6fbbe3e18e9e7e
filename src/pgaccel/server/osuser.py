"""Which OS user runs the PostgreSQL server, and running commands as that user.

PostgreSQL refuses to run as root.  When pgaccel itself runs as root (as CI does), every
server program (initdb, pg_ctl, postgres) runs as an unprivileged system user instead:
``--run-as USER``, else ``$PGACCEL_RUN_AS``, else ``pgaccel``, a system account with no
login shell and no home that pgaccel creates on first use with ``useradd --system``.
Run as a normal user, the server runs as that user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass

from ..errors import NotFound, PgaccelError

DEFAULT_SERVER_USER = "pgaccel"


@dataclass(frozen=True)
class OsUser:
    name: str
    uid: int
    gid: int
    home: str

    @property
    def is_current(self) -> bool:
        return self.uid == os.geteuid()


def current_user() -> OsUser:
    pw = pwd.getpwuid(os.geteuid())
    return OsUser(pw.pw_name, pw.pw_uid, pw.pw_gid, pw.pw_dir)


def _create_system_user(name: str) -> None:
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    if not os.path.exists(useradd):
        raise NotFound(
            f"pgaccel runs as root and needs an unprivileged user {name!r} for the server, "
            "but useradd is missing.",
            f"Create the user yourself (e.g. `adduser --system --group {name}`) or pass "
            "--run-as USER naming an existing unprivileged account.",
        )
    nologin = "/usr/sbin/nologin" if os.path.exists("/usr/sbin/nologin") else "/bin/false"
    r = subprocess.run(
        [useradd, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
         "--shell", nologin, "--comment", "pgaccel throwaway PostgreSQL servers", name],
        capture_output=True, text=True)
    if r.returncode not in (0, 9):  # 9: already exists (race with another pgaccel)
        raise PgaccelError(
            f"Could not create the system user {name!r} for the server: {r.stderr.strip()}",
            "Create it yourself or pass --run-as USER naming an existing unprivileged account.")


def server_user(run_as: str | None = None) -> OsUser:
    """The account the server runs as (see module docstring)."""
    if os.geteuid() != 0:
        me = current_user()
        if run_as and run_as != me.name:
            raise PgaccelError(
                f"--run-as {run_as} needs root: pgaccel runs as {me.name} and cannot switch "
                "users.", "Drop --run-as, or run pgaccel as root.")
        return me
    name = run_as or os.environ.get("PGACCEL_RUN_AS") or DEFAULT_SERVER_USER
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        if name != DEFAULT_SERVER_USER and (run_as or os.environ.get("PGACCEL_RUN_AS")):
            raise PgaccelError(f"--run-as {name}: no such user.",
                               "Create the account or name an existing one.") from None
        _create_system_user(name)
        pw = pwd.getpwnam(name)
    if pw.pw_uid == 0:
        raise PgaccelError(
            f"--run-as {name} is root; PostgreSQL refuses to run as root.",
            "Name an unprivileged account, or omit --run-as to use the 'pgaccel' user.")
    return OsUser(pw.pw_name, pw.pw_uid, pw.pw_gid, pw.pw_dir)


def as_user_kwargs(user: OsUser) -> dict:
    """subprocess keyword arguments that run a command as ``user``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update({"LC_ALL": "C", "LANG": "C"})
    if user.is_current:
        return {"env": env}
    env.update({"HOME": "/tmp", "USER": user.name, "LOGNAME": user.name})
    return {"user": user.uid, "group": user.gid, "extra_groups": [], "env": env,
            "cwd": "/"}


def chown_tree(path: str, user: OsUser) -> None:
    if user.is_current:
        return
    for root, dirs, files in os.walk(path):
        os.chown(root, user.uid, user.gid, follow_symlinks=False)
        for f in files:       # a link is chowned itself, never what it points to
            os.chown(os.path.join(root, f), user.uid, user.gid, follow_symlinks=False)
