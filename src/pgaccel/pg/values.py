"""PostgreSQL values, pure: one implementation of each value rule the rest of pgaccel uses.

* Units (``MEMORY_UNITS``, ``TIME_UNITS``, ``unit_scale``, ``to_unit``, ``setting_number``):
  a setting's text as the server reads it, in the parameter's unit (pg_settings.unit).
* Sizes: ``parse_size`` for user input ('24GB', '512MiB'), ``setting_bytes`` for a memory
  setting ('4GB', '16384' with unit 8kB); ``pg_size`` / ``pg_duration`` write exact values
  the way SHOW does ('4GB', '1920kB', '15min'); ``show_form`` turns a raw pg_settings value
  into that form.  (Human display, '1.5 GB', is ``util.format_bytes``.)
* Booleans: ``parse_bool`` (PostgreSQL's parse_bool), ``enum_switch`` (the on/off words
  of enum parameters such as synchronous_commit).
* Durability: ``DURABILITY`` and ``turns_off_durability``.
* ``same_value``: the one comparison of an intended value with pg_settings.setting.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

# -- units ------------------------------------------------------------------------------

MEMORY_UNITS = {"B": 1, "kB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
TIME_UNITS = {"us": 0.001, "ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_NUM_UNIT = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z]*)\s*$")


def unit_scale(unit: str | None) -> tuple[str, float] | None:
    """pg_settings.unit ('8kB', 'kB', 'MB', 's', 'ms') -> (kind, size in bytes or ms)."""
    if not unit:
        return None
    m = re.fullmatch(r"(\d*)\s*([A-Za-z]+)", unit)
    if not m:
        return None
    n = int(m.group(1) or 1)
    if m.group(2) in MEMORY_UNITS:
        return "memory", n * MEMORY_UNITS[m.group(2)]
    if m.group(2) in TIME_UNITS:
        return "time", n * TIME_UNITS[m.group(2)]
    return None


def to_unit(value: Any, unit: str | None) -> float:
    """A setting value as PostgreSQL reads it, expressed in the parameter's unit.

    '4GB' with unit '8kB' -> 524288; '15min' with unit 's' -> 900; '12' -> 12.  Units are
    case-sensitive, as in PostgreSQL.  Like PostgreSQL, a fraction of a unit is first
    rounded to a whole number of the next smaller unit: '30.1GB' is 30822MB, '0.0015min'
    is 0s.  Raises ValueError when the text is not a number with an acceptable unit."""
    m = _NUM_UNIT.match(str(value))
    if not m:
        raise ValueError(f"{value!r} is not a number")
    num, suffix = float(m.group(1)), m.group(2)
    if not suffix:
        return num
    scale = unit_scale(unit)
    if scale is None:
        raise ValueError(f"{value!r} has a unit but the parameter takes none")
    kind, base = scale
    table = MEMORY_UNITS if kind == "memory" else TIME_UNITS
    if suffix not in table:
        valid = ", ".join(table)
        raise ValueError(f"{value!r}: unit {suffix!r} is not valid here (valid: {valid})")
    names = list(table)
    i = names.index(suffix)
    if i == 0:                                  # B and us: nothing smaller to round to
        return num * table[suffix] / base
    smaller = table[names[i - 1]]
    ratio = round(table[suffix] / smaller)      # 1024, 1000, 60 or 24
    return round(num * ratio) / ratio * table[suffix] / base


def setting_number(value: Any, unit: str | None, vartype: str = "real") -> float:
    """The number PostgreSQL stores for ``value``: ``to_unit``, and for an integer
    parameter rounded half to even to a whole unit (C's rint: '1.5kB' -> 2, '2.5kB' -> 2)."""
    x = to_unit(value, unit)
    return float(round(x)) if vartype == "integer" else x


# -- sizes and durations ----------------------------------------------------------------

_SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "M": 1024**2, "MB": 1024**2,
               "G": 1024**3, "GB": 1024**3, "T": 1024**4, "TB": 1024**4}


