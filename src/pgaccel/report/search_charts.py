"""The charts of a search's page (inline SVG through :mod:`.charts`' conventions): every
candidate's estimate with its interval in the order tried and the incumbent's path; the
candidates over the space in parallel coordinates; each knob's importance."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from matplotlib import colors as mcolors
from matplotlib import cm

from . import format as fmt
from .charts import FASTER, SLOWER, _axes, _svg, plt
from .search import CandidateRow

STAGE_COLOUR = {"better": FASTER, "not better": "#E69F00", "dropped": "#999999"}
STAGE_MARKER = {"better": "o", "not better": "D", "dropped": "o"}


def _pct(r: float) -> float:
    return (r - 1) * 100


def candidates_chart(rows: Sequence[CandidateRow], path: Sequence[tuple[int | None, float]],
                     level: str) -> str:
    """x: the candidates in the order tried; y: each one's screen estimate against the
    rules (the incumbent's estimate times the candidate's ratio to it) with its interval,
    coloured by the stage it reached, a confirmation's estimate as a hollow diamond; the
    incumbent's path as a step line."""
    title = "Every candidate against pgaccel's rules, in the order tried"
    fig, ax = _axes(title, "candidate (order tried)",
                    f"% vs pgaccel's rules\n(screen estimate, {level} CI)", size=(7.2, 3.4))
    seen: set[str] = set()
    lows, highs, points = [], [], []
    for r in rows:
        if r.screen is None:
            continue
        y, lo, hi = (_pct(v) for v in r.over_rules(r.screen))
        c = STAGE_COLOUR.get(r.stage, SLOWER)
        label = r.stage if r.stage not in seen else None
        seen.add(r.stage)
        if math.isfinite(lo) and math.isfinite(hi):
            ax.errorbar(r.number, y, yerr=[[y - lo], [hi - y]], fmt="none", ecolor=c,
                        lw=1, capsize=2, alpha=0.8)
            lows.append(lo)
            highs.append(hi)
        points.append(y)
        ax.scatter([r.number], [y], color=c, s=22, zorder=3, label=label,
                   marker=STAGE_MARKER.get(r.stage, "x"))
        if r.confirm is not None:
            yc = _pct(r.over_rules(r.confirm)[0])
            ax.scatter([r.number + 0.3], [yc], facecolors="none", edgecolors=c, s=30,
                       marker="D", zorder=3,
                       label="confirmation estimate" if "conf" not in seen else None)
            seen.add("conf")
            points.append(yc)
    last = max([r.number for r in rows] or [0]) + 1
    xs = [(0 if n is None else n) for n, _ in path] + [last]
    ys = [_pct(math.exp(v)) for _, v in path]
    ax.step(xs, ys + ys[-1:], where="post", color="#333333", lw=1.4,
            label="incumbent (search's estimate)")
    ax.axhline(0, color="#333333", lw=0.6, ls=":")
    if points:      # every estimate shown; the wildest tenth of the interval ends cut off
        span_lo = min(points + sorted(lows)[len(lows) // 10:][:1])
        span_hi = max(points + sorted(highs)[:len(highs) - len(highs) // 10][-1:])
        pad = 0.08 * (span_hi - span_lo or 1)
        ax.set_ylim(min(span_lo, -2) - pad, max(span_hi, 2) + pad)
    ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _svg(fig, title)


def _position(knob: Mapping[str, Any], value: Any) -> float | None:
    """Where ``value`` lies in the knob's range, 0 (low) to 1 (high); a log knob on its
    log scale; a choice by its index."""
    if knob.get("kind") == "choice":
        ch = list(knob.get("choices") or [])
        if str(value) not in ch:
            return None
        return ch.index(str(value)) / max(1, len(ch) - 1)
    try:
        v, lo, hi = float(value), float(knob["low"]), float(knob["high"])
    except (TypeError, ValueError, KeyError):
        return None
    if hi <= lo:
        return 0.5
    if knob.get("log") and lo > 0 and v > 0:
        return min(1.0, max(0.0, math.log(v / lo) / math.log(hi / lo)))
    return min(1.0, max(0.0, (v - lo) / (hi - lo)))


def space_of(journal: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The knobs' ranges as journaled; for an older journal, the range the candidates
    covered (choices as seen)."""
    if journal.get("space"):
        return list(journal["space"])
    from ..tune.space import GB, default_space
    kinds = {k.name: k for k in default_space(16 * GB, 4, 99, risk_durability=True)}
    out = []
    for name in journal.get("knobs") or []:
        vals = [c["params"][name] for c in journal.get("candidates", [])
                if name in (c.get("params") or {})]
        if not vals:
            continue
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            k = kinds.get(name)
            out.append({"name": name, "kind": k.kind if k else "real", "low": min(vals),
                        "high": max(vals), "log": bool(k and k.log and min(vals) > 0)})
        else:
            out.append({"name": name, "kind": "choice", "log": False,
                        "choices": sorted({str(v) for v in vals})})
    return out


def _end_label(knob: Mapping[str, Any], end: str) -> str:
    if knob.get("kind") == "choice":
        ch = knob.get("choices") or []
        return str(ch[0] if end == "low" else ch[-1]) if ch else ""
    v = float(knob[end])
    if knob.get("kind") == "bytes":
        return fmt.size(v)
    if knob.get("kind") == "ms":
        return fmt.duration(v / 1000)
    return fmt.short(v)


def parallel_chart(space: Sequence[Mapping[str, Any]], rows: Sequence[CandidateRow]) -> str:
    """Each candidate as a line across the knobs' axes (each knob's range from low to
    high), coloured by its screen estimate against the rules; the dropped ones faint."""
    title = "The candidates over the space (parallel coordinates)"
    knobs = [k for k in space if any(k["name"] in r.params for r in rows)]
    fig, ax = _axes(title, "", "position in the knob's range (low → high)",
                    size=(max(4.2, 0.62 * len(knobs) + 1.8), 3.8))
    ests = [_pct(r.over_rules(r.screen)[0]) for r in rows if r.screen]
    lim = max([abs(e) for e in ests] + [2.0])
    norm = mcolors.TwoSlopeNorm(vmin=-lim, vcenter=0, vmax=lim)
    cmap = plt.get_cmap("RdBu")
    for r in sorted(rows, key=lambda r: r.stage != "dropped"):   # the promoted on top
        if r.screen is None:
            continue
        pts = [(i, _position(k, r.params.get(k["name"]))) for i, k in enumerate(knobs)]
        pts = [(i, p) for i, p in pts if p is not None]
        est = _pct(r.over_rules(r.screen)[0])
        dropped = r.stage == "dropped"
        ax.plot([i for i, _ in pts], [p for _, p in pts], color=cmap(norm(est)),
                lw=0.8 if dropped else 1.8, alpha=0.45 if dropped else 0.95,
                zorder=2 if dropped else 3)
    for i, k in enumerate(knobs):
        ax.axvline(i, color="#bbbbbb", lw=0.6, zorder=1)
        ax.annotate(_end_label(k, "low"), (i, 0), xytext=(0, -9), textcoords="offset points",
                    ha="center", fontsize=6, color="#555555")
        ax.annotate(_end_label(k, "high"), (i, 1), xytext=(0, 4), textcoords="offset points",
                    ha="center", fontsize=6, color="#555555")
    ax.set_xticks(range(len(knobs)), [k["name"] for k in knobs], rotation=35, ha="right")
    ax.set_ylim(-0.08, 1.08)
    ax.set_yticks([0, 0.5, 1], ["low", "", "high"])
    ax.grid(False)
    sm = cm.ScalarMappable(norm=norm, cmap=cmap)
    fig.colorbar(sm, ax=ax, pad=0.01, fraction=0.03).set_label("% vs rules (screen)")
    return _svg(fig, title)


def importance_chart(importance: Mapping[str, float], top: int = 10) -> str:
    """Optuna's importance of each knob (fANOVA-style share of the explained variance)."""
    title = "Which knobs mattered (Optuna's importance)"
    items = sorted(importance.items(), key=lambda kv: kv[1])[-top:]
    fig, ax = _axes(title, "share of the variance of the estimates", "",
                    size=(5.6, 0.28 * len(items) + 1.1))
    ax.barh([k for k, _ in items], [v for _, v in items], color=FASTER, alpha=0.8)
    for i, (_, v) in enumerate(items):
        ax.annotate(fmt.share(v), (v, i), xytext=(3, -3), textcoords="offset points",
                    fontsize=7)
    ax.grid(axis="x", alpha=0.3)
    ax.grid(axis="y", visible=False)
    return _svg(fig, title)
