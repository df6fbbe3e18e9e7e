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
    "test_sqlshape_pure", "test_recover_pure", "test_tune_workload", "test_verdict_recompute",
})


def _is_slow(item) -> bool:
    return item.get_closest_marker("slow") is not None


def pytest_collection_modifyitems(config, items):
    """Mark the slow tests, then run every quick one first (their order kept): a broken
    rule or report cell is said in the first minute, and the server tests are not started
    at all (see pytest_runtest_protocol)."""
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1]
        if module not in QUICK_MODULES or "cluster" in item.fixturenames:
            item.add_marker(pytest.mark.slow)
    items[:] = [i for i in items if not _is_slow(i)] + [i for i in items if _is_slow(i)]


_QUICK_FAILED: list[str] = []
_MODULE_SECONDS: dict[str, list[float]] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Fail fast: when the last quick test is done and one of them failed, stop before
    the first server test (an hour of them would only bury the failure)."""
    yield
    if (_QUICK_FAILED and not _is_slow(item)
            and nextitem is not None and _is_slow(nextitem)):
        item.session.shouldstop = (
            f"{len(_QUICK_FAILED)} quick test(s) failed, so the server tests were not "
            "started: fix them (pytest -m 'not slow') and run again")


def pytest_runtest_logreport(report):
    per = _MODULE_SECONDS.setdefault(report.nodeid.split("::", 1)[0], [0.0, 0])
    per[0] += report.duration
    if report.when == "call":
        per[1] += 1
    if report.failed and "slow" not in report.keywords:
        _QUICK_FAILED.append(report.nodeid)


def pytest_terminal_summary(terminalreporter):
    """Where the time went, per module (pytest's --durations, in addopts, gives the
    slowest tests): printed on every run that took more than a minute, as CI's is."""
    total = sum(s for s, _ in _MODULE_SECONDS.values())
    if total < 60:
        return
    tr = terminalreporter
    tr.write_sep("=", "seconds per test module (setup, call and teardown; the 25 slowest)")
    for mod, (s, n) in sorted(_MODULE_SECONDS.items(), key=lambda kv: -kv[1][0])[:25]:
        tr.write_line(f"{s:8.1f} s {100 * s / total:5.1f}%  {n:4d} tests  {mod}")
    tr.write_line(f"{total:8.1f} s in all, {len(_MODULE_SECONDS)} modules")
