"""Where in a TOML file a key is: ``file:line`` for error messages about the lab spec.

A light scan of the text (headers, ``key =`` lines, inline tables), no full TOML parser:
good enough to point a user at the line to fix.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from ..errors import UsageError


class SpecError(UsageError):
    """A problem with the spec file, located as ``file:line``."""


# -- locations -----------------------------------------------------------------------------
_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-.\"']+)\s*=")
_INLINE_KEY = re.compile(r"[{,]\s*([A-Za-z0-9_\-\"']+)\s*=")


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i]
    return line


def _parts(dotted: str) -> list[str]:
    return [p.strip().strip("\"'") for p in dotted.split(".")]


class Locator:
    """Maps a key path such as ``("variant", 1, "settings", "work_mem")`` to its line.

    A light scan of the TOML text (headers, ``key =`` lines, inline tables), good enough to
    point at the line; ``where(path)`` falls back to the nearest enclosing table."""

    def __init__(self, text: str, path: str = "<spec>"):
        self.path = path
        self.lines: dict[tuple, int] = {}
        arrays: dict[str, int] = {}
        current: tuple = ()
        for no, raw in enumerate(text.splitlines(), start=1):
            line = _strip_comment(raw)
            m = _HEADER.match(line)
            if m:
                names = _parts(m.group(2))
                if m.group(1) == "[[":
                    arrays[names[0]] = arrays.get(names[0], 0) + 1
                    current = (names[0], arrays[names[0]] - 1, *names[1:])
                elif names[0] in arrays:
                    current = (names[0], arrays[names[0]] - 1, *names[1:])
                else:
                    current = tuple(names)
                self.lines.setdefault(current, no)
                continue
            m = _KEY.match(line)
            if not m:
                continue
            key = (*current, *_parts(m.group(1)))
            self.lines.setdefault(key, no)
            brace = line.find("{", m.end())
            if brace >= 0:
                for k in _INLINE_KEY.finditer(line, brace):
                    self.lines.setdefault((*key, k.group(1).strip("\"'")), no)

    def line(self, path: Iterable[Any]) -> int | None:
        p = tuple(path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return None

    def where(self, path: Iterable[Any]) -> str:
        n = self.line(path)
        return f"{self.path}:{n}" if n else self.path

    def error(self, path: Iterable[Any], message: str, hint: str | None = None) -> SpecError:
        return SpecError(f"{self.where(path)}: {message}", hint)

