"""A step workload's charts for the HTML report (``report/stepview.py``'s numbers): the
rQPS heatmap with each cell's verdict, and the per-operation costs against the base, as
inline SVG drawn like every chart in ``charts.py``."""

from __future__ import annotations

from typing import Mapping, Sequence

from . import format as fmt
from .charts import FASTER, SLOWER, _axes, _svg, colour, plt


def rqps_heatmap(workload: str, base: str, steps: Sequence[str], variants: Sequence[str],
                 rqps: Mapping[tuple[str, str], float | None],
                 verdicts: Mapping[tuple[str, str], str | None]) -> str:
    """rQPS per step (columns) and variant (rows), coloured as the Insert Benchmark's
    reports colour it (below 0.95 orange, above 1.05 blue, deeper the further out), each
    cell with its ratio and verdict."""
    import numpy as np
    from matplotlib.colors import LinearSegmentedColormap, TwoSlopeNorm
    title = f"{workload}: rQPS per step (QPS / {base}'s)"
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(steps) + 1.6),
                                    0.55 * len(variants) + 1.4))
    grid = np.array([[rqps.get((v, s)) if fmt.known(rqps.get((v, s))) else np.nan
                      for s in steps] for v in variants], dtype=float)
    cmap = LinearSegmentedColormap.from_list("rqps", [SLOWER, "#FBE3D2", "#FFFFFF",
                                                      "#D6E6F4", FASTER]
                                             ).with_extremes(bad="#EEEEEE")
    ax.imshow(np.clip(grid, 0.5, 1.5), cmap=cmap, norm=TwoSlopeNorm(1.0, 0.5, 1.5),
              aspect="auto")
    short = {"faster": "faster", "slower": "slower", "equivalent": "equiv.",
             "not enough evidence": "undecided"}
    for i, v in enumerate(variants):
        for j, s in enumerate(steps):
            x = rqps.get((v, s))
            word = short.get(verdicts.get((v, s)) or "", "not compared")
            text = f"{fmt.ratio(x)}\n{word}" if fmt.known(x) else "–\nnot compared"
            deep = fmt.known(x) and (x < 0.8 or x > 1.25)
            ax.text(j, i, text, ha="center", va="center", fontsize=7,
                    color="white" if deep else "black")
    ax.set_xticks(range(len(steps)), steps)
    ax.set_yticks(range(len(variants)), variants)
    ax.set_xlabel("step (in the order run)")
    ax.set_ylabel("variant")
    ax.set_title(title)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    return _svg(fig, title)


def step_costs_chart(workload: str, base: str, cost: str, steps: Sequence[str],
                     ratios: Mapping[str, Mapping[str, float | None]]) -> str:
    """One cost per operation (``cost``: its label) per step, each variant's as a ratio to
    the base's: grouped bars around 1."""
    import numpy as np
    title = f"{workload}: {cost} relative to {base}"
    fig, ax = _axes(title, "step", f"{cost} / {base}'s (1 = the same)",
                    size=(max(5.6, 0.8 * len(steps) + 1.5), 3.0))
    names = list(ratios)
    width = 0.8 / max(1, len(names))
    x = np.arange(len(steps))
    for i, n in enumerate(names):
        vals = [ratios[n].get(s) for s in steps]
        ys = [v if fmt.known(v) else np.nan for v in vals]
        ax.bar(x + (i - (len(names) - 1) / 2) * width, [y - 1 for y in ys], width,
               bottom=1, color=colour(i + 1), label=n)
    ax.axhline(1, color="black", linewidth=0.8)
    # at least 0.95-1.05 shown: scaled to the bars alone, half a percent filled the chart
    # (an A/A's CPU 0.990-1.010) and read as large as the study's 3-5%
    known = [v for n in names for v in ratios[n].values() if fmt.known(v)]
    low, high = min([1 - MIN_SPAN, *known]), max([1 + MIN_SPAN, *known])
    pad = (high - low) * 0.05
    ax.set_ylim(max(0.0, low - pad), high + pad)
    ax.set_xticks(x, steps)
    ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.22),
              ncol=min(4, len(names)))
    return _svg(fig, title)


MIN_SPAN = 0.05       # the cost bars' least distance from 1 on either side
