"""Huge pages of any size the kernel offers in lab variants: the page size from
huge_page_size, the reservation in that size's pool (a constructed sysfs tree through the
same OsState code, and this machine's real 1 GB pool), and a size the kernel lacks refused
by `lab --check` before any server starts."""

from __future__ import annotations

import os

import pytest

from pgaccel.osknobs.hugepages import nr_key, page_kb, size_label
from pgaccel.osknobs.state import OsState
from pgaccel.tune.hugepages import margin

from helpers import pgaccel

GB_KB = 1024 * 1024
GB_POOL = f"/sys/kernel/mm/hugepages/hugepages-{GB_KB}kB"


@pytest.mark.parametrize("value, kb", [(None, 2048), ("0", 2048), ("2MB", 2048),
                                       ("1GB", GB_KB), ("1048576kB", GB_KB), ("2048", 2048)])
def test_page_size_from_huge_page_size(value, kb):
    settings = {} if value is None else {"huge_page_size": value}
    assert page_kb(settings, 2048) == kb


def test_keys_labels_and_margins_by_page_size():
    assert nr_key(2048, 2048) == "nr_hugepages" and nr_key(GB_KB, 2048) == "nr_hugepages@1048576"
    assert size_label(GB_KB) == "1 GB" and size_label(2048) == "2 MB"
    assert margin(10) == 4 and margin(1000) == 20                  # 2 MB pages: 8 MB, or 2%
    assert margin(1, 1024 ** 3) == 1 and margin(100, 1024 ** 3) == 2   # 1 GB pages


def test_a_non_default_pool_through_a_constructed_sysfs_tree(tmp_path):
    sizes = tmp_path / "hugepages"
    pool = sizes / f"hugepages-{GB_KB}kB"
    pool.mkdir(parents=True)
    (pool / "nr_hugepages").write_text("0\n")
    (pool / "free_hugepages").write_text("0\n")
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("HugePages_Total:       0\nHugePages_Free:        0\n"
                       "Hugepagesize:       2048 kB\n")
    default = tmp_path / "nr_default"
    default.write_text("0\n")
    st = OsState(str(default), str(tmp_path / "thp"), str(sizes), str(meminfo))
    assert st.default_kb() == 2048 and st.offers(GB_KB) and not st.offers(16 * GB_KB)
    key = nr_key(GB_KB, st.default_kb())
    assert st.ensure({key: 2}) == []
    assert (pool / "nr_hugepages").read_text().strip() == "2"
    assert default.read_text().strip() == "0"                 # the 2 MB pool untouched
    assert st.top_up(2, GB_KB) == ["only 0 huge pages of 1 GB are free, 2 needed (the kernel "
                                   "could not find that much contiguous free memory)"]
    (pool / "free_hugepages").write_text("2\n")
    assert st.top_up(2, GB_KB) == []
    st.restore()
    assert (pool / "nr_hugepages").read_text().strip() == "0"


SPEC = """name = "hp"
base = "4k"
[run]
rounds = 2
duration = 3
warmup = 1
[[variant]]
name = "4k"
settings = {{ shared_buffers = "256MB", huge_pages = "off" }}
[[variant]]
name = "big"
base = "4k"
settings = {{ huge_pages = "on", huge_page_size = "{size}" }}
os = {{ nr_hugepages = "auto" }}
[[workload]]
name = "select-only"
clients = 1
scale = 1
"""


def _pools() -> dict[str, str]:
    d = "/sys/kernel/mm/hugepages"
    return {n: open(os.path.join(d, n, "nr_hugepages")).read() for n in os.listdir(d)}


@pytest.mark.slow     # starts a server
@pytest.mark.skipif(os.geteuid() != 0, reason="reserving huge pages needs root")
def test_a_page_size_the_kernel_lacks_is_refused_at_check(tmp_path):
    spec = tmp_path / "hp.toml"
    spec.write_text(SPEC.format(size="16GB"))
    before = _pools()
    r = pgaccel("lab", "--check", str(spec), timeout=300)
    assert r.returncode == 4, r.stderr
    assert "no 16 GB huge pages" in r.stderr and "Traceback" not in r.stderr
    assert "OK" not in r.stderr
    assert _pools() == before


@pytest.mark.slow     # starts a server
@pytest.mark.skipif(os.geteuid() != 0 or not os.path.isdir(GB_POOL),
                    reason="needs root and a kernel with 1 GB huge pages")
def test_1gb_pages_reserved_used_and_put_back(tmp_path):
    spec = tmp_path / "hp.toml"
    spec.write_text(SPEC.format(size="1GB"))
    before = _pools()
    r = pgaccel("lab", "--check", "--json", str(spec), timeout=300)
    if r.returncode != 0 and "contiguous" in r.stderr:
        pytest.skip("the kernel could not find a free 1 GB block")
    assert r.returncode == 0, r.stderr
    import json
    v = json.loads(r.stdout)["variants"]["big"]["verified"]
    assert v["ok"] and v["hugetlb_kb"] >= GB_KB, v        # shared memory on a 1 GB page
    assert json.loads(r.stdout)["variants"]["4k"]["verified"]["hugetlb_kb"] == 0
    assert _pools() == before                                # reservation put back


THP = "/sys/kernel/mm/transparent_hugepage/enabled"


def _thp() -> str:
    return open(THP).read().split("[")[1].split("]")[0]


