"""One call from facts to a full plan (pure), and the thin version that asks a real
installation (pg_config, its parameter catalog, ``postgres -C``).

``plan_for_target`` is pure: facts, overrides, current settings, catalog -> Plan.
``plan_for_installation`` is what ``pgaccel run`` calls for the local machine and one
installation: it reads pg_config, the catalog (pg_settings when given a connection, else
``postgres --describe-config``) and, with a stopped data directory, the exact huge page
count.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ..probe.facts import HostFacts
from .build import build_changes, build_features, read_pg_config
from .gucs import GucCatalog, catalog_from_server, describe_config, fmt_bytes, fmt_ms
from .hugepages import server_huge_pages
from .inputs import inputs_from_facts
from .linux import linux_changes
from .plan import Plan
from .rules import make_plan
from . import versions

LAYER_CHOICES = ("postgres", "linux", "build")


def show_form(raw: str, unit: str | None) -> str:
    """A value in the parameter's unit ('16384' with unit 8kB) as SHOW prints it ('128MB')."""
    if unit in ("8kB", "kB", "MB") and raw.isdigit():
        return fmt_bytes(int(raw) * {"8kB": 8192, "kB": 1024, "MB": 1024**2}[unit])
    if unit in ("s", "ms") and raw.isdigit() and int(raw) > 0:
        return fmt_ms(int(raw) * (1000 if unit == "s" else 1))
    return raw


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
    from ..server.discovery import parse_version
    parsed = parse_version((pgc or {}).get("VERSION", "").replace("PostgreSQL", "(PostgreSQL)"))
    return parsed[1] if parsed else None


def plan_for_installation(inst, facts: HostFacts | None = None,
                          inputs_overrides: dict[str, Any] | None = None, *,
                          conn=None, catalog: GucCatalog | None = None,
                          current: dict[str, str] | None = None, pgdata: str | None = None,
                          user=None, layers: Iterable[str] = ("postgres",)) -> Plan:
    """The plan for this machine and installation ``inst`` (thin).

    conn: a psycopg connection to a server of ``inst``: its pg_settings give the full
    catalog and the current values (or pass ``catalog``/``current`` read earlier); without
    either the catalog comes from ``postgres --describe-config``, current values unknown.
    pgdata (+ user, the OsUser owning it): a stopped, initdb'd data directory of ``inst``;
    with the linux layer on 15+ the huge page count comes from ``postgres -C`` there."""
    if facts is None:
        from ..probe.host import probe_host
        facts = probe_host(data_dir=pgdata)
    pgc = read_pg_config(inst.path("pg_config")) if "pg_config" in inst.programs else {}
    if conn is not None:
        catalog, current = catalog_from_server(conn)
    elif catalog is None:
        catalog = describe_config(inst.path("postgres"), inst.major)
    ov = dict(inputs_overrides or {})
    same_version = ov.get("pg_version") in (None, inst.major)
    hp: Callable[[dict[str, str]], int | None] | None = None
    if pgdata and inst.major >= 15 and same_version:
        postgres = inst.path("postgres")
        hp = lambda settings: server_huge_pages(postgres, pgdata, settings, user)  # noqa: E731
    if not same_version:
        catalog, current = None, default_settings(int(ov["pg_version"]))
    layers = tuple(layers)
    nics = None
    if "linux" in layers:
        from .linux import list_nics
        nics = list_nics()
    plan = plan_for_target(facts, ov, current, catalog, pg_config=pgc, layers=layers,
                           huge_pages=hp, nics=nics)
    if not same_version:
        plan.warnings.append(f"Planning for PostgreSQL {ov['pg_version']} but the installed "
                             f"binary is {inst.major}: values were not validated against a "
                             "real binary; 'current' shows that version's defaults.")
    return plan


def settings_from_datadir(postgres: str, pgdata: str, names: Iterable[str],
                          user=None) -> dict[str, str]:
    """Current values of a local cluster's parameters via ``postgres -D DIR -C name`` (thin;
    works whether or not the cluster runs)."""
    import subprocess

    from ..server.osuser import as_user_kwargs, current_user
    out = {}
    for name in names:
        try:
            r = subprocess.run([postgres, "-D", pgdata, "-C", name], capture_output=True,
                               text=True, timeout=30, **as_user_kwargs(user or current_user()))
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0 and r.stdout.strip():
            spec = versions.GUCS.get(name)
            out[name] = show_form(r.stdout.strip().splitlines()[-1], spec.unit if spec else None)
    return out
