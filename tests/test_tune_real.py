"""The tuner against the real PostgreSQL 15 binary: catalog, bounds, restart flags, huge
pages, and rendered configuration the server accepts."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from pgaccel.server.cluster import Cluster
from pgaccel.server.discovery import choose_server
from pgaccel.server.osuser import as_user_kwargs, chown_tree
from pgaccel.pg import versions
from pgaccel.session.plan import plan_for_installation
from pgaccel.tune.engine import plan_for_target
from pgaccel.server.binary import describe_config
from pgaccel.pg.catalog import check_value, validate
from pgaccel.server.database import Database
from pgaccel.pg.values import setting_bytes, to_unit
from pgaccel.tune.hugepages import estimate_shared_memory_bytes, margin, pages_for
from pgaccel.tune.inputs import WORKLOADS
from pgaccel.tune.plan import Change
from pgaccel.tune.render import render_conf, render_sql
from pgaccel.tune.rules import make_plan

from test_tune_profiles import PROFILES, inputs_for

MB = 1024**2


@pytest.fixture(scope="module")
def pg15():
    inst = choose_server()
    if inst.major != 15:
        pytest.skip(f"these tests pin PostgreSQL 15; found {inst.major}")
    with Cluster.create_throwaway(inst) as c:
        c.start({})
        with c.connect() as conn:
            catalog, current = Database(conn).catalog()
            boot = dict(conn.execute("SELECT name, boot_val FROM pg_settings").fetchall())
        c.stop()
        yield {"inst": inst, "cluster": c, "catalog": catalog, "current": current,
               "boot": boot}


def _server_refuses(pg15, name: str, value: str) -> bool:
    c = pg15["cluster"]
    r = subprocess.run([pg15["inst"].path("postgres"), "-D", c.pgdata, "-C", name, "-c",
                        f"{name}={value}"], capture_output=True, text=True,
                       **as_user_kwargs(c.user))
    return r.returncode != 0


def test_version_table_matches_the_real_15_binary(pg15):
    cat, boot = pg15["catalog"], pg15["boot"]
    for name, spec in versions.GUCS.items():
        s = versions.spec(name, 15)
        assert (name in cat) == (s is not None), name
        if s is None:
            continue
        g = cat.get(name)
        assert g.context == s.context, name
        assert (g.unit or None) == s.unit, name
        assert g.vartype == s.vartype, name
        assert float(boot[name]) == float(s.default) if s.vartype in ("integer", "real") \
            else boot[name] == s.default, name


def test_describe_config_agrees_with_pg_settings(pg15):
    dc = describe_config(pg15["inst"].path("postgres"), 15)
    full = pg15["catalog"]
    assert len(dc.gucs) > 250
    for name, g in dc.gucs.items():
        f = full.get(name)
        if f is None:      # describe-config also lists a few internal ones
            continue
        assert (g.context, g.vartype) == (f.context, f.vartype), name
        if g.vartype in ("integer", "real") and f.max_val is not None:
            assert g.min_val == pytest.approx(f.min_val) and g.max_val == pytest.approx(
                f.max_val, rel=1e-5), name


@pytest.mark.parametrize("profile", PROFILES)
def test_every_value_within_the_real_bounds_and_restart_flags_agree(pg15, profile):
    cat = pg15["catalog"]
    for w in WORKLOADS:
        plan = make_plan(inputs_for(profile, 15, workload=w), gucs=cat)
        assert plan.warnings == []
        assert validate(plan, cat) == []
        for c in plan.changes:
            assert c.restart == (cat.context(c.name) == "postmaster"), c.name
    # the describe-config catalog (no server) gives the same verdict
    dc = describe_config(pg15["inst"].path("postgres"), 15)
    assert validate(make_plan(inputs_for(profile, 15)), dc) == []


@pytest.mark.parametrize("name,value", [
    ("shared_buffers", "64kB"), ("work_mem", "3TB"), ("wal_compression", "brotli"),
    ("jit", "maybe"), ("io_method", "worker"), ("max_wal_size", "1kB"),
    ("checkpoint_timeout", "10s"), ("random_page_cost", "-1"),
])
def test_validate_refuses_what_the_server_refuses(pg15, name, value):
    assert check_value(name, value, pg15["catalog"]) is not None
    assert _server_refuses(pg15, name, value)


@pytest.mark.parametrize("name,value", [
    ("shared_buffers", "6016MB"), ("work_mem", "1920kB"), ("wal_compression", "lz4"),
    ("checkpoint_timeout", "15min"), ("bgwriter_delay", "100ms"), ("jit", "off"),
])
def test_validate_accepts_what_the_server_accepts(pg15, name, value):
    assert check_value(name, value, pg15["catalog"]) is None
    assert not _server_refuses(pg15, name, value)


@pytest.mark.parametrize("profile", PROFILES)
def test_huge_page_count_is_what_the_binary_reports(pg15, profile):
    inst, c = pg15["inst"], pg15["cluster"]
    plan = plan_for_installation(inst, PROFILES[profile], {"pg_version": 15},
                                 catalog=pg15["catalog"], current=pg15["current"],
                                 pgdata=c.pgdata, user=c.user, layers=("postgres", "linux"))
    ch = plan.get("vm.nr_hugepages")
    settings = plan.postgres_settings()
    cmd = [inst.path("postgres"), "-D", c.pgdata, "-C", "shared_memory_size_in_huge_pages"]
    cmd += [a for k, v in settings.items() for a in ("-c", f"{k}={v}")]
    r = subprocess.run(cmd, capture_output=True, text=True, **as_user_kwargs(c.user))
    assert r.returncode == 0, r.stderr
    reported = int(r.stdout.strip())
    assert ch.inputs["shared_memory_size_in_huge_pages"] == reported
    assert ch.inputs["method"].startswith("postgres -C")
    assert int(ch.proposed) == reported + margin(reported)
    # shared_buffers alone would undercount: the other postmaster settings matter
    assert reported > pages_for(setting_bytes(settings["shared_buffers"], "8kB"), 2 * MB)
    # the <15 estimate stays within 2% of the truth, on the safe side once its margin is in
    est = pages_for(estimate_shared_memory_bytes(settings, 15), 2 * MB)
    assert abs(est - reported) / reported < 0.02
    no_binary = plan_for_target(PROFILES[profile], {"pg_version": 14}, None, None,
                                layers=("linux",))
    assert int(no_binary.get("vm.nr_hugepages").proposed) > 0
    assert no_binary.get("vm.nr_hugepages").inputs["method"] == "estimate"


def test_alter_system_statements_run_on_a_real_server(pg15):
    """render_sql of every profile's plan (full size) is accepted by ALTER SYSTEM, which
    validates each value against the running server."""
    with Cluster.create_throwaway(pg15["inst"]) as c:
        c.start({})
        with c.connect() as conn:
            for profile in PROFILES:
                for w in ("oltp", "analytics"):
                    plan = make_plan(inputs_for(profile, 15, workload=w), gucs=pg15["catalog"])
                    for stmt in render_sql(plan).splitlines():
                        if stmt and not stmt.startswith("--"):
                            conn.execute(stmt.split("  --")[0])
                    errors = dict(conn.execute("SELECT name, error FROM pg_file_settings "
                                               "WHERE error IS NOT NULL").fetchall())
                    # only restart-level settings wait for a restart; nothing is invalid
                    assert set(errors.values()) <= {"setting could not be applied"}
                    assert {n for n in errors} <= {c.name for c in plan.changes if c.restart}
                    assert "shared_buffers" in errors
                    # a reload-level value goes live after pg_reload_conf() (asynchronously)
                    want = setting_bytes(plan.get("work_mem").proposed)
                    for _ in range(100):
                        with c.connect() as fresh:
                            wm = fresh.execute("SELECT setting::bigint * 1024 FROM pg_settings"
                                               " WHERE name = 'work_mem'").fetchone()[0]
                        if wm == want:
                            break
                        time.sleep(0.05)
                    assert wm == want
                    conn.execute("ALTER SYSTEM RESET ALL")


def test_server_starts_with_the_rendered_conf(pg15):
    """The 2-core/24GB plan as a conf.d file (shared_buffers capped for the CI machine)
    starts a real server, and every setting shows the planned value."""
    plan = make_plan(inputs_for("2c-24g", 15), gucs=pg15["catalog"])
    plan.changes = [Change(**{**c.to_dict(), "proposed": "256MB"})
                    if c.name == "shared_buffers" else c for c in plan.changes]
    with Cluster.create_throwaway(pg15["inst"]) as c:
        confd = os.path.join(c.pgdata, "conf.d")
        os.makedirs(confd)
        with open(os.path.join(confd, "90-pgaccel.conf"), "w") as f:
            f.write(render_conf(plan))
        with open(os.path.join(c.pgdata, "postgresql.conf"), "a") as f:
            f.write("\ninclude_dir = 'conf.d'\n")
        chown_tree(c.pgdata, c.user)
        c.start({})
        with c.connect() as conn:
            assert conn.execute("SELECT count(*) FROM pg_file_settings "
                                "WHERE error IS NOT NULL").fetchone()[0] == 0
            rows = dict(conn.execute("SELECT name, setting || coalesce(unit, '') "
                                     "FROM pg_settings").fetchall())
            units = dict(conn.execute("SELECT name, unit FROM pg_settings").fetchall())
    for ch in plan.layer("postgres"):
        shown, unit = rows[ch.name], units[ch.name]
        if unit:
            want = to_unit(ch.proposed, unit)
            assert float(shown[: -len(unit)]) == pytest.approx(want, rel=1e-9), ch.name
        else:
            assert shown.lower() == ch.proposed.lower() or \
                float(shown) == pytest.approx(float(ch.proposed)), ch.name