@pytest.mark.slow     # starts a server
@pytest.mark.skipif(os.geteuid() != 0, reason="changing huge pages and THP needs root")
def test_kill_9_after_the_os_changed_then_the_next_start_puts_it_back(tmp_path):
    spec = tmp_path / "hp.toml"
    other = "never" if _thp() != "never" else "madvise"
    spec.write_text(SPEC.format(size="2MB").replace(
        'os = { nr_hugepages = "auto" }', f'os = {{ nr_hugepages = "auto", thp = "{other}" }}'))
    before, thp_before = _pools(), _thp()
    journal = tmp_path / "journal"
    env = {"PGACCEL_OS_JOURNAL_DIR": str(journal)}
    r = pgaccel("lab", "--check", str(spec), timeout=300,
                env={**env, "PGACCEL_TEST_KILL_AT": "lab-os-changed"})
    assert r.returncode == -9, (r.returncode, r.stderr)
    try:
        assert _thp() == other and _pools() != before      # the kill left them changed
        assert len(list(journal.glob("os-journal-*.json"))) == 1
        r = pgaccel("workloads", env=env)
        assert r.returncode == 0, r.stderr
        assert "Restored OS values left by pgaccel process" in r.stderr
        assert _thp() == thp_before and _pools() == before
        assert list(journal.glob("os-journal-*.json")) == []
    finally:                                                 # never leave the host changed
        from pgaccel.osknobs.journal import recover
        recover(str(journal))


def test_sysfs_values_set_and_put_back_through_a_constructed_tree(tmp_path):
    """A device queue's scheduler (a bracketed sysfs list) and read-ahead, set and restored
    by the same OsState code, journaled before the first write."""
    q = tmp_path / "sys/block/vda/queue"
    q.mkdir(parents=True)
    (q / "scheduler").write_text("none [mq-deadline] kyber bfq\n")
    (q / "read_ahead_kb").write_text("8192\n")
    from pgaccel.osknobs.journal import OsJournal
    from pgaccel.osknobs.state import SYSFS
    journal = OsJournal(str(tmp_path / "journal"))
    st = OsState(str(tmp_path / "nr"), str(tmp_path / "thp"), str(tmp_path / "sizes"),
                 str(tmp_path / "meminfo"), journal=journal, root=str(tmp_path))
    sched, ra = SYSFS + "sys/block/vda/queue/scheduler", SYSFS + "sys/block/vda/queue/read_ahead_kb"
    assert st.read(sched) == "mq-deadline" and st.read(ra) == 8192
    assert st.differs({sched: "none", ra: 128})
    assert st.ensure({sched: "none", ra: 128}) == []
    assert (q / "scheduler").read_text() == "none\n" and st.read(ra) == 128
    assert len(list((tmp_path / "journal").glob("*.json"))) == 1   # journaled first
    assert not st.differs({sched: "none", ra: 128})
    st.restore()
    assert st.read(sched) == "mq-deadline" and st.read(ra) == 8192
    assert list((tmp_path / "journal").glob("*.json")) == []


@pytest.mark.parametrize("path, ok", [
    ("sys/block/vda/queue/scheduler", True), ("sys/block/nvme0n1/queue/read_ahead_kb", True),
    ("sys/kernel/debug/sched/migration_cost_ns", True), ("/sys/block/vda/queue/scheduler", False),
    ("sys/block/../../etc/passwd", False), ("sys/kernel/mm/transparent_hugepage/enabled", False)])
def test_which_sysfs_paths_a_variant_may_set(tmp_path, path, ok):
    from pgaccel.specs.parse import parse_spec
    from pgaccel.specs.tomlpos import SpecError
    text = (f'name = "s"\n[[variant]]\nname = "a"\n[[variant]]\nname = "b"\n'
            f'os = {{ sysfs = {{ "{path}" = "none" }} }}\n[[workload]]\nname = "select-only"\n')
    if ok:
        v = parse_spec(text, "s.toml", "small").variants[1]
        assert v.os.sysfs == {path: "none"}
    else:
        with pytest.raises(SpecError, match="is not a path a lab variant may set"):
            parse_spec(text, "s.toml", "small")


def test_pages_a_running_server_reserved_are_not_counted_free(tmp_path):
    """A server that mapped its shared memory on huge pages and has not touched it all holds
    them as reserved (HugePages_Rsvd / resv_hugepages): another variant's top-up side by side
    must not count them free, or its server fails to start."""
    sizes = tmp_path / "hugepages"
    pool = sizes / f"hugepages-{GB_KB}kB"
    pool.mkdir(parents=True)
    for name, v in (("nr_hugepages", 4), ("free_hugepages", 4), ("resv_hugepages", 3)):
        (pool / name).write_text(f"{v}\n")
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("HugePages_Total:     600\nHugePages_Free:      600\n"
                       "HugePages_Rsvd:      548\nHugePages_Surp:        0\n"
                       "Hugepagesize:       2048 kB\n")
    default = tmp_path / "nr_default"
    default.write_text("600\n")
    st = OsState(str(default), str(tmp_path / "thp"), str(sizes), str(meminfo))
    st.top_up(548)                      # 52 free, not 600: the pool grows by 496
    assert default.read_text().strip() == "1096"
    st.top_up(2, GB_KB)                 # 1 free, not 4
    assert (pool / "nr_hugepages").read_text().strip() == "5"
    st.restore()
    assert default.read_text().strip() == "600"
