"""Local PostgreSQL clusters that pgaccel starts and stops: throwaway ones it creates.

This is the process level (initdb, pg_ctl as the server's OS user, the reaper).  Commands
and the apply code do not use it directly: they go through the target that wraps it
(``server.target_local.LocalTarget``, opened by ``server.target.open_target``).

A throwaway cluster lives in one temporary directory::

    pgaccel-XXXX/data   the data directory (initdb)
    pgaccel-XXXX/sock   the only unix-socket directory (mode 0700)
    pgaccel-XXXX/server.log

It listens on that socket and on 127.0.0.1 only, on a free port.  Local connections over
the private socket are trusted; TCP needs a random password pgaccel never prints.

Variant settings are passed on the postgres command line (``-c name=value``), so changing
them never edits a configuration file; ``pg_settings.source`` shows ``command line``.

Cleanup is guaranteed three ways: the context manager stops the server and removes the
directory; SIGTERM is turned into an exception by the CLI so that runs too; and a small
reaper process (``pgaccel.server.reaper``) waits on a pipe from this process and does the
same if this process dies without cleaning up (kill -9, crash).
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

import psycopg
from psycopg import conninfo as pgconninfo

from ..errors import DiskFull, PgaccelError, ServerError
from ..pg.settings import command_line
from . import reaper
from .discovery import Installation, server_env
from .osuser import OsUser, as_user_kwargs, chown_tree, server_user

SUPERUSER = "pgaccel"
BENCH_DB = "pgaccel_bench"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


# Lines in the server log that explain a failed start, with what to tell the user.
_START_FAILURES: list[tuple[re.Pattern, type[PgaccelError], str]] = [
    (re.compile(r'"root" execution of the PostgreSQL server is not permitted|'
                r"cannot be run as root", re.I),
     ServerError,
     "The data directory belongs to root, and PostgreSQL never runs as root (pgaccel runs a "
     "named cluster as the directory's owner). Give it to an unprivileged user, e.g. "
     "`chown -R postgres: DIR` with every directory above it searchable by that user, and "
     "run again."),
    (re.compile(r"could not bind .*Address already in use|could not create lock file .*s\.PGSQL",
                re.I), ServerError,
     "Another server is using that port. Choose another with --port, or omit --port to let "
     "pgaccel pick a free one."),
    (re.compile(r"huge pages|could not map anonymous shared memory", re.I), ServerError,
     "The server could not get the shared memory it asked for. Lower shared_buffers, or "
     "reserve huge pages first (pgaccel tune shows vm.nr_hugepages), or use huge_pages=try."),
    (re.compile(r"could not (create|resize) shared memory segment|shmget|No space left on device"
                r".*(shm|shared memory)", re.I), ServerError,
     "The system ran out of shared memory. Lower shared_buffers or max_connections, or raise "
     "the shared-memory limits (/dev/shm size, kernel.shmmax/shmall)."),
    (re.compile(r"No space left on device", re.I), DiskFull,
     "The disk is full. Free space, or put the throwaway cluster elsewhere with --workdir."),
    (re.compile(r"invalid value for parameter|unrecognized configuration parameter|"
                r"is outside the valid range|requires a (Boolean|numeric|integer) value|"
                r"cannot be (higher|lower|less|greater)|must be (at least|less|greater)", re.I),
     ServerError,
     "The server rejected a setting. Fix or remove it; `pgaccel tune` only proposes values "
     "this server version accepts, so a hand-written override is the likely cause."),
]


UNKNOWN_FAILURE = "Read the server log for details."


def explain_start_failure(log_tail: str) -> tuple[type[PgaccelError], str, str]:
    """(error class, the log line, advice) for the first known failure in the log tail."""
    lines = [ln for ln in log_tail.splitlines() if ln.strip()]
    for pattern, cls, advice in _START_FAILURES:
        for ln in lines:
            if pattern.search(ln):
                return cls, ln.strip(), advice
    detail = next((ln.strip() for ln in lines if re.search(r"FATAL|PANIC|ERROR", ln)),
                  lines[-1].strip() if lines else "(the server log is empty)")
    return ServerError, detail, UNKNOWN_FAILURE


class Cluster:
    """A local server pgaccel controls through pg_ctl, as ``user``."""

    def __init__(self, inst: Installation, pgdata: str, port: int, sockdir: str,
                 logfile: str, user: OsUser, *, throwaway: bool, base: str | None = None,
                 password: str | None = None):
        self.inst = inst
        self.pgdata = pgdata
        self.port = port
        self.sockdir = sockdir
        self.logfile = logfile
        self.user = user
        self.throwaway = throwaway
        self.base = base
        self.password = password
        self.settings: dict[str, object] = {}
        self._reaper: subprocess.Popen | None = None
        self.extra_env: dict[str, str] = {}     # the lab's per-variant server environment
        self._reaper_fd: int | None = None
        self.keep = False
        self.original_opts = ""   # a --pgdata cluster's own command-line options

    # -- creation -----------------------------------------------------------------------
    @classmethod
    def create_throwaway(cls, inst: Installation, *, workdir: str | None = None,
                         port: int | None = None, run_as: str | None = None,
                         initdb_args: list[str] | None = None) -> "Cluster":
        user = server_user(run_as)
        if port is not None and port_in_use(port):
            raise ServerError(f"Port {port} on 127.0.0.1 is already in use.",
                              "Choose another with --port, or omit --port to let pgaccel pick "
                              "a free one.")
        wd = workdir or tempfile.gettempdir()
        try:
            base = tempfile.mkdtemp(prefix="pgaccel-", dir=wd)
        except FileNotFoundError:
            raise PgaccelError(f"--workdir {wd} does not exist.",
                               "Create it or choose another directory.") from None
        except OSError as e:
            if e.errno == 28:
                raise DiskFull(f"No space left in {wd} for a throwaway cluster.",
                               "Free space or choose another place with --workdir.") from None
            raise
        os.chmod(base, 0o711)
        pgdata = os.path.join(base, "data")
        sockdir = os.path.join(base, "sock")
        os.mkdir(sockdir, 0o700)
        logfile = os.path.join(base, "server.log")
        Path(logfile).touch()
        password = secrets.token_urlsafe(18)
        pwfile = os.path.join(base, ".pw")
        with open(pwfile, "w") as f:
            f.write(password + "\n")
        os.chmod(pwfile, 0o600)
        chown_tree(base, user)
        self = cls(inst, pgdata, port or free_port(), sockdir, logfile, user, throwaway=True,
                   base=base, password=password)
        self._start_reaper()
        try:
            cmd = [inst.path("initdb"), "-D", pgdata, "-U", SUPERUSER, "-E", "UTF8",
                   "--locale=C", "--auth-local=trust", "--auth-host=scram-sha-256",
                   f"--pwfile={pwfile}", "--no-sync", *(initdb_args or [])]
            r = subprocess.run(cmd, capture_output=True, text=True, **as_user_kwargs(user))
            os.unlink(pwfile)
            if r.returncode != 0:
                out = r.stdout + r.stderr
                if "No space left on device" in out:
                    raise DiskFull(f"initdb ran out of disk space in {wd}.",
                                   "Free space or choose another place with --workdir.")
                last = out.strip().splitlines()[-1] if out.strip() else f"exit {r.returncode}"
                if "Permission denied" in out:
                    raise ServerError(
                        f"The server user {user.name!r} cannot use {base}: {last}",
                        "Every directory above it must be searchable by that user; choose a "
                        "--workdir such as /tmp or /var/tmp, or another --run-as user.")
                raise ServerError(f"initdb failed: {last}",
                                  "Check that the directory is writable by the server user "
                                  f"{user.name!r}.")
        except BaseException:
            self.cleanup()
            raise
        return self

    @classmethod
    def existing(cls, inst: Installation, pgdata: str, *, port: int | None = None,
                 sockdir: str | None = None, run_as: str | None = None) -> "Cluster":
        """A cluster the user owns (``--pgdata``); it is never removed."""
        if not os.path.isfile(os.path.join(pgdata, "PG_VERSION")):
            from ..errors import UsageError
            raise UsageError(f"--pgdata {pgdata} is not a PostgreSQL data directory.",
                             "Point it at a directory initdb created (it holds PG_VERSION).")
        user = server_user(run_as)
        st = os.stat(pgdata)
        if os.geteuid() == 0 and st.st_uid != user.uid:
            import pwd
            owner = pwd.getpwuid(st.st_uid)
            user = OsUser(owner.pw_name, owner.pw_uid, owner.pw_gid, owner.pw_dir)
        # A server pg_ctl restarts keeps writing its stderr to the -l file after pgaccel
        # exits, so that file must outlive pgaccel: <pgdata>/log/pgaccel-pg_ctl.log, owned
        # by the server user (never a temp file that would be deleted under the server).
        # (created on the first start only: planning alone writes nothing there)
        logfile = os.path.join(pgdata, "log", "pgaccel-pg_ctl.log")
        c = cls(inst, pgdata, port or 5432, sockdir or "/var/run/postgresql", logfile, user,
                throwaway=False)
        c.read_pidfile()
        c.original_opts = read_postmaster_opts(pgdata)
        return c

    # -- reaper -------------------------------------------------------------------------
    def _start_reaper(self) -> None:
        self._reaper, self._reaper_fd = reaper.spawn(self.base or "", self.pgdata)

    def _stop_reaper(self) -> None:
        if self._reaper_fd is not None:
            if self.keep:
                os.write(self._reaper_fd, b"k")
            os.close(self._reaper_fd)
            self._reaper_fd = None
        if self._reaper is not None:
            try:
                self._reaper.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._reaper.kill()
            self._reaper = None

    # -- control ------------------------------------------------------------------------
    def _pg_ctl(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = [self.inst.path("pg_ctl"), "-D", self.pgdata, *args]
        kw = as_user_kwargs(self.user)
        # e.g. jemalloc preloaded; a lab variant's own environment (hugetext) comes last
        kw["env"] = {**kw["env"], **server_env(self.inst.bindir), **self.extra_env}
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)

    def base_settings(self) -> dict[str, object]:
        if not self.throwaway:
            return {}
        return {"port": self.port, "listen_addresses": "127.0.0.1",
                "unix_socket_directories": self.sockdir}

    def is_running(self) -> bool:
        return self._pg_ctl("status", timeout=30).returncode == 0

    def start(self, settings: dict[str, object] | None = None, timeout: int = 120) -> None:
        self.settings = dict(settings or {})
        if not self.throwaway:
            self._ensure_log()
        opts = command_line({**self.base_settings(), **self.settings})
        if self.original_opts:
            opts = f"{self.original_opts} {opts}".strip()
        log_offset = os.path.getsize(self.logfile) if os.path.exists(self.logfile) else 0
        r = self._pg_ctl("start", "-w", "-t", str(timeout), "-l", self.logfile, "-o", opts,
                         timeout=timeout + 30)
        if r.returncode != 0:
            tail = self._log_since(log_offset) or (r.stdout + r.stderr)
            # pg_ctl may leave a half-started postmaster behind; make sure it is gone.
            self._pg_ctl("stop", "-m", "immediate", "-w", timeout=60)
            cls, line, advice = explain_start_failure(tail)
            raise cls(f"The PostgreSQL server did not start: {line}", advice)
        if not self.throwaway:
            self.read_pidfile()

    def _ensure_log(self) -> None:
        logdir = os.path.dirname(self.logfile)
        if not os.path.isdir(logdir):
            os.mkdir(logdir, 0o700)
            if not self.user.is_current:
                os.chown(logdir, self.user.uid, self.user.gid)
        if not os.path.exists(self.logfile):
            Path(self.logfile).touch()
            if not self.user.is_current:
                os.chown(self.logfile, self.user.uid, self.user.gid)

    def read_pidfile(self) -> None:
        """Port and socket directory of a running cluster, from postmaster.pid (lines 4, 5)."""
        try:
            with open(os.path.join(self.pgdata, "postmaster.pid")) as f:
                lines = f.read().splitlines()
        except OSError:
            return
        if len(lines) >= 5:
            if lines[3].strip().isdigit():
                self.port = int(lines[3])
            if lines[4].strip():
                self.sockdir = lines[4].strip()

    def stop(self, mode: str = "fast") -> None:
        r = self._pg_ctl("stop", "-m", mode, "-w", "-t", "120", timeout=150)
        if r.returncode != 0 and self.is_running():
            self._pg_ctl("stop", "-m", "immediate", "-w", timeout=60)

    def adopt_copy(self, src: str) -> None:
        """Replace this throwaway cluster's data with a copy of ``src``, a data directory of
        the same major that no server runs on, self-contained (no symbolic link: no WAL or
        tablespace elsewhere): the copy a user gives of their server (a captured workload's
        ``pgdata``).  This cluster's own configuration files stay (a copy's settings, paths,
        archive and replication settings would not fit here; a Debian data directory has
        none); it never replicates (``standby.signal`` left out, no logical replication
        workers); its superuser role is made in the copy (single-user mode) so pgaccel
        connects as it does to any throwaway server.  The copy is made beside the cluster's
        data and swapped in only when whole."""
        if not self.throwaway:
            raise ServerError("Only a throwaway cluster takes a copy of another's data.",
                              "Leave out --pgdata and --dsn.")
        try:
            with open(os.path.join(src, "PG_VERSION")) as f:
                major = int(f.read().strip().split(".")[0])
        except (OSError, ValueError):
            raise ServerError(f"{src} is not a PostgreSQL data directory (no PG_VERSION).",
                              "Give a copy of the captured server's data directory.") from None
        if major != self.inst.major:
            raise ServerError(f"{src} is PostgreSQL {major}'s; this installation is "
                              f"{self.inst.major}.", f"Use --pg-bin with PostgreSQL {major}.")
        if os.path.exists(os.path.join(src, "postmaster.pid")):
            raise ServerError(f"{src} has a postmaster.pid: a server may be running on it.",
                              "Give a copy (pg_basebackup, or a snapshot of a stopped "
                              "server), never a live data directory.")
        for root, dirs, files in os.walk(src):
            for name in dirs + files:
                if os.path.islink(os.path.join(root, name)):
                    raise ServerError(
                        f"{src} is not self-contained: {os.path.join(root, name)} is a "
                        "symbolic link (WAL or a tablespace elsewhere).",
                        "Give a copy with everything inside it (pg_basebackup -D DIR "
                        "without --waldir or tablespaces), or capture with --data dump.")
        new = self.pgdata + ".copy"
        shutil.rmtree(new, ignore_errors=True)
        try:
            shutil.copytree(src, new, ignore=shutil.ignore_patterns(
                "postmaster.opts", "postmaster.pid", "standby.signal"))
        except OSError as e:
            shutil.rmtree(new, ignore_errors=True)
            raise ServerError(f"The copy of {src} failed: {e}.",
                              "Check that pgaccel may read it and that the disk has room."
                              ) from None
        for name in ("postgresql.conf", "postgresql.auto.conf", "pg_hba.conf", "pg_ident.conf"):
            target = os.path.join(new, name)
            if os.path.lexists(target):
                os.unlink(target)
            keep = os.path.join(self.pgdata, name)
            if os.path.exists(keep):
                shutil.copyfile(keep, target)
        with open(os.path.join(new, "postgresql.conf"), "a") as f:
            f.write("\nmax_logical_replication_workers = 0   # pgaccel: a copy never "
                    "replicates\n")
        if self.is_running():
            self.stop()
        shutil.rmtree(self.pgdata)
        os.rename(new, self.pgdata)
        chown_tree(self.pgdata, self.user)
        os.chmod(self.pgdata, 0o700)
        pw = (self.password or "").replace("'", "''")
        sql = (f"DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{SUPERUSER}') "
               f"THEN CREATE ROLE {SUPERUSER} SUPERUSER LOGIN; END IF; "
               f"ALTER ROLE {SUPERUSER} SUPERUSER LOGIN PASSWORD '{pw}'; END$$;\n")
        r = subprocess.run([self.inst.path("postgres"), "--single", "-D", self.pgdata,
                            "template1"], input=sql, capture_output=True, text=True,
                           **as_user_kwargs(self.user))
        if r.returncode != 0 or "ERROR" in r.stdout + r.stderr:
            last = (r.stdout + r.stderr).strip().splitlines()
            raise ServerError(f"The copy of {src} did not start in single-user mode: "
                              f"{last[-1] if last else r.returncode}",
                              "Give a copy of a cleanly stopped server or a pg_basebackup.")

    def restart(self, settings: dict[str, object] | None = None) -> None:
        if self.is_running():
            self.stop()
        self.start(settings)

    def _log_since(self, offset: int) -> str:
        try:
            with open(self.logfile, "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def postmaster_pid(self) -> int | None:
        try:
            with open(os.path.join(self.pgdata, "postmaster.pid")) as f:
                return int(f.readline().strip())
        except (OSError, ValueError):
            return None

    # -- connections --------------------------------------------------------------------
    def conninfo(self, dbname: str = "postgres") -> str:
        # a --pgdata cluster: connect as $PGUSER, else as the data directory's owner (the
        # name initdb gives the bootstrap superuser by default)
        user = SUPERUSER if self.throwaway else (os.environ.get("PGUSER") or self.user.name)
        return pgconninfo.make_conninfo(host=self.sockdir, port=self.port, user=user,
                                        dbname=dbname)

    def connect(self, dbname: str = "postgres", **kw) -> psycopg.Connection:
        return psycopg.connect(self.conninfo(dbname), autocommit=True, **kw)

    # -- teardown -----------------------------------------------------------------------
    def cleanup(self) -> None:
        """Stop the server and, for a throwaway cluster, remove its directory."""
        if not self.throwaway:
            return
        try:
            if os.path.exists(os.path.join(self.pgdata, "postmaster.pid")):
                self.stop("fast")
        except Exception:
            pid = self.postmaster_pid()
            if pid:
                try:
                    os.kill(pid, signal.SIGQUIT)
                except ProcessLookupError:
                    pass
        if self.base and not self.keep:
            shutil.rmtree(self.base, ignore_errors=True)
        self._stop_reaper()

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        self.cleanup()


def read_postmaster_opts(pgdata: str) -> str:
    """The options a cluster was last started with (postmaster.opts), minus -D, re-quoted.

    Debian's pg_ctlcluster, for one, passes ``-c config_file=/etc/...`` there; a cluster
    restarted without them would read another configuration."""
    try:
        with open(os.path.join(pgdata, "postmaster.opts")) as f:
            args = shlex.split(f.read().strip())
    except (OSError, ValueError):
        return ""
    args = args[1:]  # the postgres binary
    keep: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-D":
            skip = True
            continue
        if a.startswith("-D") or a.startswith("--pgdata"):
            continue
        keep.append(a)
    return " ".join(shlex.quote(a) for a in keep)
