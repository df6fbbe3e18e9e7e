"""When a run that adds rounds until decided judges each workload, and at what level (pure).

A run with ``until_decided`` looks at each workload's intervals after round ``first``,
``first + 1``, ... up to that workload's *last look*, each look at the stricter level of
decide/sequential.py that keeps the overall chance of a wrong "faster" or "slower" at
``1 - confidence``.  Without a budget the last look is ``cap`` (``max_rounds``).  With a
budget it is fixed once, after the workload's first round and before any look, as far as
the time left reaches at that round's pace (:func:`schedule.last_look`): a last look the
budget never reaches would leave part of the error unspent and every look stricter than it
needs to be.  When the rounds run slower than that pace and the budget has no room for
another round before the last look, the look then becomes the last and spends what is left
(:meth:`Looks.end`).  The Experiment keeps one :class:`Looks` and asks it for levels and limits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .judge import Level
from .schedule import last_look
from .sequential import look_level


@dataclass
class Looks:
    confidence: float = 0.95
    first: int = 3                        # the minimum rounds: the first look
    cap: int | None = None                # max_rounds
    until_decided: bool = False
    last: dict[str, int] = field(default_factory=dict)   # workload label -> its last look
    # workload label -> the round the budget ended its looks at, before its last look
    ended: dict[str, int] = field(default_factory=dict)

    @property
    def on(self) -> bool:
        """Whether rounds are added until decided, with more than one look."""
        return bool(self.until_decided and self.cap and self.cap > self.first)

    def last_of(self, label: str | None) -> int | None:
        """The last round workload ``label`` looks at (before it is fixed: the cap)."""
        return self.last.get(label, self.cap) if label else self.cap

    def from_budget(self, label: str) -> bool:
        """Whether ``label``'s last look is the budget's, below the cap."""
        return label in self.last and self.last[label] < (self.cap or 0)

    def level_after(self, rounds_done: int, label: str | None = None) -> float:
        """The level of the interval looked at after ``rounds_done`` rounds of workload
        ``label``: the one asked for, or when looking after every round the stricter level
        of that look, which follows from the workload's last look."""
        if not self.on:
            return self.confidence
        return look_level(self.confidence, self.first, int(self.last_of(label) or 0),
                          rounds_done, end=self.ended.get(label) if label else None)

    def level_of(self, label: str) -> Level:
        """What judging workload ``label`` uses: one level, or one per number of rounds."""
        if not self.on:
            return self.confidence
        return lambda n: self.level_after(n, label)

    @property
    def judged(self) -> Level:
        """The level asked for, or one per number of rounds looked at up to the cap."""
        return self.level_after if self.on else self.confidence

    def fix(self, label: str, left_s: float, round_s: float, rounds_done: int) -> int | None:
        """After ``label``'s first round(s), with ``left_s`` of its budget share left: fix
        its last look once, before its first look; the last look, or None when it was
        already fixed, no rounds are added or the first look has passed."""
        if label in self.last or not self.on or rounds_done > self.first:
            return None
        self.last[label] = last_look(left_s, round_s, rounds_done, self.first,
                                     int(self.cap or self.first))
        return self.last[label]

    def end(self, label: str, rounds_done: int) -> bool:
        """The budget has no room for another round of ``label`` after ``rounds_done``: if
        that is before its last look, the look now is its last and spends what is left of
        the error (decide/sequential.py ``end``).  Whether it ended the looks here."""
        last = self.last_of(label)
        if (not self.on or label in self.ended or last is None
                or not self.first <= rounds_done < last):
            return False
        self.ended[label] = rounds_done
        return True

    def summary_fields(self, labels: list[str]) -> dict[str, Any]:
        """What a Summary says about the looks (nothing when there were none)."""
        if not self.on:
            return {}
        lasts = {x: int(self.ended.get(x) or self.last_of(x) or self.first) for x in labels}
        # the planned last look of each workload the budget ended sooner, so that a resumed
        # run judges its looks at the same levels (restore())
        planned = {x: int(self.last_of(x) or self.first) for x in labels if x in self.ended}
        return {"nominal_confidence": self.confidence,
                "looks": [self.first, max(lasts.values(), default=self.first)],
                "last_looks": lasts, "planned_last_looks": planned}

    @staticmethod
    def restore(summary: dict[str, Any] | None) -> tuple[dict[str, int], dict[str, int]]:
        """A stored summary's looks, for a resumed run: (planned last looks, looks the
        budget ended early), the inverse of :meth:`summary_fields`."""
        s = summary or {}
        lasts = {k: int(v) for k, v in (s.get("last_looks") or {}).items()}
        planned = {k: int(v) for k, v in (s.get("planned_last_looks") or {}).items()}
        return {**lasts, **planned}, {k: lasts[k] for k in planned if k in lasts}
