"""Shared fixtures: real PostgreSQL installations and throwaway clusters (no mocks)."""

from __future__ import annotations

import os

import pytest

from pgaccel.server.cluster import Cluster
from pgaccel.server.discovery import choose_server



@pytest.fixture(autouse=True, scope="session")
def _private_store(tmp_path_factory):
    """Keep test runs out of the user's results store and data directory."""
    d = tmp_path_factory.mktemp("pgaccel-data")
    old = {k: os.environ.get(k) for k in ("PGACCEL_STORE", "XDG_DATA_HOME", "XDG_STATE_HOME",
                                          "PGACCEL_STATE_DIR", "PGACCEL_BUILDS")}
    os.environ["PGACCEL_STORE"] = str(d / "results.sqlite")
    os.environ["XDG_DATA_HOME"] = str(d)
    os.environ["XDG_STATE_HOME"] = str(d / "state")
    os.environ["PGACCEL_STATE_DIR"] = str(d / "tune-states")
    # no builds unless a test asks for them (tests/test_build_real.py has its own cache)
    os.environ["PGACCEL_BUILDS"] = str(d / "no-builds")
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def inst():
    return choose_server()


@pytest.fixture(scope="module")
def cluster(inst):
    """A started throwaway cluster shared by a test module."""
    with Cluster.create_throwaway(inst) as c:
        c.start({})
        yield c


# Modules whose tests need no server, benchmark or build: `pytest -m "not slow"` runs them
# in well under a minute, and the mutation run (tools/mutation.sh) uses them. Every other
# module is slow by default, so a new module that starts a server is never in the quick loop
# by mistake; a slow test inside a quick module says so with @pytest.mark.slow.
QUICK_MODULES = frozenset({
    "test_build_pure", "test_build_sources", "test_hostspeed", "test_lab_edges",
    "test_topology", "test_states", "test_layers",
    "test_lab_effect", "test_lab_judge",
    "test_lab_budget", "test_lab_schedule", "test_lab_spec", "test_lab_spec_bounds",
    "test_lab_stats",
    "test_lab_stats_edges", "test_noise_drift", "test_lab_paired_pure", "test_osjournal",
    "test_sysbench_rand", "test_lab_hugepages", "test_pg_values", "test_tune_measured",
    "test_metrics_values", "test_cpucost_pure", "test_report_terminal",
    "test_pg_settings", "test_sequential", "test_perfprof", "test_race",
    "test_osknobs_procfs", "test_tune_space", "test_search_report", "test_search_pure",
    "test_capture_pure", "test_replay_pure", "test_serverlog_pure", "test_cli_missing",
    "test_pg_delta", "test_probe_host", "test_remote_pure", "test_report_format",
    "test_report_view", "test_stack_pure", "test_stats_reference", "test_tune_gucs",
    "test_tune_linux", "test_tune_pgtune", "test_tune_boundaries", "test_tune_fleet",
    "test_tune_pinned", "test_tune_profiles", "test_tune_rules", "test_discovery",
    "test_install_script", "test_ib_sizes", "test_steadiness",
    "test_sqlshape_pure", "test_recover_pure", "test_tune_workload",
})


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1]
        if module not in QUICK_MODULES or "cluster" in item.fixturenames:
            item.add_marker(pytest.mark.slow)
