"""PostgreSQL values (pgaccel.pg.values): every expected number below was worked out by
hand (or read from a PostgreSQL 15 server), not with the module's formulas; the last test
asks a real server."""

from __future__ import annotations

import pytest

from pgaccel.pg.values import (MINUS_ONE_DERIVED, parse_bool, parse_size, pg_duration,
                               pg_size, same_value, setting_bytes, setting_number, show_form,
                               to_unit, turns_off_durability, unit_scale, unquote)

KiB, MiB, GiB, TiB = 1024, 1024**2, 1024**3, 1024**4


# -- sizes ------------------------------------------------------------------------------

@pytest.mark.parametrize("text, n", [
    ("24GB", 25_769_803_776), ("512MiB", 536_870_912), ("1.5G", 1_610_612_736),
    (1024, 1024), ("100", 100), ("2tb", 2_199_023_255_552), (" 8 kB ", 8192),
    ("64k", 65_536), ("3B", 3),
])
def test_parse_size(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("text", ["12XB", "", "-1GB", "GB", "1.5.2G", "10 min"])
def test_parse_size_refuses(text):
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)


@pytest.mark.parametrize("value, unit, n", [
    ("4GB", "8kB", 4_294_967_296), ("16384", "8kB", 134_217_728),
    ("1920kB", "kB", 1_966_080), ("64", "MB", 67_108_864), ("-1", "8kB", -8192),
    ("1.5kB", "kB", 2048),                  # rounded to a whole kB: 1.5 -> 2
    ("2.5kB", "kB", 2048),                  # half to even, as C's rint: 2.5 -> 2
    ("30.1GB", "kB", 32_319_209_472),       # 30822MB first (the server shows 31561728 kB)
    ("4GB", "kB", 4 * GiB),
    ("16", None, 16),                       # no unit: the number itself, as bytes
    ("16", "B", 16), ("3kB", "B", 3072),
])
def test_setting_bytes(value, unit, n):
    assert setting_bytes(value, unit) == n


def test_setting_bytes_default_unit_is_kb():
    """Most memory parameters (work_mem, maintenance_work_mem, ...) are in kB."""
    assert setting_bytes("4MB") == 4 * MiB and setting_bytes("16") == 16 * KiB


@pytest.mark.parametrize("value, unit, vartype, x", [
    ("1.5kB", "kB", "integer", 2),          # rounded half to even to a whole kB: 1.5 -> 2
    ("2.5kB", "kB", "integer", 2),
    ("1.5kB", "kB", "real", 1.5),           # a real keeps its fraction
    ("1.5kB", "kB", None, 1.5),
])
def test_setting_number(value, unit, vartype, x):
    got = setting_number(value, unit, vartype) if vartype else setting_number(value, unit)
    assert got == x


@pytest.mark.parametrize("value, unit, message", [
    ("4GB", None, "'4GB' has a unit but the parameter takes none"),
    ("10min", "kB", "'10min': unit 'min' is not valid here (valid: B, kB, MB, GB, TB)"),
    ("4gb", "kB", "'4gb': unit 'gb' is not valid here (valid: B, kB, MB, GB, TB)"),
    ("4GB", "s", "'4GB': unit 'GB' is not valid here (valid: us, ms, s, min, h, d)"),
    ("lots", "kB", "'lots' is not a number"),
])
def test_setting_bytes_refuses(value, unit, message):
    """The message names the value and the units the parameter takes (check_value shows it
    to the user)."""
    with pytest.raises(ValueError) as e:
        setting_bytes(value, unit)
    assert str(e.value) == message


@pytest.mark.parametrize("unit, scale", [
    ("8kB", ("memory", 8192)), ("kB", ("memory", 1024)), ("MB", ("memory", MiB)),
    ("B", ("memory", 1)), ("16MB", ("memory", 16 * MiB)), ("8 kB", ("memory", 8192)),
    ("s", ("time", 1000)), ("ms", ("time", 1)), ("min", ("time", 60_000)),
    ("us", ("time", 0.001)), ("10s", ("time", 10_000)),
    ("", None), (None, None), ("8kb", None), ("blocks", None), ("-8kB", None),
])
def test_unit_scale(unit, scale):
    assert unit_scale(unit) == scale


@pytest.mark.parametrize("text, plain", [("'on'", "on"), (" 'UTC' ", "UTC"), ("15min", "15min"),
                                         ("'Xeon'", "Xeon"), (4, "4")])
def test_unquote(text, plain):
    assert unquote(text) == plain


@pytest.mark.parametrize("value, unit, x", [
    ("0.0104s", "ms", 10),          # 10.4 ms rounds to 10 ms first (the server shows 10)
    ("1500us", "ms", 1.5), ("1.0001MB", "kB", 1024), ("0.0015min", "ms", 0),
    ("+4MB", "kB", 4096), ("4 MB", "kB", 4096), ("1e3", "kB", 1000),
    ("2048B", "kB", 2), ("16384B", "8kB", 2),   # bytes: nothing smaller, 2048 / 1024
    ("3000us", "s", 0.003),                     # 3000 x 0.001 ms / 1000 ms
])
def test_to_unit_rounds_like_postgres(value, unit, x):
    assert to_unit(value, unit) == pytest.approx(x)


