"""Apply a plan's PostgreSQL settings safely, verify them, and undo them.

Where pgaccel writes (the reasons are in docs/tuning-rules.md, "Applying a plan"):

* a local cluster (throwaway or ``--pgdata``): one file pgaccel owns, ``pgaccel.conf``
  beside postgresql.conf, read through one line appended once to the end of postgresql.conf
  (``include_if_exists = 'pgaccel.conf'``).  pgaccel rewrites only its own file; the user's
  postgresql.conf lines and ALTER SYSTEM entries are never edited.
* ``--dsn``: ALTER SYSTEM, the only way in from outside; reload-level settings only (the
  restart-level ones are listed with the restart they need), and never a parameter the user
  already set with ALTER SYSTEM.

Order: validate and refuse (catalog, durability); back up every file it will touch into a
state directory with a JSON manifest (checksums, target, previous values, the plan); apply
the Linux layer (``osapply``); write the file with the reload-level settings and the
restart-level values already in force, check it with ``postgres -C`` (which names any
refused value without touching the server), reload, verify (pg_settings, pg_file_settings
errors); then the full file, restart if the server says a value is pending, verify again.
Any failure restores the backups (byte-identical, checked), restarts or reloads, verifies
the previous values are back, and raises a :class:`ServerError` naming the setting and the
server's log line.  ``rollback`` returns a target to the state before any saved apply.

The state store (``StateStore``/``State``, at the bottom) keeps one directory per apply:
``<state dir>/<id>/manifest.json`` and ``files/<name>.<timestamp>`` backups.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
import re
import secrets
import shlex
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from .. import __version__
from ..errors import PgaccelError, ServerError, UsageError
from ..util import atomic_write_json
from .gucs import GucCatalog, check_value, to_unit
from .plan import Change

OWNED = "pgaccel.conf"
INCLUDE = f"include_if_exists = '{OWNED}'"
_INCLUDE_RE = re.compile(r"^\s*include_if_exists\s*=?\s*'pgaccel\.conf'", re.M)
_ENTRY_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=?\s*('(?:[^']|'')*'|[^\s#]+)", re.M)
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
AUTO_CONF = "postgresql.auto.conf"
_OFF = ("off", "false", "no", "0", "of", "fals", "fa", "n")
# parameter -> values that give up durability
UNSAFE = {"fsync": _OFF, "full_page_writes": _OFF, "synchronous_commit": ("off",)}
RELOAD_WAIT = 10.0


# -- pure helpers -----------------------------------------------------------------------

def durability_risks(changes: Iterable[Change]) -> list[str]:
    """'fsync = off' for every change that would turn durability off."""
    return [f"{c.name} = {c.proposed}" for c in changes
            if c.layer == "postgres" and c.name.lower() in UNSAFE
            and str(c.proposed).strip().strip("'").lower() in UNSAFE[c.name.lower()]]


def conf_entries(text: str) -> dict[str, str]:
    """``name = value`` lines of a PostgreSQL configuration file (last one wins; include
    directives are not settings)."""
    out: dict[str, str] = {}
    for m in _ENTRY_RE.finditer(text):
        name, val = m.group(1).lower(), m.group(2)
        if name in ("include", "include_if_exists", "include_dir"):
            continue
        if val.startswith("'"):
            val = val[1:-1].replace("''", "'")
        out[name] = val
    return out


def cmdline_settings(opts: str) -> set[str]:
    """Parameters set on the server's command line (postmaster.opts: -c n=v, --n=v)."""
    try:
        args = shlex.split(opts or "")
    except ValueError:
        return set()
    names = set()
    for i, a in enumerate(args):
        if a == "-c" and i + 1 < len(args):
            a = "-c" + args[i + 1]
        m = re.match(r"^(?:-c|--)([A-Za-z_][A-Za-z0-9_.-]*)=", a)
        if m:
            names.add(m.group(1).replace("-", "_").lower())
    return names


def _bool(v: str) -> bool | None:
    v = v.lower()
    if v in ("on", "true", "yes", "1", "t", "y"):
        return True
    if v in ("off", "false", "no", "0", "f", "n"):
        return False
    return None


def value_matches(proposed: str, raw: str | None, unit: str | None, vartype: str) -> bool:
    """Does pg_settings.setting ``raw`` (base unit) equal the proposed text?"""
    if raw is None:
        return False
    p, r = str(proposed).strip().strip("'"), str(raw).strip()
    if vartype == "bool":
        return _bool(p) is not None and _bool(p) == _bool(r)
    if vartype in ("integer", "real"):
        try:
            x = to_unit(p, unit)
            y = float(r)
        except ValueError:
            return False
        if vartype == "integer":
            x = math.floor(x + 0.5)
            if x == -1:              # "automatic" (wal_buffers -1 shows the derived size)
                return True
        return abs(x - y) <= 1e-9 * max(1.0, abs(x))
    return p.lower() == r.lower()


def with_include(conf_text: str) -> str | None:
    """postgresql.conf with the include line appended, or None when it is already there."""
    if _INCLUDE_RE.search(conf_text):
        return None
    sep = "" if conf_text.endswith("\n") or not conf_text else "\n"
    return (conf_text + sep + "\n# Added once by `pgaccel tune --apply`: pgaccel's settings "
            f"live in {OWNED} (`pgaccel rollback` removes this line again).\n{INCLUDE}\n")


def _quote(v: str) -> str:
    return "'" + str(v).replace("'", "''") + "'"


def render_owned(changes: Iterable[Change], state_id: str, describe: str = "") -> str:
    lines = ["# pgaccel.conf: owned by pgaccel. `pgaccel tune --apply` rewrites this whole file",
             "# and `pgaccel rollback` restores the previous one; put your own settings in",
             "# postgresql.conf (or ALTER SYSTEM, which pgaccel never overrides).",
             f"# State {state_id}" + (f": {describe}" if describe else "") + "."]
    for c in changes:
        tag = " [restart]" if c.restart else ""
        lines += ["", f"# {c.reason}{tag}", f"{c.name} = {_quote(c.proposed)}"]
    return "\n".join(lines) + "\n"


