"""Charts for the HTML report, as inline SVG (matplotlib, headless; text kept as text so a
browser, a screen reader and a search find the labels).  Every chart has a title and units
on both axes, and uses the Okabe–Ito palette, which stays distinct under the common forms of
colour blindness.  Each function takes plain numbers and returns one ``<svg>`` element."""

from __future__ import annotations

import io
import math
import re
from typing import TYPE_CHECKING, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import (FuncFormatter, LogLocator, MaxNLocator,  # noqa: E402
                               NullFormatter)

from . import format as fmt  # noqa: E402

if TYPE_CHECKING:
    from ..decide.effect import Comparison

# Okabe & Ito (2008), without black (kept for text) and yellow (too pale on white).
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#999999"]
FASTER, SLOWER = "#0072B2", "#D55E00"
_SIZE = (5.6, 3.3)

plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "pgaccel", "font.size": 8,
                     "axes.titlesize": 10, "font.family": "DejaVu Sans"})


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _svg(fig, title: str) -> str:
    """The figure as an inline ``<svg>`` with a <title>, scalable, deterministic bytes."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.S)
    text = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1', text, count=1)
    esc = title.replace("&", "&amp;").replace("<", "&lt;")
    return text.replace(">", f' role="img" class="chart"><title>{esc}</title>', 1)


def _plain_log(axis) -> None:
    """A log axis labelled with plain numbers (0.05, 1, 20), not powers of ten."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt.short(v)))
    axis.set_minor_formatter(NullFormatter())


def _legend(ax, n: int, **kw) -> None:
    """A legend only when there is more than one config to tell apart."""
    if n > 1:
        ax.legend(frameon=False, **kw)


def _axes(title: str, xlabel: str, ylabel: str, size=_SIZE):
    fig, ax = plt.subplots(figsize=size)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    return fig, ax


def trials_chart(workload: str, unit: str, values: dict[str, list[float]],
                 comparisons: Mapping[str, Comparison] | None = None,
                 level: str = "95%") -> str:
    """Every trial's value as a dot per config, the geometric mean (the level the effect
    compares) as a bar, and for each compared config the 95% interval of its level (the
    base's geometric mean times the effect's interval) as a whisker."""
    names = list(values)
    title = f"{workload}: every trial, by config"
    fig, ax = _axes(title, "config", f"{fmt.unit_label(unit)}\n(bar: geometric mean; "
                    f"whisker: {level} CI)")
    base_geo, label_at = None, 0.0
    for i, name in enumerate(names):
        vals = sorted(v for v in values[name] if v > 0)
        if not vals:
            continue
        geo = math.exp(sum(math.log(v) for v in vals) / len(vals))
        base_geo = geo if base_geo is None else base_geo
        ax.bar(i, geo, color=colour(i), alpha=0.35, width=0.6)
        ax.scatter([i + (j - (len(vals) - 1) / 2) * 0.06 for j in range(len(vals))], vals,
                   color=colour(i), zorder=3, s=20)
        label = fmt.number(geo)
        cmp = (comparisons or {}).get(name)
        if cmp:
            label += f"\n{fmt.pct_change(cmp.ratio)}"
            if fmt.known(cmp.ci_low) and fmt.known(cmp.ci_high) and base_geo:
                lvl = base_geo * cmp.ratio
                ax.errorbar(i + 0.33, lvl, yerr=[[lvl - base_geo * cmp.ci_low],
                                                [base_geo * cmp.ci_high - lvl]],
                            fmt="none", ecolor="#333333", capsize=3, lw=1.2, zorder=4)
        label_at = max(label_at, geo, vals[-1])
        ax.annotate(label, (i, max(geo, vals[-1])), textcoords="offset points",
                    xytext=(-14, 4), ha="center")
    ax.set_xticks(range(len(names)), names)
    top = max([v for vs in values.values() for v in vs if v > 0] or [1.0])
    ax.set_ylim(0, trials_ylim(ax.get_ylim()[1], label_at, top))
    return _svg(fig, title)


def trials_ylim(auto: float, label_at: float, top: float) -> float:
    """The top of the trials chart's value axis: matplotlib's own (``auto``), raised so
    that the two-line label above the highest dot or bar (``label_at``) stays inside the
    axes instead of running into the title, and at most twice the highest trial (``top``)
    so that a wide whisker does not squash the dots."""
    return min(max(auto, 1.2 * label_at), 2 * top)


