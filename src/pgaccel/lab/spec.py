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
    small = { rounds = 3, duration = 5 }     # overrides at --size small

    [[variant]]
    name = "default"

    [[variant]]
    name = "big-buffers"
    base = "default"                  # inherit settings, binaries and OS settings
    settings = { shared_buffers = "2GB", huge_pages = "on" }
    os = { nr_hugepages = "auto", thp = "never" }
    version = 17                      # or bin = "/usr/lib/postgresql/17/bin"

    [[workload]]
    name = "select-only"
    clients = [2, 4]
    scale = 50
    small = { scale = 5 }

Any ``[run]``, ``[[variant]]`` or ``[[workload]]`` table may hold ``small``, ``medium`` and
``large`` subtables whose keys replace the table's own at that ``--size`` (``settings``,
``os`` and ``options`` are merged key by key).  Without them ``--size small`` caps the run at
3 rounds of 5 s (3 s warm-up) and 5 minutes; data sizes change only where the spec says.

Everything here is pure: parsing, inheritance and the checks that need no server.  Errors
are :class:`SpecError` (a ``UsageError``) naming ``file:line``.  Checks against a server's
parameter catalog are :func:`settings_problems`; binaries are resolved in ``variants.py``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from ..errors import UsageError
from .schedule import ORDERS

SIZES = ("small", "medium", "large")
SETTINGS_FROM = ("pgtune", "pgaccel")
THP_MODES = ("always", "madvise", "never")
PROTOCOLS = ("simple", "extended", "prepared")

TOP_KEYS = {"name", "description", "base", "run", "variant", "workload"}
RUN_KEYS = {"rounds", "max_rounds", "duration", "warmup", "order", "seed", "budget",
            "min_effect", "target_ci_width", "confidence"}
VARIANT_KEYS = {"name", "base", "description", "settings", "settings_from", "bin", "version",
                "os"}
OS_KEYS = {"nr_hugepages", "thp"}
WORKLOAD_PARAM_KEYS = {"clients", "threads", "duration", "warmup", "protocol", "rate",
                       "scale"}
WORKLOAD_KEYS = {"name", "label", "options"} | WORKLOAD_PARAM_KEYS
MERGED_SUBTABLES = {"settings", "os", "options"}

# pgaccel runs the throwaway cluster on these; a variant changing them would lose it
MANAGED_SETTINGS = {"port", "listen_addresses", "unix_socket_directories", "data_directory",
                    "config_file", "hba_file", "ident_file"}
# never benchmark a configuration that can lose or corrupt committed data
DURABILITY_SETTINGS = {"fsync", "full_page_writes", "synchronous_commit"}
_OFF = {"off", "false", "no", "0", "f", "n"}

SMALL_CAPS = {"rounds": 3, "max_rounds": 6, "duration": 5.0, "warmup": 3.0, "budget": 300.0}
DEFAULTS = {"rounds": 5, "duration": 30.0, "warmup": 10.0, "order": "abba", "seed": 0,
            "min_effect": 0.02}


class SpecError(UsageError):
    """A problem with the spec file, located as ``file:line``."""


# -- locations -----------------------------------------------------------------------------
_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-.\"']+)\s*=")
_INLINE_KEY = re.compile(r"[{,]\s*([A-Za-z0-9_\-\"']+)\s*=")


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i]
    return line


def _parts(dotted: str) -> list[str]:
    return [p.strip().strip("\"'") for p in dotted.split(".")]