def unified_diff(old: str, new: str, path: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                        f"{path} (now)", f"{path} (after apply)"))


def with_overrides(changes: list[Change], sets: dict[str, str],
                   catalog: GucCatalog | None) -> list[Change]:
    """The plan's changes with ``--set NAME=VALUE`` values replacing or adding settings."""
    out = [Change(**c.to_dict()) for c in changes]
    by = {c.name: c for c in out if c.layer == "postgres"}
    for name, value in sets.items():
        name = name.strip().lower()
        if not _NAME_RE.match(name):
            raise UsageError(f"--set {name}: not a parameter name.", "Use --set NAME=VALUE.")
        if catalog is not None and catalog.gucs and name not in catalog:
            raise UsageError(f"--set {name}: the server has no such parameter.",
                             "Check the name (SHOW ALL lists them).")
        restart = bool(catalog.restart(name)) if catalog is not None else False
        if name in by:
            by[name].proposed, by[name].reason = str(value), "set with --set"
            by[name].advice_only, by[name].rule = False, "user.set"
        else:
            c = Change("postgres", name, str(value), "set with --set", "--set", rule="user.set",
                       restart=restart,
                       context=catalog.context(name) if catalog is not None else None)
            out.append(c)
            by[name] = c
    return out


def check_changes(changes: list[Change], catalog: GucCatalog | None,
                  allow_unsafe_durability: bool = False) -> None:
    """Refuse durability changes (unless allowed) and values the catalog refuses."""
    risks = durability_risks(changes)
    if risks and not allow_unsafe_durability:
        raise UsageError(f"Refusing to turn durability off ({', '.join(risks)}): a crash could "
                         "lose committed transactions or corrupt data.",
                         "pgaccel never proposes this; if you really mean it, add "
                         "--allow-unsafe-durability.")
    if catalog is not None and catalog.gucs:
        bad = [p for c in changes if c.layer == "postgres" and not c.advice_only
               for p in [check_value(c.name, c.proposed, catalog)] if p]
        if bad:
            raise UsageError("The server would refuse: " + "; ".join(bad) + ".",
                             "Nothing was changed. Fix or drop those values.")


def _sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def _read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def _put_bytes(path: str, data: bytes, like: dict | None = None) -> None:
    """Write ``data`` to ``path`` in place when it exists (same inode, owner, mode, labels),
    else create it with ``like``'s mode and owner."""
    if os.path.exists(path):
        with open(path, "r+b") as f:
            f.write(data)
            f.truncate()
            f.flush()
            os.fsync(f.fileno())
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, (like or {}).get("mode", 0o600))
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if like:
        os.chmod(path, like["mode"])
        if os.geteuid() == 0:
            os.chown(path, like["uid"], like["gid"])


def _stat(path: str) -> dict:
    st = os.stat(path)
    return {"mode": st.st_mode & 0o7777, "uid": st.st_uid, "gid": st.st_gid}


@dataclass
class Applied:
    name: str
    value: str
    restart: bool
    previous: str | None = None        # SHOW form before
    previous_raw: str | None = None    # pg_settings.setting before
    previous_auto: str | None = None   # --dsn: the ALTER SYSTEM entry before (None: none)
    shown: str | None = None           # SHOW form after, verified


@dataclass
class ApplyReport:
    target: str
    state_id: str | None = None
    state_dir: str | None = None
    dry_run: bool = False
    applied: list[Applied] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    listed: list[tuple[str, str, str]] = field(default_factory=list)   # name, value, why
    unchanged: list[str] = field(default_factory=list)     # already at the planned value
    os_applied: list[dict] = field(default_factory=list)
    os_skipped: list[tuple[str, str]] = field(default_factory=list)
    diff: str = ""
    reloaded: bool = False
    restarted: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d [\d:.]+ [A-Z+\-\d]+ \[\d+\] ")


class _Failed(Exception):
    def __init__(self, what: str, line: str = "", hint: str | None = None):
        super().__init__(what)
        self.what, self.line, self.hint = what, _LOG_PREFIX.sub("", line.strip()), hint


# -- the local server (thin) ------------------------------------------------------------

