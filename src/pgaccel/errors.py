"""Expected failures, each carrying a message that says what happened and what to do.

The CLI prints these as one paragraph and exits non-zero; anything else is a bug and
gets a traceback.  Exit codes are stable so scripts can branch on them.
"""

from __future__ import annotations


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
