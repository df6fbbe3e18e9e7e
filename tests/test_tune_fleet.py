"""Fleet formats of a plan (tune/fleet.py), pure: what each tool gets, what is left out and
why, and that the YAML reads back to exactly the plan's values as strings.

The tools themselves check these files in tests/test_fleet_tools.py (Patroni's validators,
CloudNativePG's CRD and fixed-parameter list, a real ansible-playbook run)."""

from __future__ import annotations

import pytest
import yaml

from pgaccel.tune import fleet
from pgaccel.tune.plan import Change, Plan


def plan(*changes: tuple[str, str, bool]) -> Plan:
    return Plan(inputs={"pg_version": 15, "cpus": 4, "memory_bytes": 8 << 30,
                        "storage": "ssd", "workload": "oltp", "connections": 100},
                changes=[Change("postgres", n, v, f"why {n}", restart=r) for n, v, r in changes]
                + [Change("linux", "vm.swappiness", "1", "not for PostgreSQL tools"),
                   Change("postgres", "advice_only_thing", "x", "", advice_only=True)])


BASE = (("shared_buffers", "2GB", True), ("jit", "off", False),
        ("checkpoint_completion_target", "0.9", False), ("max_connections", "100", True),
        ("work_mem", "15680kB", False))


def _yaml(text: str):
    return yaml.safe_load(text)


@pytest.mark.parametrize("fmt", fleet.FLEET_FORMATS)
def test_every_value_reads_back_as_the_plans_string(fmt):
    text = fleet.RENDERERS[fmt](plan(*BASE))
    doc = _yaml(text)
    if fmt == "patroni":
        params = doc["postgresql"]["parameters"]
    elif fmt == "cloudnativepg":
        assert (doc["apiVersion"], doc["kind"]) == ("postgresql.cnpg.io/v1", "Cluster")
        params = doc["spec"]["postgresql"]["parameters"]
    else:
        params = doc[0]["vars"]["pgaccel_settings"]
    # "off" and "0.9" would read back as a boolean and a float if they were not quoted
    assert params == {n: v for n, v, _ in BASE}
    assert all(type(v) is str for v in params.values())
    assert "vm.swappiness" not in text and "advice_only_thing" not in text
    assert "Needs a restart: shared_buffers, max_connections." in text


@pytest.mark.parametrize("name,value,why", [
    ("listen_addresses", "*", "set by Patroni per member"),
    ("port", "5433", "set by Patroni per member"),
    ("cluster_name", "main", "Patroni's scope"),
    ("restore_command", "cp x y", "recovery parameter"),
    ("wal_level", "minimal", "replica or logical"),
    ("hot_standby", "off", "keeps it at on"),
    ("max_connections", "24", "floor of 25"),
    ("max_wal_senders", "0", "floor of 3"),
    ("max_worker_processes", "1", "floor of 2"),
    ("max_locks_per_transaction", "31", "floor of 32"),
    ("max_replication_slots", "3", "floor of 4"),
    ("wal_keep_size", "15MB", "floor of 16MB"),
    ("wal_keep_size", "15", "floor of 16MB"),
])
def test_patroni_leaves_out_what_it_manages_or_would_ignore(name, value, why):
    r = fleet.patroni_plan(plan(*BASE, (name, value, True)) if name != "max_connections"
                           else plan((name, value, True)))
    assert name not in r.settings and why in r.left_out[name]
    text = fleet.render_patroni(plan((name, value, True)))
    assert f"# Left out: {name}: " in text
    assert _yaml(text)["postgresql"]["parameters"] == {}


@pytest.mark.parametrize("name,value", [
    ("max_connections", "25"), ("max_wal_senders", "3"), ("max_worker_processes", "2"),
    ("max_locks_per_transaction", "32"), ("max_replication_slots", "4"),
    ("wal_keep_size", "16MB"), ("wal_keep_size", "1GB"), ("wal_level", "logical"),
    ("wal_level", "replica"), ("hot_standby", "on"), ("wal_log_hints", "off"),
    ("max_prepared_transactions", "0"),
])
def test_patroni_keeps_values_at_or_above_its_floors(name, value):
    r = fleet.patroni_plan(plan((name, value, True)))
    assert r.settings == {name: value} and not r.left_out
    assert r.restart == (name,)


def test_patroni_says_how_to_apply_and_restart_only_when_needed():
    with_restart = fleet.render_patroni(plan(*BASE))
    assert "edit-config --apply" in with_restart and "restart SCOPE --pending" in with_restart
    reload_only = fleet.render_patroni(plan(("jit", "off", False)))
    assert "edit-config --apply" in reload_only and "--pending" not in reload_only
    assert "Needs a restart" not in reload_only


@pytest.mark.parametrize("name,why", [
    ("shared_preload_libraries", "spec.postgresql.shared_preload_libraries"),
    ("synchronous_standby_names", "spec.postgresql.synchronous"),
    ("archive_mode", "the operator sets it"),
    ("temp_tablespaces", "the operator sets it"),
    ("listen_addresses", "needs PostgreSQL's default"),
    ("logging_collector", "needs PostgreSQL's default"),
    ("hot_standby", "needs PostgreSQL's default"),
])
def test_cloudnativepg_leaves_out_the_operators_fixed_parameters(name, why):
    r = fleet.cnpg_plan(plan(*BASE, (name, "x", True)))
    assert name not in r.settings and why in r.left_out[name]
    assert set(r.settings) == {n for n, _, _ in BASE}


def test_ansible_gets_everything_and_restarts_only_for_pending_parameters():
    p = plan(*BASE, ("listen_addresses", "*", True))
    r = fleet.ansible_plan(p)
    assert set(r.settings) == {n for n, _, _ in BASE} | {"listen_addresses"}
    assert not r.left_out
    play = _yaml(fleet.render_ansible(p))[0]
    set_task, pending, restart = play["tasks"]
    assert set_task["community.postgresql.postgresql_alter_system"]["param"] == "{{ item.key }}"
    assert set_task["loop"] == "{{ pgaccel_settings | dict2items }}"
    assert "restart_required" in pending["ansible.builtin.set_fact"]["pgaccel_pending"]
    assert restart["ansible.builtin.service"]["state"] == "restarted"
    assert "pgaccel_pending | length > 0" in restart["when"]


def test_a_value_with_a_quote_or_a_comma_survives():
    value = "'$user', public"
    for fmt in fleet.FLEET_FORMATS:
        doc = _yaml(fleet.RENDERERS[fmt](plan(("search_path", value, False))))
        got = (doc["postgresql"]["parameters"] if fmt == "patroni" else
               doc["spec"]["postgresql"]["parameters"] if fmt == "cloudnativepg" else
               doc[0]["vars"]["pgaccel_settings"])
        assert got == {"search_path": value}


def test_postgresql_13_gets_the_older_module():
    p13 = plan(*BASE)
    p13.inputs["pg_version"] = 13
    task = _yaml(fleet.render_ansible(p13))[0]["tasks"][0]
    assert task["community.postgresql.postgresql_set"]["name"] == "{{ item.key }}"
    assert "community.postgresql.postgresql_alter_system" not in task
