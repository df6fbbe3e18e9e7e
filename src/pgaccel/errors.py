"""Expected failures, each carrying a message that says what happened and what to do.

The CLI prints these as one paragraph and exits non-zero; anything else is a bug and
gets a traceback.  Exit codes are stable so scripts can branch on them.
"""

from __future__ import annotations

from typing import NoReturn


class PgaccelError(Exception):
    """An expected failure with a user-facing explanation and a suggested fix."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.message if not self.hint else f"{self.message} {self.hint}"


class UsageError(PgaccelError):
    """Bad flags or spec files."""

    exit_code = 2


class NotFound(PgaccelError):
    """A required program (postgres, pgbench, sysbench ...) is missing."""

    exit_code = 3


class ServerError(PgaccelError):
    """The server refused to start, a setting was rejected, shared memory ran out ..."""

    exit_code = 4


class ConnectError(PgaccelError):
    """Cannot reach or authenticate to an existing server."""

    exit_code = 5


class BenchError(PgaccelError):
    """A workload failed to prepare or run."""

    exit_code = 6


class DiskFull(PgaccelError):
    exit_code = 7


class OsApplyError(PgaccelError):
    """A Linux setting could not be applied or restored."""

    exit_code = 8


class ReportError(PgaccelError):
    """The run finished and its results are stored, but its report could not be written."""

    exit_code = 9


class Interrupted(PgaccelError):
    """Ctrl-C or SIGTERM: cleanup has run, finished results were kept."""

    exit_code = 130


def missing_dependency(e: ImportError) -> "NoReturn":
    """A Python package pgaccel imports is not installed: one paragraph on stderr and exit 3
    (a program is missing), never a traceback.  Written without rich or click, which may be
    the package that is missing."""
    import sys
    name = (getattr(e, "name", None) or str(e)).split(".")[0]
    sys.stderr.write(
        f"pgaccel: the Python package {name!r} cannot be imported by {sys.executable} ({e}). "
        "Install pgaccel's dependencies (./install.sh in pgaccel's directory, or "
        "`python3 -m pip install -e .` there) and run again.\n")
    sys.exit(3)


def is_missing_dependency(e: ImportError) -> bool:
    """A package outside pgaccel could not be imported (not a mistake in pgaccel's own
    imports, which stays a bug with its traceback)."""
    name = getattr(e, "name", None)
    return bool(name) and name.split(".")[0] != "pgaccel"