class Locator:
    """Maps a key path such as ``("variant", 1, "settings", "work_mem")`` to its line.

    A light scan of the TOML text (headers, ``key =`` lines, inline tables), good enough to
    point at the line; ``where(path)`` falls back to the nearest enclosing table."""

    def __init__(self, text: str, path: str = "<spec>"):
        self.path = path
        self.lines: dict[tuple, int] = {}
        arrays: dict[str, int] = {}
        current: tuple = ()
        for no, raw in enumerate(text.splitlines(), start=1):
            line = _strip_comment(raw)
            m = _HEADER.match(line)
            if m:
                names = _parts(m.group(2))
                if m.group(1) == "[[":
                    arrays[names[0]] = arrays.get(names[0], 0) + 1
                    current = (names[0], arrays[names[0]] - 1, *names[1:])
                elif names[0] in arrays:
                    current = (names[0], arrays[names[0]] - 1, *names[1:])
                else:
                    current = tuple(names)
                self.lines.setdefault(current, no)
                continue
            m = _KEY.match(line)
            if not m:
                continue
            key = (*current, *_parts(m.group(1)))
            self.lines.setdefault(key, no)
            brace = line.find("{", m.end())
            if brace >= 0:
                for k in _INLINE_KEY.finditer(line, brace):
                    self.lines.setdefault((*key, k.group(1).strip("\"'")), no)

    def line(self, path: Iterable[Any]) -> int | None:
        p = tuple(path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return None

    def where(self, path: Iterable[Any]) -> str:
        n = self.line(path)
        return f"{self.path}:{n}" if n else self.path

    def error(self, path: Iterable[Any], message: str, hint: str | None = None) -> SpecError:
        return SpecError(f"{self.where(path)}: {message}", hint)


# -- the parsed spec -----------------------------------------------------------------------
@dataclass
class OsSettings:
    nr_hugepages: int | str | None = None     # a count, or "auto" (from the server)
    thp: str | None = None                    # always | madvise | never

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

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
    os: OsSettings = field(default_factory=OsSettings)
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
                "target_ci_width": self.target_ci_width, "confidence": self.confidence}


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


