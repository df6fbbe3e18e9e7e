"""The space ``pgaccel tune --search`` explores (pure): which settings, over which values,
on a log scale where the value is a size or a rate, for one machine and server version.

Knobs are data (:class:`Knob`).  :func:`default_space` sizes the ranges from the memory and
CPUs the server may use and keeps only what the version has; :func:`for_catalog` keeps only
what the real binary's catalog knows and clips every range to the catalog's bounds;
:func:`narrowed` applies the user's TOML table (``--space FILE``).  A candidate is a dict of
knob -> number or choice (what the optimizer proposes); :meth:`Space.settings` writes it as
PostgreSQL values, and :meth:`Space.repair` keeps every candidate inside the memory budget of
``tune/rules.memory_budget`` by lowering work_mem, then maintenance_work_mem, then
shared_buffers (the optimizer is told the values that ran).

Settings that give up durability (fsync, full_page_writes, synchronous_commit) are never in
the space unless the caller asks with ``risk_durability`` (the CLI flag is named for the
risk: ``--risk-losing-committed-data``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from ..errors import UsageError
from ..pg.catalog import GucCatalog
from ..pg.values import parse_size, pg_duration, pg_size, setting_number, unit_scale

MB = 1024 * 1024
GB = 1024 * MB

KINDS = ("bytes", "int", "real", "ms", "choice")


@dataclass(frozen=True)
class Knob:
    """One setting the search varies.  ``low``/``high``: bytes for ``bytes``, milliseconds
    for ``ms``, the number itself otherwise; ``log``: sampled on a log scale."""
    name: str
    kind: str
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    choices: tuple[str, ...] = ()
    min_major: int = 0
    max_major: int = 99
    why: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: unknown kind {self.kind!r}")
        if self.kind == "choice":
            if not self.choices:
                raise ValueError(f"{self.name}: a choice knob needs choices")
        elif not self.low <= self.high:
            raise ValueError(f"{self.name}: low {self.shown(self.low)} above high "
                             f"{self.shown(self.high)}")
        if self.log and self.kind != "choice" and self.low <= 0:
            raise ValueError(f"{self.name}: a log scale needs a positive low")

    def shown(self, x: float) -> str:
        """A bound as a person writes it: sizes and times in PostgreSQL's units (not
        clamped to the range, unlike :meth:`value`)."""
        if self.kind == "bytes":
            return pg_size(int(x))
        if self.kind == "ms":
            return pg_duration(int(x))
        if self.kind == "int":
            return str(int(x))
        return f"{float(x):g}"

    def value(self, x: Any) -> str:
        """The PostgreSQL value of a proposed ``x`` (sizes to whole MB from 8 MB, else kB;
        times to whole seconds from 10 s, else ms; integers rounded; reals to 3 decimals)."""
        if self.kind == "choice":
            if str(x) not in self.choices:
                raise ValueError(f"{self.name}: {x!r} is not one of {', '.join(self.choices)}")
            return str(x)
        v = min(max(float(x), self.low), self.high)
        if self.kind == "bytes":
            step = MB if v >= 8 * MB else 1024
            return pg_size(int(round(v / step)) * step)
        if self.kind == "ms":            # whole seconds from 10 s: a parameter in s keeps them
            return pg_duration(int(round(v / 1000)) * 1000 if v >= 10_000 else int(round(v)))
        if self.kind == "int":
            return str(int(round(v)))
        return f"{round(v, 3):g}"


# durability: only with the flag named for the risk (fsync never: it risks the cluster)
UNSAFE = ("synchronous_commit", "full_page_writes", "fsync")
RISK_SEARCHED = ("synchronous_commit", "full_page_writes")


def default_space(memory_bytes: int, cpus: float, major: int, *,
                  risk_durability: bool = False) -> list[Knob]:
    """The knobs worth searching on a server with ``memory_bytes`` and ``cpus`` of version
    ``major``: memory, WAL and checkpoints, the background writer, I/O, the planner, JIT,
    huge pages, and io_method / io_workers from 18."""
    mem = max(int(memory_bytes), 1 * GB)
    ncpu = max(1, int(cpus))
    knobs = [
        Knob("shared_buffers", "bytes", 128 * MB, 0.40 * mem, log=True,
             why="the server's own cache"),
        Knob("effective_cache_size", "bytes", 0.25 * mem, 0.85 * mem, log=True,
             why="planner: how much of the data the caches hold"),
        Knob("work_mem", "bytes", 1 * MB, 256 * MB, log=True,
             why="memory per sort or hash before it spills to disk"),
        Knob("maintenance_work_mem", "bytes", 64 * MB, max(64 * MB, min(2 * GB, mem / 8)),
             log=True, why="VACUUM and index builds"),
        Knob("wal_buffers", "bytes", 1 * MB, 128 * MB, log=True,
             why="WAL kept in memory before it is written"),
        Knob("max_wal_size", "bytes", 1 * GB, max(1 * GB, min(64 * GB, 2 * mem)), log=True,
             why="WAL between checkpoints: fewer forced checkpoints and full-page images"),
        Knob("checkpoint_timeout", "ms", 5 * 60_000, 60 * 60_000, log=True,
             why="time between checkpoints"),
        Knob("checkpoint_completion_target", "real", 0.5, 0.95,
             why="how evenly a checkpoint's writes spread"),
        Knob("bgwriter_delay", "ms", 10, 1000, log=True, why="background writer's pace"),
        Knob("bgwriter_lru_maxpages", "int", 0, 1000, why="pages the writer may write a round"),
        Knob("bgwriter_lru_multiplier", "real", 1.0, 10.0, why="how far ahead it writes"),
        Knob("random_page_cost", "real", 1.0, 4.0, why="planner: cost of a random read"),
        Knob("effective_io_concurrency", "int", 1, 512, log=True,
             why="prefetch depth of bitmap heap scans"),
        Knob("max_parallel_workers_per_gather", "int", 0, ncpu, why="parallel query"),
        Knob("jit", "choice", choices=("on", "off"), why="JIT compilation of expressions"),
        Knob("huge_pages", "choice", choices=("try", "off"),
             why="shared memory on huge pages when the kernel has a pool"),
        Knob("wal_compression", "choice", choices=("off", "pglz", "lz4"), min_major=15,
             why="compress full-page images"),
        Knob("io_method", "choice", choices=("sync", "worker", "io_uring"), min_major=18,
             why="asynchronous I/O"),
        Knob("io_workers", "int", 1, 32, log=True, min_major=18,
             why="I/O worker processes (io_method = worker)"),
    ]
    if risk_durability:
        knobs += [Knob("synchronous_commit", "choice", choices=("on", "off"),
                       why="RISK: off loses the last commits in a crash"),
                  Knob("full_page_writes", "choice", choices=("on", "off"),
                       why="RISK: off can corrupt pages in a crash")]
    return [k for k in knobs if k.min_major <= major <= k.max_major]


def for_catalog(knobs: Iterable[Knob], cat: GucCatalog) -> tuple[list[Knob], list[str]]:
    """The knobs the catalog's server has, each range clipped to the catalog's [min, max]
    and each choice to the values it offers; (knobs, notes on what was left out)."""
    out: list[Knob] = []
    notes: list[str] = []
    for k in knobs:
        g = cat.get(k.name)
        if g is None:
            notes.append(f"{k.name}: this server does not have it")
            continue
        if k.kind == "choice":
            offered = k.choices
            if g.enumvals:
                allowed = {e.lower() for e in g.enumvals}
                offered = tuple(c for c in k.choices if c.lower() in allowed)
            if len(offered) < 2:
                notes.append(f"{k.name}: this server offers fewer than two of "
                             f"{', '.join(k.choices)}")
                continue
            out.append(replace(k, choices=offered))
            continue
        lo, hi = k.low, k.high
        scale = unit_scale(g.unit)
        per = scale[1] if scale else 1.0       # bytes or ms per catalog unit
        if g.min_val is not None:
            lo = max(lo, g.min_val * per)
        if g.max_val is not None:
            hi = min(hi, g.max_val * per)
        if k.log and lo <= 0:
            lo = min(per, hi)
        if lo >= hi:                           # one value is nothing to search
            notes.append(f"{k.name}: the server's bounds leave no room")
            continue
        out.append(replace(k, low=lo, high=hi))
    return out, notes


def _number(k: Knob, text: Any) -> float:
    """A bound the user wrote ('1GB', '30s', 0.9) in the knob's own scale."""
    if k.kind == "bytes":
        return float(parse_size(str(text)) if isinstance(text, str) else text)
    if k.kind == "ms":
        return setting_number(str(text), "ms", "integer") if isinstance(text, str) else float(text)
    return float(text)


