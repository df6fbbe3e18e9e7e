"""tune --search's decisions that need no server (session/search.py, search_confirm.py): the
space on this machine with and without --huge-pages, the pool it reserves, and the configs
of the confirmation run.  (Values by hand; the search on real servers is test_search.py's.)"""

from __future__ import annotations

import pytest

from pgaccel.pg.catalog import GucCatalog, GucInfo
from pgaccel.probe.facts import Cgroup, HostFacts
from pgaccel.session.request import ServerRequest
from pgaccel.session.search import SearchRequest
from pgaccel.session.search_space import build_space, pool_pages
from pgaccel.session.search_confirm import confirmation_request, found_uses_pool
from pgaccel.tune.hugepages import estimate_pages

GB = 1024 ** 3
MB = 1024 ** 2

CAT = GucCatalog(gucs={g.name: g for g in [
    GucInfo("shared_buffers", "postmaster", "integer", "8kB", 16, 1073741823),
    GucInfo("wal_buffers", "postmaster", "integer", "8kB", -1, 262143),
    GucInfo("work_mem", "user", "integer", "kB", 64, 2147483647),
    GucInfo("huge_pages", "postmaster", "enum", None, None, None, ("off", "on", "try")),
]}, source="a test catalog")


def _facts(mem_gb=24, cpus=2):
    return HostFacts(arch="x86_64", kernel="6.1.0", logical_cpus=cpus,
                     memory_total_bytes=mem_gb * GB, memory_available_bytes=mem_gb * GB,
                     cgroup=Cgroup(version=2))


def _req(**kw):
    return SearchRequest(ServerRequest(), **kw)


def test_huge_pages_is_try_or_off_without_a_pool_and_on_or_off_with_one():
    plain, _ = build_space(_facts(), CAT, 15, _req())
    pool, _ = build_space(_facts(), CAT, 15, _req(huge_pages=True))
    assert {k.name: k for k in plain.knobs}["huge_pages"].choices == ("try", "off")
    assert {k.name: k for k in pool.knobs}["huge_pages"].choices == ("on", "off")


def test_shared_buffers_is_capped_so_two_servers_fit():
    space, _ = build_space(_facts(24), CAT, 15, _req())
    sb = {k.name: k for k in space.knobs}["shared_buffers"]
    assert sb.high == pytest.approx(0.25 * 24 * GB)       # not the 40% of one server


def test_the_pool_covers_two_servers_at_the_spaces_largest_shared_memory():
    space, _ = build_space(_facts(24), CAT, 15, _req(huge_pages=True))
    base = {"shared_buffers": "1GB", "wal_buffers": "16MB", "max_connections": "100"}
    got = pool_pages(space, base, 15, 2048)
    # shared_buffers at 6 GB (a quarter of 24), wal_buffers at its 128 MB ceiling
    one = estimate_pages({**base, "shared_buffers": "6144MB", "wal_buffers": "128MB"}, 15,
                         2 * MB)
    assert got == 2 * one
    assert 2 * 3072 < got < 2 * 3400              # 6 GB in 2 MB pages, plus 2% and WAL
    assert pool_pages(space, base, 15, 2048, servers=1) == one


def _journal(found):
    inc = {"number": 7 if found else None, "log_effect": 0.03,
           "settings": {"shared_buffers": "2GB", **found} if found else None}
    return {"id": "20261126-000000-abcd", "rules": {"shared_buffers": "2GB",
                                                    "huge_pages": "try"},
            "incumbent": inc}


@pytest.mark.parametrize("found, pooled, configs", [
    ({}, False, ["baseline", "pgtune", "tuned"]),
    ({"huge_pages": "off", "work_mem": "8MB"}, False, ["baseline", "pgtune", "tuned", "found"]),
    ({"huge_pages": "on"}, True, ["baseline", "pgtune", "tuned", "found"]),
])
def test_the_confirmation_measures_what_was_found_and_a_pool_only_for_it(found, pooled,
                                                                        configs):
    j = _journal(found)
    assert found_uses_pool(j) is pooled
    req = confirmation_request(j, _req(workloads=("tpcb-like", "select-only")), 600)
    assert [c.name for c in req.configs] == configs
    assert [w.workload.name for w in req.workloads] == ["tpcb-like", "select-only"]
    others = [c.settings.get("huge_pages") for c in req.configs if c.name != "found"]
    assert others == (["off"] * 3 if pooled else [None] * 3)
    assert req.protocol.side_by_side and req.protocol.until_decided
    assert req.protocol.budget_s == 600


@pytest.mark.parametrize("found, left, budget", [
    ({}, 0.0, 240.0),                   # 3 configs of tpcb-like: 168 s, 240 with the margin
    ({"work_mem": "8MB"}, 0.0, 300.0),   # 4 configs: 224 s; 4 minutes would cut it short
    ({"work_mem": "8MB"}, 900.0, 900.0),
])
def test_the_confirmation_has_at_least_what_its_minimum_rounds_need(found, left, budget):
    """A search that spent its share still gets a confirmation whose 3 rounds fit
    (session/budget.py), not 4 minutes that cut them short."""
    req = confirmation_request(_journal(found), _req(), left)
    assert req.protocol.budget_s == budget
