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
    (fmt.general, (1234567.0,), "1.23e+06"),
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
