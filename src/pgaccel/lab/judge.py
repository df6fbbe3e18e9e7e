"""Judging measured trials (pure): what an A/A calibration says about this machine's noise.
"""

from __future__ import annotations

from typing import Any

from . import stats


def calibration(a: list[float], b: list[float], trial_s: float, budget_s: float,
                min_effect: float = 0.02) -> dict[str, Any]:
    """The noise floor of an A/A experiment and what a budget can detect (pure)."""
    sa, sb, pooled = stats.summarize(a), stats.summarize(b), stats.summarize(a + b)
    aa = stats.compare(a, b, min_effect=min_effect)
    per_side = int(budget_s // (2 * trial_s)) if trial_s > 0 else 0
    cv = pooled.cv
    return {"cv_a": sa.cv, "cv_b": sb.cv, "noise_floor_cv": cv, "aa": aa.to_dict(),
            "trial_s": trial_s, "budget_s": budget_s, "trials_per_variant": per_side,
            "min_detectable_effect": stats.min_detectable_effect(cv, per_side),
            "trials_needed": {f"{e:.0%}": stats.trials_needed(cv, e) for e in (0.02, 0.05, 0.1)}}
