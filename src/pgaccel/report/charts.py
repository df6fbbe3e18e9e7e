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


def waterfall_chart(workload: str, steps: list[dict]) -> bytes:
    """`run --stack`: the level of each config relative to baseline (1.0), each layer a
    floating bar from the level before it to its own, with the 95% interval of its level
    against baseline as a whisker and its own step (against the layer before) as a label."""
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    level, names = 1.0, ["baseline"]
    ax.bar(0, 1.0, color="#999999", alpha=0.5, width=0.6)
    for i, s in enumerate(steps, start=1):
        vb, vp = s.get("vs_baseline") or {}, s.get("vs_previous") or {}
        new = vb.get("ratio") or level * (vp.get("ratio") or 1.0)
        up = new >= level
        ax.bar(i, new - level, bottom=level, width=0.6,
               color="#2C7BB6" if up else "#D7191C", alpha=0.85)
        lo, hi = vb.get("ci_low"), vb.get("ci_high")
        if fmt.known(lo) and fmt.known(hi):
            ax.errorbar(i, new, yerr=[[new - lo], [hi - new]], fmt="none", ecolor="#333333",
                        capsize=3, lw=1.1, zorder=4)
        step = fmt.pct_change(vp["ratio"]) if vp.get("ratio") else ""
        ax.annotate(f"{step}\n{vp.get('verdict', '')}", (i, max(new, level)),
                    textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
        ax.plot([i - 0.7, i + 0.3], [level, level], color="#666666", lw=0.6, ls=":")
        level = new
        names.append(s["layer"])
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("throughput relative to baseline\n(whisker: 95% CI vs baseline)", fontsize=8)
    ax.set_title(f"{workload}: what each layer adds", fontsize=10)
    top = max([1.0] + [(s.get("vs_baseline") or {}).get("ci_high") or 1.0 for s in steps])
    bottom = min([1.0] + [(s.get("vs_baseline") or {}).get("ci_low") or 1.0 for s in steps])
    ax.set_ylim(max(0.0, bottom - 0.15), top + 0.2)
    ax.grid(axis="y", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)