# -- parsing -------------------------------------------------------------------------------
class _Parser:
    def __init__(self, text: str, path: str, size: str):
        self.text, self.path, self.size = text, path, size
        self.loc = Locator(text, path)

    def err(self, path: Iterable[Any], message: str, hint: str | None = None) -> SpecError:
        return self.loc.error(path, message, hint)

    def unknown(self, table: dict[str, Any], allowed: set[str], path: tuple,
                what: str) -> None:
        for k in table:
            if k not in allowed:
                close = _closest(k, allowed)
                raise self.err((*path, k), f"unknown key {k!r} in {what}",
                               (f"Did you mean {close!r}? " if close else "")
                               + f"Known keys: {', '.join(sorted(allowed))}.")

    def typed(self, value: Any, path: tuple, kind: str, *, lo: float | None = None,
              hi: float | None = None, lo_open: bool = False) -> Any:
        name = path[-1]
        try:
            if kind == "int":
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValueError(f"{name} must be a whole number, not {value!r}")
                x: Any = value
            elif kind == "float":
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ValueError(f"{name} must be a number, not {value!r}")
                x = float(value)
            elif kind == "duration":
                x = parse_duration(value)
            else:  # str
                if not isinstance(value, str):
                    raise ValueError(f"{name} must be a string, not {value!r}")
                x = value
        except ValueError as e:
            raise self.err(path, str(e)) from None
        if lo is not None and (x < lo or (lo_open and x == lo)):
            raise self.err(path, f"{name} = {value!r} is out of range: it must be "
                                 f"{'>' if lo_open else '>='} {lo:g}")
        if hi is not None and x > hi:
            raise self.err(path, f"{name} = {value!r} is out of range: it must be <= {hi:g}")
        return x

    # -- [run] ---------------------------------------------------------------------------
    def run_table(self, raw: Any) -> dict[str, Any]:
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise self.err(("run",), "[run] must be a table")
        self.unknown(raw, RUN_KEYS | set(SIZES), ("run",), "[run]")
        for s in SIZES:
            if s in raw:
                if not isinstance(raw[s], dict):
                    raise self.err(("run", s), f"run.{s} must be a table of overrides")
                self.unknown(raw[s], RUN_KEYS, ("run", s), f"[run.{s}]")
        t = merge_size(raw, self.size)

        def where(k: str) -> tuple:
            return ("run", self.size, k) if k in (raw.get(self.size) or {}) else ("run", k)

        out: dict[str, Any] = dict(DEFAULTS)
        if "rounds" in t:
            out["rounds"] = self.typed(t["rounds"], where("rounds"), "int", lo=1, hi=10000)
        if "max_rounds" in t:
            out["max_rounds"] = self.typed(t["max_rounds"], where("max_rounds"), "int", lo=1,
                                           hi=100000)
        if "duration" in t:
            out["duration"] = self.typed(t["duration"], where("duration"), "duration", lo=1)
        if "warmup" in t:
            out["warmup"] = self.typed(t["warmup"], where("warmup"), "duration", lo=1)
        if "order" in t:
            o = self.typed(t["order"], where("order"), "str")
            if o not in ORDERS:
                raise self.err(where("order"), f"order = {o!r} is not one of "
                                               f"{', '.join(ORDERS)}")
            out["order"] = o
        if "seed" in t:
            out["seed"] = self.typed(t["seed"], where("seed"), "int")
        if "budget" in t:
            out["budget_s"] = self.typed(t["budget"], where("budget"), "duration", lo=0,
                                         lo_open=True)
        if "min_effect" in t:
            out["min_effect"] = self.typed(t["min_effect"], where("min_effect"), "float",
                                           lo=0, hi=0.99)
        if "target_ci_width" in t:
            out["target_ci_width"] = self.typed(t["target_ci_width"], where("target_ci_width"),
                                                "float", lo=0, hi=10, lo_open=True)
        if "confidence" in t:
            out["confidence"] = self.typed(t["confidence"], where("confidence"), "float",
                                           lo=0.5, hi=0.999)
        if self.size == "small":       # built-in caps unless the spec's small table decides
            mine = raw.get("small") or {}
            for k, cap in SMALL_CAPS.items():
                key = "budget_s" if k == "budget" else k
                src = "budget" if k == "budget" else k
                if src not in mine and out.get(key) is not None:
                    out[key] = type(out[key])(min(out[key], cap))
        if out.get("max_rounds") is not None and out["max_rounds"] < out["rounds"]:
            raise self.err(where("max_rounds"),
                           f"max_rounds = {out['max_rounds']} is below rounds = "
                           f"{out['rounds']}")
        return out

    # -- variants ------------------------------------------------------------------------
    def variants(self, raw: Any) -> list[VariantSpec]:
        if not isinstance(raw, list) or not raw:
            raise self.err(("variant",), "the spec has no [[variant]] tables",
                           "Declare at least two variants to compare.")
        tables: dict[str, dict[str, Any]] = {}
        index: dict[str, int] = {}
        for i, t in enumerate(raw):
            p = ("variant", i)
            if not isinstance(t, dict):
                raise self.err(p, "each [[variant]] must be a table")
            self.unknown(t, VARIANT_KEYS | set(SIZES), p, "[[variant]]")
            for s in SIZES:
                if s in t:
                    if not isinstance(t[s], dict):
                        raise self.err((*p, s), f"{s} must be a table of overrides")
                    self.unknown(t[s], VARIANT_KEYS - {"name", "base"}, (*p, s),
                                 f"a variant's {s} table")
            m = merge_size(t, self.size)
            name = m.get("name")
            if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*",
                                                             name):
                raise self.err((*p, "name"), f"variant name {name!r} is missing or not a "
                               "simple name", "Use letters, digits, '_', '.', '+', '-'.")
            if name in tables:
                raise self.err((*p, "name"), f"variant {name!r} is declared twice")
            tables[name], index[name] = m, i
        if len(tables) < 2:
            raise self.err(("variant",), "a lab experiment needs at least two variants",
                           "Add a second [[variant]] (e.g. the server defaults).")
        resolved: dict[str, VariantSpec] = {}

        def build(name: str, chain: tuple[str, ...]) -> VariantSpec:
            if name in resolved:
                return resolved[name]
            t, i = tables[name], index[name]
            p = ("variant", i)
            parent: VariantSpec | None = None
            if "base" in t:
                b = t["base"]
                if b not in tables:
                    raise self.err((*p, "base"), f"variant {name!r}: base {b!r} is not a "
                                   "variant", f"Variants: {', '.join(tables)}.")
                if b in chain or b == name:
                    raise self.err((*p, "base"), "variants inherit in a circle: "
                                   + " -> ".join((*chain, name, b)))
                parent = build(b, (*chain, name))
            v = self.one_variant(name, t, p, parent)
            v.index = i
            resolved[name] = v
            return v

        return [build(n, ()) for n in tables]

    def one_variant(self, name: str, t: dict[str, Any], p: tuple,
                    parent: VariantSpec | None) -> VariantSpec:
        v = VariantSpec(name=name)
        if parent:
            v.settings = dict(parent.settings)
            v.settings_from, v.bin, v.version = parent.settings_from, parent.bin, parent.version
            v.os = dataclasses.replace(parent.os)
        if "description" in t:
            v.description = self.typed(t["description"], (*p, "description"), "str")
        settings = t.get("settings", {})
        if not isinstance(settings, dict):
            raise self.err((*p, "settings"), "settings must be a table of name = value")
        for k, val in settings.items():
            sp = (*p, "settings", k)
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", k):
                raise self.err(sp, f"{k!r} is not a PostgreSQL setting name")
            if isinstance(val, (dict, list)):
                raise self.err(sp, f"setting {k} must be a single value, not {val!r}")
            text = setting_text(val)
            if k in MANAGED_SETTINGS:
                raise self.err(sp, f"{k} is managed by pgaccel (it runs the throwaway "
                               "cluster on it) and cannot be a variant setting")
            if k in DURABILITY_SETTINGS and text.strip().lower() in _OFF:
                raise self.err(sp, f"{k} = {text} can lose committed data; pgaccel does not "
                               "benchmark configurations that turn durability off")
            v.settings[k] = text
        if "settings_from" in t:
            sf = self.typed(t["settings_from"], (*p, "settings_from"), "str")
            if sf not in SETTINGS_FROM:
                raise self.err((*p, "settings_from"), f"settings_from = {sf!r} is not one "
                               f"of {', '.join(SETTINGS_FROM)}")
            v.settings_from = sf
        if "bin" in t and "version" in t:
            raise self.err((*p, "version"), "give bin or version, not both")
        if "bin" in t:
            v.bin, v.version = self.typed(t["bin"], (*p, "bin"), "str"), None
        if "version" in t:
            v.version = self.typed(t["version"], (*p, "version"), "int", lo=9, hi=99)
            v.bin = None
        if "os" in t:
            o = t["os"]
            if not isinstance(o, dict):
                raise self.err((*p, "os"), "os must be a table (nr_hugepages, thp)")
            self.unknown(o, OS_KEYS, (*p, "os"), "a variant's os table")
            if "nr_hugepages" in o:
                n = o["nr_hugepages"]
                if n != "auto":
                    n = self.typed(n, (*p, "os", "nr_hugepages"), "int", lo=0, hi=2**31)
                v.os.nr_hugepages = n
            if "thp" in o:
                mode = o["thp"]
                if mode not in THP_MODES:
                    raise self.err((*p, "os", "thp"), f"thp = {mode!r} is not one of "
                                   f"{', '.join(THP_MODES)}")
                v.os.thp = mode
        return v

    # -- workloads -----------------------------------------------------------------------
    def workloads(self, raw: Any, run: dict[str, Any]) -> list[WorkloadEntry]:
        from ..workloads.base import REGISTRY, RunParams
        from ..workloads import load_all
        from ..workloads.steps import params_for
        load_all()
        if not isinstance(raw, list) or not raw:
            raise self.err(("workload",), "the spec has no [[workload]] tables",
                           "Add one, e.g. [[workload]] name = \"select-only\".")
        out: list[WorkloadEntry] = []
        seen: dict[tuple[str, int], int] = {}
        for i, t in enumerate(raw):
            p = ("workload", i)
            if not isinstance(t, dict):
                raise self.err(p, "each [[workload]] must be a table")
            name = t.get("name")
            if not isinstance(name, str) or name not in REGISTRY:
                raise self.err((*p, "name"), f"unknown workload {name!r}",
                               f"Workloads: {', '.join(sorted(REGISTRY))} "
                               "(see `pgaccel workloads`).")
            wl = REGISTRY[name]
            knobs = known_options(wl)
            allowed = WORKLOAD_KEYS | knobs | set(SIZES)
            self.unknown(t, allowed, p, f"workload {name!r}")
            for s in SIZES:
                if s in t:
                    if not isinstance(t[s], dict):
                        raise self.err((*p, s), f"{s} must be a table of overrides")
                    self.unknown(t[s], allowed - {"name", "label"} - set(SIZES), (*p, s),
                                 f"workload {name!r}'s {s} table")
            m = merge_size(t, self.size)
            label = self.typed(m.get("label", name), (*p, "label"), "str")
            over: dict[str, Any] = {"duration": run["duration"], "warmup": run["warmup"]}
            small_own = t.get("small") or {}
            for k in WORKLOAD_PARAM_KEYS - {"clients"}:
                if k not in m:
                    continue
                kind = {"threads": "int", "scale": "int", "duration": "duration",
                        "warmup": "duration", "rate": "float", "protocol": "str"}[k]
                lo = {"threads": 1, "scale": 1, "duration": 1, "warmup": 1, "rate": 0}.get(k)
                x = self.typed(m[k], (*p, k), kind, lo=lo, lo_open=(k == "rate"))
                if k == "protocol" and x not in PROTOCOLS:
                    raise self.err((*p, k), f"protocol = {x!r} is not one of "
                                   f"{', '.join(PROTOCOLS)}")
                if self.size == "small" and k in ("duration", "warmup") and k not in small_own:
                    x = min(x, SMALL_CAPS[k])
                over[k] = x
            options = m.get("options", {})
            if not isinstance(options, dict):
                raise self.err((*p, "options"), "options must be a table")
            for k, val in options.items():
                if knobs and k not in knobs:
                    raise self.err((*p, "options", k), f"workload {name!r} has no option {k!r}",
                                   f"Options: {', '.join(sorted(knobs))}.")
            opts = dict(options)
            opts.update({k: v for k, v in m.items() if k in knobs})
            over["options"] = opts
            clients = m.get("clients", getattr(wl, "defaults", {}).get("clients", 2))
            clist = clients if isinstance(clients, list) else [clients]
            if not clist:
                raise self.err((*p, "clients"), "clients is empty")
            clist = [self.typed(c, (*p, "clients"), "int", lo=1, hi=10000) for c in clist]
            if len(set(clist)) != len(clist):
                raise self.err((*p, "clients"), f"clients {clist} repeats a value")
            for c in clist:
                if (label, c) in seen:
                    raise self.err((*p, "name"), f"workload {label!r} with {c} clients is "
                                   "listed twice", "Give one of them a distinct label = \"...\".")
                seen[(label, c)] = i
            try:
                params = params_for(wl, {**over, "clients": clist[0]})
                check_params(wl, params)
            except UsageError as e:
                raise self.err(p, f"workload {name!r}: {e.message}", e.hint) from None
            except TypeError as e:
                raise self.err(p, f"workload {name!r}: {e}") from None
            assert isinstance(params, RunParams)
            out.append(WorkloadEntry(name, label, over, clist, i))
        return out

    def parse(self) -> LabSpec:
        if self.size not in SIZES:
            raise SpecError(f"--size {self.size!r} is not one of {', '.join(SIZES)}.")
        try:
            doc = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as e:
            raise SpecError(f"{self.path}: not valid TOML: {e}",
                            "See https://toml.io for the syntax.") from None
        self.unknown(doc, TOP_KEYS, (), "the spec")
        name = doc.get("name", "")
        if not isinstance(name, str):
            raise self.err(("name",), "name must be a string")
        desc = doc.get("description", "")
        if not isinstance(desc, str):
            raise self.err(("description",), "description must be a string")
        run = self.run_table(doc.get("run"))
        variants = self.variants(doc.get("variant"))
        names = [v.name for v in variants]
        base = doc.get("base", names[0])
        bases = base if isinstance(base, list) else [base]
        if not bases or not all(isinstance(b, str) for b in bases):
            raise self.err(("base",), "base must be a variant name or a list of them")
        for b in bases:
            if b not in names:
                raise self.err(("base",), f"base {b!r} is not a variant",
                               f"Variants: {', '.join(names)}.")
        workloads = self.workloads(doc.get("workload"), run)
        return LabSpec(path=self.path, text=self.text, size=self.size, name=name or
                       _stem(self.path), description=desc, base=bases, variants=variants,
                       workloads=workloads, locator=self.loc, **run)


