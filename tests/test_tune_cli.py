"""`pgaccel tune` end to end (real probe, real PostgreSQL binary, throwaway cluster)."""

from __future__ import annotations

import configparser
import io
import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner
from rich.console import Console

from pgaccel.cli import cli
from pgaccel.report.tune import emit_plan
from pgaccel.session.plan import build_plan

PGACCEL = os.path.join(os.path.dirname(sys.executable), "pgaccel")


def run(*args: str):
    r = CliRunner().invoke(cli, ["tune", *args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.output


def test_table_shows_current_proposed_restart_reason():
    text = run("--format", "table")
    assert "shared_buffers" in text and "128MB" in text     # the build's default
    assert re.search(r"shared_buffers\s+│\s+128MB\s+│\s+\d+MB\s+│\s+yes", text)
    assert "Memory budget" in text


def test_json_is_a_plan_with_budget():
    d = json.loads(run("--format", "json", "--layer", "all"))
    layers = {c["layer"] for c in d["changes"]}
    assert layers == {"postgres", "linux", "build"}
    b = d["memory_budget"]
    assert b["used_bytes"] < b["limit_bytes"]
    hp = next(c for c in d["changes"] if c["name"] == "vm.nr_hugepages")
    assert hp["inputs"]["method"].startswith("postgres -C")     # the real binary was asked


def test_conf_and_sql():
    conf = run("--format", "conf", "--workload", "analytics")
    assert re.search(r"^shared_buffers = '\d+MB'$", conf, re.M)
    assert "jit = 'on'" in conf
    sql = run("--format", "sql")
    assert re.search(r"^ALTER SYSTEM SET work_mem = '\d+MB';$", sql, re.M)
    assert "SELECT pg_reload_conf();" in sql
    assert re.search(r"^-- Restart the server for: .*shared_buffers", sql, re.M)


def test_linux_formats():
    sysctl = run("--format", "sysctl")
    assert re.search(r"^vm\.swappiness = 1$", sysctl, re.M)
    tuned = configparser.ConfigParser()
    tuned.read_string(run("--format", "tuned"))
    assert tuned["main"]["include"] == "throughput-performance"
    script = run("--format", "script")
    assert script.startswith("#!/bin/sh") and "old: vm.swappiness" in script


def test_build_layer_table():
    text = run("--layer", "build")
    assert "build.march" in text and "advice" in text


def test_compare_pgtune():
    text = run("--compare", "pgtune")
    assert "PGTune" in text and "checkpoint_timeout" in text
    d = json.loads(run("--compare", "pgtune", "--format", "json"))
    assert any(r["setting"] == "shared_buffers" for r in d["compare_pgtune"])


def test_overrides_plan_another_machine_without_the_binary():
    d = json.loads(run("--format", "json", "--pg-version", "18", "--memory", "64GB",
                       "--cpus", "16", "--storage", "nvme", "--connections", "300"))
    s = {c["name"]: c for c in d["changes"]}
    assert s["io_method"]["proposed"] == "worker" and "io_workers" in s
    assert s["shared_buffers"]["proposed"] == "16GB"
    assert s["shared_buffers"]["current"] == "128MB"           # PG18's built-in default
    assert any("not validated" in w for w in d["warnings"])


def test_unsupported_version_is_a_clear_error():
    r = subprocess.run([PGACCEL, "tune", "--pg-version", "12"], capture_output=True, text=True)
    assert r.returncode == 2 and "not supported" in r.stderr and "Traceback" not in r.stderr


def test_compare_with_a_text_format_is_refused():
    r = subprocess.run([PGACCEL, "tune", "--compare", "pgtune", "--format", "conf"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "--compare" in (r.stderr + r.stdout)


def test_dsn_reads_that_servers_settings():
    from pgaccel.server.cluster import Cluster
    from pgaccel.server.discovery import choose_server
    with Cluster.create_throwaway(choose_server()) as c:
        c.start({"work_mem": "7MB", "max_connections": "40"})
        res = build_plan(dsn=c.conninfo(), overrides={}, layers=("postgres",))
    assert res.plan.get("work_mem").current == "7MB"
    assert res.inputs.connections == 40                  # from the server's max_connections
    assert res.target.startswith("the server at")
    text = io.StringIO()
    emit_plan(res, "table", None, out=Console(file=text, width=120),
              err=Console(file=io.StringIO()))              # renders without error
    assert "work_mem" in text.getvalue() and "the server at" in text.getvalue()


@pytest.mark.parametrize("fmt", ["table", "sysctl"])
def test_every_format_via_the_installed_command(fmt):
    r = subprocess.run([PGACCEL, "tune", "--format", fmt, "--pg-version", "17"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()


def test_pgdata_reads_that_clusters_settings_without_starting_it():
    from pgaccel.server.cluster import Cluster
    from pgaccel.server.discovery import choose_server
    with Cluster.create_throwaway(choose_server()) as c:
        with open(os.path.join(c.pgdata, "postgresql.conf"), "a") as f:
            f.write("\nwork_mem = '8MB'\nshared_buffers = '256MB'\n")
        res = build_plan(pgdata=c.pgdata, overrides={}, layers=("postgres", "linux"))
        assert not c.is_running()
    assert res.plan.get("work_mem").current == "8MB"
    assert res.plan.get("shared_buffers").current == "256MB"
    assert res.plan.get("vm.nr_hugepages").inputs["method"].startswith("postgres -C")