def narrowed(knobs: list[Knob], table: Mapping[str, Any], where: str = "--space"
             ) -> list[Knob]:
    """The user's space file applied: ``only = [names]`` and ``exclude = [names]`` choose
    knobs; ``[knobs.NAME]`` sets ``low``, ``high`` (sizes and times as PostgreSQL writes
    them) or ``choices``.  A name the space does not have is an error that lists them."""
    by_name = {k.name: k for k in knobs}
    unknown = [n for n in list(table.get("only", [])) + list(table.get("exclude", []))
               + list((table.get("knobs") or {}).keys()) if n not in by_name]
    risky = sorted({n for n in unknown if n in UNSAFE})
    if risky:
        never = [n for n in risky if n not in RISK_SEARCHED]
        if never:
            raise UsageError(
                f"{where}: {', '.join(never)} is never searched: off can corrupt the whole "
                "cluster in a crash, which no speed-up is worth finding by search.",
                "Measure it deliberately in a lab variant (`fsync = \"off\"` with `pgaccel "
                "lab --allow-unsafe-durability`), or leave it out.")
        raise UsageError(
            f"{where}: {', '.join(risky)} can lose committed data when off, and the search "
            "explores it only when asked.",
            "Pass --allow-unsafe-durability to search it on the search's throwaway servers "
            "(a crash there can lose their last commits), or "
            "leave it out.")
    extra = sorted(set(table) - {"only", "exclude", "knobs"})
    if unknown or extra:
        what = (f"unknown knob(s) {', '.join(sorted(set(unknown)))}" if unknown
                else f"unknown key(s) {', '.join(extra)}")
        raise UsageError(f"{where}: {what}.",
                         f"Knobs here: {', '.join(sorted(by_name))}; keys: only, exclude, "
                         "[knobs.NAME] with low, high or choices.")
    chosen = list(table.get("only") or by_name)
    chosen = [n for n in chosen if n not in set(table.get("exclude") or [])]
    out = []
    for name in chosen:
        k = by_name[name]
        spec = (table.get("knobs") or {}).get(name) or {}
        try:
            if "choices" in spec:
                k = replace(k, choices=tuple(str(c) for c in spec["choices"]))
            if "low" in spec or "high" in spec:
                k = replace(k, low=_number(k, spec.get("low", k.low)),
                            high=_number(k, spec.get("high", k.high)))
        except ValueError as e:
            raise UsageError(f"{where}: [knobs.{name}]: {e}.",
                             "Write sizes as 512MB or 4GB, times as 30s or 5min, "
                             "choices as a list of strings.") from None
        out.append(k)
    if not out:
        raise UsageError(f"{where}: no knob is left to search.",
                         "Name at least one knob in `only`, or exclude fewer.")
    return out