def rounds_chart(workload: str, base: str, ratios: Mapping[str, Mapping[int, float]],
                 comparisons: Mapping[str, Comparison], min_effect: float,
                 level: str = "95%") -> str:
    """What a paired verdict is built from: each round's value of a config over the base's
    in the same round, as a change in percent (one dot per round), with the effect and its
    interval as a line and a band, and the minimum effect either side of zero.  Rounds are
    shown from 1, as the terminal counts them."""
    title = f"{workload}: each round against {base}"
    fig, ax = _axes(title, "round", f"change against {base} in the same round (%)\n"
                    f"(line: effect; band: {level} CI)")
    ax.axhline(0, color="#333333", lw=0.8)
    for sign in (-1, 1):
        ax.axhline(100 * sign * min_effect, color="#999999", lw=0.8, ls=":",
                   label=f"±{fmt.short(100 * min_effect)}% (minimum effect)" if sign > 0 else None)
    lo_all, hi_all = [0.0], [0.0]
    for i, (name, by_round) in enumerate(ratios.items()):
        c = colour(i + 1)          # the base keeps the first colour, as in the other charts
        rounds = sorted(by_round)
        ys = [100 * (by_round[r] - 1) for r in rounds]
        ax.plot([r + 1 for r in rounds], ys, "o", color=c, ms=5, zorder=3,
                label=f"{name}: a round")
        cmp = comparisons.get(name)
        if cmp is not None and rounds:
            x0, x1 = rounds[0] + 0.6, rounds[-1] + 1.4
            ax.hlines(100 * cmp.change, x0, x1, color=c, lw=1.4,
                      label=f"{name}: effect, {level} CI")
            if fmt.known(cmp.ci_low) and fmt.known(cmp.ci_high):
                ax.fill_between([x0, x1], 100 * (cmp.ci_low - 1), 100 * (cmp.ci_high - 1),
                                color=c, alpha=0.18, lw=0)
                lo_all.append(100 * (cmp.ci_low - 1))
                hi_all.append(100 * (cmp.ci_high - 1))
        lo_all += ys
        hi_all += ys
    pad = max(1.0, 0.1 * (max(hi_all) - min(lo_all)))
    ax.set_ylim(min(min(lo_all), -100 * min_effect) - pad,
                max(max(hi_all), 100 * min_effect) + pad)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:+g}"))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    # below the axes: inside, it would cover the dots it explains
    ax.legend(frameon=False, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2),
              ncol=3)
    return _svg(fig, title)


def series_chart(workload: str, ylabel: str, series: dict[str, list[list[float]]],
                 warmups: Mapping[str, float] | None = None, what: str = "throughput",
                 checkpoints: Mapping[str, Sequence[float]] | None = None,
                 slice_s: float | None = None) -> str:
    """A per-second series of every trial, one colour per config; the measured interval
    starts at 0, after the warm-up, whose length the x label gives.  ``checkpoints``: the
    seconds by which a checkpoint had ended in a trial of each config (dashed lines).
    ``slice_s``: the trials were taken side by side, each point one slice of that length,
    the configs taking turns (so a point's neighbour is not the next second)."""
    w = [v for v in (warmups or {}).values() if fmt.known(v)]
    warm = (f"after a warm-up of {fmt.number(min(w))}–{fmt.seconds(max(w))}, not shown"
            if w and round(min(w)) != round(max(w))
            else f"after a {fmt.seconds(w[0])} warm-up, not shown" if w else "")
    if slice_s:
        after = (f"slice of the trial ({fmt.short(slice_s)} s each, configs taking turns"
                 + (f"; {warm})" if warm else ")"))
    else:
        after = "second of the measured interval" + (f" ({warm})" if warm else "")
    title = f"{workload}: {what} per {'slice' if slice_s else 'second'}, every trial"
    fig, ax = _axes(title, after, ylabel)
    for i, (name, runs) in enumerate(series.items()):
        for j, s in enumerate(runs):
            ax.plot(range(1, len(s) + 1), s, color=colour(i), alpha=0.7, linewidth=1.1,
                    label=name if j == 0 else None)
        for k, x in enumerate((checkpoints or {}).get(name) or []):
            ax.axvline(x, color=colour(i), ls="--", lw=0.9, alpha=0.8,
                       label=f"{name}: checkpoint ended (±1 s)" if k == 0 else None)
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    _legend(ax, len(series) + sum(1 for v in (checkpoints or {}).values() if v))
    return _svg(fig, title)