class LocalServer:
    """A local cluster pgaccel may reload and restart: pg_ctl as the server's OS user, or
    ``restart_cmd`` (e.g. systemctl) when given."""

    def __init__(self, cluster, restart_cmd: str | None = None):
        self.cluster = cluster
        self.restart_cmd = restart_cmd
        self.opts = shlex.split(cluster.original_opts or "")
        if not cluster.throwaway:
            self._stable_log()

    def _stable_log(self) -> None:
        """A --pgdata server restarted by pg_ctl keeps writing its stderr to the -l file:
        use ``<pgdata>/log/pgaccel-pg_ctl.log`` (the server user's, kept), not a temp file."""
        c = self.cluster
        tmp = os.path.dirname(c.logfile)
        logdir = os.path.join(c.pgdata, "log")
        if not os.path.isdir(logdir):
            os.mkdir(logdir, 0o700)
            if os.geteuid() == 0:
                os.chown(logdir, c.user.uid, c.user.gid)
        path = os.path.join(logdir, "pgaccel-pg_ctl.log")
        if not os.path.exists(path):
            open(path, "a").close()
            if os.geteuid() == 0:
                os.chown(path, c.user.uid, c.user.gid)
        c.logfile = path
        if os.path.basename(tmp).startswith("pgaccel-log-"):
            shutil.rmtree(tmp, ignore_errors=True)

    def _postgres(self, *args: str) -> subprocess.CompletedProcess:
        from ..server.osuser import as_user_kwargs
        cmd = [self.cluster.inst.path("postgres"), "-D", self.cluster.pgdata, *self.opts, *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                              **as_user_kwargs(self.cluster.user))

    def config_file(self) -> str:
        r = self._postgres("-C", "config_file")
        if r.returncode != 0 or not r.stdout.strip():
            from ..server.cluster import explain_start_failure
            _, line, _ = explain_start_failure(r.stderr)
            raise ServerError(f"Cannot read the configuration of {self.cluster.pgdata}: {line}",
                              "Fix the configuration files first (postgres -C config_file "
                              "must work).")
        return os.path.realpath(r.stdout.strip().splitlines()[-1])

    def check_files(self) -> str | None:
        """The server's complaint about its configuration files, or None (``postgres -C``
        parses every file and checks every value without starting anything)."""
        r = self._postgres("-C", "config_file")
        if r.returncode == 0:
            return None
        lines = [ln.strip() for ln in r.stderr.splitlines() if ln.strip()]
        for ln in lines:
            if re.search(r"invalid value|unrecognized configuration|outside the valid range|"
                         r"requires a|syntax error|could not", ln, re.I):
                return ln
        return lines[0] if lines else f"postgres -C exited with {r.returncode}"

    def raw_values(self, names: Iterable[str]) -> dict[str, str]:
        out = {}
        for n in names:
            r = self._postgres("-C", n)
            if r.returncode == 0 and r.stdout.strip():
                out[n] = r.stdout.strip().splitlines()[-1]
        return out

    def running(self) -> bool:
        return self.cluster.is_running()

    def connect(self):
        return self.cluster.connect("postgres", connect_timeout=10)

    def settings(self, names: Iterable[str]) -> dict[str, dict]:
        with self.connect() as conn:
            return _settings(conn, names)

    def file_errors(self) -> list[tuple]:
        with self.connect() as conn:
            return _file_errors(conn)

    def reload(self) -> None:
        with self.connect() as conn:
            conn.execute("SELECT pg_reload_conf()")

    def start(self) -> None:
        self.cluster.start({})

    def stop(self) -> None:
        self.cluster.stop()

    def restart(self) -> None:
        """Restart; raises ServerError with the server's log line when it does not come up."""
        if not self.restart_cmd:
            self.cluster.restart({})
            return
        try:
            r = subprocess.run(shlex.split(self.restart_cmd), capture_output=True, text=True,
                               timeout=300)
        except (OSError, ValueError, subprocess.TimeoutExpired) as e:
            raise ServerError(f"--restart-cmd {self.restart_cmd!r} could not run: {e}",
                              "Check the command.") from None
        if r.returncode != 0:
            out = (r.stderr or r.stdout).strip().splitlines()
            raise ServerError(f"--restart-cmd {self.restart_cmd!r} failed (exit "
                              f"{r.returncode}): {out[-1] if out else ''}",
                              "See the server log (journalctl -u <unit> for systemd).")
        self.wait_ready()

    def wait_ready(self, timeout: float = 120) -> None:
        end = time.monotonic() + timeout
        last = ""
        while time.monotonic() < end:
            self.cluster.read_pidfile()
            try:
                with self.connect() as conn:
                    conn.execute("SELECT 1")
                return
            except Exception as e:  # noqa: BLE001 - any failure means "not up yet"
                last = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            time.sleep(0.5)
        raise ServerError(f"The server did not accept connections within {timeout:.0f}s after "
                          f"--restart-cmd: {last}", "See the server log.")


_SETTINGS_Q = ("SELECT name, setting, unit, vartype, source, sourcefile, sourceline, "
               "pending_restart, current_setting(name) FROM pg_settings WHERE name = ANY(%s)")


def _settings(conn, names: Iterable[str]) -> dict[str, dict]:
    rows = conn.execute(_SETTINGS_Q, (list(names),)).fetchall()
    keys = ("name", "setting", "unit", "vartype", "source", "sourcefile", "sourceline",
            "pending_restart", "shown")
    return {r[0]: dict(zip(keys, r)) for r in rows}


def _file_errors(conn) -> list[tuple]:
    return conn.execute("SELECT sourcefile, sourceline, name, setting, error FROM "
                        "pg_file_settings WHERE error IS NOT NULL").fetchall()


def verify(expected: dict[str, str], rows: dict[str, dict],
           file_errors: Iterable[tuple] = (), *, pending_ok: bool = False) -> list[str]:
    """What does not show the intended value (pure): pg_settings rows + pg_file_settings
    errors for the expected names."""
    problems = []
    for name, value in expected.items():
        row = rows.get(name)
        if row is None:
            problems.append(f"{name}: the server does not know it")
            continue
        if not value_matches(value, row["setting"], row["unit"], row["vartype"]):
            where = (f"{row['sourcefile']} line {row['sourceline']}" if row.get("sourcefile")
                     else row.get("source") or "?")
            problems.append(f"{name} is {row['shown']}, not {value} (from {where})")
        elif row.get("pending_restart") and not pending_ok:
            problems.append(f"{name} still waits for a restart")
    for sourcefile, line, name, setting, error in file_errors:
        if name in expected and not (pending_ok and "could not be applied" in (error or "")):
            problems.append(f"{name} = {setting} in {sourcefile} line {line}: {error}")
    return problems


def _wait_for(fetch, expected: dict[str, str], pending_ok: bool) -> list[str]:
    """Poll after a reload (asynchronous) until verified, a file error names one of the
    settings, or RELOAD_WAIT passes."""
    end = time.monotonic() + RELOAD_WAIT
    while True:
        rows, errs = fetch()
        problems = verify(expected, rows, errs, pending_ok=pending_ok)
        ours = [e for e in errs if e[2] in expected]
        if not problems or time.monotonic() > end or ours:
            return problems
        time.sleep(0.1)


def _settle(server: "LocalServer", raw: dict[str, str]) -> list[str]:
    """Names whose pg_settings.setting is not (yet, after RELOAD_WAIT) the given raw value."""
    end = time.monotonic() + RELOAD_WAIT
    while True:
        rows = server.settings(raw)
        wrong = [n for n, v in raw.items() if v is not None
                 and str(rows.get(n, {}).get("setting")) != str(v)]
        if not wrong or time.monotonic() > end:
            return wrong
        time.sleep(0.1)


def new_state_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


# -- local apply ------------------------------------------------------------------------

def local_target_info(server: "LocalServer", config_file: str, kind: str) -> dict[str, Any]:
    c = server.cluster
    pgdata = os.path.realpath(c.pgdata)
    return {"kind": kind, "key": f"pgdata:{pgdata}", "pgdata": pgdata,
            "bindir": c.inst.bindir, "version": c.inst.version, "server_user": c.user.name,
            "restart_cmd": server.restart_cmd, "config_file": config_file,
            "owned_file": os.path.join(os.path.dirname(config_file), OWNED),
            "auto_conf": os.path.join(pgdata, AUTO_CONF)}


