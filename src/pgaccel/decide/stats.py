"""Descriptive statistics of trials and series (pure: numpy and scipy only): summaries,
the steady part of a per-second series, what an experiment of a given size can detect, and
the Insert Benchmark's relative QPS.  The effect of one config against another, its
interval and the verdict are ``effect.py``'s."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..util import LazyModule

_st = LazyModule("scipy.stats")      # imported at the first interval, not at start

_NAN = float("nan")


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    stdev: float             # sample standard deviation (ddof=1); 0 when n == 1
    cv: float                # stdev / mean; NaN when the mean is 0 or n == 0
    min: float
    max: float
    q1: float
    q3: float

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(values: Iterable[float]) -> Summary:
    """Median, mean, spread and quartiles of the finite values (NaN and inf are ignored)."""
    a = np.asarray([float(v) for v in values], dtype=float)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return Summary(0, *([_NAN] * 8))
    mean = float(a.mean())
    sd = float(a.std(ddof=1)) if a.size > 1 else 0.0
    q1, med, q3 = (float(x) for x in np.percentile(a, [25, 50, 75]))
    cv = sd / abs(mean) if mean != 0 else _NAN
    return Summary(int(a.size), med, mean, sd, cv, float(a.min()), float(a.max()), q1, q3)


def median_of(values: Iterable[Any]) -> float | None:
    """The median of the values that are present (None skipped); None when there are none."""
    xs = [float(x) for x in values if x is not None]
    return float(np.median(xs)) if xs else None


def geometric_mean(values: Iterable[Any]) -> float | None:
    """The geometric mean of the positive values present: the level each side of a
    comparison stands at (decide/effect.py); None when there are none."""
    xs = [float(x) for x in values if x is not None and x == x and x > 0]
    return float(np.exp(np.log(xs).mean())) if xs else None


def min_detectable_effect(cv: float, n_per_side: int, confidence: float = 0.95,
                          power: float = 0.8, *, pair_sd: float | None = None) -> float:
    """Smallest relative difference (0.07 = 7%) that ``n_per_side`` trials detect with the
    given power, for trials with coefficient of variation ``cv``, compared unpaired; or,
    with ``pair_sd`` (the standard deviation of a round's log ratio), as the paired
    analysis of ``n_per_side`` rounds compares them.

    t power formula on the log scale: unpaired, sigma = sqrt(ln(1 + cv^2)), df = 2n - 2,
    ``delta = (t_{1-a/2} + t_{power}) * sigma * sqrt(2 / n)``; paired, df = n - 1,
    ``delta = (t_{1-a/2} + t_{power}) * pair_sd / sqrt(n)``; returns ``exp(delta) - 1``.
    """
    if n_per_side < 2:
        return math.inf
    if pair_sd is not None:
        if not pair_sd > 0:
            return 0.0
        sigma, df, k = pair_sd, n_per_side - 1, 1.0
    else:
        if not cv > 0:
            return 0.0
        sigma, df, k = math.sqrt(math.log1p(cv * cv)), 2 * n_per_side - 2, 2.0
    q = _st.t.ppf(0.5 + confidence / 2, df) + _st.t.ppf(power, df)
    return math.expm1(q * sigma * math.sqrt(k / n_per_side))


def trials_needed(cv: float, effect: float, confidence: float = 0.95, power: float = 0.8,
                  *, minimum: int = 3, maximum: int = 10000,
                  pair_sd: float | None = None) -> int:
    """Trials per variant to detect a relative ``effect`` (0.05 = 5%) at this ``cv`` (or,
    paired, this ``pair_sd``: :func:`min_detectable_effect`); never below ``minimum``;
    ``maximum`` when even that is not enough."""
    if not effect > 0:
        raise ValueError("effect must be > 0")
    n = max(2, minimum)
    while n < maximum and min_detectable_effect(cv, n, confidence, power,
                                                pair_sd=pair_sd) > effect:
        n += 1 if n < 50 else max(1, n // 20)
    return min(n, maximum)


def _robust_sd(a: np.ndarray) -> float:
    return 1.4826 * float(np.median(np.abs(a - np.median(a))))


def steady_state(series: Sequence[float], *, window: int = 5, tolerance: float = 0.05
                 ) -> tuple[int, int]:
    """Indices ``(start, end)`` so that ``series[start:end]`` is the steady part of a
    per-second throughput series.

    * The last value is dropped when it is more than ``tolerance`` below the median of the
      rest: a partial last second.
    * The warm-up ramp ends at the first index whose value, and the mean of the ``window``
      values starting there, are within a threshold of the median of everything from there
      on.  The threshold is ``tolerance`` or, if larger, twice the noise (robust sd of the
      second half, divided by sqrt(window) for the mean), so noisy flat series keep all.
    * Never more than half the series is dropped.  A short series (a 10-second trial) uses
      a window of a third of its length (at least 2), so its first slow seconds are trimmed
      too; fewer than 4 values are returned whole (apart from a partial last second).
    """
    a = np.asarray(list(series), dtype=float)
    n = a.size
    if n < 3 or not np.isfinite(a).all():
        return 0, n
    end = n
    rest_median = float(np.median(a[:-1]))
    if rest_median > 0 and a[-1] < (1 - tolerance) * rest_median:
        end = n - 1
    window = min(window, max(2, end // 3))
    if end < 2 * window:
        return 0, end
    sd = _robust_sd(a[end // 2:end])
    limit = end // 2
    for s in range(0, limit + 1):
        ref = float(np.median(a[s:end]))
        if ref <= 0:
            continue
        thr_mean = max(tolerance, 2 * sd / math.sqrt(window) / ref)
        thr_one = max(tolerance, 2 * sd / ref)
        if (abs(float(a[s:s + window].mean()) - ref) <= thr_mean * ref
                and abs(float(a[s]) - ref) <= thr_one * ref):
            return s, end
    return limit, end


def is_steady(series_tail: Sequence[float], tolerance: float = 0.05, *, window: int = 10,
              alpha: float = 0.05) -> bool:
    """True when the last ``window`` per-second values are steady: their CV is at most
    ``tolerance`` and there is no trend that is both significant (least-squares slope,
    p < ``alpha``) and large (drift over the window >= tolerance / 2 of the mean).
    Fewer than ``window`` values, NaN or a mean <= 0 -> False."""
    a = np.asarray(list(series_tail), dtype=float)[-window:]
    if a.size < max(window, 3) or not np.isfinite(a).all():
        return False
    mean = float(a.mean())
    if mean <= 0:
        return False
    if float(a.std(ddof=1)) / mean > tolerance:
        return False
    if np.ptp(a) == 0:
        return True
    fit = _st.linregress(np.arange(a.size, dtype=float), a)
    drift = abs(fit.slope) * (a.size - 1) / mean
    return not (fit.pvalue < alpha and drift >= tolerance / 2)


def rqps_table(results: Mapping[str, Mapping[str, float]], base: str) -> list[dict]:
    """Relative QPS per step in the Insert Benchmark's style: ``qps(variant) / qps(base)``.

    ``results`` maps variant -> step -> QPS.  Returns one row per variant, the base first:
    ``{"variant": name, "qps": {step: qps | None}, "rqps": {step: ratio | None}}`` with the
    steps in first-seen order (base's steps first).  A step missing for a variant, or whose
    base QPS is missing or <= 0, gets None.
    """
    if base not in results:
        raise KeyError(f"base variant {base!r} not in results")
    steps: list[str] = list(results[base])
    for per in results.values():
        steps += [s for s in per if s not in steps]
    order = [base] + [v for v in results if v != base]
    rows = []
    for v in order:
        qps, rq = {}, {}
        for s in steps:
            q = results[v].get(s)
            bq = results[base].get(s)
            qps[s] = float(q) if q is not None else None
            ok = q is not None and bq is not None and bq > 0 and math.isfinite(q)
            rq[s] = float(q) / float(bq) if ok else None
        rows.append({"variant": v, "qps": qps, "rqps": rq})
    return rows


@dataclass(frozen=True)
class Drift:
    """A trend of one config's throughput across rounds (least squares of log value on
    round): ``per_round`` relative change per round (0.05: +5% a round), ``total`` over
    the rounds covered, the slope's two-sided ``p_value``, and ``significant`` when the
    trend is both unlikely by chance and large (``total`` at least ``min_total``)."""
    per_round: float
    total: float
    p_value: float
    rounds: int
    significant: bool


def drift(values: Sequence[float], rounds: Sequence[int], *, alpha: float = 0.05,
          min_total: float = 0.05) -> Drift | None:
    """The trend across rounds; None with fewer than 3 distinct rounds or a value <= 0."""
    v = np.asarray(values, dtype=float)
    r = np.asarray(rounds, dtype=float)
    if v.size != r.size or len(set(r.tolist())) < 3 or not np.isfinite(v).all() \
            or (v <= 0).any():
        return None
    y = np.log(v)
    if np.ptp(y) == 0:
        return Drift(0.0, 0.0, 1.0, int(len(set(r.tolist()))), False)
    fit = _st.linregress(r, y)
    span = float(r.max() - r.min())
    total = math.expm1(fit.slope * span)
    p = float(fit.pvalue)
    return Drift(math.expm1(fit.slope), total, p, int(len(set(r.tolist()))),
                 p < alpha and abs(total) >= min_total)


def shared_drift(groups: Sequence[tuple[Sequence[float], Sequence[int]]], *,
                 alpha: float = 0.05, min_total: float = 0.05) -> Drift | None:
    """The trend across rounds that every config shares: one slope of log value on round
    fitted to all configs at once, each config around its own level (a regression with a
    level per config), so a host that speeds up or slows down under every config is found
    with all the trials, even when each config alone has too few to show it.  ``groups``
    is one (values, rounds) per config; None with fewer than two usable configs or three
    distinct rounds.  The paired comparison cancels such a drift; it still says the trials
    did not start from the same state."""
    xs, ys = [], []
    rounds_seen: set[float] = set()
    for values, rounds in groups:
        v = np.asarray(values, dtype=float)
        r = np.asarray(rounds, dtype=float)
        if v.size != r.size or v.size < 2 or not np.isfinite(v).all() or (v <= 0).any():
            continue
        y = np.log(v)
        xs.append(r - r.mean())
        ys.append(y - y.mean())
        rounds_seen.update(r.tolist())
    if len(xs) < 2 or len(rounds_seen) < 3:
        return None
    x, y = np.concatenate(xs), np.concatenate(ys)
    sxx = float(x @ x)
    df = x.size - len(xs) - 1
    if sxx == 0 or df < 1:
        return None
    slope = float(x @ y) / sxx
    resid = y - slope * x
    sse = float(resid @ resid)
    if sse == 0:
        p = 0.0 if slope != 0 else 1.0
    else:
        se = math.sqrt(sse / df / sxx)
        p = float(2 * _st.t.sf(abs(slope) / se, df))
    span = max(rounds_seen) - min(rounds_seen)
    total = math.expm1(slope * span)
    return Drift(math.expm1(slope), total, p, len(rounds_seen),
                 p < alpha and abs(total) >= min_total)
