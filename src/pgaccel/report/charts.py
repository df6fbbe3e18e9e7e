"""Charts for reports (matplotlib, headless): trial values per variant and per-second series."""

from __future__ import annotations

import math
import io
from typing import TYPE_CHECKING, Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from . import format as fmt  # noqa: E402

if TYPE_CHECKING:
    from ..lab.effect import Comparison

PALETTE = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860"]


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def trials_chart(workload: str, unit: str, values: dict[str, list[float]],
                 comparisons: Mapping[str, Comparison] | None = None) -> bytes:
    """Every trial's value as a dot per variant, the geometric mean (the level the effect
    compares) as a bar, and for each compared variant the 95% interval of its level
    (the base's geometric mean times the effect's interval) as a whisker."""
    names = list(values)
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    base_geo = None
    for i, name in enumerate(names):
        vals = sorted(v for v in values[name] if v > 0)
        if not vals:
            continue
        geo = math.exp(sum(math.log(v) for v in vals) / len(vals))
        base_geo = geo if base_geo is None else base_geo
        colour = PALETTE[i % len(PALETTE)]
        ax.bar(i, geo, color=colour, alpha=0.35, width=0.6)
        ax.scatter([i + (j - (len(vals) - 1) / 2) * 0.06 for j in range(len(vals))], vals,
                   color=colour, zorder=3, s=22)
        label = fmt.number(geo)
        cmp = (comparisons or {}).get(name)
        if cmp:
            label += f"\n{fmt.pct_change(cmp.ratio)}"
            if fmt.known(cmp.ci_low) and fmt.known(cmp.ci_high) and base_geo:
                lvl = base_geo * cmp.ratio
                ax.errorbar(i + 0.33, lvl, yerr=[[lvl - base_geo * cmp.ci_low],
                                                [base_geo * cmp.ci_high - lvl]],
                            fmt="none", ecolor="#333333", capsize=3, lw=1.2, zorder=4)
        ax.annotate(label, (i, geo), textcoords="offset points", xytext=(0, 4), ha="center",
                    fontsize=8)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel(f"{unit} (bar: geometric mean; whisker: 95% CI)", fontsize=8)
    ax.set_title(workload, fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


def series_chart(workload: str, unit: str, series: dict[str, list[list[float]]]) -> bytes:
    """Per-second throughput of every trial, one colour per variant."""
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    for i, (name, runs) in enumerate(series.items()):
        for j, s in enumerate(runs):
            ax.plot(range(1, len(s) + 1), s, color=PALETTE[i % len(PALETTE)], alpha=0.7,
                    linewidth=1.2, label=name if j == 0 else None)
    ax.set_xlabel("second of the measured interval")
    ax.set_ylabel(f"{unit} per second")
    ax.set_title(f"{workload}: per-second rate, every trial", fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)