def _os_apply(state: "State", report: ApplyReport, changes: list[Change], root: str,
              is_root: bool | None) -> None:
    from . import osapply

    def record(items) -> None:
        state.data["os"] = {"root": root, "items": [i.to_dict() for i in items]}
        state.save()
    try:
        done, skipped = osapply.apply_os(changes, root, is_root=is_root, record=record)
    except PgaccelError:
        state.data["os"]["items"] = []            # apply_os undid what it had written
        state.finish("failed")
        raise
    state.data["os"]["items"] = [i.to_dict() for i in done]
    report.os_applied, report.os_skipped = [i.to_dict() for i in done], skipped


def apply_linux(changes: list[Change], store: "StateStore", *, root: str = "/",
                is_root: bool | None = None, dry_run: bool = False,
                plan_dict: dict | None = None) -> ApplyReport:
    """The Linux layer alone (``--apply-os`` without ``--apply``)."""
    from . import osapply
    osapply.check_allowed(os.geteuid() == 0 if is_root is None else is_root)
    report = ApplyReport(f"Linux settings under {root}", dry_run=dry_run)
    items, report.os_skipped = osapply.plan_os(changes, root)
    if dry_run or not items:
        report.os_applied = [i.to_dict() for i in items]
        if not items and not dry_run:
            report.notes.append("No Linux setting needs to change.")
        return report
    state = store.new({"kind": "os", "key": f"os:{os.path.realpath(root)}", "root": root},
                      plan_dict)
    report.state_id, report.state_dir = state.id, state.dir
    _os_apply(state, report, changes, root, is_root)
    state.finish("applied")
    return report


def apply_local(server: "LocalServer", changes: list[Change], store: "StateStore", *,
                catalog: GucCatalog | None = None, plan_dict: dict | None = None,
                dry_run: bool = False, allow_unsafe_durability: bool = False,
                os_changes: list[Change] | None = None, os_root: str = "/",
                is_root: bool | None = None, kind: str = "pgdata",
                describe: str = "") -> ApplyReport:
    """Apply ``changes`` (the postgres layer) to a local cluster, and ``os_changes`` (the
    Linux layer) first when given; see the module docstring."""
    from . import osapply
    pg = [c for c in changes if c.layer == "postgres" and not c.advice_only]
    check_changes(pg, catalog, allow_unsafe_durability)
    if os_changes is not None:
        osapply.check_allowed(os.geteuid() == 0 if is_root is None else is_root)
    c = server.cluster
    config_file = server.config_file()
    info = local_target_info(server, config_file, kind)
    owned, auto = info["owned_file"], info["auto_conf"]
    report = ApplyReport(f"the cluster in {c.pgdata}", dry_run=dry_run)

    # never override the user's own ALTER SYSTEM entries or command-line settings
    user_auto = conf_entries((_read_bytes(auto) or b"").decode("utf-8", "replace"))
    on_cmdline = cmdline_settings(c.original_opts)
    todo = []
    for ch in pg:
        if ch.name in user_auto:
            report.skipped.append((ch.name, f"set with ALTER SYSTEM ({AUTO_CONF}: "
                                   f"{user_auto[ch.name]}), which pgaccel leaves alone; "
                                   f"ALTER SYSTEM RESET {ch.name} lets pgaccel manage it"))
        elif ch.name in on_cmdline:
            report.skipped.append((ch.name, "set on the server's command line, which "
                                   "overrides any file"))
        else:
            todo.append(ch)
    conf_before = _read_bytes(config_file) or b""
    owned_before = _read_bytes(owned)
    new_conf = with_include(conf_before.decode("utf-8", "replace"))
    sid = new_state_id()
    full = render_owned(todo, sid, describe)
    restart_level = {ch.name for ch in todo if ch.restart}
    old = conf_entries((owned_before or b"").decode("utf-8", "replace"))
    keep = [Change("postgres", n, v, "in force until the restart", restart=True)
            for n, v in old.items()
            if n in restart_level or (catalog is not None and catalog.restart(n))]
    phase1 = render_owned([ch for ch in todo if not ch.restart] + keep, sid, describe)
    if new_conf is not None:
        report.diff += unified_diff(conf_before.decode("utf-8", "replace"), new_conf,
                                    config_file)
    report.diff += unified_diff((owned_before or b"").decode("utf-8", "replace"), full, owned)
    if dry_run:
        if os_changes is not None:
            items, report.os_skipped = osapply.plan_os(os_changes, os_root)
            report.os_applied = [i.to_dict() for i in items]
        return report

    running = server.running()
    names = [ch.name for ch in todo]
    if running:
        before_rows = server.settings(names)
        before = {n: r["setting"] for n, r in before_rows.items()}
        shown = {n: r["shown"] for n, r in before_rows.items()}
    else:
        from .engine import show_form
        before = server.raw_values(names)
        shown = {n: show_form(v, (catalog.get(n).unit if catalog and catalog.get(n) else None))
                 for n, v in before.items()}
    report.applied = [Applied(ch.name, ch.proposed, ch.restart, shown.get(ch.name),
                              before.get(ch.name)) for ch in todo]
    state = store.new({**info, "was_running": running}, plan_dict, sid=sid)
    report.state_id, report.state_dir = state.id, state.dir
    like = _stat(config_file)
    if new_conf is not None:
        state.backup(config_file)
    state.backup(owned)
    state.watch(auto)
    state.data["postgres"] = {"applied": [asdict(a) for a in report.applied],
                              "skipped": report.skipped}
    state.save()
    if os_changes is not None:
        store.add_os_key(state, os_root)
        _os_apply(state, report, os_changes, os_root, is_root)   # huge pages before restart
        state.save()
    expected = {ch.name: ch.proposed for ch in todo}
    reload_expected = {ch.name: ch.proposed for ch in todo if not ch.restart}

    def fetch():
        with server.connect() as conn:
            return _settings(conn, expected), _file_errors(conn)

    try:
        if new_conf is not None:
            with open(config_file, "ab") as f:
                f.write(new_conf.encode()[len(conf_before):])
        _put_bytes(owned, full.encode(), like)
        bad = server.check_files()
        if bad:
            raise _Failed("the server refuses a value in the new configuration", bad,
                          "Nothing was reloaded or restarted.")
        if not running:
            try:
                server.start()
            except ServerError as e:
                raise _Failed("the server did not start with the new settings",
                              e.message.split(": ", 1)[-1], e.hint) from None
            try:
                probs = verify(expected, *fetch())
            finally:
                server.stop()
            if probs:
                raise _Failed("a setting does not show its intended value", "; ".join(probs))
        else:
            if phase1 != full:
                _put_bytes(owned, phase1.encode(), like)
            server.reload()
            report.reloaded = True
            probs = _wait_for(fetch, reload_expected, pending_ok=False)
            if probs:
                raise _Failed("a reload-level setting was not applied", "; ".join(probs))
            if phase1 != full:
                _put_bytes(owned, full.encode(), like)
                server.reload()
            dropped = [n for n in old if n not in expected]   # back to the user's value
            if _wait_pending(server, expected, dropped):
                try:
                    server.restart()
                except ServerError as e:
                    raise _Failed("the server did not come back after the restart",
                                  e.message.split(": ", 1)[-1], e.hint) from None
                report.restarted = True
            probs = verify(expected, *fetch())
            if probs:
                raise _Failed("a setting does not show its intended value", "; ".join(probs))
    except _Failed as f:
        _restore_after_failure(server, state, report, f, running, before, is_root)
    if running:
        rows, _ = fetch()
        for a in report.applied:
            a.shown = rows.get(a.name, {}).get("shown", a.value)
    else:
        report.notes.append("The cluster was stopped: pgaccel started it to verify the "
                            "settings and stopped it again.")
    state.data["postgres"]["applied"] = [asdict(a) for a in report.applied]
    state.data["postgres"]["restarted"] = report.restarted
    state.finish("applied")
    return report


