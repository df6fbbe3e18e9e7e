"""Passwords out of any text pgaccel shows or stores (pure): a DSN libpq can or cannot
parse, an error message quoting one, a setting such as primary_conninfo."""

from __future__ import annotations

import re

# What looks like a password, in any text (a DSN libpq can or cannot parse, or an error
# message that quotes one): URI userinfo ``scheme://user:PW@``, key=value ``password=PW``
# (bare, or single-quoted with backslash escapes), a query parameter ``?password=PW``.
_URI_USERINFO_RE = re.compile(r"(?P<pre>\b[A-Za-z][A-Za-z0-9+.-]*://[^:@/?#\s]*):[^\s]*@")
_KV_PASSWORD_RE = re.compile(
    r"(?P<pre>\bpassword\s*=\s*)(?:'(?:[^'\\]|\\.)*(?:'|$)|\"(?:[^\"\\]|\\.)*(?:\"|$)|[^\s&#]*)",
    re.I)
REDACTED = "********"


def scrub_secrets(text: str) -> str:
    """``text`` with every password-like part replaced (see the patterns above).  Used for
    any text that may quote a DSN: error messages, logs, stored rows."""
    if not text:
        return text
    text = _URI_USERINFO_RE.sub(lambda m: f"{m.group('pre')}:{REDACTED}@", text)
    return _KV_PASSWORD_RE.sub(lambda m: f"{m.group('pre')}{REDACTED}", text)