@dataclass(frozen=True)
class Space:
    """The knobs of one search, and the memory the server may use (for :meth:`repair`)."""
    knobs: tuple[Knob, ...]

    def names(self) -> list[str]:
        return [k.name for k in self.knobs]

    def settings(self, candidate: Mapping[str, Any]) -> dict[str, str]:
        """A candidate (knob -> proposed number or choice) as PostgreSQL settings; knobs the
        candidate leaves out keep the server's value."""
        return {k.name: k.value(candidate[k.name]) for k in self.knobs if k.name in candidate}

    def repair(self, settings: dict[str, str], fits: Any) -> tuple[dict[str, str], list[str]]:
        """``settings`` brought inside the memory budget: ``fits(settings)`` says whether
        they are (``tune/rules.memory_budget`` under the caller's inputs).  work_mem is
        halved first, then maintenance_work_mem, then shared_buffers, never below each
        knob's low end; (settings, what was lowered)."""
        s = dict(settings)
        lowered: list[str] = []
        for name in ("work_mem", "maintenance_work_mem", "shared_buffers"):
            k = next((x for x in self.knobs if x.name == name), None)
            while not fits(s) and k is not None and name in s:
                now = parse_size(s[name])
                if now / 2 < k.low:
                    break
                s[name] = k.value(now / 2)
                if name not in lowered:
                    lowered.append(name)
        if not fits(s):
            raise UsageError("No setting of this space fits the memory budget.",
                             "Lower shared_buffers' range in the space file.")
        return s, lowered


def log_span(k: Knob) -> float:
    """How many doublings a size or rate knob spans (for the report's axis)."""
    return math.log2(k.high / k.low) if k.log and k.low > 0 else 0.0