@pytest.mark.parametrize("n, text", [
    (4 * GiB, "4GB"), (1536 * MiB, "1536MB"), (1920 * KiB, "1920kB"), (TiB, "1TB"),
    (3 * TiB, "3TB"), (1536 * GiB, "1536GB"), (1023, "0kB"), (1025, "1kB"), (0, "0kB"),
])
def test_pg_size(n, text):
    assert pg_size(n) == text


@pytest.mark.parametrize("ms, text", [
    (900_000, "15min"), (3_600_000, "1h"), (86_400_000, "1d"), (100, "100ms"),
    (1500, "1500ms"), (90_000, "90s"), (0, "0ms"),
])
def test_pg_duration(ms, text):
    assert pg_duration(ms) == text


@pytest.mark.parametrize("text", ["4GB", "1536MB", "1920kB", "1TB", "64kB"])
def test_pg_size_round_trip(text):
    assert pg_size(setting_bytes(text, "kB")) == text


@pytest.mark.parametrize("text", ["15min", "1h", "90s", "100ms", "2d"])
def test_pg_duration_round_trip(text):
    assert pg_duration(int(to_unit(text, "ms"))) == text


@pytest.mark.parametrize("raw, unit, shown", [
    ("16384", "8kB", "128MB"), ("512", "8kB", "4MB"), ("3", "8kB", "24kB"),
    ("1024", "MB", "1GB"), ("1048576", "MB", "1TB"), ("65536", "kB", "64MB"),
    ("1920", "kB", "1920kB"), ("100", "B", "100B"), ("2048", "B", "2kB"),
    ("300", "s", "5min"), ("90", "s", "90s"), ("60", "min", "1h"), ("200", "ms", "200ms"),
    ("-1", "8kB", "-1"), ("0", "kB", "0"), ("0", "ms", "0"), ("1.1", None, "1.1"),
    ("100", None, "100"), ("on", None, "on"),
])
def test_show_form(raw, unit, shown):
    assert show_form(raw, unit) == shown


# -- booleans and durability --------------------------------------------------------------

@pytest.mark.parametrize("text", ["t", "tr", "tru", "true", "TRUE", "True", "y", "ye", "yes",
                                  "YES", "on", "ON", "On", "1", True])
def test_parse_bool_true(text):
    assert parse_bool(text) is True


@pytest.mark.parametrize("text", ["f", "fa", "fal", "fals", "false", "FALSE", "n", "no", "NO",
                                  "of", "off", "OFF", "0", False])
def test_parse_bool_false(text):
    assert parse_bool(text) is False


@pytest.mark.parametrize("text", ["o", "O", "", "offf", "onn", " on", "on ", "2", "00", "10",
                                  "truex", "yess", "nope", "ok", "-1", "enabled"])
def test_parse_bool_refuses(text):
    assert parse_bool(text) is None


@pytest.mark.parametrize("name, value", [
    ("fsync", "off"), ("fsync", "'false'"), ("fsync", "fa"), ("fsync", "0"),
    ("full_page_writes", "no"), ("full_page_writes", "f"), ("FSYNC", "OFF"),
    ("synchronous_commit", "off"), ("synchronous_commit", "false"),
    ("synchronous_commit", "no"), ("synchronous_commit", "0"), ("synchronous_commit", "OFF"),
])
def test_turns_off_durability(name, value):
    assert turns_off_durability(name, value)


@pytest.mark.parametrize("name, value", [
    ("fsync", "on"), ("fsync", "o"), ("fsync", "garbage"), ("full_page_writes", "yes"),
    ("synchronous_commit", "local"), ("synchronous_commit", "remote_write"),
    ("synchronous_commit", "on"),
    ("synchronous_commit", "of"),     # an enum takes no prefix: the server refuses 'of'
    ("work_mem", "0"), ("wal_level", "minimal"),
])
def test_keeps_durability(name, value):
    assert not turns_off_durability(name, value)


# -- same_value ---------------------------------------------------------------------------

