"""One call from facts to a full plan (pure): ``plan_for_target`` turns facts, overrides,
current settings and a catalog into a :class:`~pgaccel.tune.plan.Plan`.

What asks a real installation or server for those inputs is ``session/plan.py``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ..probe.facts import HostFacts
from ..pg.catalog import GucCatalog
from ..pg.values import show_form
from .build import build_changes, build_features
from .inputs import inputs_from_facts
from .linux import linux_changes
from .plan import Plan
from .rules import make_plan
from ..pg import versions

LAYER_CHOICES = ("postgres", "linux", "build")


def default_settings(major: int) -> dict[str, str]:
    """The built-in defaults of ``major`` as SHOW prints them (for planning without a server)."""
    out = {}
    for name in versions.GUCS:
        s = versions.spec(name, major)
        if s is not None and s.default is not None:
            out[name] = show_form(s.default, s.unit)
    return out


def plan_for_target(facts: HostFacts, inputs_overrides: dict[str, Any] | None = None,
                    current_settings: dict[str, str] | None = None,
                    catalog: GucCatalog | None = None, *,
                    pg_config: dict[str, str] | None = None,
                    layers: Iterable[str] = ("postgres",),
                    huge_pages: int | Callable[[dict[str, str]], int | None] | None = None,
                    nics: list[str] | None = None) -> Plan:
    """The plan for ``facts`` (pure unless ``huge_pages`` is a callable that asks a binary).

    inputs_overrides: memory, cpus, pg_version, storage, connections, workload.
    The PostgreSQL version is the override, else the catalog's, else pg_config's."""
    ov = dict(inputs_overrides or {})
    layers = set(layers)
    unknown = layers - set(LAYER_CHOICES)
    if unknown:
        raise ValueError(f"unknown layers {sorted(unknown)}")
    if ov.get("pg_version") is None:
        ov["pg_version"] = (catalog.major if catalog and catalog.major
                            else _major_from_pg_config(pg_config))
    build = build_features(pg_config) if pg_config else None
    inp = inputs_from_facts(facts, build=build, current=current_settings, nics=nics, **ov)
    plan = make_plan(inp, current_settings, catalog)
    if "linux" in layers:
        n = huge_pages(plan.postgres_settings()) if callable(huge_pages) else huge_pages
        plan.changes += linux_changes(inp, plan.postgres_settings(), n)
    if "build" in layers:
        plan.changes += build_changes(inp, pg_config)
    if "postgres" not in layers:
        plan.changes = [c for c in plan.changes if c.layer != "postgres"]
    return plan


def _major_from_pg_config(pgc: dict[str, str] | None) -> int | None:
    from ..pg.versions import parse_version
    parsed = parse_version((pgc or {}).get("VERSION", "").replace("PostgreSQL", "(PostgreSQL)"))
    return parsed[1] if parsed else None


