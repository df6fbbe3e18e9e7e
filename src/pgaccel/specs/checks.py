"""A variant's settings against a server's parameter catalog (pure): names the server does
not know, parameters fixed at build or initdb time, and values it would refuse."""

from __future__ import annotations

import re
from typing import Any


def settings_problems(settings: dict[str, str], catalog: Any) -> list[tuple[str, str]]:
    """``(setting, problem)`` for every setting the catalog's server would refuse.

    ``catalog`` is a ``tune.gucs.GucCatalog``.  From ``postgres --describe-config`` it has
    no units for most parameters and no enum values: values with a unit suffix whose unit is
    unknown are left to the check against the running server's pg_settings."""
    from ..pg.catalog import check_value
    static = str(getattr(catalog, "source", "")).startswith("describe-config")
    out: list[tuple[str, str]] = []
    for name, value in settings.items():
        g = catalog.get(name)
        if g is None:
            if "." in name:       # an extension's parameter: the server accepts placeholders
                continue
            src = str(getattr(catalog, "source", "") or "")
            where = (f"`{src.split(' ', 1)[1]} --describe-config` does not list it"
                     if static and " " in src else f"{src or 'the server'} does not have it")
            out.append((name, f"{name} is not a setting this server accepts: {where}"))
            continue
        if g.context == "internal":
            out.append((name, f"{name} is fixed when PostgreSQL is built or initdb runs; "
                              "it cannot be set"))
            continue
        if (static and g.vartype in ("integer", "real") and not g.unit
                and re.fullmatch(r"\s*[-+]?[\d.]+\s*[A-Za-z]+\s*", str(value))):
            continue
        problem = check_value(name, value, catalog)
        if problem:
            out.append((name, problem))
    return out
