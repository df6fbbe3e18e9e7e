"""How every renderer writes numbers and units: terminal tables, Markdown, HTML, charts and
the commands' own tables.  One function per kind of number, each returning ``"–"`` for a
value that is missing (None) or not finite (NaN, inf), so a table never shows "nan".

========================  ====================  ============================
function                  input                 example
========================  ====================  ============================
:func:`pct_change`        a ratio               1.07 -> ``+7.0%``
:func:`interval`          two ratios            ``-3.1% … +4.2%``
:func:`ratio_ci`          ratio and interval    ``+7.0% (-3.1% … +4.2%)``
:func:`percent`           a fraction            0.042 -> ``4.2%``
:func:`cv`                a CV                  0.042 -> ``4.2%``
:func:`share`             a fraction            0.45 -> ``45%``
:func:`number`            a count or rate       12345.6 -> ``12,346``
:func:`count`             a count per op        12.34 -> ``12.3``
:func:`ms`                milliseconds          ``1.25``
:func:`us`                microseconds          ``84.2``
:func:`kb`                kilobytes             ``0.25``
:func:`nbytes`            bytes per operation   ``1,234``
:func:`size`              bytes                 ``1.5 GB``
:func:`ratio`             a ratio as is         ``0.97``
:func:`level`             a confidence          0.9 -> ``90%``
:func:`general`           anything              0.000123 -> ``0.000123``
:func:`short`             a plain number        2.0 -> ``2``, 0.5 -> ``0.5``
:func:`pvalue`            a p-value             0.01234 -> ``0.012``
:func:`seconds`           seconds               42.4 -> ``42 s``
:func:`minutes`           seconds as minutes    300 -> ``5 min``
:func:`duration`          seconds, either       42 -> ``42 s``, 300 -> ``5 minutes``
:func:`cost`              a registered cost     by its ``format`` (metrics/registry.py)
========================  ====================  ============================
"""

from __future__ import annotations

import math
from typing import Any

from ..util import format_bytes

DASH = "–"


def known(x: Any) -> bool:
    """True for a number that can be shown (not None, not NaN or infinite)."""
    if x is None or isinstance(x, bool):
        return False
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def pct_change(r: Any, digits: int = 1) -> str:
    """A ratio as a signed percentage change: 1.07 -> ``+7.0%``, 0.969 -> ``-3.1%``."""
    return f"{(float(r) - 1) * 100:+.{digits}f}%" if known(r) else DASH


def interval(lo: Any, hi: Any) -> str:
    """An interval of ratios as changes: ``-3.1% … +4.2%``; ``–`` when unknown."""
    return f"{pct_change(lo)} … {pct_change(hi)}" if known(lo) and known(hi) else DASH


def ratio_ci(r: Any, lo: Any, hi: Any) -> str:
    """A ratio with its interval, ``+7.0% (-3.1% … +4.2%)``; the interval is left out when
    it is unknown (fewer than two trials a side)."""
    if known(lo) and known(hi):
        return f"{pct_change(r)} ({interval(lo, hi)})"
    return pct_change(r)


def percent(x: Any, digits: int = 1) -> str:
    """A fraction as a percentage: 0.042 -> ``4.2%``."""
    return f"{float(x) * 100:.{digits}f}%" if known(x) else DASH


def cv(x: Any) -> str:
    """A coefficient of variation (stdev / mean): 0.042 -> ``4.2%``."""
    return percent(x, 1)


def share(x: Any) -> str:
    """A share of a whole, whole percents: 0.45 -> ``45%``."""
    return percent(x, 0)


def number(x: Any, digits: int = 0) -> str:
    """A count or a rate (throughput) with thousands separators: ``12,346``."""
    return f"{float(x):,.{digits}f}" if known(x) else DASH


def count(x: Any) -> str:
    """A count per operation (context switches): one decimal, ``12.3``."""
    return number(x, 1)


def ms(x: Any) -> str:
    """Milliseconds (latency): ``1.25``."""
    return f"{float(x):.2f}" if known(x) else DASH


def us(x: Any) -> str:
    """Microseconds (CPU per operation): ``84.2``."""
    return f"{float(x):.1f}" if known(x) else DASH


def kb(x: Any) -> str:
    """Kilobytes (I/O per operation): ``0.25``."""
    return f"{float(x):.2f}" if known(x) else DASH


