"""The constants pg_stat_statements normalised away, recovered from what ran (pure).

pg_stat_statements shows ``LIMIT $2`` where the application wrote ``LIMIT 20``.  The server
shows the text that ran in two places: its log (``--log``, ``--from-log``: every execution,
with the bound parameters in DETAIL) and pg_stat_activity (each backend's current or last
statement, with the literals the application wrote inline; sampled during the window).  Each
observed text is matched to its captured statement by libpg_query's fingerprint (which
ignores constants), then aligned with it node by node (``sqlshape.align``): the value each
``$n`` stood for.

What is kept:

* **constants** of parameters that meet no column (a LIMIT, an interval, a number in
  arithmetic), when they are numbers, intervals, dates, timestamps or booleans: the
  statement's shape, kept by default (statements.json), with how often each was seen;
* **tuples** of every parameter, for ``--with-values`` only (values.json): those are the
  user's data.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Any, Iterable, Mapping

from .replay import replayable
from .sqlshape import Shape, ShapeError, align, fingerprint, shape
from .statements import Statement

MAX_CONSTANTS = 20          # distinct values kept per parameter (the most frequent)
_SHAPE_VALUE = re.compile(
    r"-?\d+(\.\d+)?|true|false|"
    r"(@\s*)?(-?\d+(\.\d+)?\s*(microseconds?|milliseconds?|seconds?|secs?|minutes?|mins?|"
    r"hours?|days?|weeks?|months?|mons?|years?)\s*)+(ago)?|"
    r"\d{4}-\d\d-\d\d([ T][\d:.]+([+-]\d\d(:?\d\d)?|Z)?)?|now|today|yesterday|tomorrow|"
    # date_trunc's, extract's and date_part's fields
    r"microseconds?|milliseconds?|second|minute|hour|day|week|month|quarter|year|decade|"
    r"century|millennium|epoch|dow|doy|isodow|isoyear",
    re.I)


_NAME = re.compile(r'[A-Za-z_][\w$]*(\.[A-Za-z_][\w$]*)?|"[^"]+"(\."[^"]+")?')


def is_shape_value(v: Any, cast: str | None = None) -> bool:
    """A number, interval, date, timestamp, boolean or a date field ('hour'), or a
    sequence's name where the parser says one goes (nextval): not text a user wrote."""
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):            # a number literal the parser saw
        return cast != "regclass"
    if not isinstance(v, str):
        return False
    if cast == "regclass":
        return bool(_NAME.fullmatch(v.strip()))
    return bool(_SHAPE_VALUE.fullmatch(v.strip()))


_NUMBER = re.compile(r"\s*-?\d+(\.\d+)?\s*")


def _count(cnt: Counter, v: Any) -> None:
    """One more sighting of ``v``: a bound parameter's text ('21') and the literal the
    parser saw in another execution (21) are one value, kept as the number."""
    if isinstance(v, str) and _NUMBER.fullmatch(v):
        num = float(v) if "." in v else int(v)
        if num in cnt:
            cnt[num] += 1
            return
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        for k in [k for k in cnt if isinstance(k, str) and _NUMBER.fullmatch(k)]:
            if (float(k) if "." in k else int(k)) == v:
                cnt[v] += cnt.pop(k)
    cnt[v] += 1


class Recovery:
    """Observed statements matched to the captured ones; :meth:`add` each observation."""

    def __init__(self, stmts: Iterable[Statement], limit: int = 10_000, seed: int = 0):
        self.by_fp: dict[str, list[tuple[Statement, Shape]]] = {}
        for s in replayable(stmts):
            try:
                sh = shape(s.query)
            except ShapeError:
                continue
            self.by_fp.setdefault(sh.fingerprint, []).append((s, sh))
        self.limit = limit
        self.rng = random.Random(seed)
        self.constants: dict[int, dict[int, Counter]] = {}
        self.tuples: dict[int, list[dict[int, Any]]] = {}
        self._seen: Counter = Counter()
        self.matched = 0
        self.unmatched = 0

    def add(self, text: str, params: Mapping[int, str | None] | None = None) -> bool:
        """One observed execution (its text, and its bound parameters if any); whether it
        matched a captured statement."""
        cands = self.by_fp.get(fingerprint(text))
        if not cands:
            self.unmatched += 1
            return False
        for st, sh in cands:
            vals = align(st.query, text, params)
            if set(vals) >= set(sh.params) and (vals or not sh.params):
                break
        else:
            self.unmatched += 1
            return False
        self.matched += 1
        # the same text under several queryids (another user, other parameter types):
        # what one execution shows belongs to each of them
        for twin, _ in (c for c in cands if c[0].query == st.query):
            self._note(twin.queryid, sh, vals)
        return True

    def _note(self, qid: int, sh: Shape, vals: Mapping[int, Any]) -> None:
        per = self.constants.setdefault(qid, {})
        for n, v in vals.items():
            p = sh.params.get(n)
            if p is not None and p.role != "column" and is_shape_value(v, p.cast):
                _count(per.setdefault(n, Counter()), v)
        if sh.params and all(vals.get(n) is not None for n in sh.params):
            k = self._seen[qid]
            self._seen[qid] += 1
            bucket = self.tuples.setdefault(qid, [])
            row = {n: vals[n] for n in sh.params}
            if k < self.limit:
                bucket.append(row)
            else:
                j = self.rng.randrange(k + 1)
                if j < self.limit:
                    bucket[j] = row

    def constants_of(self, queryid: int) -> dict[str, list[list[Any]]]:
        """statements.json's ``constants`` of one statement: {"n": [[value, count], ...]}."""
        return {str(n): [[v, c] for v, c in cnt.most_common(MAX_CONSTANTS)]
                for n, cnt in sorted(self.constants.get(queryid, {}).items()) if cnt}

    def values(self) -> dict[str, list[dict[str, Any]]]:
        """values.json: each statement's tuples by queryid ({"n": value})."""
        return {str(q): [{str(n): v for n, v in t.items()} for t in ts]
                for q, ts in self.tuples.items() if ts}