def _wait_pending(server: "LocalServer", expected: dict[str, str],
                  also: Iterable[str] = ()) -> list[str]:
    """Names that need a restart once the full file is reloaded: those (of ``expected`` and
    ``also``) the server marks pending_restart, or, if it has not processed the reload
    within RELOAD_WAIT, those of ``expected`` not showing their value yet."""
    end = time.monotonic() + RELOAD_WAIT
    while True:
        rows = server.settings([*expected, *also])
        pending = [n for n, r in rows.items() if r["pending_restart"]]
        differ = [n for n, v in expected.items() if n in rows and not value_matches(
            v, rows[n]["setting"], rows[n]["unit"], rows[n]["vartype"])]
        if pending or not differ or time.monotonic() > end:
            return pending or differ
        time.sleep(0.1)


def _culprits(line: str, applied: list[Applied]) -> str:
    """'shared_buffers = 1TB' for the settings a failure line points at (pure)."""
    named = set(re.findall(r'parameter "([^"]+)"', line))
    named |= {a.name for a in applied if re.search(rf"\b{re.escape(a.name)}\b", line)}
    hit = [a for a in applied if a.name in named]
    if not hit and re.search(r"shared memory|huge pages|could not map", line, re.I):
        hit = [a for a in applied if a.restart and a.previous != a.value]
        return (" (restart-level settings: " + ", ".join(f"{a.name} = {a.value}" for a in hit)
                + ")") if hit else ""
    return (" (" + ", ".join(f"{a.name} = {a.value}" for a in hit) + ")") if hit else ""


def _restore_after_failure(server: "LocalServer", state: "State", report: ApplyReport,
                           f: _Failed, was_running: bool, before: dict[str, str],
                           is_root: bool | None) -> None:
    from . import osapply
    problems = state.restore_files()
    try:
        osapply.restore_os([osapply.OsItem.from_dict(d) for d in report.os_applied],
                           is_root=is_root)
    except PgaccelError as e:
        problems.append(e.message)
    back = ("restoring failed: " + "; ".join(problems) if problems else
            "the configuration files are byte-identical to before (checked)")
    if was_running:
        try:
            if not server.running():
                server.restart() if server.restart_cmd else server.start()
            else:
                server.reload()
                if report.restarted or _wait_pending(server, before):
                    server.restart()
            still = _settle(server, before)
            back += (", and the server is running with its previous values" if not still
                     else f"; but these still differ: {', '.join(still)}")
        except ServerError as e:
            back += f"; but the server did not come back: {e.message}"
    else:
        bad = server.check_files()
        back += ("; the cluster stays stopped" if not bad else
                 f"; but the restored files do not parse: {bad}")
    state.data["error"] = {"what": f.what, "line": f.line}
    state.finish("failed")
    raise ServerError(f"Applying the plan to {report.target} failed: {f.what}"
                      f"{_culprits(f.line, report.applied)}: {f.line}. pgaccel restored the "
                      f"previous configuration: {back}.",
                      (f.hint + " " if f.hint else "") + f"State {state.id} keeps the backups.")


# -- remote apply (--dsn) ---------------------------------------------------------------

def _connect(dsn: str):
    import psycopg

    from ..server.target import explain_connect_error, safe_dsn
    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=15)
    except psycopg.Error as e:
        raise explain_connect_error(e, f"the server at {safe_dsn(dsn)}") from None


def _auto_entries(conn) -> dict[str, str]:
    import psycopg
    try:
        rows = conn.execute("SELECT name, setting, sourcefile FROM pg_file_settings "
                            "ORDER BY seqno").fetchall()
    except psycopg.errors.InsufficientPrivilege:
        raise ServerError("Reading pg_file_settings needs a superuser (or a role granted "
                          "SELECT on it); pgaccel needs it to leave your ALTER SYSTEM "
                          "settings alone and to roll back exactly.",
                          "Connect as a superuser.") from None
    return {n: s for n, s, f in rows if f and f.endswith(AUTO_CONF)}


