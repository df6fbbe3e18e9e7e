"""Plans for the tools that run fleets: Patroni, CloudNativePG, Ansible (pure text).

Each tool owns some parameters itself.  A plan rendered for it leaves those out, and says
which and why at the top of the file, so applying it never fights the tool:

* **Patroni** (dynamic configuration, ``postgresql.parameters``): each member's own
  configuration sets ``listen_addresses``, ``port``, ``cluster_name``, the file locations and
  the recovery parameters; Patroni rejects any value there.  It also keeps replication
  working: ``wal_level`` is at least ``replica``, ``hot_standby`` and ``wal_log_hints`` are on,
  and a few counts have a floor (``max_connections`` 25, ``max_wal_senders`` 3, ...).  A
  value below the floor is ignored by Patroni (it keeps its default), so it is left out here.
  (Facts from Patroni's ``ConfigHandler.CMDLINE_OPTIONS``, patroni/postgresql/config.py.)
* **CloudNativePG** (``Cluster`` ``spec.postgresql.parameters``): the operator's
  ``FixedConfigurationParameters`` (pkg/postgres/configuration.go, as of 1.27.1) are refused by its
  admission webhook; every value must be a string (the CRD's ``additionalProperties``).
* **Ansible** (``community.postgresql.postgresql_alter_system``, ALTER SYSTEM then a reload,
  PostgreSQL 14 or later; it replaces the deprecated ``postgresql_set``): nothing
  is left out; the playbook restarts the server only where a parameter needs it.

YAML comes from PyYAML (``safe_dump``), so a value such as ``on`` or ``0.9`` stays a string.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from ..pg.values import setting_bytes
from .plan import Change, Plan
from .render import describe

FLEET_FORMATS = ("patroni", "cloudnativepg", "ansible")

# -- Patroni ---------------------------------------------------------------------------------

PATRONI_LOCAL = {
    "listen_addresses": "each member's own postgresql.listen",
    "port": "each member's own postgresql.listen",
    "cluster_name": "Patroni's scope",
    "data_directory": "each member's postgresql.data_dir",
    "config_file": "Patroni writes postgresql.conf itself",
    "hba_file": "postgresql.pg_hba / hba_file of each member",
    "ident_file": "postgresql.pg_ident / ident_file of each member",
    "primary_conninfo": "Patroni points replicas at the leader",
    "primary_slot_name": "Patroni manages replication slots",
}
# recovery parameters: Patroni takes them from each member's postgresql.recovery_conf
PATRONI_LOCAL.update({n: "a recovery parameter, from each member's postgresql.recovery_conf"
                      for n in (
    "archive_cleanup_command pause_at_recovery_target promote_trigger_file "
    "recovery_end_command recovery_min_apply_delay recovery_target recovery_target_action "
    "recovery_target_inclusive recovery_target_lsn recovery_target_name recovery_target_time "
    "recovery_target_timeline recovery_target_xid restore_command standby_mode "
    "trigger_file").split()})

# parameter -> (smallest value Patroni accepts, in the parameter's base unit; unit or None)
PATRONI_FLOORS = {
    "max_connections": (25, None),
    "max_wal_senders": (3, None),
    "max_locks_per_transaction": (32, None),
    "max_replication_slots": (4, None),
    "max_worker_processes": (2, None),
    "max_prepared_transactions": (0, None),
    "wal_keep_segments": (1, None),
    "wal_keep_size": (16 * 1024 * 1024, "bytes"),
}
PATRONI_ALLOWED = {
    "wal_level": ("replica", "logical", "hot_standby"),
    "hot_standby": ("on", "true", "yes", "1"),
}

# -- CloudNativePG ---------------------------------------------------------------------------

_CNPG_FIXED = (        # CloudNativePG 1.27.1 (tests/test_fleet_tools.py compares)
    "archive_command archive_mode cluster_name pg_failover_slots.primary_dsn "
    "pg_failover_slots.standby_slot_names port primary_conninfo primary_slot_name "
    "recovery_target recovery_target_action recovery_target_inclusive recovery_target_lsn "
    "recovery_target_name recovery_target_time recovery_target_timeline recovery_target_xid "
    "restore_command shared_preload_libraries ssl ssl_ca_file ssl_cert_file ssl_crl_file "
    "ssl_dh_params_file ssl_ecdh_curve ssl_key_file ssl_passphrase_command "
    "ssl_passphrase_command_supports_reload ssl_prefer_server_ciphers "
    "synchronized_standby_slots synchronous_standby_names temp_tablespaces")
_CNPG_BLOCKED = (
    "allow_system_table_mods bonjour bonjour_name config_file data_directory data_sync_retry "
    "event_source external_pid_file hba_file hot_standby ident_file jit_provider "
    "listen_addresses logging_collector unix_socket_directories unix_socket_group "
    "unix_socket_permissions archive_cleanup_command log_destination log_directory "
    "log_file_mode log_filename log_rotation_age log_rotation_size log_truncate_on_rotation "
    "promote_trigger_file recovery_end_command recovery_min_apply_delay restart_after_crash "
    "stats_temp_directory syslog_facility syslog_ident syslog_sequence_numbers "
    "syslog_split_messages")
CNPG_FIXED = {n: "the operator sets it" for n in _CNPG_FIXED.split()}
CNPG_FIXED.update({n: "the operator needs PostgreSQL's default" for n in _CNPG_BLOCKED.split()})
CNPG_HINTS = {"shared_preload_libraries": "use spec.postgresql.shared_preload_libraries",
              "synchronous_standby_names": "use spec.postgresql.synchronous"}


@dataclass(frozen=True)
class Rendered:
    """A plan for one tool: the parameters it gets, and those left out with the reason."""
    settings: dict[str, str]
    left_out: dict[str, str]
    restart: tuple[str, ...]


def _changes(plan: Plan) -> list[Change]:
    return [c for c in plan.layer("postgres") if not c.advice_only]


def _is_on(value: str) -> bool:
    return str(value).strip().lower() in ("on", "true", "yes", "1")


def _patroni_refusal(name: str, value: str) -> str | None:
    if name in PATRONI_LOCAL:
        return f"set by Patroni per member ({PATRONI_LOCAL[name]})"
    if name in PATRONI_ALLOWED and str(value).strip().lower() not in PATRONI_ALLOWED[name]:
        keep = "on" if name == "hot_standby" else "replica or logical"
        return f"Patroni keeps it at {keep} for replication"
    if name in PATRONI_FLOORS:
        floor, unit = PATRONI_FLOORS[name]
        try:
            n = setting_bytes(value, "MB") if unit == "bytes" else int(value)
        except (TypeError, ValueError):
            return None
        if n < floor:
            shown = f"{floor // (1024 * 1024)}MB" if unit == "bytes" else str(floor)
            return f"below Patroni's floor of {shown}: Patroni would ignore it"
    return None


def patroni_plan(plan: Plan) -> Rendered:
    keep: dict[str, str] = {}
    out: dict[str, str] = {}
    for c in _changes(plan):
        why = _patroni_refusal(c.name, c.proposed)
        if why:
            out[c.name] = why
        else:
            keep[c.name] = str(c.proposed)
    return Rendered(keep, out, tuple(c.name for c in _changes(plan)
                                     if c.restart and c.name in keep))


def cnpg_plan(plan: Plan) -> Rendered:
    keep: dict[str, str] = {}
    out: dict[str, str] = {}
    for c in _changes(plan):
        if c.name in CNPG_FIXED:
            hint = CNPG_HINTS.get(c.name)
            out[c.name] = CNPG_FIXED[c.name] + (f"; {hint}" if hint else "")
        else:
            keep[c.name] = str(c.proposed)
    return Rendered(keep, out, tuple(c.name for c in _changes(plan)
                                     if c.restart and c.name in keep))


def ansible_plan(plan: Plan) -> Rendered:
    keep = {c.name: str(c.proposed) for c in _changes(plan)}
    return Rendered(keep, {}, tuple(c.name for c in _changes(plan) if c.restart))


def _header(plan: Plan, r: Rendered, lines: list[str]) -> str:
    head = [f"Written by pgaccel tune for {describe(plan)}."] + lines
    if r.restart:
        head.append("Needs a restart: " + ", ".join(r.restart) + ".")
    for name, why in r.left_out.items():
        head.append(f"Left out: {name}: {why}.")
    return "".join(f"# {h}\n" for h in head)


def _dump(doc: object) -> str:
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100)


def render_patroni(plan: Plan) -> str:
    """Patroni's dynamic configuration: apply with ``patronictl edit-config --apply``."""
    r = patroni_plan(plan)
    how = ["Patroni dynamic configuration (postgresql.parameters). Apply with:",
           "  patronictl -c /etc/patroni/patroni.yml edit-config --apply THIS_FILE --force"]
    if r.restart:
        how.append("  then: patronictl -c /etc/patroni/patroni.yml restart SCOPE --pending")
    return _header(plan, r, how) + _dump({"postgresql": {"parameters": r.settings}})


