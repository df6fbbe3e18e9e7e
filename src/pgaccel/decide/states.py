"""Trials of one measure that ran in two states (pure).

A trial's buffer accesses per operation (``pg``'s ``db_blks_hit + db_blks_read`` over its
operations) hardly move while the work stays the same: l.i1's were 16-19 in every trial of
an A/A here.  l.i2's fell into two groups, 17-29 and 70-79 per insert, with rates 5,200-6,500
against 3,700-4,800 inserts/s (runs 20261126-230736-be6c and 20261126-231605-a14e): what the
data was left in by the steps before (how far autovacuum had got) decided the step's speed
more than anything the variants did, and a round whose two trials fell in different groups
put them 41-55% apart while its other pairs were within 4%.  (There it was whether an
autoanalyze had run while l.i1's deleted rows were not yet vacuumed: every l.i2 DELETE,
planned anew, then probed the index's low end through those dead entries, about 600 buffer
accesses of planning each; docs/measurements.md.)  Such a split is said beside the measure's
verdict: the paired interval only sees a wide spread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

# consecutive per-op values this far apart (ratio) split the trials into two groups
MIN_GAP = 1.5
MIN_TRIALS = 4


@dataclass(frozen=True)
class StateSplit:
    light: tuple[float, float, int]          # lowest, highest, trials
    heavy: tuple[float, float, int]
    # rounds whose trials fell in both groups: round -> variant -> "light" | "heavy"
    mixed: dict[int, dict[str, str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"metric": "buffer accesses per operation", "light": list(self.light),
                "heavy": list(self.heavy),
                "mixed": {str(r): v for r, v in self.mixed.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "StateSplit | None":
        if not d:
            return None
        lo, hi = d["light"], d["heavy"]
        return cls((float(lo[0]), float(lo[1]), int(lo[2])),
                   (float(hi[0]), float(hi[1]), int(hi[2])),
                   {int(r): dict(v) for r, v in (d.get("mixed") or {}).items()})


def buffer_accesses_per_op(metrics: Mapping[str, Any]) -> float | None:
    """A trial's shared-buffer accesses (hits and reads) per operation, if counted."""
    pg = metrics.get("pg") or {}
    ops = metrics.get("ops")
    hit, read = pg.get("db_blks_hit"), pg.get("db_blks_read")
    if not ops or hit is None or read is None:
        return None
    return (hit + read) / ops


def split_states(per_trial: Mapping[tuple[str, int], float | None],
                 min_gap: float = MIN_GAP, min_trials: int = MIN_TRIALS
                 ) -> StateSplit | None:
    """The two groups of ``per_trial`` ((variant, round) -> work per operation) where the
    widest step between consecutive values (sorted) is a ratio of at least ``min_gap``;
    None when no step is that wide, when fewer than ``min_trials`` trials have a value, or
    when no variant has trials in both groups (then the configs differ in the work they do,
    which is what they are compared for, not the state they ran in)."""
    known = {k: v for k, v in per_trial.items() if v is not None and v > 0}
    if len(known) < min_trials:
        return None
    vals = sorted(known.values())
    ratio, cut = max((vals[i + 1] / vals[i], i + 1) for i in range(len(vals) - 1))
    if ratio < min_gap:
        return None
    lo, hi = vals[:cut], vals[cut:]
    edge = vals[cut - 1]
    state = {k: ("light" if v <= edge else "heavy") for k, v in known.items()}
    rounds: dict[int, dict[str, str]] = {}
    seen: dict[str, set[str]] = {}
    for (variant, rnd), s in state.items():
        rounds.setdefault(rnd, {})[variant] = s
        seen.setdefault(variant, set()).add(s)
    if not any(len(s) == 2 for s in seen.values()):
        return None
    mixed = {r: dict(sorted(v.items())) for r, v in sorted(rounds.items())
             if len(set(v.values())) > 1}
    return StateSplit((lo[0], lo[-1], len(lo)), (hi[0], hi[-1], len(hi)), mixed)
