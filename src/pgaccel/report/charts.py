"""Charts for reports (matplotlib, headless): trial values per variant and per-second series."""

from __future__ import annotations

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
    """Every trial's value as a dot per variant, the median as a bar."""
    names = list(values)
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    for i, name in enumerate(names):
        vals = sorted(values[name])
        if not vals:
            continue
        med = vals[len(vals) // 2] if len(vals) % 2 else (vals[len(vals) // 2 - 1] + vals[len(vals) // 2]) / 2
        ax.bar(i, med, color=PALETTE[i % len(PALETTE)], alpha=0.35, width=0.6)
        ax.scatter([i + (j - (len(vals) - 1) / 2) * 0.06 for j in range(len(vals))], vals,
                   color=PALETTE[i % len(PALETTE)], zorder=3, s=22)
        label = fmt.number(med)
        cmp = (comparisons or {}).get(name)
        if cmp:
            label += f"\n{fmt.pct_change(cmp.ratio)}"
        ax.annotate(label, (i, med), textcoords="offset points", xytext=(0, 4), ha="center",
                    fontsize=8)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel(unit)
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