def _stem(path: str) -> str:
    import os
    return os.path.splitext(os.path.basename(path))[0] or "lab"


def _closest(key: str, allowed: Iterable[str]) -> str | None:
    import difflib
    m = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.75)
    return m[0] if m else None


def known_options(wl: Any) -> set[str]:
    """Option names a workload takes (its knobs and defaults, minus RunParams fields)."""
    from ..workloads.steps import RUNPARAM_FIELDS
    names = set(getattr(wl, "knobs", {}) or {}) | set(getattr(wl, "defaults", {}) or {})
    if getattr(wl, "data_group", lambda: "")() == "pgbench":
        names.add("partitions")
    return names - RUNPARAM_FIELDS


def check_params(wl: Any, params: Any) -> None:
    """Let the workload reject its parameters now rather than mid-run (UsageError)."""
    wl.data_key(params)
    if getattr(wl, "kind", "single") == "steps":
        wl.step_names(params)
        req = getattr(wl, "required_settings", None)
        if req:
            req(params)


def parse_spec(text: str, path: str = "<spec>", size: str = "medium") -> LabSpec:
    """Parse and check a spec (no server needed); raises :class:`SpecError`."""
    return _Parser(text, path, size).parse()


def load_spec(path: str, size: str = "medium") -> LabSpec:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise SpecError(f"The spec {path} does not exist.",
                        "Examples are in the examples/ directory of pgaccel.") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"Cannot read the spec {path}: {e}.") from None
    return parse_spec(text, path, size)


