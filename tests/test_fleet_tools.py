"""`pgaccel tune --format patroni|cloudnativepg|ansible`, checked by the tools that consume them.

- Patroni (from PyPI): pgaccel's table of what Patroni manages equals Patroni's own
  (``ConfigHandler.CMDLINE_OPTIONS``, ``recovery_parameters``), and every parameter of a real
  plan passes Patroni's own per-version validation (``transform_postgresql_parameter_value``).
- CloudNativePG (its Go module, from the Go module proxy): the rendered patch validates against
  the ``Cluster`` CRD's OpenAPI schema, and pgaccel's list of fixed parameters equals the
  operator's ``FixedConfigurationParameters``.
- Ansible (the ``ansible`` package from PyPI, which carries community.postgresql): the
  rendered playbook runs for real against a throwaway cluster; the settings land, the
  restart-level ones wait for a restart and hold after it.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import urllib.request
import zipfile

import pytest
import yaml

from pgaccel.server.binary import describe_config
from pgaccel.server.cluster import SUPERUSER
from pgaccel.tune import fleet

PGACCEL = os.path.join(os.path.dirname(sys.executable), "pgaccel")
CNPG_VERSION = "v1.27.1"
CNPG_ZIP = ("https://proxy.golang.org/github.com/cloudnative-pg/cloudnative-pg/@v/"
            f"{CNPG_VERSION}.zip")
PROFILES = [["--memory", "2GB", "--cpus", "2", "--workload", "oltp"],
            ["--memory", "64GB", "--cpus", "16", "--workload", "analytics",
             "--storage", "hdd"],
            ["--memory", "512MB", "--cpus", "1", "--workload", "web", "--connections", "20"]]


def tune(fmt: str, *args: str, pg_version: int | None = None) -> str:
    cmd = [PGACCEL, "tune", "--format", fmt, *args]
    if pg_version:
        cmd += ["--pg-version", str(pg_version)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    return r.stdout


# -- Patroni -----------------------------------------------------------------------------------

def test_pgaccels_patroni_table_is_patronis_own():
    from patroni.postgresql.config import ConfigHandler
    from patroni.postgresql.validator import recovery_parameters
    from patroni.validator import EnumValidator, IntValidator
    for name, (_default, check, _since) in ConfigHandler.CMDLINE_OPTIONS.items():
        if isinstance(check, IntValidator):
            floor, unit = fleet.PATRONI_FLOORS[name]
            assert floor == (check.min * 1024 * 1024 if check.base_unit == "MB" else check.min)
        elif isinstance(check, EnumValidator):
            assert {v.lower() for v in fleet.PATRONI_ALLOWED[name]} == \
                {v.lower() for v in check.allowed_values}
        elif check("anything") is False and check("on") is False:       # _false_validator
            assert name in fleet.PATRONI_LOCAL, name
        elif check("off") is False:                                      # must be on
            assert "off" not in fleet.PATRONI_ALLOWED[name]
        else:                                                            # any boolean
            assert name not in fleet.PATRONI_ALLOWED and name not in fleet.PATRONI_LOCAL
    assert set(recovery_parameters) <= set(fleet.PATRONI_LOCAL)


@pytest.mark.parametrize("profile", PROFILES, ids=["oltp-2GB", "analytics-64GB", "web-512MB"])
def test_every_patroni_parameter_passes_patronis_validation(profile, inst):
    from patroni.collections import CaseInsensitiveSet
    from patroni.postgresql.config import ConfigHandler
    from patroni.postgresql.validator import transform_postgresql_parameter_value
    major = inst.major
    text = tune("patroni", *profile, "--set", "listen_addresses=*",
                "--set", "max_wal_senders=0", "--set", "wal_level=minimal")
    params = yaml.safe_load(text)["postgresql"]["parameters"]
    assert len(params) >= 15
    assert {"listen_addresses", "max_wal_senders", "wal_level"}.isdisjoint(params)
    assert "# Left out: wal_level: Patroni keeps it at replica or logical" in text
    available = CaseInsensitiveSet(describe_config(inst.path("postgres"), major).gucs)
    for name, value in params.items():
        got = transform_postgresql_parameter_value(major * 10000, name, value, available)
        assert got is not None, f"Patroni drops {name} = {value!r}"
        if name in ConfigHandler.CMDLINE_OPTIONS:
            assert ConfigHandler.CMDLINE_OPTIONS[name][1](value), name


# -- CloudNativePG -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cnpg(tmp_path_factory) -> zipfile.ZipFile:
    cache = os.environ.get("PGACCEL_TEST_BUILDS") or os.path.expanduser("~/.cache/pgaccel-tests")
    path = os.path.join(cache, f"cloudnative-pg-{CNPG_VERSION}.zip")
    if not os.path.exists(path):
        os.makedirs(cache, exist_ok=True)
        with urllib.request.urlopen(CNPG_ZIP, timeout=120) as r:
            data = r.read()
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
    with open(path, "rb") as f:
        return zipfile.ZipFile(io.BytesIO(f.read()))


def _member(z: zipfile.ZipFile, suffix: str) -> str:
    name = next(n for n in z.namelist() if n.endswith(suffix))
    return z.read(name).decode()


def test_pgaccels_fixed_list_is_the_operators(cnpg):
    src = _member(cnpg, "pkg/postgres/configuration.go")
    block = src[src.index("FixedConfigurationParameters = map[string]string{"):]
    block = block[:block.index("\n\t}")]
    operator = dict(re.findall(r'"([a-z_.]+)":\s+(fixed|blocked)ConfigurationParameter', block))
    assert len(operator) > 40
    assert set(operator) == set(fleet.CNPG_FIXED)
    for name, kind in operator.items():
        assert ("operator sets it" in fleet.CNPG_FIXED[name]) == (kind == "fixed"), name


@pytest.mark.parametrize("profile", PROFILES, ids=["oltp-2GB", "analytics-64GB", "web-512MB"])
def test_the_cluster_patch_validates_against_the_crd(profile, cnpg):
    import jsonschema
    crd = yaml.safe_load(_member(cnpg, "config/crd/bases/postgresql.cnpg.io_clusters.yaml"))
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    spec_schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    pg_schema = spec_schema["properties"]["postgresql"]
    doc = yaml.safe_load(tune("cloudnativepg", *profile, "--set",
                              "shared_preload_libraries=pg_stat_statements"))
    assert doc["apiVersion"] == f"{crd['spec']['group']}/v1"
    assert doc["kind"] == crd["spec"]["names"]["kind"]
    jsonschema.validate(doc["spec"]["postgresql"], pg_schema)
    params = doc["spec"]["postgresql"]["parameters"]
    assert "shared_preload_libraries" not in params and len(params) >= 15
    # the schema does refuse what the operator cannot take: a number where a string belongs
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"parameters": {"max_connections": 100}}, pg_schema)


# -- Ansible -----------------------------------------------------------------------------------

def test_the_playbook_applies_the_plan_to_a_real_server(cluster, tmp_path):
    text = tune("ansible", "--memory", "1GB", "--cpus", "2")
    playbook = tmp_path / "pgaccel.yml"
    playbook.write_text(text)
    settings = yaml.safe_load(text)[0]["vars"]["pgaccel_settings"]
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8",
           "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
           "ANSIBLE_HOME": str(tmp_path / "ansible-home"), "ANSIBLE_NOCOLOR": "1"}
    extra = {"pgaccel_hosts": "all", "pgaccel_become": False, "pgaccel_restart": False,
             "pgaccel_login_unix_socket": cluster.sockdir, "pgaccel_login_port": cluster.port,
             "pgaccel_login_user": SUPERUSER, "ansible_python_interpreter": sys.executable}
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
                        "-i", "localhost,", "-c", "local", str(playbook),
                        "-e", yaml.safe_dump(extra, default_flow_style=True)],
                       capture_output=True, text=True, env=env, timeout=600,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert re.search(r"localhost\s*: ok=\d+\s+changed=[1-9]", r.stdout), r.stdout[-1500:]
    with cluster.connect() as c:
        rows = {n: (s, u, p) for n, s, u, p in c.execute(
            "SELECT name, setting, unit, pending_restart FROM pg_settings "
            "WHERE name = ANY(%s)", [list(settings)])}
    assert set(rows) == set(settings)
    pending = {n for n, (_s, _u, p) in rows.items() if p}
    assert "shared_buffers" in pending and "jit" not in pending
    assert rows["jit"][0] == settings["jit"]                 # a reload-level one is live
    cluster.restart({})
    with cluster.connect() as c:
        after = dict(c.execute("SELECT name, current_setting(name) FROM pg_settings "
                               "WHERE name = ANY(%s)", [list(settings)]).fetchall())
        assert not c.execute("SELECT count(*) FROM pg_settings WHERE pending_restart"
                             ).fetchone()[0]
    assert after["shared_buffers"] == settings["shared_buffers"]
    assert after["max_wal_size"] == settings["max_wal_size"]
