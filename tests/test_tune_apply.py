"""Applying a plan to real PostgreSQL clusters, verifying it, and rolling it back.

Each test makes a throwaway cluster look like a user's: its own port, socket directory and
listen_addresses in postgresql.conf, started by plain ``pg_ctl`` (no pgaccel options), then
works on it as an existing ``--pgdata`` cluster (or through ``--dsn``)."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from pgaccel.errors import PgaccelError, ServerError, UsageError
from pgaccel.server.cluster import Cluster
from pgaccel.apply.local import apply_local
from pgaccel.apply.dsn import apply_dsn
from pgaccel.server.binary import describe_config
from pgaccel.server.target import DsnTarget, LocalTarget
from pgaccel.apply.conf import (INCLUDE, check_changes, cmdline_settings, conf_entries,
                                 durability_risks, with_include)
from pgaccel.tune.plan import Change
from pgaccel.apply.rollback import rollback
from pgaccel.apply.state import StateStore

import helpers
from helpers import pg_ctl, pgaccel


# -- pure ---------------------------------------------------------------------------------

def test_durability_is_never_turned_off_without_the_flag():
    risky = [Change("postgres", "fsync", "off", ""), Change("postgres", "work_mem", "8MB", ""),
             Change("postgres", "synchronous_commit", "off", ""),
             Change("postgres", "full_page_writes", "false", "")]
    assert durability_risks(risky) == ["fsync = off", "synchronous_commit = off",
                                       "full_page_writes = false"]
    assert durability_risks([Change("postgres", "synchronous_commit", "local", ""),
                             Change("postgres", "fsync", "on", "")]) == []
    with pytest.raises(UsageError, match="durability"):
        check_changes(risky, None)
    check_changes(risky, None, allow_unsafe_durability=True)


def test_include_line_is_appended_once_and_entries_parse():
    text = "port = 5432\nshared_buffers = 128MB  # user's\n"
    once = with_include(text)
    assert once.startswith(text) and once.rstrip().endswith(INCLUDE)
    assert with_include(once) is None
    assert with_include("port = 1") .startswith("port = 1\n")
    assert conf_entries(once) == {"port": "5432", "shared_buffers": "128MB"}
    assert conf_entries("work_mem = 'a''b'\nWork_Mem='8MB'\n#jit = on\n") == \
        {"work_mem": "8MB"}
    assert cmdline_settings("-c shared_buffers=1GB '-cport=5433' --work-mem=4MB -k /x") \
        == {"shared_buffers", "port", "work_mem"}


def test_state_store_finds_states_by_unique_prefix(tmp_path):
    store = StateStore(str(tmp_path / "states"))
    t = {"kind": "pgdata", "key": "pgdata:/x", "pgdata": "/x"}
    a = store.new(t, None, sid="20240101-000000-aaaa")
    b = store.new(t, None, sid="20240101-000000-aabb")
    with pytest.raises(UsageError, match="no applied state"):
        store.find(None)                                  # both still 'applying'
    a.finish("applied")
    b.finish("applied")
    assert store.find(None).id == b.id
    assert store.find("20240101-000000-aab").id == b.id
    with pytest.raises(UsageError, match="matches 2 states"):
        store.find("20240101-000000-aa")
    assert [s.id for s in store.chain(a)] == [b.id, a.id]  # newest first
    b.finish("rolled-back")
    with pytest.raises(UsageError, match="is rolled-back"):
        store.find(b.id)
    assert json.load(open(os.path.join(a.dir, "manifest.json")))["status"] == "applied"


# -- real clusters ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def catalog(inst):
    return describe_config(inst.path("postgres"), inst.major)


@pytest.fixture
def user_cluster(inst):
    yield from helpers.user_cluster(inst, listen="")


def server_for(c: Cluster, restart_cmd: str | None = None) -> LocalTarget:
    """The cluster as `tune --apply --pgdata` opens it: left as found on close."""
    return LocalTarget(Cluster.existing(c.inst, c.pgdata), restart_cmd, restore_on_close=False)


def conf_files(c: Cluster) -> dict[str, bytes | None]:
    out = {}
    for name in ("postgresql.conf", "postgresql.auto.conf", "pgaccel.conf"):
        p = os.path.join(c.pgdata, name)
        out[name] = open(p, "rb").read() if os.path.exists(p) else None
    return out


def settings(c: Cluster, *names: str) -> dict[str, tuple]:
    with c.connect() as conn:
        rows = conn.execute("SELECT name, setting, source, sourcefile FROM pg_settings WHERE "
                            "name = ANY(%s)", (list(names),)).fetchall()
    return {r[0]: r[1:] for r in rows}


def changes(catalog, **values) -> list[Change]:
    return [Change("postgres", n, v, f"test: {n}", restart=bool(catalog.restart(n)),
                   context=catalog.context(n)) for n, v in values.items()]


def test_restart_level_change_applied_and_verified(user_cluster, catalog, tmp_path):
    c = user_cluster
    pg_ctl(c, "start")
    before = conf_files(c)
    pid = c.postmaster_pid()
    store = StateStore(str(tmp_path / "states"))
    rep = apply_local(server_for(c), changes(catalog, shared_buffers="256MB",
                                             work_mem="8MB"), store, catalog=catalog)
    assert rep.reloaded and rep.restarted and c.postmaster_pid() != pid
    owned = os.path.join(c.pgdata, "pgaccel.conf")
    s = settings(c, "shared_buffers", "work_mem")
    assert s["shared_buffers"] == ("32768", "configuration file", owned)
    assert s["work_mem"] == ("8192", "configuration file", owned)
    after = conf_files(c)
    # the user's file only gained the include line at its end; auto.conf untouched
    assert after["postgresql.conf"].startswith(before["postgresql.conf"])
    assert after["postgresql.conf"][len(before["postgresql.conf"]):].decode().strip() \
        .endswith(INCLUDE)
    assert after["postgresql.auto.conf"] == before["postgresql.auto.conf"]
    assert "shared_buffers = '256MB'" in after["pgaccel.conf"].decode()
    # reload-level first (applied before the restart), then the restart
    log = open(c.logfile).read()
    assert log.index('parameter "work_mem" changed to "8MB"') < \
        log.rindex("received fast shutdown request")
    # the manifest: target, checksums, previous values, plan entries, backups
    m = json.load(open(os.path.join(rep.state_dir, "manifest.json")))
    assert m["status"] == "applied" and m["target"]["kind"] == "pgdata"
    prev = {a["name"]: a["previous_raw"] for a in m["postgres"]["applied"]}
    assert prev == {"shared_buffers": "16384", "work_mem": "4096"}
    files = {os.path.basename(f["path"]): f for f in m["files"]}
    assert not files["pgaccel.conf"]["existed"]
    backup = os.path.join(rep.state_dir, files["postgresql.conf"]["backup"])
    assert open(backup, "rb").read() == before["postgresql.conf"]
    assert oct(os.stat(rep.state_dir).st_mode & 0o777) == "0o700"


def test_value_refused_at_start_is_rolled_back(user_cluster, catalog, tmp_path):
    c = user_cluster
    pg_ctl(c, "start")
    before = conf_files(c)
    store = StateStore(str(tmp_path / "states"))
    # 1TB passes every catalog check (max is 8TB) but cannot be mapped on this host
    with pytest.raises(ServerError) as e:
        apply_local(server_for(c), changes(catalog, shared_buffers="1TB", work_mem="8MB"),
                    store, catalog=catalog)
    msg = str(e.value)
    assert "shared_buffers = 1TB" in msg
    assert re.search(r"FATAL: +could not map anonymous shared memory", msg)
    assert "restored the previous configuration" in msg and "running with its previous" in msg
    assert conf_files(c) == before                        # byte-identical
    s = settings(c, "shared_buffers", "work_mem")         # up, with the old values
    assert s["shared_buffers"][0] == "16384" and s["work_mem"][0] == "4096"
    [state] = store.states()
    assert state.status == "failed" and "could not map" in state.data["error"]["line"]


def test_invalid_value_is_caught_before_reload(user_cluster, tmp_path):
    c = user_cluster
    pg_ctl(c, "start")
    before, pid = conf_files(c), c.postmaster_pid()
    # describe-config has no enum values, so only the server itself can refuse this
    with pytest.raises(ServerError, match=r'huge_pages = bogus.*invalid value for parameter '
                                          r'"huge_pages"'):
        apply_local(server_for(c), [Change("postgres", "huge_pages", "bogus", "", restart=True),
                                    Change("postgres", "work_mem", "8MB", "")],
                    StateStore(str(tmp_path / "s")))
    assert conf_files(c) == before and c.postmaster_pid() == pid
    assert settings(c, "work_mem")["work_mem"][0] == "4096"


def test_a_value_overridden_elsewhere_fails_verification_and_is_restored(user_cluster, catalog,
                                                                         tmp_path):
    c = user_cluster
    with open(os.path.join(c.pgdata, "postgresql.conf"), "a") as f:   # a later line wins
        f.write(f"{INCLUDE}\nwork_mem = '2MB'\n")
    pg_ctl(c, "start")
    before = conf_files(c)
    with pytest.raises(ServerError, match=r"work_mem is 2MB, not 8MB \(from .*postgresql\.conf "
                                          r"line \d+\).*byte-identical"):
        apply_local(server_for(c), changes(catalog, work_mem="8MB", random_page_cost="1.5"),
                    StateStore(str(tmp_path / "s")), catalog=catalog)
    assert conf_files(c) == before
    s = settings(c, "work_mem", "random_page_cost")
    assert s["work_mem"][0] == "2048" and s["random_page_cost"][0] == "4"   # reverted


def test_rollback_is_byte_identical(user_cluster, catalog, tmp_path):
    c = user_cluster
    pg_ctl(c, "start")
    original = conf_files(c)
    store = StateStore(str(tmp_path / "states"))
    a = apply_local(server_for(c), changes(catalog, shared_buffers="192MB", work_mem="8MB"),
                    store, catalog=catalog)
    after_a = conf_files(c)
    b = apply_local(server_for(c), changes(catalog, work_mem="16MB", shared_buffers="192MB",
                                           random_page_cost="1.5"), store, catalog=catalog)
    assert b.reloaded and not b.restarted       # shared_buffers is already 192MB
    assert settings(c, "work_mem")["work_mem"][0] == "16384"
    r = rollback(store)                                    # latest: b only
    assert r.undone == [b.state_id] and conf_files(c) == after_a
    assert r.reloaded and not r.restarted
    assert settings(c, "shared_buffers", "work_mem") == {
        "shared_buffers": ("24576", "configuration file", os.path.join(c.pgdata, "pgaccel.conf")),
        "work_mem": ("8192", "configuration file", os.path.join(c.pgdata, "pgaccel.conf"))}
    r = rollback(store, a.state_id)
    assert r.restarted and r.undone == [a.state_id]
    assert conf_files(c) == original
    assert all(f["identical"] for f in r.files)
    s = settings(c, "shared_buffers", "work_mem", "random_page_cost")
    assert {n: v[0] for n, v in s.items()} == {"shared_buffers": "16384", "work_mem": "4096",
                                               "random_page_cost": "4"}
    assert [s.status for s in store.states()] == ["rolled-back", "rolled-back"]
    with pytest.raises(UsageError, match="no applied state"):
        rollback(store)


def test_rollback_refuses_to_overwrite_later_edits(user_cluster, catalog, tmp_path):
    c = user_cluster
    store = StateStore(str(tmp_path / "states"))
    apply_local(server_for(c), changes(catalog, work_mem="8MB"), store, catalog=catalog)
    conf = os.path.join(c.pgdata, "postgresql.conf")
    with open(conf, "a") as f:
        f.write("# the user's own later edit\n")
    with pytest.raises(PgaccelError, match="changed after pgaccel's apply"):
        rollback(store)
    r = rollback(store, force=True)
    assert b"later edit" not in open(conf, "rb").read()
    saved = os.listdir(os.path.join(store.root, r.state_id, "files"))
    assert any(n.startswith("postgresql.conf.before-rollback") for n in saved)


def test_stopped_cluster_and_the_users_alter_system_left_alone(user_cluster, catalog,
                                                               tmp_path):
    c = user_cluster
    pg_ctl(c, "start")
    with c.connect() as conn:
        conn.execute("ALTER SYSTEM SET work_mem = '2MB'")    # the user's own line
    pg_ctl(c, "stop")
    before = conf_files(c)
    rep = apply_local(server_for(c), changes(catalog, work_mem="8MB",
                                             random_page_cost="1.1"),
                      StateStore(str(tmp_path / "s")), catalog=catalog)
    assert [n for n, _ in rep.skipped] == ["work_mem"]
    assert [a.name for a in rep.applied] == ["random_page_cost"]
    assert rep.applied[0].previous == "4"
    assert conf_files(c)["postgresql.auto.conf"] == before["postgresql.auto.conf"]
    assert not c.is_running()                                         # stopped again
    assert any("started it to verify" in n for n in rep.notes)


def test_dry_run_changes_nothing(user_cluster, catalog, tmp_path):
    c = user_cluster
    pg_ctl(c, "start")
    before, pid = conf_files(c), c.postmaster_pid()
    store = StateStore(str(tmp_path / "states"))
    rep = apply_local(server_for(c), changes(catalog, shared_buffers="256MB"), store,
                      catalog=catalog, dry_run=True)
    assert f"+{INCLUDE}" in rep.diff and "+shared_buffers = '256MB'" in rep.diff
    assert conf_files(c) == before and c.postmaster_pid() == pid
    assert store.states() == [] and rep.state_id is None


def test_restart_cmd_is_used_instead_of_pg_ctl(user_cluster, catalog, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the restart script switches to the server user")
    c = user_cluster
    pg_ctl(c, "start")
    marker = tmp_path / "restarted"
    script = tmp_path / "restart.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\nrunuser -u {c.user.name} -- "
                      f"{c.inst.path('pg_ctl')} -D {c.pgdata} -l {c.logfile} -w restart "
                      ">/dev/null\n")
    script.chmod(0o755)
    rep = apply_local(server_for(c, str(script)), changes(catalog, max_connections="50"),
                      StateStore(str(tmp_path / "s")), catalog=catalog)
    assert rep.restarted and marker.exists()
    assert settings(c, "max_connections")["max_connections"][0] == "50"


def test_postgres_and_linux_layers_together(user_cluster, catalog, tmp_path):
    from test_tune_osapply import make_tree, snapshot
    c = user_cluster
    root = make_tree(str(tmp_path / "root"))
    tree, before = snapshot(root), conf_files(c)
    linux = [Change("linux", "vm.swappiness", "1", ""),
             Change("linux", "sys/kernel/mm/transparent_hugepage/enabled", "madvise", ""),
             Change("linux", "vm.overcommit_memory", "2", "", advice_only=True)]
    store = StateStore(str(tmp_path / "states"))
    # a failed PostgreSQL apply undoes the Linux values it had set first
    with pytest.raises(ServerError, match="did not start"):
        apply_local(server_for(c), changes(catalog, shared_buffers="1TB"), store,
                    catalog=catalog, os_changes=linux, os_root=root, is_root=True)
    assert snapshot(root) == {**tree, "proc/sys/vm/swappiness": "60\n",
                              "sys/kernel/mm/transparent_hugepage/enabled": "always\n"}
    assert conf_files(c) == before
    rep = apply_local(server_for(c), changes(catalog, work_mem="8MB"), store,
                      catalog=catalog, os_changes=linux, os_root=root, is_root=True)
    assert {i["key"] for i in rep.os_applied} == {"vm.swappiness",
                                                  "sys/kernel/mm/transparent_hugepage/enabled"}
    assert open(os.path.join(root, "proc/sys/vm/overcommit_memory")).read() == "0\n"
    m = json.load(open(os.path.join(rep.state_dir, "manifest.json")))
    assert len(m["keys"]) == 2 and m["os"]["items"][0]["previous"] == "60"
    r = rollback(store, is_root=True)
    assert r.undone == [rep.state_id] and len(r.os_restored) == 2
    assert conf_files(c) == before
    assert osapply_values(root) == {"proc/sys/vm/swappiness": "60",
                                    "sys/kernel/mm/transparent_hugepage/enabled": "always"}


def osapply_values(root: str) -> dict[str, str]:
    from pgaccel.osknobs.knob import normalise
    return {rel: normalise(open(os.path.join(root, rel)).read()) for rel in
            ("proc/sys/vm/swappiness", "sys/kernel/mm/transparent_hugepage/enabled")}


# -- --dsn ---------------------------------------------------------------------------------

def _databases(c: Cluster) -> list[str]:
    with c.connect() as conn:
        return [r[0] for r in conn.execute("SELECT datname FROM pg_database ORDER BY 1")]


def test_dsn_reload_level_applied_restart_level_listed_and_rolled_back(user_cluster, catalog,
                                                                       tmp_path):
    c = user_cluster
    pg_ctl(c, "start")
    with c.connect() as conn:
        conn.execute("ALTER SYSTEM SET effective_io_concurrency = 7")   # the user's
        conn.execute("SELECT pg_reload_conf()")
    before, dbs = conf_files(c), _databases(c)
    dsn = f"host={c.sockdir} port={c.port} user=pgaccel dbname=postgres password=Sekr1tPw"
    store = StateStore(str(tmp_path / "states"))
    todo = changes(catalog, work_mem="8MB", random_page_cost="1.1", shared_buffers="256MB",
                   effective_io_concurrency="64")
    dry = apply_dsn(DsnTarget(dsn), todo, store, catalog=catalog, dry_run=True)
    assert "ALTER SYSTEM SET work_mem = '8MB';" in dry.diff and "shared_buffers" not in dry.diff
    assert conf_files(c) == before and store.states() == []
    rep = apply_dsn(DsnTarget(dsn), todo, store, catalog=catalog)
    assert {a.name for a in rep.applied} == {"work_mem", "random_page_cost"}
    assert [n for n, _, _ in rep.listed] == ["shared_buffers"]
    assert [n for n, _ in rep.skipped] == ["effective_io_concurrency"]
    s = settings(c, "work_mem", "shared_buffers", "effective_io_concurrency")
    assert s["work_mem"][0] == "8192" and s["work_mem"][2].endswith("postgresql.auto.conf")
    assert s["shared_buffers"][0] == "16384" and s["effective_io_concurrency"][0] == "7"
    manifest = open(os.path.join(rep.state_dir, "manifest.json")).read()
    assert "Sekr1tPw" not in manifest and "Sekr1tPw" not in rep.target
    r = rollback(store, dsn=dsn)
    assert r.files == [{"path": "postgresql.auto.conf", "identical": True, "existed": True,
                        "touched": True}]
    assert conf_files(c) == before and _databases(c) == dbs
    assert settings(c, "work_mem")["work_mem"][0] == "4096"


# -- the command line ---------------------------------------------------------------------

def _no_traceback(r: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in r.stderr + r.stdout


def test_cli_pgdata_dry_run_then_refused_value(user_cluster, tmp_path):
    c = user_cluster
    pg_ctl(c, "start")
    before, pid = conf_files(c), c.postmaster_pid()
    env = {"PGACCEL_STATE_DIR": str(tmp_path / "states")}
    r = pgaccel("tune", "--pgdata", c.pgdata, "--apply", "--dry-run", env=env, timeout=120)
    _no_traceback(r)
    assert r.returncode == 0, r.stderr
    assert "nothing was changed" in r.stdout and f"+{INCLUDE}" in r.stdout
    assert re.search(r"^\+shared_buffers = '\d+[MG]B'$", r.stdout, re.M)
    assert conf_files(c) == before and c.postmaster_pid() == pid
    r = pgaccel("tune", "--pgdata", c.pgdata, "--apply", "--set", "shared_buffers=1TB",
                env=env, timeout=180)
    _no_traceback(r)
    assert r.returncode == ServerError.exit_code
    assert "shared_buffers = 1TB" in r.stderr and "restored the previous configuration" in \
        r.stderr
    assert conf_files(c) == before
    assert settings(c, "shared_buffers")["shared_buffers"][0] == "16384"


def test_cli_dsn_apply_and_rollback(user_cluster, tmp_path):
    c = user_cluster
    pg_ctl(c, "start")
    before = conf_files(c)
    env = {"PGACCEL_STATE_DIR": str(tmp_path / "states")}
    dsn = f"host={c.sockdir} port={c.port} user=pgaccel dbname=postgres password=Sekr1tPw"
    r = pgaccel("tune", "--dsn", dsn, "--apply", "--format", "json", "--set", "work_mem=12MB",
                env=env, timeout=120)
    _no_traceback(r)
    assert r.returncode == 0, r.stderr
    assert "Sekr1tPw" not in r.stdout + r.stderr
    d = json.loads(r.stdout)["apply"]
    applied = {a["name"]: a for a in d["applied"]}
    assert applied["work_mem"]["shown"] == "12MB"
    assert "shared_buffers" in [x[0] for x in d["listed"]]         # restart-level: listed
    assert settings(c, "work_mem")["work_mem"][0] == str(12 * 1024)
    r = pgaccel("rollback", "--list", "--json", env=env)
    assert [s["status"] for s in json.loads(r.stdout)["states"]] == ["applied"]
    r = pgaccel("rollback", env=env)
    _no_traceback(r)
    assert r.returncode == 0, r.stderr
    assert "byte-identical" in r.stdout
    assert conf_files(c) == before
    assert settings(c, "work_mem")["work_mem"][0] == "4096"


def test_cli_refuses_unsafe_durability_and_bad_flags(tmp_path):
    r = pgaccel("tune", "--apply", "--set", "fsync=off", timeout=60)
    _no_traceback(r)
    assert r.returncode == UsageError.exit_code and "--allow-unsafe-durability" in r.stderr
    r = pgaccel("tune", "--dry-run", timeout=60)
    assert r.returncode == UsageError.exit_code and "--dry-run goes with" in r.stderr
    r = pgaccel("rollback", "--state-dir", str(tmp_path / "none"), timeout=60)
    _no_traceback(r)
    assert r.returncode == UsageError.exit_code and "no applied state" in r.stderr