def _auto_file(conn) -> bytes | None:
    import psycopg
    try:
        text = conn.execute("SELECT pg_read_file(%s)", (AUTO_CONF,)).fetchone()[0]
    except psycopg.Error:
        return None
    return text.encode()


def _system_id(conn) -> str | None:
    import psycopg
    try:
        return str(conn.execute("SELECT system_identifier FROM pg_control_system()")
                   .fetchone()[0])
    except psycopg.Error:
        return None


def _alter(conn, name: str, value: str | None) -> None:
    from psycopg import sql
    if value is None:
        conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(name)))
    else:
        conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name),
                                                                 sql.Literal(str(value))))


def alter_statements(changes: Iterable[Change]) -> str:
    lines = [f"ALTER SYSTEM SET {c.name} = {_quote(c.proposed)};" for c in changes]
    return "\n".join(lines + ["SELECT pg_reload_conf();"]) + "\n" if lines else ""


def apply_dsn(dsn: str, changes: list[Change], store: "StateStore", *,
              catalog: GucCatalog | None = None, plan_dict: dict | None = None,
              dry_run: bool = False, allow_unsafe_durability: bool = False) -> ApplyReport:
    """Reload-level changes through ALTER SYSTEM + pg_reload_conf(); restart-level ones
    are listed, never applied; the user's ALTER SYSTEM entries are left alone."""
    import psycopg

    from ..server.target import safe_dsn
    pg = [c for c in changes if c.layer == "postgres" and not c.advice_only]
    check_changes(pg, catalog, allow_unsafe_durability)
    report = ApplyReport(f"the server at {safe_dsn(dsn)}", dry_run=dry_run)
    with _connect(dsn) as conn:
        sysid = _system_id(conn)
        key = f"cluster:{sysid}" if sysid else f"dsn:{safe_dsn(dsn)}"
        auto = _auto_entries(conn)
        ours = store.owned_auto_entries(key)
        rows = _settings(conn, [c.name for c in pg])
        todo = []
        for c in pg:
            row = rows.get(c.name)
            restart = c.restart or (row is not None and catalog is not None
                                    and catalog.context(c.name) == "postmaster")
            if row is not None and value_matches(c.proposed, row["setting"], row["unit"],
                                                 row["vartype"]):
                report.unchanged.append(c.name)
                continue
            if restart:
                report.listed.append((c.name, c.proposed, "needs a server restart: not "
                                      "applied over --dsn; use --pgdata on the server's "
                                      "host, or ALTER SYSTEM and restart"))
            elif c.name in auto and ours.get(c.name) != auto[c.name]:
                report.skipped.append((c.name, f"set with ALTER SYSTEM ({auto[c.name]}), "
                                       "which pgaccel leaves alone"))
            elif row is not None and row["source"] == "command line":
                report.skipped.append((c.name, "set on the server's command line"))
            else:
                todo.append(c)
        report.diff = alter_statements(todo)
        if dry_run or not todo:
            if not todo and not dry_run:
                report.notes.append("Nothing to apply over --dsn.")
            return report
        auto_before = _auto_file(conn)
        state = store.new({"kind": "dsn", "dsn": safe_dsn(dsn), "system_identifier": sysid,
                           "key": key, "auto_conf_sha256": _sha(auto_before)}, plan_dict)
        if auto_before is not None:
            state.backup_bytes(AUTO_CONF, auto_before)
        report.applied = [Applied(c.name, c.proposed, False, rows[c.name]["shown"],
                                  rows[c.name]["setting"], auto.get(c.name)) for c in todo]
        state.data["postgres"] = {"applied": [asdict(a) for a in report.applied],
                                  "skipped": report.skipped, "listed": report.listed}
        state.save()
        report.state_id, report.state_dir = state.id, state.dir
        done: list[Applied] = []
        failure: str | None = None
        for a in report.applied:
            try:
                _alter(conn, a.name, a.value)
                done.append(a)
            except psycopg.Error as e:
                failure = f"ALTER SYSTEM SET {a.name} = {_quote(a.value)} was refused: " \
                          f"{str(e).strip().splitlines()[0]}"
                break
        if failure is None:
            conn.execute("SELECT pg_reload_conf()")
            report.reloaded = True
            expected = {a.name: a.value for a in done}

            def fetch():
                with _connect(dsn) as c2:
                    return _settings(c2, expected), _file_errors(c2)
            probs = _wait_for(fetch, expected, pending_ok=False)
            if probs:
                failure = "a setting does not show its intended value: " + "; ".join(probs)
        if failure is not None:
            for a in reversed(done):
                _alter(conn, a.name, a.previous_auto)
            conn.execute("SELECT pg_reload_conf()")
            state.data["error"] = {"what": failure}
            state.finish("failed")
            raise ServerError(f"Applying the plan to {report.target} failed: {failure}. "
                              "pgaccel reset the settings it had changed and reloaded.",
                              f"State {state.id} records what was attempted.")
        rows = _settings(conn, [a.name for a in done])
        for a in report.applied:
            a.shown = rows.get(a.name, {}).get("shown")
        state.data["postgres"]["applied"] = [asdict(a) for a in report.applied]
        state.data["target"]["auto_conf_sha256_after"] = _sha(_auto_file(conn))
        state.finish("applied")
    return report


# -- rollback ---------------------------------------------------------------------------

@dataclass
class RollbackReport:
    state_id: str
    undone: list[str] = field(default_factory=list)
    files: list[dict] = field(default_factory=list)      # path, restored: sha ok
    settings: dict[str, str] = field(default_factory=dict)  # name -> value now (verified)
    os_restored: list[str] = field(default_factory=list)
    restarted: bool = False
    reloaded: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rollback(store: "StateStore", ref: str | None = None, *, dsn: str | None = None,
             force: bool = False, is_root: bool | None = None) -> RollbackReport:
    """Return the target(s) of state ``ref`` (default: the latest applied) to how they were
    before it: undo it and every later applied state on the same target, newest first
    (PostgreSQL first, then the Linux values)."""
    from . import osapply
    target = store.find(ref)
    chain = store.chain(target)
    report = RollbackReport(target.id, undone=[s.id for s in chain])
    os_items = [osapply.OsItem.from_dict(d) for s in chain
                for d in s.data.get("os", {}).get("items", [])]
    if os_items:
        osapply.check_allowed(os.geteuid() == 0 if is_root is None else is_root)
    groups: dict[str, list[State]] = {}
    for s in chain:
        if s.data["target"].get("kind") in ("pgdata", "throwaway", "dsn"):
            groups.setdefault(s.data["target"]["key"], []).append(s)
    for states in groups.values():
        if states[0].data["target"]["kind"] == "dsn":
            _rollback_dsn(states, report, dsn, force)
        else:
            _rollback_local(states, report, force)
    if os_items:
        osapply.restore_os(os_items, is_root=is_root)
        report.os_restored = osapply.describe(os_items)
    for s in chain:
        s.data["rolled_back"] = {"at": _now(), "to": target.id}
        s.finish("rolled-back")
    return report


