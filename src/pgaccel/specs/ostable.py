"""A lab variant's ``os`` table: which OS values a variant may set for its trials, checked
before anything runs (the values are applied and put back by ``variants.py`` through
``osknobs.state.OsState``).

    os = { nr_hugepages = "auto", thp = "never",
           sysctl = { "vm.swappiness" = 1 },
           sysfs = { "sys/block/vda/queue/read_ahead_kb" = 128 },
           text_hugepages = true }
"""

from __future__ import annotations

import re
from typing import Any

from .spec import OS_KEYS, SYSCTL_NAME, SYSFS_PATH, THP_MODES, OsSettings


def _values(parser: Any, table: Any, where: tuple, pattern: re.Pattern, bad_name: str,
            example: str) -> dict[str, int | str]:
    """A table of names -> numbers or strings whose names match ``pattern``."""
    if not isinstance(table, dict):
        raise parser.err(where, f"{where[-1]} must be a table of names and values, e.g. "
                                f"{example}")
    for name, value in table.items():
        if not pattern.match(name):
            raise parser.err((*where, name), f"{name!r} {bad_name}")
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise parser.err((*where, name), f"{name} must be a number or a string")
    return dict(table)


def parse_os(parser: Any, o: Any, where: tuple, into: OsSettings) -> None:
    """Check the ``os`` table ``o`` (at ``where`` in the spec) and merge it into ``into``
    (a variant inherits its base's table key by key).  ``parser`` is the SpecParser, whose
    errors name the file and line."""
    if not isinstance(o, dict):
        raise parser.err(where, "os must be a table (nr_hugepages, thp, sysctl, sysfs, "
                                "text_hugepages)")
    parser.unknown(o, OS_KEYS, where, "a variant's os table")
    if "nr_hugepages" in o:
        n = o["nr_hugepages"]
        if n != "auto":
            n = parser.typed(n, (*where, "nr_hugepages"), "int", lo=0, hi=2**31)
        into.nr_hugepages = n
    if "thp" in o:
        if o["thp"] not in THP_MODES:
            raise parser.err((*where, "thp"), f"thp = {o['thp']!r} is not one of "
                                              f"{', '.join(THP_MODES)}")
        into.thp = o["thp"]
    if "sysctl" in o:
        into.sysctl = {**into.sysctl, **_values(
            parser, o["sysctl"], (*where, "sysctl"), SYSCTL_NAME,
            "is not a sysctl name (like vm.swappiness)", '{ "vm.swappiness" = 1 }')}
    if "sysfs" in o:
        into.sysfs = {**into.sysfs, **_values(
            parser, o["sysfs"], (*where, "sysfs"), SYSFS_PATH,
            "is not a path a lab variant may set (sys/block/DEV/queue/NAME, "
            "sys/kernel/debug/sched/NAME; no leading slash)", '{ "sys/block/vda/queue/read_ahead_kb" = 128 }')}
    if "text_hugepages" in o:
        if not isinstance(o["text_hugepages"], bool):
            raise parser.err((*where, "text_hugepages"), "text_hugepages must be true or false")
        into.text_hugepages = o["text_hugepages"]