def percentiles_chart(workload: str, rows: Mapping[str, Mapping[str, float | None]]) -> str:
    """Latency at p50, p95, p99 and the maximum per config (medians over the trials),
    grouped bars on a log axis so the tail and the median are both readable."""
    keys = ["p50", "p95", "p99", "max"]
    title = f"{workload}: latency percentiles"
    fig, ax = _axes(title, "percentile", "latency (ms, log scale; median over trials)")
    n = max(1, len(rows))
    width = 0.8 / n
    for i, (name, vals) in enumerate(rows.items()):
        xs = [k + (i - (n - 1) / 2) * width for k in range(len(keys))]
        ys = [vals.get(k) if fmt.known(vals.get(k)) and vals.get(k) > 0 else 0 for k in keys]
        ax.bar(xs, ys, width=width * 0.95, color=colour(i), label=name)
    ax.set_xticks(range(len(keys)), keys)
    ax.set_yscale("log")
    _plain_log(ax.yaxis)
    _legend(ax, n)
    return _svg(fig, title)


def cdf_chart(workload: str, rows: Mapping[str, Sequence[tuple[float, float]]]) -> str:
    """The latency distribution per config: latency (log scale) against the percentile on
    a "nines" axis (50%, 90%, 99%, 99.9%, ...), so the tail gets as much room as the body.
    Each point is the median over the trials of that quantile of pgbench's per-transaction
    log."""
    title = f"{workload}: latency distribution"
    fig, ax = _axes(title, "latency (ms, log scale)", "percentile of transactions")
    top = 0.0
    for i, (name, pts) in enumerate(rows.items()):
        pts = [(q, v) for q, v in pts if q < 1.0 and v > 0]
        ys = [-math.log10(1 - q) for q, _ in pts]
        top = max([top] + ys)
        ax.plot([v for _, v in pts], ys, color=colour(i), lw=1.6, label=name)
    ticks = [(0.0, "0%"), (math.log10(2), "50%"), (1.0, "90%"), (2.0, "99%"),
             (3.0, "99.9%"), (4.0, "99.99%")]
    ticks = [t for t in ticks if t[0] <= top + 0.01]
    if top > 2:     # "0%" and "50%" are 0.3 apart: on a tall axis their labels touch
        ticks = ticks[1:]
    ax.set_yticks([t[0] for t in ticks], [t[1] for t in ticks])
    ax.set_xscale("log")
    _plain_log(ax.xaxis)
    ax.grid(alpha=0.3)
    _legend(ax, len(rows), loc="lower right")
    return _svg(fig, title)


def cost_chart(workload: str, rows: Mapping[str, Mapping[str, float | None]]) -> str:
    """CPU time per operation: the server's and the load generator's, stacked per config."""
    title = f"{workload}: CPU per operation"
    fig, ax = _axes(title, "config", "CPU µs per operation (median over trials)")
    names = list(rows)
    server = [rows[n].get("server_us") or 0 for n in names]
    client = [rows[n].get("client_us") or 0 for n in names]
    ax.bar(names, server, color=PALETTE[0], label="server (postmaster's process tree)")
    ax.bar(names, client, bottom=server, color=PALETTE[1], label="client (load generator)")
    for i, (s, c) in enumerate(zip(server, client)):
        ax.annotate(f"{fmt.us(s)} + {fmt.us(c)}", (i, s + c), textcoords="offset points",
                    xytext=(0, 3), ha="center")
    ax.set_ylim(top=max([1.0] + [s + c for s, c in zip(server, client)]) * 1.12)
    ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    return _svg(fig, title)


def waits_chart(workload: str, shares: Mapping[str, Mapping[str, float]]) -> str:
    """Where the server's sessions were, sampled at 10 Hz: the top wait events' share of the
    samples per config, as horizontal grouped bars."""
    events: list[str] = []
    for sh in shares.values():
        for ev in sorted(sh, key=lambda e: -sh[e])[:6]:
            if ev not in events:
                events.append(ev)
    title = f"{workload}: wait events"
    fig, ax = _axes(title, "share of samples of active sessions (%)", "wait event (CPU: none)",
                    size=(5.6, 1.2 + 0.22 * max(3, len(events)) * max(1, len(shares))))
    n = max(1, len(shares))
    h = 0.8 / n
    for i, (name, sh) in enumerate(shares.items()):
        ys = [k + (i - (n - 1) / 2) * h for k in range(len(events))]
        ax.barh(ys, [100 * sh.get(e, 0.0) for e in events], height=h * 0.95, color=colour(i),
                label=name)
    ax.set_yticks(range(len(events)), events)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    _legend(ax, n, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _svg(fig, title)


def sweep_chart(workload: str, unit: str,
                points: Mapping[str, Sequence[tuple[int, float]]]) -> str:
    """Throughput against client count, one line per config (a client sweep)."""
    title = f"{workload}: throughput by client count"
    fig, ax = _axes(title, "clients (log scale)", f"{fmt.unit_label(unit)} (median)")
    for i, (name, pts) in enumerate(points.items()):
        pts = sorted(pts)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=colour(i),
                label=name)
    ax.set_xscale("log", base=2)
    xs = sorted({p[0] for pts in points.values() for p in pts})
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_ylim(bottom=0)
    ax.legend(frameon=False)
    return _svg(fig, title)