# -- settings against a server's catalog (pure) --------------------------------------------
def settings_problems(settings: dict[str, str], catalog: Any) -> list[tuple[str, str]]:
    """``(setting, problem)`` for every setting the catalog's server would refuse.

    ``catalog`` is a ``tune.gucs.GucCatalog``.  From ``postgres --describe-config`` it has
    no units for most parameters and no enum values: values with a unit suffix whose unit is
    unknown are left to the check against the running server's pg_settings."""
    from ..tune.gucs import check_value
    static = str(getattr(catalog, "source", "")).startswith("describe-config")
    out: list[tuple[str, str]] = []
    for name, value in settings.items():
        g = catalog.get(name)
        if g is None:
            if "." in name:       # an extension's parameter: the server accepts placeholders
                continue
            src = str(getattr(catalog, "source", "") or "")
            where = (f"`{src.split(' ', 1)[1]} --describe-config` does not list it"
                     if static and " " in src else f"{src or 'the server'} does not have it")
            out.append((name, f"{name} is not a setting this server accepts: {where}"))
            continue
        if g.context == "internal":
            out.append((name, f"{name} is fixed when PostgreSQL is built or initdb runs; "
                              "it cannot be set"))
            continue
        if (static and g.vartype in ("integer", "real") and not g.unit
                and re.fullmatch(r"\s*[-+]?[\d.]+\s*[A-Za-z]+\s*", str(value))):
            continue
        problem = check_value(name, value, catalog)
        if problem:
            out.append((name, problem))
    return out
