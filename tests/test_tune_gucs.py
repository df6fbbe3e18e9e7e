"""Units, value formatting and catalog parsing (pure); the real-binary checks are in
test_tune_real.py."""

from __future__ import annotations

import pytest

from pgaccel.pg.catalog import GucCatalog, GucInfo, check_value, parse_describe_config
from pgaccel.pg.values import pg_duration, pg_size, to_unit
from pgaccel.pg.versions import check_version, default, enum_values, known, needs_restart
from pgaccel.errors import UsageError

# Lines as `postgres --describe-config` (15) prints them: tab-separated, no units.
DESCRIBE = (
    "shared_buffers\tpostmaster\tResource Usage / Memory\tINTEGER\t0\t16\t1073741823\t"
    "Sets the number of shared memory buffers used by the server.\t\n"
    "jit\tuser\tQuery Tuning / Other Planner Options\tBOOLEAN\tFALSE\t\t\tAllow JIT.\t\n"
    "wal_compression\tsuperuser\tWrite-Ahead Log / Settings\tENUM\toff\t\t\tCompresses.\t\n"
    "random_page_cost\tuser\tQuery Tuning\tREAL\t0\t0\t1.79769e+308\tCost.\t\n"
    "garbage line without tabs\n")


@pytest.mark.parametrize("value,unit,expected", [
    ("4GB", "8kB", 524288), ("16MB", "8kB", 2048), ("1920kB", "kB", 1920),
    ("15min", "s", 900), ("100ms", "ms", 100), ("2h", "min", 120), ("12", "8kB", 12),
    ("1.5", None, 1.5), ("512B", "kB", 0.5), ("8TB", "MB", 8 * 1024 * 1024),
])
def test_to_unit(value, unit, expected):
    assert to_unit(value, unit) == pytest.approx(expected)


@pytest.mark.parametrize("value,unit", [("4GB", None), ("4XB", "kB"), ("10min", "kB"),
                                        ("fast", "s")])
def test_to_unit_refuses(value, unit):
    with pytest.raises(ValueError):
        to_unit(value, unit)


@pytest.mark.parametrize("n,text", [(4 * 1024**3, "4GB"), (1536 * 1024**2, "1536MB"),
                                    (1920 * 1024, "1920kB"), (1023, "0kB")])
def test_pg_size(n, text):
    assert pg_size(n) == text


def test_pg_duration():
    assert (pg_duration(900_000), pg_duration(100), pg_duration(3_600_000)) == \
        ("15min", "100ms", "1h")


def test_parse_describe_config():
    cat = parse_describe_config(DESCRIBE, 15)
    assert set(cat.gucs) == {"shared_buffers", "jit", "wal_compression", "random_page_cost"}
    sb = cat.get("shared_buffers")
    assert (sb.context, sb.vartype, sb.unit, sb.min_val, sb.max_val) == \
        ("postmaster", "integer", "8kB", 16, 1073741823)   # unit from the built-in table
    assert cat.get("jit").vartype == "bool" and cat.restart("shared_buffers")
    assert cat.get("wal_compression").enumvals is None     # not in describe-config
    assert check_value("wal_compression", "anything", cat) is None
    assert check_value("shared_buffers", "100kB", cat) is not None


def test_check_value_kinds():
    cat = GucCatalog({
        "huge_pages": GucInfo("huge_pages", "postmaster", "enum", enumvals=("off", "on", "try")),
        "jit": GucInfo("jit", "user", "bool"),
        "bgwriter_delay": GucInfo("bgwriter_delay", "sighup", "integer", "ms", 10, 10000),
    }, 15)
    assert check_value("huge_pages", "TRY", cat) is None
    assert "not one of" in check_value("huge_pages", "always", cat)
    assert check_value("jit", "off", cat) is None and check_value("jit", "2", cat)
    assert check_value("bgwriter_delay", "100ms", cat) is None
    assert "below" in check_value("bgwriter_delay", "5ms", cat)
    assert "above" in check_value("bgwriter_delay", "11s", cat)
    assert "unknown" in check_value("io_method", "worker", cat)


def test_version_table():
    assert check_version(13) == 13
    with pytest.raises(UsageError):
        check_version(19)
    assert known("io_method", 18) and not known("io_method", 17)
    assert not known("checkpoint_segments", 13)
    assert default("hash_mem_multiplier", 14) == "1" and default("hash_mem_multiplier", 15) == "2"
    assert needs_restart("autovacuum_max_workers", 17)
    assert not needs_restart("autovacuum_max_workers", 18)
    assert enum_values("wal_compression", 14) is None
    assert "lz4" in enum_values("wal_compression", 16)
