"""tune/space.py: the space tune --search explores, sized for the machine, clipped to the real
catalog, narrowed by the user's file, and kept inside the memory budget (values by hand)."""

from __future__ import annotations

import pytest

from pgaccel.errors import UsageError
from pgaccel.pg.catalog import GucCatalog, GucInfo
from pgaccel.tune.inputs import TuneInputs
from pgaccel.tune.rules import memory_budget
from pgaccel.tune.space import GB, MB, Knob, Space, default_space, for_catalog, narrowed


def by_name(knobs):
    return {k.name: k for k in knobs}


def test_default_space_is_sized_for_the_machine_and_the_version():
    k15 = by_name(default_space(16 * GB, 4, 15))
    assert k15["shared_buffers"].low == 128 * MB
    assert k15["shared_buffers"].high == pytest.approx(0.40 * 16 * GB)
    assert k15["effective_cache_size"].high == pytest.approx(0.85 * 16 * GB)
    assert k15["maintenance_work_mem"].high == 2 * GB              # min(2GB, 16GB / 8)
    assert k15["max_wal_size"].high == 32 * GB                     # min(64GB, 2 x 16GB)
    assert k15["max_parallel_workers_per_gather"].high == 4
    assert "io_method" not in k15 and "io_workers" not in k15      # 18 only
    assert "wal_compression" in k15
    assert not set(k15) & {"fsync", "synchronous_commit", "full_page_writes"}
    k14 = by_name(default_space(2 * GB, 2, 14))
    assert "wal_compression" not in k14                            # an enum from 15
    assert k14["maintenance_work_mem"].high == 256 * MB            # 2GB / 8
    assert k14["max_wal_size"].high == 4 * GB
    k18 = by_name(default_space(16 * GB, 4, 18, risk_durability=True))
    assert k18["io_method"].choices == ("sync", "worker", "io_uring")
    assert {"synchronous_commit", "full_page_writes"} <= set(k18)
    assert "fsync" not in k18


@pytest.mark.parametrize("knob,x,value", [
    (Knob("a", "bytes", MB, 8 * GB), 1.5 * GB, "1536MB"),
    (Knob("a", "bytes", MB, 8 * GB), 5.5 * MB + 300, "5632kB"),   # below 8 MB: whole kB
    (Knob("a", "bytes", MB, 8 * GB), 9 * GB, "8GB"),              # clamped to its range
    (Knob("a", "bytes", 128 * MB, 8 * GB), 200 * MB + 0.6 * MB, "201MB"),
    (Knob("t", "ms", 10, 3_600_000), 300_000, "5min"),
    (Knob("t", "ms", 10, 3_600_000), 1500.4, "1500ms"),
    (Knob("t", "ms", 10, 3_600_000), 1_003_600, "1004s"),         # whole seconds from 10 s
    (Knob("t", "ms", 10, 3_600_000), 5, "10ms"),
    (Knob("n", "int", 0, 1000), 99.5, "100"),
    (Knob("r", "real", 0.5, 0.95), 0.8996, "0.9"),
    (Knob("c", "choice", choices=("on", "off")), "off", "off"),
])
def test_a_proposed_number_becomes_a_postgresql_value(knob, x, value):
    assert knob.value(x) == value


def test_bad_knobs_and_values_are_refused():
    with pytest.raises(ValueError, match="not one of on, off"):
        Knob("c", "choice", choices=("on", "off")).value("maybe")
    for bad in (dict(kind="size"), dict(kind="int", low=5, high=1),
                dict(kind="bytes", low=0, high=10, log=True), dict(kind="choice")):
        with pytest.raises(ValueError):
            Knob("k", **bad)


CAT = GucCatalog(gucs={g.name: g for g in [
    GucInfo("shared_buffers", "postmaster", "integer", "8kB", 16, 1073741823),
    GucInfo("bgwriter_delay", "sighup", "integer", "ms", 10, 10000),
    GucInfo("checkpoint_timeout", "sighup", "integer", "s", 30, 86400),
    GucInfo("effective_io_concurrency", "user", "integer", None, 0, 256),
    GucInfo("bgwriter_lru_maxpages", "sighup", "integer", None, 0, 0),
    GucInfo("wal_compression", "superuser", "enum", None, None, None,
            ("pglz", "lz4", "zstd", "on", "off")),
    GucInfo("io_method", "postmaster", "enum", None, None, None, ("sync", "worker")),
    GucInfo("huge_pages", "postmaster", "enum", None, None, None, ("off",)),
]}, source="a test catalog")


