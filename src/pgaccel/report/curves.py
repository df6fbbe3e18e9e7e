"""Step workloads whose steps lie on an axis, as curves for the report (pure):
parallel-scan's degrees (``count@2``) become speedup against workers, data-size-sweep's
scales (``scale=50``) throughput against the database size with shared_buffers as the step
ran."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..pg.values import parse_size
from .view import (DEFAULT_SHARED_BUFFERS, median_of, shared_buffers_by_config, summary_of,
                   trials_of)


@dataclass(frozen=True)
class Curve:
    """A step workload whose steps lie on an axis: parallel-scan's degrees (``count@2``)
    or data-size-sweep's scales (``scale=50``).  ``points``: config -> (x, median
    throughput, extra) with x the worker count or the database size in bytes."""
    kind: str                     # "degree" | "size"
    workload: str                 # "parallel-scan", or "parallel-scan count" per query
    clients: int
    unit: str
    points: dict[str, list[tuple[float, float, dict[str, Any]]]]
    shared_buffers: dict[str, int | None] = field(default_factory=dict)

    def speedup(self, name: str) -> list[tuple[float, float]]:
        """Throughput over the smallest degree's, per degree."""
        pts = sorted(self.points.get(name) or [])
        return [(x, y / pts[0][1]) for x, y, _ in pts] if pts and pts[0][1] else []


_DEGREE = re.compile(r"^(?P<q>.+)@(?P<x>\d+)$")
_SCALE = re.compile(r"^scale=(?P<x>\d+)$")


def curves(doc: Mapping[str, Any]) -> list[Curve]:
    s = summary_of(doc)
    trials = trials_of(doc)
    sbs = shared_buffers_by_config(doc)
    groups: dict[tuple, dict[str, list]] = {}
    units: dict[tuple, str] = {}
    for w in s.steps:
        step = w.step or ""
        m_deg, m_size = _DEGREE.match(step), _SCALE.match(step)
        if not (m_deg or m_size):
            continue
        kind = "degree" if m_deg else "size"
        label = f"{w.key} {m_deg.group('q')}" if m_deg else w.key
        key = (kind, label, w.clients)
        units[key] = w.unit
        for name, v in w.variants.items():
            extra: dict[str, Any] = {}
            if m_deg:
                x = float(m_deg.group("x"))
            else:
                ts = [t for t in trials if t.workload == w.workload and t.variant == name
                      and t.clients == w.clients]
                ex = [(t.metrics or {}).get("extra") or {} for t in ts]
                size = median_of([e.get("db_size_bytes") for e in ex])
                if size is None:
                    continue
                x = size
                extra = {"hit_ratio": median_of([e.get("buffer_hit_ratio") for e in ex]),
                         "x_shared_buffers": median_of([e.get("size_over_shared_buffers")
                                                      for e in ex]),
                         "shared_buffers": median_of([e.get("shared_buffers_bytes") for e in ex]),
                         "scale": int(m_size.group("x"))}
            groups.setdefault(key, {}).setdefault(name, []).append((x, v.median, extra))
    out = []
    for (kind, label, n), pts in groups.items():
        sb = {}
        for name, ps in pts.items():
            first = sorted(ps)[0]
            if kind == "size" and first[2].get("shared_buffers"):
                sb[name] = int(first[2]["shared_buffers"])                 # as the step ran
                continue
            if kind == "size" and first[2].get("x_shared_buffers"):
                sb[name] = int(first[0] / first[2]["x_shared_buffers"])   # as the step ran
                continue
            try:
                sb[name] = parse_size(sbs.get(name, DEFAULT_SHARED_BUFFERS))
            except (ValueError, TypeError):
                sb[name] = None
        out.append(Curve(kind, label, n, units[(kind, label, n)],
                         {k: sorted(v) for k, v in pts.items()}, sb))
    return out
