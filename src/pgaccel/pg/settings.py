"""The settings a server runs one measurement with (pure): one precedence, one rule for what a
target may set, one encoder of ``-c`` options.

**Precedence**, lowest first (:func:`effective`):

1. ``base``: settings computed for the config before its own (a lab variant's
   ``settings_from``: pgaccel's or PGTune's plan);
2. ``variant``: the config's own settings (``run``'s tuned plan, a lab variant's
   ``settings``);
3. ``required``: what the workload needs to measure what it says (``parallel-scan``'s worker
   limits, ``data-size-sweep``'s ``shared_buffers`` option);
4. ``overrides``: what the user set for the whole run (``bench --set``).

A value a higher level replaces is reported (:attr:`Effective.replaced`), so a config that
does not run with its own value says so instead of silently measuring something else.

**What a target may set** (:func:`settable`): a server pgaccel restarts (a throwaway cluster,
``--pgdata``) takes every parameter but those fixed at build or initdb time (context
``internal``); a ``--dsn`` server only what a session may set (``user``, ``superuser``),
through the session's options.

**Encoding**: :func:`command_line` for ``pg_ctl -o`` (a shell word per ``-c``),
:func:`libpq_options` for libpq's ``options`` / PGOPTIONS (spaces and backslashes escaped).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..errors import UsageError

SESSION_CONTEXTS = frozenset({"user", "superuser"})
NEVER_SETTABLE = frozenset({"internal"})
TARGET_KINDS = ("throwaway", "pgdata", "dsn")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")

Settings = Mapping[str, object]


@dataclass(frozen=True)
class Effective:
    """The settings one config runs a workload with, and each value a higher level replaced
    ("max_parallel_workers: the workload needs 8, not the variant's 16")."""
    settings: dict[str, object]
    replaced: list[str] = field(default_factory=list)


_LEVEL_NAMES = {"base": "the computed plan", "variant": "the config's own",
                "required": "the workload's", "overrides": "the run's --set"}


def effective(*, base: Settings | None = None, variant: Settings | None = None,
              required: Settings | None = None, overrides: Settings | None = None) -> Effective:
    """Merge the four levels in the module's precedence (later levels win)."""
    merged: dict[str, object] = {}
    origin: dict[str, str] = {}
    replaced: list[str] = []
    for level, values in (("base", base), ("variant", variant), ("required", required),
                          ("overrides", overrides)):
        for name, value in (values or {}).items():
            if name in merged and str(merged[name]) != str(value) and level != "variant":
                replaced.append(f"{name} = {value} ({_LEVEL_NAMES[level]}) replaces "
                                f"{merged[name]} ({_LEVEL_NAMES[origin[name]]})")
            merged[name] = value
            origin[name] = level
    return Effective(merged, replaced)


def settable(context: str | None, target_kind: str) -> bool:
    """May a target of ``target_kind`` (one of :data:`TARGET_KINDS`) set a parameter of this
    pg_settings ``context`` for a measurement?  Unknown parameters (context None) are not."""
    if target_kind not in TARGET_KINDS:
        raise ValueError(f"unknown target kind {target_kind!r}")
    if context is None or context in NEVER_SETTABLE:
        return False
    return context in SESSION_CONTEXTS if target_kind == "dsn" else True


def unsettable(names: Iterable[str], contexts: Mapping[str, str], target_kind: str
               ) -> list[str]:
    """The names a target of ``target_kind`` cannot set, sorted (``contexts``: name ->
    pg_settings.context of the server)."""
    return sorted(n for n in set(names) if not settable(contexts.get(n), target_kind))


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise UsageError(f"{name!r} is not a valid PostgreSQL setting name.",
                         "Setting names are letters, digits, '_' and '.'.")
    return name


def command_line(settings: Settings) -> str:
    """``-c name=value`` options for the postgres command line (``pg_ctl -o``), one shell
    word each."""
    return " ".join(shlex.quote(f"-c{check_name(n)}={v}") for n, v in settings.items())


def libpq_options(settings: Settings) -> str | None:
    """The same options inside libpq's ``options`` / PGOPTIONS (None when there are none):
    spaces and backslashes in values escaped with a backslash."""
    words = [f"-c {check_name(n)}={_escape(v)}" for n, v in settings.items()]
    return " ".join(words) or None


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace(" ", "\\ ")
