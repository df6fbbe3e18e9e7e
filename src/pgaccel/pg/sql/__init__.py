"""SQL that depends on the PostgreSQL version, one file per query and version range:
``NAME-MIN-MAX.sql`` holds the text of query NAME for majors MIN..MAX (99: open-ended).
A counter a version does not have is simply absent from its file's result."""

from __future__ import annotations

import re
from importlib import resources

_SQL_RE = re.compile(r"(?P<name>[a-z_]+)-(?P<lo>\d+)-(?P<hi>\d+)\.sql$")


def load_sql(name: str, major: int) -> str | None:
    """The text of ``NAME-LO-HI.sql`` whose range holds ``major``, or None."""
    for entry in resources.files(__name__).iterdir():
        m = _SQL_RE.match(entry.name)
        if m and m["name"] == name and int(m["lo"]) <= major <= int(m["hi"]):
            return entry.read_text()
    return None
