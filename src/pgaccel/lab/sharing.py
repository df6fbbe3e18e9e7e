"""Whether a lab's variants can share the host, side by side, and which servers may swap
configs from round to round (pure).

Side by side (``lab/paired.py``) every variant's server runs at once, so whatever the host
holds for one variant it holds for all: a THP mode, a sysctl, a sysfs value.  Variants that
set such a value differently (or one sets it and another leaves it) change the host itself
and run one after the other.  A huge page pool is not host-wide in that sense: each
variant's reservation is added to the pool, and a server that does not ask for huge pages
(``huge_pages = off``) does not touch it.

The servers rotate over the configs from round to round (``PairedRounds._round_contexts``)
so no cluster stays with one config; a server can take another variant's config only when it
is the same installation with the same initdb choices and environment, and when neither
variant holds a huge page reservation (a reservation is sized for, and verified on, the
server that maps it).
"""

from __future__ import annotations

from typing import Any, Mapping

# OS target keys that belong to one server, not to the host
PER_SERVER = ("nr_hugepages", "page_kb")


def _label(key: str) -> str:
    return {"thp": "transparent huge pages"}.get(key, key.split(":", 1)[-1])


def host_conflict(os_targets: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Why the variants cannot share the host (a sentence), or None: every host-wide value
    (THP, sysctls, sysfs) the same in every variant's OS target, set or unset alike."""
    keys = sorted({k for t in os_targets.values() for k in t if k not in PER_SERVER})
    for key in keys:
        values = {name: t.get(key) for name, t in os_targets.items()}
        if len({repr(v) for v in values.values()}) > 1:
            shown = ", ".join(f"{n}: {'unset' if v is None else v}" for n, v in values.items())
            return (f"the variants set the host's {_label(key)} differently ({shown}), and a "
                    "host holds one value at a time")
    return None


def rotation_groups(servers: Mapping[str, tuple], reserves: Mapping[str, bool]
                    ) -> dict[str, str]:
    """A group name per variant: variants of one group may swap servers between rounds.
    ``servers``: what makes a variant's server (installation, initdb choices, environment),
    any hashable tuple; ``reserves``: whether it holds a huge page reservation (its own
    group then)."""
    groups: dict[str, str] = {}
    seen: dict[tuple, str] = {}
    for name, key in servers.items():
        if reserves.get(name):
            groups[name] = name
            continue
        groups[name] = seen.setdefault(key, name)
    return groups
