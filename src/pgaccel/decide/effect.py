"""The effect of one configuration against another, its interval and the verdict (pure).

One estimator everywhere (terminal, JSON, reports, compare, calibrate): the **ratio of
geometric means**, ``exp(mean(log other) - mean(log base))``, with a Student t interval on
the log scale.  The printed effect is therefore always the centre (on the log scale) of the
printed interval, and the test behind the verdict is the same t statistic; docs/statistics.md
says why this was chosen over a bootstrap of the ratio of medians.

* **Paired** (``method = "paired-log-t"``): when both sides carry the round of each trial
  and at least ``MIN_PAIRS`` rounds have both, each round's log ratio ``d_r = log o_r -
  log b_r`` is one observation (a round holding several trials of a config contributes
  their geometric mean).  pgaccel interleaves configs in counterbalanced rounds, so a slow
  drift of the host (page cache, other tenants, thermal state) hits both trials of a round
  alike and cancels in ``d_r``.  Interval: ``mean d +- t(n-1) sd(d)/sqrt(n)``.
* **Unpaired** (``"welch-log-t"``): Welch's t interval for the difference of mean logs,
  when the trials carry no rounds to pair (two runs compared by ``pgaccel compare``).
* **Too few rounds** (``"none"``): trials of one experiment's rounds (both sides' rounds
  given) with fewer than ``MIN_PAIRS`` rounds in common are *not* judged unpaired: the
  experiment was designed paired, and Welch's test on 2 against 2 trials, where the host
  drifted between them, would answer a question the design did not ask.  The verdict is
  "not enough evidence: only 2 of the minimum 3 paired rounds ran" (``short_note`` adds
  why, e.g. "before the budget ended"), with the effect so far and no interval.

Verdicts, from the other's point of view, ``m = min_effect`` (the margin):

* ``faster`` / ``slower``: the interval excludes no change and the effect is at least ``m``
  in the good (bad) direction (up for throughput, down for latency and CPU cost);
* ``equivalent``: the whole interval lies within ``+-m`` (two one-sided tests at
  (1 - confidence) / 2 each: the conservative form of an equivalence test);
* ``not enough evidence``: anything else, with ``more_rounds``, the further rounds (trials
  per config) that would probably decide it (80% power at the effect seen, or at the
  distance to the margin when the effect seen is smaller than the margin).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..util import LazyModule, known_fields

_st = LazyModule("scipy.stats")      # imported at the first interval, not at start

FASTER = "faster"
SLOWER = "slower"
EQUIVALENT = "equivalent"
NOT_ENOUGH = "not enough evidence"
VERDICTS = (FASTER, SLOWER, EQUIVALENT, NOT_ENOUGH)

MIN_PAIRS = 3                 # fewer common rounds: the unpaired interval
POWER = 0.8                   # for "how many more rounds would probably decide it"
MAX_ROUNDS = 10_000
WORTH_ROUNDS = 50             # more further rounds than this: "would probably not decide"
_NAN = float("nan")


@dataclass(frozen=True)
class Comparison:
    ratio: float             # geometric mean(other) / geometric mean(base)
    ci_low: float
    ci_high: float
    method: str              # "paired-log-t" | "welch-log-t" | "none"
    verdict: str             # one of VERDICTS, from other's point of view versus base
    n_base: int
    n_other: int
    p_value: float           # the t test behind the interval; NaN if none
    explain: str
    higher_is_better: bool = True
    min_effect: float = 0.02
    confidence: float = 0.95
    n_pairs: int = 0         # rounds used by the paired analysis (0: unpaired)
    more_rounds: int | None = None   # not enough evidence: further rounds likely to decide

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
        """A comparison read back from :meth:`to_dict`'s JSON (extra keys ignored, a null
        interval NaN again)."""
        return cls(**known_fields(cls, d))


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


def log_ratio_by_round(base: Sequence[float], base_rounds: Sequence[int],
                       other: Sequence[float], other_rounds: Sequence[int]
                       ) -> dict[int, float]:
    """``log(other) - log(base)`` for each round both sides have, by round; a side with
    several trials in a round contributes the mean of their logs."""
    def per_round(vals, rounds) -> dict[int, float]:
        acc: dict[int, list[float]] = {}
        for v, r in zip(vals, rounds):
            acc.setdefault(int(r), []).append(math.log(v))
        return {r: sum(xs) / len(xs) for r, xs in acc.items()}
    b, o = per_round(base, base_rounds), per_round(other, other_rounds)
    return {r: o[r] - b[r] for r in sorted(set(b) & set(o))}


def pair_by_round(base: Sequence[float], base_rounds: Sequence[int], other: Sequence[float],
                  other_rounds: Sequence[int]) -> list[float]:
    """The paired differences the analysis uses: :func:`log_ratio_by_round` in round
    order."""
    return list(log_ratio_by_round(base, base_rounds, other, other_rounds).values())


@dataclass(frozen=True)
class LogInterval:
    """The effect on the log scale: centre ``d``, half-width ``h``, the t test's p-value,
    the spread the next rounds would have (``sd``: of a pair's difference, or of one
    trial's log) and the count it came from."""
    d: float
    h: float
    p: float
    sd: float
    n: int
    paired: bool


def paired_interval(diffs: Sequence[float], confidence: float) -> LogInterval:
    a = np.asarray(diffs, dtype=float)
    n = a.size
    d = float(a.mean())
    sd = float(a.std(ddof=1))
    se = sd / math.sqrt(n)
    if se == 0:
        return LogInterval(d, 0.0, 1.0 if d == 0 else 0.0, 0.0, n, True)
    t = _st.t.ppf(0.5 + confidence / 2, n - 1)
    p = 2 * _st.t.sf(abs(d) / se, n - 1)
    return LogInterval(d, float(t * se), float(p), sd, n, True)


def welch_interval(b: np.ndarray, o: np.ndarray, confidence: float) -> LogInterval:
    lb, lo_ = np.log(b), np.log(o)
    d = float(lo_.mean() - lb.mean())
    vb, vo = lb.var(ddof=1) / lb.size, lo_.var(ddof=1) / lo_.size
    se = math.sqrt(vb + vo)
    pooled = math.sqrt((lb.var(ddof=1) + lo_.var(ddof=1)) / 2)
    n = min(lb.size, lo_.size)
    if se == 0:
        return LogInterval(d, 0.0, 1.0 if d == 0 else 0.0, 0.0, n, False)
    df = (vb + vo) ** 2 / (vb ** 2 / (lb.size - 1) + vo ** 2 / (lo_.size - 1))
    t = _st.t.ppf(0.5 + confidence / 2, df)
    p = 2 * _st.t.sf(abs(d) / se, df)
    return LogInterval(d, float(t * se), float(p), pooled, n, False)


@lru_cache(maxsize=256)
def _power_quantiles(confidence: float, power: float, paired: bool, start: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The rounds a look may suggest from ``start`` on (each one up to 100, then 5% steps
    up to ``MAX_ROUNDS``) and, for each, the t quantiles of the level and of the power
    added: one vectorised SciPy call instead of one per candidate (a simulation of whole
    experiments calls :func:`rounds_needed` tens of thousands of times)."""
    ns, n = [], start
    while n <= MAX_ROUNDS:
        ns.append(n)
        n += 1 if n < 100 else max(1, n // 20)
    rounds = np.array(ns, dtype=float)
    df = rounds - 1 if paired else 2 * rounds - 2
    q = _st.t.ppf(0.5 + confidence / 2, df) + _st.t.ppf(power, df)
    return rounds, q


def rounds_needed(iv: LogInterval, margin: float, confidence: float,
                  power: float = POWER) -> int | None:
    """Rounds (per config) at which the interval would probably decide: exclude no change
    when the effect seen is at least the margin, else fit inside the margin.  None when
    more than ``MAX_ROUNDS`` would be needed."""
    m = math.log1p(margin)
    target = abs(iv.d) if abs(iv.d) >= m else m - abs(iv.d)
    if iv.sd == 0:
        return iv.n + 1
    if target <= 0:
        return None
    k = 1.0 if iv.paired else 2.0
    rounds, q = _power_quantiles(float(confidence), float(power), bool(iv.paired),
                                 max(2, int(iv.n)))
    hit = np.flatnonzero(q * iv.sd * np.sqrt(k / rounds) <= target)
    return int(rounds[hit[0]]) if hit.size else None


def decide(ratio: float, lo: float, hi: float, higher_is_better: bool,
           min_effect: float) -> tuple[str, str]:
    """The verdict rule (module docstring; table-tested in tests/test_lab_stats.py)."""
    band_lo, band_hi = 1 / (1 + min_effect), 1 + min_effect
    if band_lo <= lo and hi <= band_hi:
        return EQUIVALENT, f"the interval lies within ±{min_effect:.0%}"
    if lo > 1 or hi < 1:
        up = lo > 1
        effect = (ratio - 1) if up else (1 / ratio - 1)
        if effect >= min_effect:
            return (FASTER if up == higher_is_better else SLOWER), ""
        return NOT_ENOUGH, (f"a real change of {_pct(ratio)}, smaller than the "
                            f"{min_effect:.0%} margin so far, but the interval reaches past it")
    return NOT_ENOUGH, f"the interval includes no change and reaches past ±{min_effect:.0%}"


def compare(base: Sequence[float], other: Sequence[float], *, higher_is_better: bool = True,
            min_effect: float = 0.02, confidence: float = 0.95,
            base_rounds: Sequence[int] | None = None,
            other_rounds: Sequence[int] | None = None, short_note: str = "") -> Comparison:
    """Compare ``other`` against ``base`` (see the module docstring).  With the rounds of
    both sides' trials the analysis is paired by round, and fewer than ``MIN_PAIRS``
    rounds in common are "not enough evidence" (``short_note``: why they are so few).
    Invalid input (fewer than 2 values on a side, NaN, values <= 0) never raises: the
    verdict is "not enough evidence" and ``explain`` says why."""
    b = np.asarray(list(base), dtype=float)
    o = np.asarray(list(other), dtype=float)
    common = dict(n_base=int(b.size), n_other=int(o.size), higher_is_better=higher_is_better,
                  min_effect=min_effect, confidence=confidence)
    ok_b = bool(b.size) and bool(np.isfinite(b).all()) and bool((b > 0).all())
    ok_o = bool(o.size) and bool(np.isfinite(o).all()) and bool((o > 0).all())
    paired = base_rounds is not None and other_rounds is not None
    diffs: list[float] = []
    if paired and ok_b and ok_o:       # one trial a side too: the rounds are what is short
        diffs = pair_by_round(b, base_rounds, o, other_rounds)
        if len(diffs) < MIN_PAIRS:
            return _too_few_pairs(b, o, len(diffs), short_note, common)
    problem = _check("base", b) or _check("other", o)
    if problem:
        ratio = (float(np.exp(np.log(o).mean() - np.log(b).mean())) if ok_b and ok_o
                 else _NAN)
        return Comparison(ratio, _NAN, _NAN, "none", NOT_ENOUGH, p_value=_NAN,
                          explain=f"not enough evidence: {problem}", **common)
    if paired:
        iv, method = paired_interval(diffs, confidence), "paired-log-t"
    else:
        iv, method = welch_interval(b, o, confidence), "welch-log-t"
    ratio, lo, hi = math.exp(iv.d), math.exp(iv.d - iv.h), math.exp(iv.d + iv.h)
    verdict, why = decide(ratio, lo, hi, higher_is_better, min_effect)
    more = None
    if verdict == NOT_ENOUGH:
        need = rounds_needed(iv, min_effect, confidence)
        more = max(1, need - iv.n) if need is not None else None
        if more is None:
            why += f"; even {MAX_ROUNDS} rounds would probably not decide"
        elif more > WORTH_ROUNDS:
            why += (f"; more rounds would probably not decide (it would take about {more}: "
                    "the difference is small against the noise)")
        else:
            why += f"; about {more} more round{'s' if more != 1 else ''} would probably decide"
    head = f"{verdict}: {_pct(ratio)}"
    if not higher_is_better:
        head += " (lower is better)"
    shape = (f"{iv.n} paired rounds" if iv.paired else f"n={b.size} vs {o.size}")
    level = f"{confidence * 100:.1f}".rstrip("0").rstrip(".")     # 98.8, not 99
    text = (f"{head} ({level}% CI {_pct(lo)} .. {_pct(hi)}; {method}, {shape}, "
            f"p={iv.p:.3g})")
    if why:
        text += f"; {why}"
    return Comparison(ratio, lo, hi, method, verdict, p_value=iv.p, explain=text,
                      n_pairs=iv.n if iv.paired else 0, more_rounds=more, **common)


def _too_few_pairs(b: np.ndarray, o: np.ndarray, pairs: int, short_note: str,
                   common: dict[str, Any]) -> Comparison:
    """An experiment's comparison with fewer than ``MIN_PAIRS`` rounds in common: not
    enough evidence, the ratio of geometric means so far and no interval (never Welch's)."""
    ratio = float(np.exp(np.log(o).mean() - np.log(b).mean()))
    when = f" {short_note}" if short_note else ""
    text = (f"not enough evidence: only {pairs} of the minimum {MIN_PAIRS} paired rounds "
            f"ran{when} ({_pct(ratio)} so far; a paired interval needs {MIN_PAIRS} rounds "
            "with both configs' trials)")
    return Comparison(ratio, _NAN, _NAN, "none", NOT_ENOUGH, p_value=_NAN, explain=text,
                      n_pairs=pairs, **common)


def geometric_mean_ratio(comparisons: Iterable[Comparison], confidence: float = 0.95
                         ) -> tuple[float, float, float]:
    """Geometric mean of the ratios over workloads, with an approximate interval.

    Each comparison's interval is symmetric on the log scale, giving a standard error
    ``(ln hi - ln lo) / (2 z)``; the workloads are taken as independent, so the mean of the
    logs has ``se = sqrt(sum se_i^2) / k``.  Comparisons without a finite positive ratio and
    interval are left out; none left -> (nan, nan, nan)."""
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