def _first_previous(chain: list["State"]) -> dict[str, Applied]:
    """For every name: the Applied record of the oldest state in the chain (its previous
    value is the one from before the chain)."""
    out: dict[str, Applied] = {}
    for s in chain:                       # newest first: older ones overwrite
        for d in s.data.get("postgres", {}).get("applied", []):
            out[d["name"]] = Applied(**d)
    return out


def _rollback_local(chain: list["State"], report: RollbackReport, force: bool) -> None:
    from ..server.cluster import Cluster
    from ..server.discovery import choose_server
    oldest = chain[-1]
    t = oldest.data["target"]
    changed = [p for p in store_paths(chain)
               if _sha(_read_bytes(p)) != next(s.after_sha(p) for s in chain if s.has(p))]
    if changed and not force:
        raise PgaccelError("These files changed after pgaccel's apply: " + ", ".join(changed)
                           + "; a rollback would overwrite those edits.",
                           "Look at them first; pgaccel rollback --force restores anyway "
                           "(the current files are saved in the state directory).")
    for s in chain:                       # newest first
        if changed:
            for p in changed:
                s.save_copy(p, "before-rollback")
        problems = s.restore_files()
        if problems:
            raise PgaccelError("Restoring the configuration failed: " + "; ".join(problems),
                               f"The backups are in {s.dir}.")
    for rec in oldest.data["files"]:
        now = _sha(_read_bytes(rec["path"]))
        report.files.append({"path": rec["path"], "identical": now == rec["sha256_before"],
                             "existed": rec["existed"], "touched": rec.get("touched", True)})
    inst = choose_server(t["bindir"])
    server = LocalServer(Cluster.existing(inst, t["pgdata"], run_as=t.get("server_user")),
                         t.get("restart_cmd"))
    bad = server.check_files()
    if bad:
        raise ServerError(f"The restored configuration does not parse: {bad}",
                          "Check the files listed in the state manifest.")
    if not server.running():
        report.notes.append("The cluster is stopped: files restored; it will start with its "
                            "previous settings.")
        return
    prev = {n: a.previous_raw for n, a in _first_previous(chain).items()
            if a.previous_raw is not None}
    server.reload()
    report.reloaded = True
    if _wait_pending(server, prev):
        server.restart()
        report.restarted = True
    wrong = _settle(server, prev)
    rows = server.settings(prev)
    if wrong:
        raise ServerError("After the rollback these settings do not show their previous "
                          "values: " + ", ".join(f"{n} = {rows.get(n, {}).get('shown')}"
                                                 for n in wrong) + ".",
                          "Another configuration source may override them (SELECT * FROM "
                          "pg_file_settings).")
    report.settings = {n: r["shown"] for n, r in rows.items()}


def store_paths(chain: list["State"]) -> list[str]:
    seen: list[str] = []
    for s in chain:
        for rec in s.data.get("files", []):
            if rec["path"] not in seen and rec.get("touched", True):
                seen.append(rec["path"])
    return seen


def _rollback_dsn(chain: list["State"], report: RollbackReport, dsn: str | None,
                  force: bool) -> None:
    t = chain[-1].data["target"]
    use = dsn or t["dsn"]
    with _connect(use) as conn:
        sysid = _system_id(conn)
        if t.get("system_identifier") and sysid and sysid != t["system_identifier"]:
            raise UsageError(f"{use} is another cluster (system identifier {sysid}, the state "
                             f"was saved for {t['system_identifier']}).",
                             "Pass --dsn for the server the state belongs to.")
        auto = _auto_entries(conn)
        latest: dict[str, str] = {}
        for s in reversed(chain):          # oldest first: newer values win
            for d in s.data.get("postgres", {}).get("applied", []):
                latest[d["name"]] = d["value"]
        edited = [n for n, v in latest.items() if auto.get(n) != v]
        if edited and not force:
            raise PgaccelError("These settings were changed with ALTER SYSTEM after pgaccel's "
                               "apply: " + ", ".join(edited) + ".",
                               "pgaccel rollback --force resets them anyway.")
        for s in chain:                    # newest first
            for d in reversed(s.data.get("postgres", {}).get("applied", [])):
                _alter(conn, d["name"], d.get("previous_auto"))
        conn.execute("SELECT pg_reload_conf()")
        report.reloaded = True
    prev = _first_previous(chain)
    end = time.monotonic() + RELOAD_WAIT
    while True:
        with _connect(use) as conn:
            rows = _settings(conn, prev)
            after = _auto_file(conn)
        wrong = [n for n, a in prev.items()
                 if str(rows.get(n, {}).get("setting")) != str(a.previous_raw)]
        if not wrong or time.monotonic() > end:
            break
        time.sleep(0.1)
    if wrong:
        raise ServerError("After the rollback these settings do not show their previous "
                          "values: " + ", ".join(wrong) + ".", "Check pg_file_settings.")
    report.settings = {n: r["shown"] for n, r in rows.items()}
    sha = t.get("auto_conf_sha256")
    if sha and after is not None:
        report.files.append({"path": AUTO_CONF, "identical": _sha(after) == sha,
                             "existed": True, "touched": True})
        if _sha(after) != sha:
            report.notes.append(f"{AUTO_CONF} holds the previous values but is not "
                                "byte-identical (it had been edited by hand before).")


# -- state store ------------------------------------------------------------------------