def speedup_chart(workload: str, points: Mapping[str, Sequence[tuple[float, float]]]) -> str:
    """Parallel query: throughput relative to the smallest degree against the number of
    workers, one line per config, and the ideal line (workers plus the leader)."""
    title = f"{workload}: speedup by parallel workers"
    fig, ax = _axes(title, "parallel workers (max_parallel_workers_per_gather)",
                    "speedup over the smallest degree (×)")
    xs = sorted({x for pts in points.values() for x, _ in pts})
    if xs:
        ax.plot(xs, [(x + 1) / (xs[0] + 1) for x in xs], color="#666666", ls="--", lw=1,
                label="ideal (workers + leader)")
    for i, (name, pts) in enumerate(points.items()):
        ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", color=colour(i),
                label=name)
    ax.set_xticks(xs, [str(int(x)) for x in xs])
    ax.set_ylim(bottom=0)
    ax.legend(frameon=False)
    return _svg(fig, title)


def size_chart(workload: str, unit: str, points: Mapping[str, Sequence[tuple[float, float]]],
               shared_buffers: Mapping[str, int | None]) -> str:
    """Throughput against database size (log scale), shared_buffers marked per config."""
    title = f"{workload}: throughput by database size"
    fig, ax = _axes(title, "database size (MB, log scale)", f"{fmt.unit_label(unit)}")
    for i, (name, pts) in enumerate(points.items()):
        ax.plot([x / 2**20 for x, _ in pts], [y for _, y in pts], marker="o",
                color=colour(i), label=name)
        sb = shared_buffers.get(name)
        if sb:
            ax.axvline(sb / 2**20, color=colour(i), ls=":", lw=1.2)
            ax.annotate(f"shared_buffers\n{fmt.size(sb)}", (sb / 2**20, 0),
                        xycoords=("data", "axes fraction"), xytext=(3, 4),
                        textcoords="offset points", fontsize=7, color=colour(i))
    ax.set_xscale("log")
    xs = sorted({x / 2**20 for pts in points.values() for x, _ in pts})
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(xs, [fmt.number(x) for x in xs])
    ys = [y for pts in points.values() for _, y in pts if fmt.known(y)]
    ax.set_ylim(0, max(ys or [1.0]) * 1.12)
    _legend(ax, len(points))
    return _svg(fig, title)


def waterfall_chart(workload: str, steps: list[dict], level: str = "95%") -> str:
    """`run --stack`: the level of each config relative to baseline (1.0), each layer a
    floating bar from the level before it to its own, with the 95% interval of its level
    against baseline as a whisker and its own step (against the layer before) as a label."""
    title = f"{workload}: what each layer adds"
    fig, ax = _axes(title, "config (each adds one layer to the one before)",
                    f"throughput relative to baseline (×)\n(whisker: {level} CI vs baseline)")
    level, names = 1.0, ["baseline"]
    ax.bar(0, 1.0, color="#999999", alpha=0.5, width=0.6)
    for i, s in enumerate(steps, start=1):
        vb, vp = s.get("vs_baseline") or {}, s.get("vs_previous") or {}
        new = vb.get("ratio") or level * (vp.get("ratio") or 1.0)
        ax.bar(i, new - level, bottom=level, width=0.6,
               color=FASTER if new >= level else SLOWER, alpha=0.85)
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
    top = max([1.0] + [(s.get("vs_baseline") or {}).get("ci_high") or 1.0 for s in steps])
    bottom = min([1.0] + [(s.get("vs_baseline") or {}).get("ci_low") or 1.0 for s in steps])
    ax.set_ylim(max(0.0, bottom - 0.15), top + 0.2)
    return _svg(fig, title)