def test_the_catalog_keeps_what_the_server_has_within_its_bounds():
    knobs, notes = for_catalog(default_space(16 * GB, 4, 18), CAT)
    k = by_name(knobs)
    assert set(k) == {"shared_buffers", "bgwriter_delay", "checkpoint_timeout",
                      "effective_io_concurrency", "wal_compression", "io_method"}
    assert k["effective_io_concurrency"].high == 256                # the server's maximum
    assert k["effective_io_concurrency"].low == 1                   # log scale: not 0
    assert k["bgwriter_delay"].low == 10 and k["bgwriter_delay"].high == 1000
    assert k["checkpoint_timeout"].high == 60 * 60_000              # ours, tighter
    assert k["wal_compression"].choices == ("off", "pglz", "lz4")
    assert k["io_method"].choices == ("sync", "worker")             # no io_uring in this build
    said = " ".join(notes)
    assert "jit: this server does not have it" in said
    assert "bgwriter_lru_maxpages: the server's bounds leave no room" in said
    assert "huge_pages: this server offers fewer than two" in said


def test_the_users_file_narrows_or_widens_the_space():
    knobs = default_space(16 * GB, 4, 15)
    out = narrowed(knobs, {"only": ["shared_buffers", "jit", "checkpoint_timeout"],
                           "exclude": ["jit"],
                           "knobs": {"shared_buffers": {"low": "1GB", "high": "12GB"},
                                     "checkpoint_timeout": {"high": "2h"}}})
    k = by_name(out)
    assert list(k) == ["shared_buffers", "checkpoint_timeout"]
    assert (k["shared_buffers"].low, k["shared_buffers"].high) == (1 * GB, 12 * GB)
    assert k["checkpoint_timeout"].high == 2 * 3_600_000
    assert by_name(narrowed(knobs, {"knobs": {"jit": {"choices": ["off"]}}}))[
        "jit"].choices == ("off",)


@pytest.mark.parametrize("table,words", [
    ({"only": ["shared_bufers"]}, "unknown knob(s) shared_bufers"),
    ({"knob": {}}, "unknown key(s) knob"),
    ({"knobs": {"work_mem": {"low": "lots"}}}, "[knobs.work_mem]"),
    ({"knobs": {"work_mem": {"low": "1GB", "high": "1MB"}}},
     "[knobs.work_mem]: work_mem: low 1GB above high 1MB."),
    ({"knobs": {"checkpoint_timeout": {"low": "1h", "high": "5min"}}},
     "checkpoint_timeout: low 1h above high 5min."),
    ({"knobs": {"checkpoint_completion_target": {"low": 0.9, "high": 0.5}}},
     "low 0.9 above high 0.5."),
    ({"only": ["synchronous_commit"]},
     "synchronous_commit can lose committed data when off, and the search explores it "
     "only when asked. Pass --allow-unsafe-durability"),
    ({"only": ["fsync", "work_mem"]}, "fsync is never searched: off can corrupt the whole "
     "cluster"),
    ({"only": ["jit"], "exclude": ["jit"]}, "no knob is left"),
])
def test_a_bad_space_file_says_what_to_fix(table, words):
    with pytest.raises(UsageError) as e:
        narrowed(default_space(16 * GB, 4, 15), table, where="space.toml")
    assert str(e.value).startswith("space.toml:") and words in str(e.value)


def test_a_candidate_is_written_as_settings_and_kept_in_the_memory_budget():
    space = Space(tuple(default_space(4 * GB, 2, 15)))
    s = space.settings({"shared_buffers": 1.5 * GB, "work_mem": 256 * MB, "jit": "off"})
    assert s == {"shared_buffers": "1536MB", "work_mem": "256MB", "jit": "off"}
    inputs = TuneInputs(memory_bytes=4 * GB, cpus=2, pg_version=15)

    def fits(x):
        used, limit, _ = memory_budget(x, inputs)
        return used <= limit
    assert not fits(s)          # 100 connections x 256MB x 2 (hash_mem_multiplier)
    fixed, lowered = space.repair(s, fits)
    assert lowered == ["work_mem"] and fits(fixed)
    # halved until it fits: the largest power-of-two fraction of 256MB that does
    wm = int(fixed["work_mem"].removesuffix("MB"))
    assert fits({**s, "work_mem": f"{wm}MB"}) and not fits({**s, "work_mem": f"{wm * 2}MB"})
    with pytest.raises(UsageError, match="No setting of this space fits"):
        space.repair({"shared_buffers": "3GB"}, lambda x: False)


def test_a_durability_knob_is_searched_only_with_the_flag_named_for_the_risk():
    risky = default_space(16 * GB, 4, 15, risk_durability=True)
    got = narrowed(risky, {"only": ["synchronous_commit", "work_mem"]})
    assert [k.name for k in got] == ["synchronous_commit", "work_mem"]
    with pytest.raises(UsageError) as e:                  # fsync: not even with it
        narrowed(risky, {"only": ["fsync"]})
    assert "fsync is never searched" in str(e.value) and "lab variant" in str(e.value)