def parse_size(text: str | int) -> int:
    """User input '24GB', '512MiB', '1.5G', 1024 -> bytes (binary multiples, any case)."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(I?B?)\s*", text.upper())
    if not m:
        raise ValueError(f"not a size: {text!r} (examples: 512MB, 24GB, 1TB)")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2) or ""])


def setting_bytes(value: Any, unit: str | None = "kB") -> int:
    """A memory setting ('4GB', or '16384' with unit 8kB) -> the bytes PostgreSQL keeps
    (a whole number of the parameter's unit: '1.5kB' with unit kB is 2048)."""
    scale = unit_scale(unit)
    return int(setting_number(value, unit, "integer") * (scale[1] if scale else 1))


def _largest(n: int, table: dict[str, float], smallest: str) -> str:
    """``n`` (in ``smallest`` units) in the largest unit of ``table`` that divides it."""
    size = table[smallest]
    for name in reversed(table):
        if table[name] >= size and n * size % table[name] == 0:
            return f"{int(n * size // table[name])}{name}"
    return f"{n}{smallest}"


def pg_size(n: int) -> str:
    """Bytes as an exact PostgreSQL value, rounded down to 1kB, in the largest unit that
    divides it, as SHOW prints it: 4GB, 1536MB, 1920kB, 1TB (0kB below 1kB)."""
    kb = max(int(n) // 1024, 0)
    return _largest(kb, MEMORY_UNITS, "kB") if kb else "0kB"


def pg_duration(ms: int) -> str:
    """Milliseconds as an exact PostgreSQL value in the largest unit that divides them, as
    SHOW prints it: 15min, 1h, 100ms (0ms for 0)."""
    ms = int(ms)
    return _largest(ms, TIME_UNITS, "ms") if ms > 0 else f"{ms}ms"


def show_form(raw: str, unit: str | None) -> str:
    """A whole value in the parameter's unit, as pg_settings.setting holds it ('16384' with
    unit 8kB), as SHOW prints it ('128MB'); zero, negative and fractional values and
    values without a unit are printed as they are ('-1', '0', '1.1')."""
    raw = str(raw)
    scale = unit_scale(unit)
    if scale is None or scale[1] < 1 or not raw.isdigit() or int(raw) == 0:
        return raw
    kind, size = scale
    if kind == "memory":
        n = int(raw) * int(size)
        return pg_size(n) if n % 1024 == 0 else f"{n}B"
    return pg_duration(int(raw) * int(size))


# -- booleans ---------------------------------------------------------------------------

_BOOL_WORDS = (("true", True), ("false", False), ("yes", True), ("no", False))
_ENUM_SWITCH = {"on": True, "true": True, "yes": True, "1": True,
                "off": False, "false": False, "no": False, "0": False}


def parse_bool(text: Any) -> bool | None:
    """A boolean parameter's value as PostgreSQL reads it (parse_bool_with_len in
    src/backend/utils/adt/bool.c), None when it is not one.

    Case-insensitive: 'on', '1' and any prefix of 'true' or 'yes' ('t', 'tr', 'y') are
    true; 'off', 'of', '0' and any prefix of 'false' or 'no' ('f', 'fa', 'n') are false;
    'o' alone is ambiguous.  No surrounding whitespace, as in PostgreSQL (strip first)."""
    s = str(text).lower()
    if s in ("1", "on"):
        return True
    if s in ("0", "of", "off"):
        return False
    if s:
        for word, value in _BOOL_WORDS:
            if word.startswith(s):
                return value
    return None


def enum_switch(text: Any) -> bool | None:
    """The on/off words of an enum parameter with on/off values (synchronous_commit,
    huge_pages, ...): PostgreSQL lists on/true/yes/1 and off/false/no/0 among the enum's
    values, matched case-insensitively and whole (no prefixes, unlike ``parse_bool``)."""
    return _ENUM_SWITCH.get(str(text).lower())


# -- durability -------------------------------------------------------------------------

# parameter -> how the server reads its value; False from the reader = durability off
DURABILITY: dict[str, Callable[[Any], bool | None]] = {
    "fsync": parse_bool, "full_page_writes": parse_bool, "synchronous_commit": enum_switch}


def unquote(value: Any) -> str:
    """A value without surrounding whitespace and single quotes ("'on'" -> "on")."""
    return str(value).strip().strip("'")


def turns_off_durability(name: str, value: Any) -> bool:
    """Would ``name = value`` risk committed data (fsync or full_page_writes false in any
    boolean spelling; synchronous_commit off/false/no/0)?"""
    read = DURABILITY.get(str(name).strip().lower())
    return read is not None and read(unquote(value)) is False


# -- comparing with pg_settings ---------------------------------------------------------

# Integer parameters whose -1 means "let the server derive it": pg_settings then shows the
# derived value, never -1.  wal_buffers: 1/32 of shared_buffers (checked on PostgreSQL 15:
# -1 shows 512 with the default 128MB); io_max_concurrency (18): from max_connections and
# shared_buffers.  Other -1 parameters (autovacuum_work_mem, autovacuum_vacuum_cost_limit,
# temp_file_limit, log_min_duration_statement, ...) keep showing -1.
MINUS_ONE_DERIVED = frozenset({"wal_buffers", "io_max_concurrency"})
# pg_settings prints real values with %g: six significant digits
REAL_TOLERANCE = 1e-5


def same_value(intended: Any, shown_raw: str | None, unit: str | None, vartype: str,
               name: str | None = None) -> bool:
    """Does pg_settings.setting ``shown_raw`` (in the base ``unit``) hold ``intended``?

    Surrounding single quotes of ``intended`` are dropped.  Integers compare after
    PostgreSQL's own unit conversion and rounding ('1GB' is 131072 with unit 8kB, '1.5kB'
    is 2 with unit kB); reals within a relative ``REAL_TOLERANCE`` (pg_settings shows six
    significant digits); booleans through ``parse_bool``; enums case-insensitively (with
    on/off words through ``enum_switch``: 'no' is 'off'); strings exactly.

    The -1 rule: an intended integer -1 matches a server showing -1; for the parameters
    in ``MINUS_ONE_DERIVED`` (``name`` given), where the server replaces -1 by a derived
    value, any positive value matches too.  Elsewhere -1 matches only -1, and an intended
    value other than -1 never matches a server showing -1."""
    if shown_raw is None:
        return False
    want, shown = unquote(intended), str(shown_raw).strip()
    if vartype == "bool":
        b = parse_bool(want)
        return b is not None and b == parse_bool(shown)
    if vartype in ("integer", "real"):
        try:
            x, y = setting_number(want, unit, vartype), float(shown)
        except ValueError:
            return False
        if vartype == "real":
            return math.isclose(x, y, rel_tol=REAL_TOLERANCE)
        if x == -1 and y > 0 and (name or "").lower() in MINUS_ONE_DERIVED:
            return True
        return x == y
    if vartype == "enum":
        s = enum_switch(want)
        return want.lower() == shown.lower() or (s is not None and s == enum_switch(shown))
    return want == shown
