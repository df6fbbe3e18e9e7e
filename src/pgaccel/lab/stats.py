"""Statistics for comparing benchmark variants honestly (pure: numpy and scipy only).

Every number here answers one question: *is the difference between two sets of trials real,
and how large is it?*  Trials on a shared VM vary by 5-20% between runs of the same
configuration, so a single run each proves nothing.  The rules:

* The effect is the **ratio of medians** ``median(other) / median(base)``; medians resist the
  one trial that hit a cache eviction or a noisy neighbour.
* Its confidence interval (CI) depends on how much data there is (see :func:`compare`).
* A verdict needs the whole interval on one side of 1 *and* an effect large enough to matter
  (``min_effect``); otherwise the answer is "no significant difference" or, when the data
  cannot yet tell, "not enough evidence".
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, fields
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from scipy import stats as _st

FASTER = "faster"
SLOWER = "slower"
NO_DIFFERENCE = "no significant difference"
NOT_ENOUGH = "not enough evidence"
VERDICTS = (FASTER, SLOWER, NO_DIFFERENCE, NOT_ENOUGH)

MIN_BOOTSTRAP_N = 5          # per side; below this Welch's t interval on logs is used
DEFAULT_N_BOOT = 4000
DEFAULT_SEED = 20240601      # fixed so that a report is reproducible from stored trials
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


@dataclass(frozen=True)
class Comparison:
    ratio: float             # median(other) / median(base)
    ci_low: float
    ci_high: float
    method: str              # "bootstrap-bca" | "bootstrap-percentile" | "welch-log-t" | "none"
    verdict: str             # one of VERDICTS, from other's point of view versus base
    n_base: int
    n_other: int
    p_value: float           # Mann-Whitney U (bootstrap cases) or Welch t on logs; NaN if none
    explain: str
    higher_is_better: bool = True
    min_effect: float = 0.02
    confidence: float = 0.95

    @property
    def change(self) -> float:
        """Relative change of the metric, e.g. +0.07 for 7% higher."""
        return self.ratio - 1.0

    @property
    def ci_width(self) -> float:
        w = self.ci_high - self.ci_low
        return w if math.isfinite(w) else math.inf

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Comparison":
        """A comparison read back from :meth:`to_dict`'s JSON (extra keys ignored)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def _pct(x: float) -> str:
    return f"{(x - 1) * 100:+.1f}%"


def _check(name: str, a: np.ndarray) -> str | None:
    if a.size < 2:
        return f"{name} has {a.size} value(s); at least 2 per side are needed"
    if np.isnan(a).any():
        return f"{name} contains NaN (a failed trial?)"
    if not np.isfinite(a).all():
        return f"{name} contains an infinite value"
    if (a <= 0).any():
        return f"{name} has {int((a <= 0).sum())} value(s) <= 0; ratios need positive values"
    return None


def _median_ratio_stat(b, o, axis=-1):
    return np.median(o, axis=axis) / np.median(b, axis=axis)


def _bootstrap_ci(b, o, confidence, n_boot, seed) -> tuple[float, float, str]:
    """BCa interval of the ratio of medians; percentile when BCa is degenerate."""
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = _st.bootstrap((b, o), _median_ratio_stat, n_resamples=n_boot,
                                vectorized=True, paired=False, confidence_level=confidence,
                                method=method, rng=np.random.default_rng(seed))
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            return lo, hi, f"bootstrap-{method.lower()}"
    r = float(_median_ratio_stat(b, o))       # every resample gave the same ratio
    return r, r, "bootstrap-percentile"


def _welch_log_ci(b, o, confidence) -> tuple[float, float, float]:
    """exp of Welch's t interval for mean(log other) - mean(log base); and its p-value."""
    lb, lo_ = np.log(b), np.log(o)
    d = lo_.mean() - lb.mean()
    vb, vo = lb.var(ddof=1) / lb.size, lo_.var(ddof=1) / lo_.size
    se = math.sqrt(vb + vo)
    if se == 0:
        return math.exp(d), math.exp(d), (1.0 if d == 0 else 0.0)
    df = (vb + vo) ** 2 / (vb ** 2 / (lb.size - 1) + vo ** 2 / (lo_.size - 1))
    t = _st.t.ppf(0.5 + confidence / 2, df)
    p = 2 * _st.t.sf(abs(d) / se, df)
    return math.exp(d - t * se), math.exp(d + t * se), float(p)