def render_cloudnativepg(plan: Plan) -> str:
    """A merge patch of a CloudNativePG ``Cluster``: ``kubectl patch ... --type merge``."""
    r = cnpg_plan(plan)
    how = ["CloudNativePG Cluster patch (spec.postgresql.parameters). Apply with:",
           "  kubectl patch clusters.postgresql.cnpg.io NAME --type merge --patch-file THIS_FILE",
           "Memory-sized values assume the --memory given to pgaccel tune: use the pod's "
           "memory limit.",
           "The operator restarts the instances itself for parameters that need it."]
    doc = {"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
           "spec": {"postgresql": {"parameters": r.settings}}}
    return _header(plan, r, how) + _dump(doc)


def render_ansible(plan: Plan) -> str:
    """A playbook for the community.postgresql collection: ALTER SYSTEM for each parameter
    (the module reloads), then one restart when any of them needs it.  PostgreSQL 13 gets the
    older ``postgresql_set`` (``postgresql_alter_system`` refuses servers before 14)."""
    r = ansible_plan(plan)
    old = int((plan.inputs or {}).get("pg_version") or 14) < 14
    module = ({"community.postgresql.postgresql_set": {"name": "{{ item.key }}"}} if old else
              {"community.postgresql.postgresql_alter_system": {"param": "{{ item.key }}"}})
    how = ["Ansible playbook (collection community.postgresql 3.13 or later; PostgreSQL 14 or "
           "later). Run with:",
           "  ansible-playbook -i INVENTORY THIS_FILE [-e pgaccel_hosts=GROUP] "
           "[-e pgaccel_service=postgresql@15-main] [-e pgaccel_restart=false]",
           "Connection: pgaccel_login_host, pgaccel_login_port, pgaccel_login_user, "
           "pgaccel_login_unix_socket, pgaccel_login_db; by default it becomes the postgres user "
           "(pgaccel_become, pgaccel_become_user) and uses the local socket."]
    login = {k: "{{ pgaccel_%s | default(omit) }}" % k
             for k in ("login_host", "login_port", "login_user", "login_unix_socket")}
    play = {
        "name": "PostgreSQL settings proposed by pgaccel tune",
        "hosts": "{{ pgaccel_hosts | default('postgres') }}",
        "gather_facts": False,
        "vars": {"pgaccel_settings": r.settings},
        "tasks": [
            {"name": "Set each parameter (ALTER SYSTEM, then a reload)",
             **{m: {**args, "value": "{{ item.value }}",
                    "login_db": "{{ pgaccel_login_db | default('postgres') }}", **login}
                for m, args in module.items()},
             "become": "{{ pgaccel_become | default(true) }}",
             "become_user": "{{ pgaccel_become_user | default('postgres') }}",
             "loop": "{{ pgaccel_settings | dict2items }}",
             "register": "pgaccel_set"},
            {"name": "Parameters that wait for a restart",
             "ansible.builtin.set_fact": {
                 "pgaccel_pending": "{{ pgaccel_set.results | selectattr('restart_required', "
                                    "'defined') | selectattr('restart_required') "
                                    "| map(attribute='item.key') | list }}"}},
            {"name": "Restart PostgreSQL for them",
             "ansible.builtin.service": {
                 "name": "{{ pgaccel_service | default('postgresql') }}",
                 "state": "restarted"},
             "become": True,
             "when": "pgaccel_pending | length > 0 and (pgaccel_restart | default(true) | bool)"},
        ],
    }
    return _header(plan, r, how) + "---\n" + _dump([play])


RENDERERS = {"patroni": render_patroni, "cloudnativepg": render_cloudnativepg,
             "ansible": render_ansible}
