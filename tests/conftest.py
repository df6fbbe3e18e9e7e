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