def decide(ratio, lo, hi, n_min, higher_is_better, min_effect) -> tuple[str, str]:
    """The verdict rule (table-tested in tests/test_lab_stats.py), in order:

    1. CI wholly above 1 (or wholly below 1):
       - the point estimate moves by >= ``min_effect`` in that direction -> "faster" if the
         direction is the good one (up for throughput, down for latency), else "slower";
       - smaller -> "no significant difference": real, perhaps, but too small to matter.
    2. CI contains 1:
       - CI inside the equivalence band [1 - min_effect, 1 + min_effect] -> "no significant
         difference" (shown equivalent);
       - >= 5 trials per side -> "no significant difference" (the width is reported);
       - otherwise -> "not enough evidence".
    """
    band = (1 - min_effect, 1 + min_effect)
    if lo > 1 or hi < 1:
        up = lo > 1
        effect = (ratio - 1) if up else (1 - ratio)
        if effect < min_effect:
            return NO_DIFFERENCE, (f"the interval excludes 0 but the effect ({_pct(ratio)}) is "
                                   f"below the minimum effect of {min_effect:.0%}: too small "
                                   "to matter")
        good = up == higher_is_better
        return (FASTER if good else SLOWER), ""
    if band[0] <= lo and hi <= band[1]:
        return NO_DIFFERENCE, f"the interval lies within ±{min_effect:.0%}: equivalent"
    reach = max(1 - lo, hi - 1)
    if n_min >= MIN_BOOTSTRAP_N:
        return NO_DIFFERENCE, (f"the interval includes 0; differences up to {reach:.0%} "
                               "cannot be ruled out")
    return NOT_ENOUGH, (f"the interval includes 0 and is wider than ±{min_effect:.0%} with "
                        f"fewer than {MIN_BOOTSTRAP_N} trials per side; run more trials")


def compare(base: Sequence[float], other: Sequence[float], *, higher_is_better: bool = True,
            min_effect: float = 0.02, confidence: float = 0.95,
            n_boot: int = DEFAULT_N_BOOT, seed: int | None = DEFAULT_SEED) -> Comparison:
    """Compare ``other`` against ``base``; the ratio is median(other) / median(base).

    Interval method, chosen by the smaller sample:

    * >= 5 values per side: a bootstrap interval of the ratio of medians (two independent
      samples resampled separately; ``scipy.stats.bootstrap``), bias-corrected and
      accelerated (BCa), falling back to the percentile interval when BCa is degenerate
      (e.g. ties make the jackknife constant).  Seeded, so a report is reproducible.  The
      p-value is the two-sided Mann-Whitney U test.
    * 2-4 values on a side: the bootstrap has too few distinct resamples to be trusted, so
      the interval is exp of Welch's t interval for the difference of mean log values (the
      ratio of geometric means).  With so few trials the t quantile is large and the
      interval honestly wide.  The p-value is Welch's t test on the logs.

    Invalid input (fewer than 2 values on a side, NaN, values <= 0) never raises: the verdict
    is "not enough evidence" and ``explain`` says why.  See :func:`decide` for the rule.
    """
    b = np.asarray(list(base), dtype=float)
    o = np.asarray(list(other), dtype=float)
    common = dict(n_base=int(b.size), n_other=int(o.size), higher_is_better=higher_is_better,
                  min_effect=min_effect, confidence=confidence)
    problem = _check("base", b) or _check("other", o)
    if problem:
        mb = np.median(b) if b.size and np.isfinite(b).all() else _NAN
        mo = np.median(o) if o.size and np.isfinite(o).all() else _NAN
        ratio = float(mo / mb) if mb > 0 and mo > 0 else _NAN
        return Comparison(ratio, _NAN, _NAN, "none", NOT_ENOUGH, p_value=_NAN,
                          explain=f"not enough evidence: {problem}", **common)
    ratio = float(_median_ratio_stat(b, o))
    n_min = min(b.size, o.size)
    if n_min >= MIN_BOOTSTRAP_N:
        lo, hi, method = _bootstrap_ci(b, o, confidence, n_boot, seed)
        if np.ptp(np.concatenate([b, o])) == 0:
            p = 1.0
        else:
            p = float(_st.mannwhitneyu(o, b, alternative="two-sided").pvalue)
    else:
        lo, hi, p = _welch_log_ci(b, o, confidence)
        method = "welch-log-t"
    verdict, why = decide(ratio, lo, hi, n_min, higher_is_better, min_effect)
    head = f"{verdict}: {_pct(ratio)}"
    if not higher_is_better:
        head += " (lower is better)"
    text = (f"{head} ({confidence:.0%} CI {_pct(lo)} .. {_pct(hi)}; {method}, "
            f"n={b.size} vs {o.size}, p={p:.3g})")
    if why:
        text += f"; {why}"
    return Comparison(ratio, lo, hi, method, verdict, p_value=p, explain=text, **common)