def nbytes(x: Any) -> str:
    """Bytes (WAL per operation): ``1,234``."""
    return number(x, 0)


def size(n: Any) -> str:
    """A size in bytes with its unit: ``1.5 GB``."""
    return format_bytes(float(n)) if known(n) else DASH


def ratio(x: Any, digits: int = 2) -> str:
    """A ratio as it is (rQPS): ``0.97``."""
    return f"{float(x):.{digits}f}" if known(x) else DASH


def level(confidence: Any) -> str:
    """A confidence level: 0.9 -> ``90%``, 0.99972 -> ``99.97%`` (never ``100%`` for a level
    below it; ``95%`` when unknown, the default level)."""
    c = float(confidence) if known(confidence) else 0.95
    digits = 1                     # more where one would round a level below 100% up to it
    while c < 1 and round(c * 100, digits) >= 100 and digits < 6:
        digits += 1
    text = f"{c * 100:.{digits}f}".rstrip("0").rstrip(".")
    return f"{text}%"


def general(v: Any) -> str:
    """Any value a workload reports: floats with 3 significant digits below 1,000 and whole
    with thousands separators from there (``48,600``, never ``4.86e+04``; ``0.000039``,
    never ``3.9e-05``), others as text."""
    if isinstance(v, float):
        if math.isfinite(v) and abs(v) >= 999.5:       # what .3g would write as 1e+03
            return f"{v:,.0f}"
        if math.isfinite(v) and 0 < abs(v) < 1e-4:     # what .3g would write as 1e-05
            return f"{v:.{2 - math.floor(math.log10(abs(v)))}f}".rstrip("0")
        return f"{v:.3g}"
    return str(v)


def short(x: Any) -> str:
    """A plain number in its shortest form (CPU counts, seconds of a setting): ``2``,
    ``0.5``."""
    return f"{float(x):g}" if known(x) else DASH


def pvalue(p: Any) -> str:
    """A p-value with two significant digits: ``0.012``."""
    return f"{float(p):.2g}" if known(p) else DASH


def seconds(x: Any, digits: int = 0) -> str:
    """Seconds with their unit: ``42 s``."""
    return f"{float(x):.{digits}f} s" if known(x) else DASH


def minutes(secs: Any, digits: int = 0) -> str:
    """Seconds shown in minutes with their unit: 300 -> ``5 min``."""
    return f"{float(secs) / 60:.{digits}f} min" if known(secs) else DASH


def duration(secs: Any) -> str:
    """A duration a person reads: seconds below 90 s, whole minutes above (``42 s``,
    ``5 minutes``)."""
    if not known(secs):
        return DASH
    return seconds(secs) if float(secs) < 90 else f"{float(secs) / 60:.0f} minutes"


def duration_up(secs: Any) -> str:
    """A lower limit to the second, rounded up (a budget just under it must read as too
    small): 200 -> ``3 min 20 s``, 7260 -> ``2 h 1 min``."""
    if not known(secs):
        return DASH
    h, rest = divmod(int(math.ceil(float(secs) - 1e-9)), 3600)
    m, s = divmod(rest, 60)
    parts = ([f"{h} h"] if h else []) + ([f"{m} min"] if m else []) + \
        ([f"{s} s"] if s and not h else [])
    return " ".join(parts) or "0 s"


def cost(c: Any, x: Any) -> str:
    """A cost of ``metrics.registry.COSTS`` in its own format (``c.format`` names one of the
    functions above)."""
    return _COST_FORMATS[c.format](x)


_COST_FORMATS = {"us": us, "kb": kb, "nbytes": nbytes, "share": share, "count": count}
_UNITS = {"tps": "transactions per second", "qps": "queries per second",
          "queries/s": "queries per second", "inserts/s": "rows inserted per second",
          "stmt/s": "statements per second"}


def unit_label(unit: str) -> str:
    """An axis label for a throughput unit: ``tps`` -> ``transactions per second (tps)``."""
    long = _UNITS.get(unit)
    return f"{long} ({unit})" if long else unit


def verdict_lines(entries) -> str:
    """``decide.results.judged`` entries as one clause: "W vs pgtune: slower (-3.1%); ..."."""
    return "; ".join(f"{e['workload']} vs {e['other']}: {e['verdict']} "
                     f"({pct_change(e['ratio'])})" for e in entries)