@pytest.mark.parametrize("intended, raw, unit, vartype, ok", [
    ("1GB", "131072", "8kB", "integer", True),
    ("1024MB", "131072", "8kB", "integer", True),
    ("131072", "131072", "8kB", "integer", True),
    ("1GB", "131071", "8kB", "integer", False),
    ("256MB", "32768", "8kB", "integer", True),
    ("256MB", "16384", "8kB", "integer", False),
    ("64MB", "65536", "kB", "integer", True),
    ("64MB", "65535", "kB", "integer", False),
    ("45MB", "46080", "kB", "integer", True),
    ("15min", "900", "s", "integer", True),
    ("'15min'", "900", "s", "integer", True),
    ("1.5kB", "2", "kB", "integer", True),
    ("2.5kB", "2", "kB", "integer", True),
    ("1.4kB", "1", "kB", "integer", True),
    ("1.5kB", "1", "kB", "integer", False),
    ("30.1GB", "31561728", "kB", "integer", True),
    ("lots", "100", None, "integer", False),
    ("1.1", "1.1", None, "real", True),
    ("1.1234567", "1.12346", None, "real", True),
    ("1.2", "1.1", None, "real", False),
    ("1.1001", "1.1", None, "real", False),
    ("0", "0", None, "real", True),
    ("0.0104s", "10", "ms", "real", True),
    ("1500us", "1.5", "ms", "real", True),
    ("on", "on", None, "bool", True), ("true", "on", None, "bool", True),
    ("tr", "on", None, "bool", True), ("yes", "on", None, "bool", True),
    ("1", "on", None, "bool", True), ("of", "off", None, "bool", True),
    ("off", "on", None, "bool", False), ("o", "on", None, "bool", False),
    ("garbage", "off", None, "bool", False), ("on", None, None, "bool", False),
    ("LZ4", "lz4", None, "enum", True), ("try", "on", None, "enum", False),
    ("no", "off", None, "enum", True), ("false", "off", None, "enum", True),
    ("'UTC'", "UTC", None, "string", True), ("utc", "UTC", None, "string", False),
    ("on", "off", None, "enum", False),       # both on/off words, but different ones
    ("off", "local", None, "enum", False), ("try", "off", None, "enum", False),
])
def test_same_value(intended, raw, unit, vartype, ok):
    assert same_value(intended, raw, unit, vartype) is ok


@pytest.mark.parametrize("intended, raw, unit, name, ok", [
    ("-1", "512", "8kB", "wal_buffers", True),          # the derived size matches -1
    ("-1", "2048", "8kB", "WAL_BUFFERS", True),
    ("-1", "-1", "8kB", "wal_buffers", True),
    ("-1", "0", "8kB", "wal_buffers", False),
    ("-1", "10", None, "io_max_concurrency", True),
    ("-1", "1", None, "io_max_concurrency", True),     # 1 is a derived value too (> 0)
    ("-1", "512", "8kB", None, False),                  # no name: -1 is only -1
    ("-1", "64", "kB", "autovacuum_work_mem", False),   # not derived: shows -1 when -1
    ("-1", "-1", "kB", "autovacuum_work_mem", True),
    ("64MB", "-1", "kB", "autovacuum_work_mem", False),
    ("4MB", "-1", "8kB", "wal_buffers", False),
    ("4MB", "512", "8kB", "wal_buffers", True),
])
def test_same_value_minus_one(intended, raw, unit, name, ok):
    assert same_value(intended, raw, unit, "integer", name) is ok


def test_minus_one_set():
    assert {"wal_buffers", "io_max_concurrency"} == MINUS_ONE_DERIVED


# -- against a real PostgreSQL --------------------------------------------------------------

@pytest.mark.slow
def test_same_value_agrees_with_a_real_server(cluster):
    """wal_buffers = -1 shows a derived size, autovacuum_work_mem = -1 keeps showing -1,
    and values the server rounds read back as what same_value expects."""
    cluster.restart({"wal_buffers": "-1", "autovacuum_work_mem": "-1"})
    sql = "SELECT setting, unit, vartype FROM pg_settings WHERE name = %s"
    with cluster.connect() as conn:
        conn.autocommit = True
        wb, wb_unit, wb_type = conn.execute(sql, ("wal_buffers",)).fetchone()
        av, av_unit, av_type = conn.execute(sql, ("autovacuum_work_mem",)).fetchone()
        assert int(wb) > 0 and av == "-1"
        assert same_value("-1", wb, wb_unit, wb_type, "wal_buffers")
        assert not same_value("-1", wb, wb_unit, wb_type)
        assert same_value("-1", av, av_unit, av_type, "autovacuum_work_mem")
        assert not same_value("64MB", av, av_unit, av_type, "autovacuum_work_mem")
        for name, value in [("work_mem", "30.1GB"), ("work_mem", "1000.5"),
                            ("work_mem", "1001.5"), ("work_mem", "1.0001MB"),
                            ("statement_timeout", "2.5"), ("statement_timeout", "0.0015min"),
                            ("vacuum_cost_delay", "0.0104s"), ("vacuum_cost_delay", "1500us"),
                            ("random_page_cost", "1.1234567"), ("enable_seqscan", "fa"),
                            ("enable_seqscan", "YE"), ("synchronous_commit", "no"),
                            ("jit", "of")]:
            conn.execute(f"SET {name} = '{value}'")
            row = conn.execute(sql, (name,)).fetchone()
            assert same_value(value, *row, name), (name, value, row)
        conn.execute("SET work_mem = '4MB'")
        assert not same_value("5MB", *conn.execute(sql, ("work_mem",)).fetchone())