def geometric_mean_ratio(comparisons: Iterable[Comparison], confidence: float = 0.95
                         ) -> tuple[float, float, float]:
    """Geometric mean of the ratios over workloads, with an approximate interval.

    Each comparison's interval is read as a symmetric interval on the log scale, giving a
    standard error ``(ln hi - ln lo) / (2 z)``; the workloads are taken as independent, so
    the mean of the logs has ``se = sqrt(sum se_i^2) / k``.  Comparisons without a finite
    positive ratio and interval are left out; none left -> (nan, nan, nan).
    """
    logs, ses = [], []
    for c in comparisons:
        vals = (c.ratio, c.ci_low, c.ci_high)
        if not all(math.isfinite(v) and v > 0 for v in vals):
            continue
        z = _st.norm.ppf(0.5 + c.confidence / 2)
        logs.append(math.log(c.ratio))
        ses.append((math.log(c.ci_high) - math.log(c.ci_low)) / (2 * z))
    if not logs:
        return _NAN, _NAN, _NAN
    k = len(logs)
    m = sum(logs) / k
    se = math.sqrt(sum(s * s for s in ses)) / k
    z = _st.norm.ppf(0.5 + confidence / 2)
    return math.exp(m), math.exp(m - z * se), math.exp(m + z * se)


_MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)   # sd(median) / sd(mean) for normal data


def min_detectable_effect(cv: float, n_per_side: int, confidence: float = 0.95,
                          power: float = 0.8) -> float:
    """Smallest relative difference (0.07 = 7%) that ``n_per_side`` trials detect with the
    given power, for trials with coefficient of variation ``cv``.

    Two-sample t power formula on the log scale (sigma = sqrt(ln(1 + cv^2)), df = 2n - 2):
    ``delta = (t_{1-a/2} + t_{power}) * sigma * sqrt(2 / n)``.  With >= 5 per side the lab
    compares medians, which need ~sqrt(pi/2) = 1.25x more spread than means on normal data,
    so delta is scaled by that factor there.  Returns ``exp(delta) - 1``.
    """
    if n_per_side < 2:
        return math.inf
    if not cv > 0:
        return 0.0
    sigma = math.sqrt(math.log1p(cv * cv))
    df = 2 * n_per_side - 2
    q = _st.t.ppf(0.5 + confidence / 2, df) + _st.t.ppf(power, df)
    delta = q * sigma * math.sqrt(2.0 / n_per_side)
    if n_per_side >= MIN_BOOTSTRAP_N:
        delta *= _MEDIAN_EFFICIENCY
    return math.expm1(delta)


def trials_needed(cv: float, effect: float, confidence: float = 0.95, power: float = 0.8,
                  *, minimum: int = MIN_BOOTSTRAP_N, maximum: int = 10000) -> int:
    """Trials per variant to detect a relative ``effect`` (0.05 = 5%) at this ``cv``; never
    below ``minimum`` (a verdict needs 5 per side); ``maximum`` when even that is not enough."""
    if not effect > 0:
        raise ValueError("effect must be > 0")
    n = max(2, minimum)
    while n < maximum and min_detectable_effect(cv, n, confidence, power) > effect:
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
    * Never more than half the series is dropped; series shorter than ``2 * window`` are
      returned whole (apart from a partial last second).
    """
    a = np.asarray(list(series), dtype=float)
    n = a.size
    if n < 3 or not np.isfinite(a).all():
        return 0, n
    end = n
    rest_median = float(np.median(a[:-1]))
    if rest_median > 0 and a[-1] < (1 - tolerance) * rest_median:
        end = n - 1
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