def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def default_state_dir() -> str:
    env = os.environ.get("PGACCEL_STATE_DIR")
    if env:
        return env
    import platformdirs
    return os.path.join(platformdirs.user_state_dir("pgaccel"), "tune-states")


class State:
    """One apply: ``<store>/<id>/manifest.json`` plus timestamped backups in ``files/``."""

    def __init__(self, path: str, data: dict):
        self.dir, self.data = path, data

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def status(self) -> str:
        return self.data.get("status", "?")

    @property
    def keys(self) -> list[str]:
        return self.data.get("keys", [])

    def save(self) -> None:
        atomic_write_json(os.path.join(self.dir, "manifest.json"), self.data)

    def finish(self, status: str) -> None:
        """Set the status; after an apply (or a failed one) record the files' checksums."""
        self.data["status"] = status
        if status in ("applied", "failed"):
            for rec in self.data.get("files", []):
                rec["sha256_after"] = _sha(_read_bytes(rec["path"]))
        self.save()

    def _copy(self, name: str, data: bytes) -> str:
        d = os.path.join(self.dir, "files")
        os.makedirs(d, mode=0o700, exist_ok=True)
        rel = os.path.join("files", f"{name}.{time.strftime('%Y%m%dT%H%M%S')}")
        with open(os.path.join(self.dir, rel), "wb") as f:
            f.write(data)
        os.chmod(os.path.join(self.dir, rel), 0o600)
        return rel

    def backup(self, path: str, touched: bool = True) -> dict:
        """Save ``path`` as it is now (before pgaccel touches it)."""
        path = os.path.realpath(path)
        data = _read_bytes(path)
        rec = {"path": path, "existed": data is not None, "touched": touched,
               "sha256_before": _sha(data), "backup": None, "sha256_after": None}
        if data is not None:
            rec.update(_stat(path))
            rec["backup"] = self._copy(os.path.basename(path), data)
        self.data.setdefault("files", []).append(rec)
        return rec

    def watch(self, path: str) -> dict:
        """Record a file pgaccel does not touch (checksums before and after)."""
        return self.backup(path, touched=False)

    def backup_bytes(self, name: str, data: bytes) -> None:
        self.data.setdefault("remote_files", []).append(
            {"name": name, "sha256_before": _sha(data), "backup": self._copy(name, data)})

    def save_copy(self, path: str, tag: str) -> None:
        data = _read_bytes(path)
        if data is not None:
            self._copy(f"{os.path.basename(path)}.{tag}", data)

    def has(self, path: str) -> bool:
        return any(r["path"] == path and r.get("touched", True)
                   for r in self.data.get("files", []))

    def after_sha(self, path: str) -> str | None:
        return next((r["sha256_after"] for r in self.data.get("files", [])
                     if r["path"] == path), None)

    def restore_files(self) -> list[str]:
        """Put every touched file back as it was before (remove ones that did not exist);
        check the bytes.  Returns problems."""
        problems = []
        for rec in self.data.get("files", []):
            if not rec.get("touched", True):
                continue
            p = rec["path"]
            try:
                if rec["existed"]:
                    with open(os.path.join(self.dir, rec["backup"]), "rb") as f:
                        data = f.read()
                    _put_bytes(p, data, rec)
                elif os.path.exists(p):
                    os.unlink(p)
            except OSError as e:
                problems.append(f"{p}: {e.strerror or e}")
                continue
            if _sha(_read_bytes(p)) != rec["sha256_before"]:
                problems.append(f"{p} does not match its backup")
        return problems


class StateStore:
    def __init__(self, root: str | None = None):
        self.root = root or default_state_dir()

    def new(self, target: dict, plan: dict | None, sid: str | None = None) -> State:
        """A new state directory (mode 0700) with its manifest saved as 'applying'."""
        sid = sid or new_state_id()
        path = os.path.join(self.root, sid)
        os.makedirs(path, mode=0o700)
        os.chmod(self.root, 0o700)
        st = State(path, {"format": 1, "id": sid, "created": _now(), "pgaccel": __version__,
                          "status": "applying", "keys": [target["key"]], "target": target,
                          "files": [], "plan": plan})
        st.save()
        return st

    def add_os_key(self, state: State, root: str) -> None:
        k = f"os:{os.path.realpath(root)}"
        if k not in state.data["keys"]:
            state.data["keys"].append(k)

    def states(self) -> list[State]:
        out = []
        try:
            names = sorted(os.listdir(self.root))
        except FileNotFoundError:
            return []
        for n in names:
            try:
                with open(os.path.join(self.root, n, "manifest.json")) as f:
                    out.append(State(os.path.join(self.root, n), json.load(f)))
            except (OSError, ValueError):
                continue
        return out

    def find(self, ref: str | None) -> State:
        states = self.states()
        if ref in (None, "latest"):
            active = [s for s in states if s.status == "applied"]
            if not active:
                raise UsageError("There is no applied state to roll back.",
                                 f"`pgaccel rollback --list` shows the states in {self.root}.")
            return active[-1]
        hits = [s for s in states if s.id.startswith(ref)]
        if len(hits) != 1:
            raise UsageError(f"No state {ref!r}" if not hits else
                             f"{ref!r} matches {len(hits)} states",
                             f"`pgaccel rollback --list` shows the states in {self.root}.")
        if hits[0].status != "applied":
            raise UsageError(f"State {hits[0].id} is {hits[0].status}: nothing to roll back.",
                             "Choose an applied state (pgaccel rollback --list).")
        return hits[0]

    def chain(self, state: State) -> list[State]:
        """``state`` and every later applied state sharing a target with it, newest first."""
        keys = set(state.keys)
        return [s for s in reversed(self.states()) if s.id >= state.id
                and s.status == "applied" and keys & set(s.keys)]

    def owned_auto_entries(self, key: str) -> dict[str, str]:
        """ALTER SYSTEM entries pgaccel set on ``key`` in states still applied."""
        out: dict[str, str] = {}
        for s in self.states():
            if s.status == "applied" and key in s.keys:
                for d in s.data.get("postgres", {}).get("applied", []):
                    out[d["name"]] = d["value"]
        return out
