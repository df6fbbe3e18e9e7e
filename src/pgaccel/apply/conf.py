"""PostgreSQL configuration text and values, and the checks made before any apply (pure).

Parsing and rendering configuration files (``conf_entries``, ``with_include``,
``render_owned``), the server's command-line settings (``cmdline_settings``), checking what
pg_settings shows after an apply (``verify``, ``differs``; values compared by
``pg.values.same_value``), and refusing a plan before anything is touched
(``check_changes``, ``durability_risks``, ``with_overrides`` for ``--set``).  Used by the
local (``apply.py``) and remote (``apply_dsn.py``) apply paths alike; nothing here reads a
file or a server.
"""

from __future__ import annotations

import difflib
import re
import shlex
from typing import Iterable

from ..errors import UsageError
from ..pg.catalog import GucCatalog, check_value
from ..pg.values import same_value, turns_off_durability
from ..tune.plan import Change

OWNED = "pgaccel.conf"
INCLUDE = f"include_if_exists = '{OWNED}'"
AUTO_CONF = "postgresql.auto.conf"
_INCLUDE_RE = re.compile(r"^\s*include_if_exists\s*=?\s*'pgaccel\.conf'", re.M)
_ENTRY_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=?\s*('(?:[^']|'')*'|[^\s#]+)", re.M)
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


# -- refusing before anything is touched ------------------------------------------------

def durability_risks(changes: Iterable[Change]) -> list[str]:
    """'fsync = off' for every change that would turn durability off."""
    return [f"{c.name} = {c.proposed}" for c in changes
            if c.layer == "postgres" and turns_off_durability(c.name, c.proposed)]


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


def postgres_changes(changes: Iterable[Change], catalog: GucCatalog | None,
                     allow_unsafe_durability: bool = False) -> list[Change]:
    """The plan's applicable PostgreSQL changes, checked (``check_changes``)."""
    pg = [c for c in changes if c.layer == "postgres" and not c.advice_only]
    check_changes(pg, catalog, allow_unsafe_durability)
    return pg


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
        problem = check_value(name, str(value), catalog) if catalog is not None and \
            catalog.gucs else None
        if problem:
            raise UsageError(f"--set {name}={value}: the server would refuse it: {problem}.",
                             "Fix the value (SHOW ALL and pg_settings show the unit and "
                             "range).")
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


# -- configuration text -----------------------------------------------------------------

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


def with_include(conf_text: str) -> str | None:
    """postgresql.conf with the include line appended, or None when it is already there."""
    if _INCLUDE_RE.search(conf_text):
        return None
    sep = "" if conf_text.endswith("\n") or not conf_text else "\n"
    return (conf_text + sep + "\n# Added once by `pgaccel tune --apply`: pgaccel's settings "
            f"live in {OWNED} (`pgaccel rollback` removes this line again).\n{INCLUDE}\n")


def quote(v: str) -> str:
    """A configuration-file (and SQL) string literal."""
    return "'" + str(v).replace("'", "''") + "'"


def render_owned(changes: Iterable[Change], state_id: str, describe: str = "") -> str:
    lines = ["# pgaccel.conf: owned by pgaccel. `pgaccel tune --apply` rewrites this whole file",
             "# and `pgaccel rollback` restores the previous one; put your own settings in",
             "# postgresql.conf (or ALTER SYSTEM, which pgaccel never overrides).",
             f"# State {state_id}" + (f": {describe}" if describe else "") + "."]
    for c in changes:
        tag = " [restart]" if c.restart else ""
        lines += ["", f"# {c.reason}{tag}", f"{c.name} = {quote(c.proposed)}"]
    return "\n".join(lines) + "\n"


def unified_diff(old: str, new: str, path: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                        f"{path} (now)", f"{path} (after apply)"))


# -- values as the server shows them ----------------------------------------------------

def verify(expected: dict[str, str], rows: dict[str, dict],
           file_errors: Iterable[tuple] = (), *, pending_ok: bool = False) -> list[str]:
    """What does not show the intended value: pg_settings rows + pg_file_settings errors
    for the expected names."""
    problems = []
    for name, value in expected.items():
        row = rows.get(name)
        if row is None:
            problems.append(f"{name}: the server does not know it")
            continue
        if not same_value(value, row["setting"], row["unit"], row["vartype"], name):
            where = (f"{row['sourcefile']} line {row['sourceline']}" if row.get("sourcefile")
                     else row.get("source") or "?")
            problems.append(f"{name} is {row['shown']}, not {value} (from {where})")
        elif row.get("pending_restart") and not pending_ok:
            problems.append(f"{name} still waits for a restart")
    for sourcefile, line, name, setting, error in file_errors:
        if name in expected and not (pending_ok and "could not be applied" in (error or "")):
            problems.append(f"{name} = {setting} in {sourcefile} line {line}: {error}")
    return problems


def differs(rows: dict[str, dict], raw: dict[str, str | None]) -> list[str]:
    """Names whose pg_settings.setting (in ``rows``) is not the given raw value (names
    with no recorded value, None, are not checked)."""
    return [n for n, v in raw.items() if v is not None
            and str(rows.get(n, {}).get("setting")) != str(v)]
