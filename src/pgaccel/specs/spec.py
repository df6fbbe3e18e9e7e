"""The experiment spec: a TOML file naming variants, workloads and how long to measure.

A minimal spec::

    name = "shared-buffers"
    base = "default"                  # or a list: the first one that is installed

    [run]
    rounds = 5                        # minimum trials per variant and workload
    duration = "20s"                  # measured seconds per trial
    warmup = "10s"                    # upper bound; ends early once the rate is steady
    budget = "30m"                    # stop adding rounds when this is spent
    target_ci_width = 0.04            # add rounds until every 95% CI is narrower
    confidence = 0.95                 # of the intervals (and so of every verdict)
    # until_decided = true            # add rounds (up to max_rounds, within the budget)
                                      # until every verdict is decided; each look then
                                      # uses the stricter level of decide/sequential.py
    small = { rounds = 3, duration = 5 }     # overrides at --size small

    [[variant]]
    name = "default"

    [[variant]]
    name = "big-buffers"
    base = "default"                  # inherit settings, binaries and OS settings
    settings = { shared_buffers = "2GB", huge_pages = "on" }
    os = { nr_hugepages = "auto", thp = "never" }   # pages of huge_page_size (1GB too)
    # os.sysctl = { "vm.swappiness" = 1 }  # any /proc/sys value, put back afterwards
    # os.sysfs = { "sys/block/vda/queue/scheduler" = "none" }   # device queues, debugfs sched
    # os.text_hugepages = true             # the server's code on huge pages (needs THP)
    version = 17                      # or bin = "/usr/lib/postgresql/17/bin"
    # substitute = [16, 15]           # with version: run these when it can't be had here
    # flavor = "lto"                  # with version: that `pgaccel build`, made on demand
    # build = "18-lto"                # or name a build outright
    # data_checksums = true           # initdb's choice (default off on every version)

    [[workload]]
    name = "select-only"
    clients = [2, 4]
    scale = 50
    small = { scale = 5 }

    [findings.big-buffers]            # what a study found, beside each verdict
    "select-only" = "about +10%"

Any ``[run]``, ``[[variant]]`` or ``[[workload]]`` table may hold ``small``, ``medium`` and
``large`` subtables whose keys replace the table's own at that ``--size`` (``settings``,
``os`` and ``options`` are merged key by key).  Without them ``--size small`` caps the run at
3 rounds of 5 s (3 s warm-up) and 5 minutes; data sizes change only where the spec says.

Variants run side by side, each on a throwaway server of its own (``lab/paired.py`` for
pgbench workloads, ``lab/paired_steps.py`` for the Insert Benchmark's steps), unless they
set the host differently (``lab/sharing.py``), do not fit in memory or disk at once, or
``pgaccel lab --one-at-a-time`` asks; the run says which and why.

This module holds the spec's model and value helpers; parsing, inheritance and the checks
that need no server are in ``specparse.py`` (all pure).  Errors are :class:`SpecError` (a
``UsageError``) naming ``file:line`` (located by ``tomlpos.py``).  Checks against a
server's parameter catalog are :func:`pgaccel.specs.checks.settings_problems`; binaries
are resolved in ``variants.py``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any

from .tomlpos import Locator

SIZES = ("small", "medium", "large")
SETTINGS_FROM = ("pgtune", "pgaccel")
THP_MODES = ("always", "madvise", "never")
PROTOCOLS = ("simple", "extended", "prepared")

TOP_KEYS = {"name", "description", "base", "run", "variant", "workload", "findings"}
RUN_KEYS = {"rounds", "max_rounds", "duration", "warmup", "order", "seed", "budget",
            "min_effect", "target_ci_width", "confidence", "until_decided"}
VARIANT_KEYS = {"name", "base", "description", "settings", "settings_from", "bin", "version",
                "build", "flavor", "os", "data_checksums", "substitute"}
OS_KEYS = {"nr_hugepages", "thp", "sysctl", "sysfs", "text_hugepages"}
# a sysctl name: vm.swappiness, kernel.sched_autogroup_enabled (a file under /proc/sys)
SYSCTL_NAME = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_-]+)+$")
# sysfs values a variant may set: block device queues and the scheduler's debugfs knobs
SYSFS_PATH = re.compile(r"^sys/(block/[A-Za-z0-9_.-]+/queue/[a-z_]+|"
                        r"kernel/debug/sched/[a-z_]+)$")
WORKLOAD_PARAM_KEYS = {"clients", "threads", "duration", "warmup", "protocol", "rate",
                       "scale"}
WORKLOAD_KEYS = {"name", "label", "options"} | WORKLOAD_PARAM_KEYS
MERGED_SUBTABLES = {"settings", "os", "options"}

# pgaccel runs the throwaway cluster on these; a variant changing them would lose it
MANAGED_SETTINGS = {"port", "listen_addresses", "unix_socket_directories", "data_directory",
                    "config_file", "hba_file", "ident_file"}

SMALL_CAPS = {"rounds": 3, "max_rounds": 6, "duration": 5.0, "warmup": 3.0, "budget": 300.0}
DEFAULTS = {"rounds": 5, "duration": 30.0, "warmup": 10.0, "order": "abba", "seed": 0,
            "min_effect": 0.02}


# -- the parsed spec -----------------------------------------------------------------------
@dataclass
class OsSettings:
    nr_hugepages: int | str | None = None     # a count, or "auto" (from the server)
    thp: str | None = None                    # always | madvise | never
    sysctl: dict[str, int | str] = field(default_factory=dict)   # vm.swappiness = 1
    sysfs: dict[str, int | str] = field(default_factory=dict)    # sys/block/vda/queue/...
    text_hugepages: bool | None = None        # the server's code on THP (LD_PRELOAD remap)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v not in (None, {})}

    def __bool__(self) -> bool:
        return bool(self.to_dict())


@dataclass
class VariantSpec:
    name: str
    description: str = ""
    settings: dict[str, str] = field(default_factory=dict)   # inherited + own, as text
    settings_from: str | None = None
    bin: str | None = None
    version: int | None = None
    build: str | None = None                    # a `pgaccel build` name (18-lto)
    flavor: str | None = None                   # with version: that build, made on demand
    os: OsSettings = field(default_factory=OsSettings)
    # the cluster's data checksums: off unless a variant asks (pgaccel names the choice
    # to initdb, whose default changed in 18), inherited from the base variant
    data_checksums: bool = False
    # majors to run instead, in order, when ``version`` can be neither found nor built here
    # (study 001's 17 on a machine whose sources have no 17); said in one line when used
    substitute: list[int] = field(default_factory=list)
    substituted: str = ""                       # what was substituted, once resolved
    index: int = 0                              # position in the file (for locations)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["os"] = self.os.to_dict()
        return d


@dataclass
class WorkloadEntry:
    name: str
    label: str                                  # the store's workload key
    overrides: dict[str, Any]                   # RunParams fields and options (params_for)
    clients: list[int]
    index: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class LabSpec:
    path: str
    text: str
    size: str
    name: str
    description: str
    base: list[str]
    variants: list[VariantSpec]
    workloads: list[WorkloadEntry]
    rounds: int = 5
    max_rounds: int | None = None
    duration: float = 30.0
    warmup: float = 10.0
    order: str = "abba"
    seed: int = 0
    budget_s: float | None = None
    min_effect: float = 0.02
    target_ci_width: float | None = None
    confidence: float = 0.95
    until_decided: bool = False
    # what the study the spec reproduces found: variant -> step (or workload) -> text, set
    # beside each verdict in the report
    findings: dict[str, dict[str, str]] = field(default_factory=dict)
    locator: Locator | None = field(default=None, repr=False, compare=False)

    def variant(self, name: str) -> VariantSpec:
        return next(v for v in self.variants if v.name == name)

    def where(self, *path: Any) -> str:
        return self.locator.where(path) if self.locator else self.path

    def variant_where(self, name: str, *rest: Any) -> str:
        return self.where("variant", self.variant(name).index, *rest)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "name": self.name,
                "description": self.description, "base": list(self.base),
                "variants": [v.to_dict() for v in self.variants],
                "workloads": [w.to_dict() for w in self.workloads],
                "rounds": self.rounds, "max_rounds": self.max_rounds,
                "duration": self.duration, "warmup": self.warmup, "order": self.order,
                "seed": self.seed, "budget_s": self.budget_s, "min_effect": self.min_effect,
                "target_ci_width": self.target_ci_width, "confidence": self.confidence,
                "until_decided": self.until_decided, "findings": self.findings}


# -- value helpers (pure) ------------------------------------------------------------------
_DUR = re.compile(r"(\d+(?:\.\d+)?)\s*(hours?|h|minutes?|mins?|m|seconds?|secs?|s)?", re.I)


def parse_duration(value: Any) -> float:
    """Seconds from 90, 2.5, "90s", "10m", "10min", "1h30m"; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{value!r} is not a duration")
        return float(value)
    text = str(value).strip().replace(" ", "")
    if not text:
        raise ValueError("an empty duration")
    total, pos = 0.0, 0
    for m in _DUR.finditer(text):
        if m.start() != pos or not m.group(0):
            break
        unit = (m.group(2) or "s").lower()
        mult = 3600 if unit.startswith("h") else 60 if unit.startswith("m") else 1
        total += float(m.group(1)) * mult
        pos = m.end()
    if pos != len(text):
        raise ValueError(f"{value!r} is not a duration (examples: 90, \"45s\", \"10m\", "
                         "\"1h30m\")")
    if not math.isfinite(total):
        raise ValueError(f"{value!r} is not a finite duration")
    return total


def setting_text(value: Any) -> str:
    """A TOML value as PostgreSQL setting text: booleans as on/off."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def merge_size(table: dict[str, Any], size: str) -> dict[str, Any]:
    """``table`` without its size subtables, with ``table[size]`` laid over it
    (``settings``/``os``/``options`` merged key by key)."""
    out = {k: v for k, v in table.items() if k not in SIZES}
    over = table.get(size) or {}
    for k, v in over.items():
        if k in MERGED_SUBTABLES and isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out
