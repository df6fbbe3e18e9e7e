"""What a search explores on this server and what it holds for it: the space (the
machine's defaults, the catalog's knobs and bounds, --knobs and the --space file,
shared_buffers capped so two servers fit; ``tune/space.py`` is the pure part), its Optuna
distributions, and the huge page pool of ``--huge-pages`` (docs/search.md)."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any, Callable, Mapping, Protocol

from ..errors import UsageError
from ..probe.facts import HostFacts
from ..tune.space import Space, default_space, for_catalog, narrowed


class SpaceRequest(Protocol):
    """What the space depends on of a search's request (``search.SearchRequest``)."""
    knobs: tuple[str, ...]
    space: Mapping[str, Any]
    risk_durability: bool
    huge_pages: bool

# a search measures two servers at once: each may have at most this share of memory as
# shared_buffers, so both fit (the plan found is for one server on the machine)
SHARED_BUFFERS_SHARE = 0.25


def build_space(facts: HostFacts, catalog: Any, major: int, req: SpaceRequest
                ) -> tuple[Space, list[str]]:
    """The search's space on this server: the defaults for the machine, the catalog's
    knobs and bounds, --knobs and the --space file; shared_buffers capped so two servers
    fit."""
    mem = int(facts.effective_memory_bytes)
    cpus = float(facts.effective_cpus)
    knobs = default_space(mem, cpus, major, risk_durability=req.risk_durability)
    knobs, notes = for_catalog(knobs, catalog)
    capped = []
    for k in knobs:
        if k.name == "shared_buffers":
            from dataclasses import replace
            k = replace(k, high=max(k.low, min(k.high, SHARED_BUFFERS_SHARE * mem)))
        capped.append(k)
    if req.huge_pages:                   # a pool is reserved: on (it must use it) vs off
        from dataclasses import replace
        capped = [replace(k, choices=("on", "off")) if k.name == "huge_pages" else k
                  for k in capped]
    table = dict(req.space)
    if req.knobs:
        table["only"] = list(req.knobs)
    return Space(tuple(narrowed(capped, table, "--space/--knobs"))), notes


def pool_pages(space: Space, base: dict[str, str], major: int, page_kb: int,
               servers: int = 2) -> int:
    """Huge pages for ``servers`` servers at the space's largest shared memory (its highest
    shared_buffers and wal_buffers over ``base``), with the estimate's margin."""
    from ..tune.hugepages import estimate_pages
    big = dict(base)
    for k in space.knobs:
        if k.name in ("shared_buffers", "wal_buffers"):
            big[k.name] = k.value(k.high)
    return servers * estimate_pages(big, major, page_kb * 1024)


def reserve_pool(stack: ExitStack, pages: int, say: Callable[[str], None]) -> None:
    """Grow the default-size huge page pool until ``pages`` are free, journaled and put back
    when ``stack`` closes (at the next start after a kill -9)."""
    from ..osknobs.journal import OsJournal
    from ..osknobs.state import OsState
    os_state = OsState(journal=OsJournal())
    stack.callback(os_state.restore)
    problems = os_state.top_up(pages)
    if problems:
        raise UsageError(f"--huge-pages: {problems[0]}.",
                         "Free memory (or reserve the pages at boot), lower the space's "
                         "shared_buffers with --space, or leave out --huge-pages.")
    say(f"reserved {pages} huge pages of {os_state.default_kb()} kB for the search "
        "(put back at the end)")


def space_entry(k: Any) -> dict[str, Any]:
    """A knob of the space as the journal keeps it (the report draws its range)."""
    return {"name": k.name, "kind": k.kind, "low": k.low, "high": k.high, "log": k.log,
            "choices": list(k.choices)}


def distributions(space: Space) -> dict[str, Any]:
    import optuna
    d: dict[str, Any] = {}
    for k in space.knobs:
        if k.kind == "choice":
            d[k.name] = optuna.distributions.CategoricalDistribution(list(k.choices))
        elif k.kind == "int":
            d[k.name] = optuna.distributions.IntDistribution(int(k.low), int(k.high),
                                                             log=k.log and k.low > 0)
        else:
            d[k.name] = optuna.distributions.FloatDistribution(k.low, k.high, log=k.log)
    return d
