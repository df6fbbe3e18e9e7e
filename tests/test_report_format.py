"""The one number formatter every renderer uses (report/format.py), table-tested."""

from __future__ import annotations

import pytest

from pgaccel.report import format as fmt

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("func,args,expected", [
    (fmt.pct_change, (1.07,), "+7.0%"),
    (fmt.pct_change, (0.969,), "-3.1%"),
    (fmt.pct_change, (1.0,), "+0.0%"),
    (fmt.pct_change, (2.5,), "+150.0%"),
    (fmt.pct_change, (None,), "–"),
    (fmt.pct_change, (NAN,), "–"),
    (fmt.pct_change, (INF,), "–"),
    (fmt.interval, (0.969, 1.042), "-3.1% … +4.2%"),
    (fmt.interval, (NAN, 1.042), "–"),
    (fmt.interval, (0.9, None), "–"),
    (fmt.ratio_ci, (1.07, 0.969, 1.042), "+7.0% (-3.1% … +4.2%)"),
    (fmt.ratio_ci, (1.07, NAN, NAN), "+7.0%"),
    (fmt.ratio_ci, (NAN, NAN, NAN), "–"),
    (fmt.percent, (0.042,), "4.2%"),
    (fmt.percent, (0.042, 0), "4%"),
    (fmt.cv, (0.0123,), "1.2%"),
    (fmt.cv, (None,), "–"),
    (fmt.cv, (NAN,), "–"),
    (fmt.share, (0.456,), "46%"),
    (fmt.share, (None,), "–"),
    (fmt.number, (12345.6,), "12,346"),
    (fmt.number, (12345.66, 1), "12,345.7"),
    (fmt.number, (0,), "0"),
    (fmt.number, (7,), "7"),
    (fmt.number, (None,), "–"),
    (fmt.number, ("n/a",), "–"),
    (fmt.ms, (1.2549,), "1.25"),
    (fmt.ms, (NAN,), "–"),
    (fmt.us, (84.25,), "84.2"),
    (fmt.kb, (0.254,), "0.25"),
    (fmt.nbytes, (1234.4,), "1,234"),
    (fmt.size, (1536 * 2**20,), "1.5 GB"),
    (fmt.size, (512,), "512 B"),
    (fmt.size, (None,), "–"),
    (fmt.ratio, (0.9666,), "0.97"),
    (fmt.ratio, (None,), "–"),
    (fmt.level, (0.95,), "95%"),
    (fmt.level, (0.9,), "90%"),
    (fmt.level, (0.99,), "99%"),
    (fmt.level, (0.975,), "97.5%"),
    (fmt.level, (None,), "95%"),
    (fmt.general, (0.000123456,), "0.000123"),
    # a step workload's summary printed "throughput: l.i0=4.86e+04" (issue 41)
    (fmt.general, (1234567.0,), "1,234,567"),
    (fmt.general, (48612.3,), "48,612"),
    (fmt.general, (999.6,), "1,000"),
    (fmt.general, (999.4,), "999"),
    # and a cost of almost nothing read "3.9e-05" in an rQPS table
    (fmt.general, (3.9e-05,), "0.000039"),
    (fmt.general, (1.234e-05,), "0.0000123"),
    (fmt.general, (-2e-06,), "-0.000002"),
    (fmt.general, (3,), "3"),
    (fmt.general, ("on",), "on"),
])
def test_formats(func, args, expected):
    assert func(*args) == expected


@pytest.mark.parametrize("x,ok", [(1, True), (0.0, True), (-2.5, True), (None, False),
                                  (NAN, False), (INF, False), (True, False), ("1", True),
                                  ("x", False), ([1], False)])
def test_known(x, ok):
    assert fmt.known(x) is ok


@pytest.mark.parametrize("func,args,expected", [
    (fmt.pct_change, (1.0736, 0), "+7%"),
    (fmt.pct_change, (0.96234, 2), "-3.77%"),
    (fmt.pct_change, (0.5,), "-50.0%"),
    (fmt.pct_change, ("1.25",), "+25.0%"),
    (fmt.interval, (1.042, 0.969), "+4.2% … -3.1%"),   # as given: the caller orders them
    (fmt.ratio_ci, (0.95, 0.9, None), "-5.0%"),
    (fmt.ratio_ci, (0.95, None, 1.01), "-5.0%"),
    (fmt.percent, (-0.125,), "-12.5%"),
    (fmt.percent, (1.5, 2), "150.00%"),
    (fmt.share, (1.0,), "100%"),
    (fmt.number, (-1234.5, 2), "-1,234.50"),
    (fmt.number, (float("inf"),), "–"),
    (fmt.ms, (0.005,), "0.01"),
    (fmt.ms, (None,), "–"),
    (fmt.us, (None,), "–"),
    (fmt.us, (1234.56,), "1234.6"),
    (fmt.kb, (None,), "–"),
    (fmt.kb, (12.345,), "12.35"),
    (fmt.nbytes, (None,), "–"),
    (fmt.size, (NAN,), "–"),
    (fmt.size, ("2048",), "2.0 kB"),
    (fmt.ratio, (1.23456, 3), "1.235"),
    (fmt.ratio, (NAN,), "–"),
    (fmt.level, (1.0,), "100%"),
    (fmt.level, (0.5,), "50%"),
    (fmt.level, (0.999,), "99.9%"),
    (fmt.level, (0.99972,), "99.97%"),             # not rounded up to 100%
    (fmt.level, (0.999996,), "99.9996%"),
    (fmt.level, (NAN,), "95%"),
    (fmt.general, (2.0,), "2"),
    (fmt.general, (None,), "None"),
])
def test_formats_digits_signs_and_missing_values(func, args, expected):
    assert func(*args) == expected


@pytest.mark.parametrize("unit,label", [
    ("tps", "transactions per second (tps)"), ("qps", "queries per second (qps)"),
    ("queries/s", "queries per second (queries/s)"),
    ("inserts/s", "rows inserted per second (inserts/s)"), ("rows/s", "rows/s"), ("", ""),
])
def test_unit_labels(unit, label):
    assert fmt.unit_label(unit) == label


def test_each_registered_cost_prints_in_its_own_format():
    """metrics/registry.py names a format per cost; fmt.cost prints it that way, and a
    missing value is the dash whatever the format."""
    from pgaccel.metrics.registry import BY_KEY, COSTS
    assert fmt.cost(BY_KEY["server_cpu_us_per_op"], 84.23) == "84.2"
    assert fmt.cost(BY_KEY["client_cpu_share"], 0.456) == "46%"
    assert fmt.cost(BY_KEY["ctx_switches_per_op"], 12.34) == "12.3"
    assert fmt.cost(BY_KEY["wal_bytes_per_op"], 1234.4) == "1,234"
    assert fmt.cost(BY_KEY["read_kb_per_op"], 0.25) == "0.25"
    assert {fmt.cost(c, None) for c in COSTS} == {fmt.DASH}
    assert [c.field for c in COSTS if c.in_rows] == [
        "server_us", "client_us", "client_share", "ctx", "read_kb", "write_kb", "wal_b"]


@pytest.mark.parametrize("key,title", [
    ("2", "insert-benchmark, 2 clients"),
    ("1", "insert-benchmark, 1 client"),
    ("1 (trial 2)", "insert-benchmark, 1 client, trial 2"),     # was "1 (trial 2) clients"
    ("16 (trial 10)", "insert-benchmark, 16 clients, trial 10"),
])
def test_a_step_tables_title_names_clients_and_trial(key, title):
    from pgaccel.cli.bench import step_table_title
    assert step_table_title("insert-benchmark", key) == title
