"""Two stored runs side by side (`pgaccel compare`): pure, from the runs as
:meth:`Store.get_run <pgaccel.session.store.Store.get_run>` returns them.

Two runs are not paired: each may have been taken at another hour or on another host, so the
comparison is unpaired (:func:`effect.compare`), and a difference of hosts is flagged."""

from __future__ import annotations

from typing import Any, Mapping

from . import effect, stats


def _groups(run: Mapping[str, Any]) -> dict[tuple, list[float]]:
    """Each (workload, clients, variant, metric)'s primary values of the run's good trials;
    a run with one variant has it as ``*``, so that it pairs with the other run's whatever
    either is called."""
    single = len({t["variant"] for t in run["trials"]}) == 1
    g: dict[tuple, list[float]] = {}
    for t in run["trials"]:
        if t["status"] == "ok" and t["primary_value"] is not None:
            key = (t["workload"], t["clients"], "*" if single else t["variant"],
                   t["primary_metric"])
            g.setdefault(key, []).append(t["primary_value"])
    return g


def compare_runs(a: Mapping[str, Any], b: Mapping[str, Any], *,
                 higher_is_better: bool = True, min_effect: float = 0.02) -> dict:
    """Per (workload, clients, variant) the medians of two runs' primary values side by
    side, with an :func:`effect.compare` verdict of ``b`` against ``a``.  ``hosts_differ``
    flags runs recorded on hosts with different fingerprints (or an unknown one)."""
    ga, gb = _groups(a), _groups(b)
    rows = []
    for key in sorted(set(ga) | set(gb), key=lambda k: tuple(str(x) for x in k)):
        va, vb = ga.get(key, []), gb.get(key, [])
        sa, sb = stats.summarize(va), stats.summarize(vb)
        c = effect.compare(va, vb, higher_is_better=higher_is_better,
                           min_effect=min_effect) if va and vb else None
        rows.append({"workload": key[0], "clients": key[1], "variant": key[2],
                     "metric": key[3], "n_a": sa.n, "median_a": sa.median, "cv_a": sa.cv,
                     "n_b": sb.n, "median_b": sb.median, "cv_b": sb.cv,
                     "ratio": c.ratio if c else None, "verdict": c.verdict if c else None,
                     "explain": c.explain if c else "present in one run only"})
    fa, fb = a["host_fingerprint"], b["host_fingerprint"]
    return {"run_a": a["id"], "run_b": b["id"], "host_a": fa, "host_b": fb,
            "hosts_differ": fa is None or fb is None or fa != fb, "rows": rows}
