"""Parsing and checking a lab spec's TOML (pure): ``[run]``, ``[[variant]]`` inheritance and
``[[workload]]`` tables against the workload registry.  Call it through
:func:`pgaccel.specs.spec.parse_spec`; the spec's format is described there."""

from __future__ import annotations

import math
import os
import stat

import dataclasses
import re
from typing import Any, Iterable

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from ..errors import UsageError
from ..pg.values import turns_off_durability
from ..decide.schedule import MAX_ROUNDS_CAP, ORDERS
from .spec import (DEFAULTS, MANAGED_SETTINGS, PROTOCOLS, RUN_KEYS, SETTINGS_FROM, SIZES,
                   SMALL_CAPS, TOP_KEYS, VARIANT_KEYS, WORKLOAD_KEYS, WORKLOAD_PARAM_KEYS,
                   LabSpec, VariantSpec, WorkloadEntry, merge_size, parse_duration,
                   setting_text)
from .ostable import parse_os
from .tomlpos import Locator, SpecError


class SpecParser:
    def __init__(self, text: str, path: str, size: str, unsafe_durability: bool = False):
        self.text, self.path, self.size = text, path, size
        self.unsafe_durability = unsafe_durability
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
                if not math.isfinite(x):
                    raise ValueError(f"{name} must be a finite number, not {value!r}")
            elif kind == "duration":
                x = parse_duration(value)
            elif kind == "bool":
                if not isinstance(value, bool):
                    raise ValueError(f"{name} must be true or false, not {value!r}")
                x = value
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
        if "until_decided" in t:
            out["until_decided"] = self.typed(t["until_decided"], where("until_decided"),
                                              "bool")
        if self.size == "small":       # built-in caps unless the spec's small table decides
            mine = raw.get("small") or {}
            for k, cap in SMALL_CAPS.items():
                key = "budget_s" if k == "budget" else k
                src = "budget" if k == "budget" else k
                if src not in mine and out.get(key) is not None:
                    out[key] = type(out[key])(min(out[key], cap))
        if out.get("until_decided") and out.get("max_rounds") is None:
            raise self.err(where("until_decided"),
                           "until_decided = true needs max_rounds: the last round it may "
                           "look at sets the level of every look (decide/sequential.py)")
        if out.get("until_decided") and out["max_rounds"] > MAX_ROUNDS_CAP:
            # every look's level is planned over the looks up to it (decide/sequential.py):
            # memory and time grow with it, past what a run can wait for
            raise self.err(where("max_rounds"),
                           f"max_rounds = {out['max_rounds']} with until_decided = true: "
                           f"rounds are added until decided up to {MAX_ROUNDS_CAP} at most")
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
            v.build, v.flavor = parent.build, parent.flavor
            v.os = dataclasses.replace(parent.os)
            v.data_checksums = parent.data_checksums
            v.substitute = list(parent.substitute)
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
            if turns_off_durability(k, text) and not self.unsafe_durability:
                raise self.err(sp, f"{k} = {text} can lose committed data, and the lab "
                               "measures durability off only when asked",
                               "Pass --allow-unsafe-durability to measure it on the lab's "
                               "throwaway clusters (a crash there can lose their last "
                               "commits), or leave the setting out.")
            v.settings[k] = text
        if "settings_from" in t:
            sf = self.typed(t["settings_from"], (*p, "settings_from"), "str")
            if sf not in SETTINGS_FROM:
                raise self.err((*p, "settings_from"), f"settings_from = {sf!r} is not one "
                               f"of {', '.join(SETTINGS_FROM)}")
            v.settings_from = sf
        server_keys = [k for k in ("bin", "version", "build") if k in t]
        if len(server_keys) > 1:
            raise self.err((*p, server_keys[1]), "give one of bin, version or build")
        if server_keys:
            v.bin = v.version = v.build = v.flavor = None
            v.substitute = []
        if "bin" in t:
            v.bin = self.typed(t["bin"], (*p, "bin"), "str")
        if "version" in t:
            v.version = self.typed(t["version"], (*p, "version"), "int", lo=9, hi=99)
        if "build" in t:
            v.build = self.typed(t["build"], (*p, "build"), "str")
        if "flavor" in t:
            fl = self.typed(t["flavor"], (*p, "flavor"), "str")
            from ..buildlab.flavors import FLAVORS
            if fl not in FLAVORS:
                raise self.err((*p, "flavor"), f"flavor = {fl!r} is not one of "
                               f"{', '.join(FLAVORS)}")
            if v.version is None:
                raise self.err((*p, "flavor"), "flavor goes with version (the build of that "
                               "version to make or reuse)")
            v.flavor = fl
        if "os" in t:
            parse_os(self, t["os"], (*p, "os"), v.os)
        if "substitute" in t:
            sub = t["substitute"]
            if (not isinstance(sub, list) or not sub
                    or not all(isinstance(x, int) and not isinstance(x, bool) and 9 <= x <= 99
                               for x in sub)):
                raise self.err((*p, "substitute"), "substitute must be a list of major "
                               "versions, e.g. [16, 15]")
            if v.version is None:
                raise self.err((*p, "substitute"), "substitute goes with version (what to "
                               "run when that version cannot be found or built)")
            v.substitute = list(sub)
        if "data_checksums" in t:
            v.data_checksums = self.typed(t["data_checksums"], (*p, "data_checksums"), "bool")
        return v

    # -- workloads -----------------------------------------------------------------------
    def workloads(self, raw: Any, run: dict[str, Any]) -> list[WorkloadEntry]:
        from ..workloads.base import REGISTRY, RESOLVERS, RunParams, get_workload, load_all
        from ..workloads.steps import params_for, takes_clients
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
            prefixed = isinstance(name, str) and any(name.startswith(x) for x in RESOLVERS)
            if not isinstance(name, str) or (name not in REGISTRY and not prefixed):
                raise self.err((*p, "name"), f"unknown workload {name!r}",
                               f"Workloads: {', '.join(sorted(REGISTRY))}, or "
                               "captured:DIR (see `pgaccel workloads`).")
            try:
                wl = get_workload(name)
            except UsageError as e:          # a captured:DIR that is not a bundle
                raise self.err((*p, "name"), e.message, e.hint) from None
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
            if "clients" in m and not takes_clients(wl):
                raise self.err((*p, "clients"), f"workload {name!r} runs on one connection "
                               "and has no clients", "Leave clients out of this workload.")
            clients = (m.get("clients", getattr(wl, "defaults", {}).get("clients", 2))
                       if takes_clients(wl) else 1)
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
        findings = self.findings(doc.get("findings", {}), names)
        return LabSpec(path=self.path, text=self.text, size=self.size, name=name or
                       _stem(self.path), description=desc, base=bases, variants=variants,
                       workloads=workloads, findings=findings, locator=self.loc, **run)

    def findings(self, raw: Any, names: list[str]) -> dict[str, dict[str, str]]:
        """``[findings.VARIANT]`` tables of step (or workload) = "what the study found"."""
        if not isinstance(raw, dict):
            raise self.err(("findings",), "findings must be a table of [findings.VARIANT]")
        out: dict[str, dict[str, str]] = {}
        for name, table in raw.items():
            if name not in names:
                raise self.err(("findings", name), f"findings for {name!r}, which is not a "
                               "variant", f"Variants: {', '.join(names)}.")
            if not isinstance(table, dict) or not all(isinstance(x, str)
                                                      for x in table.values()):
                raise self.err(("findings", name), "each finding is step = \"text\"")
            out[name] = dict(table)
        return out


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


MAX_SPEC_BYTES = 1024 * 1024         # the examples are 1-5 kB


def parse_spec(text: str, path: str = "<spec>", size: str = "medium", *,
               unsafe_durability: bool = False) -> LabSpec:
    """Parse and check a spec (no server needed); raises :class:`SpecError`.  Settings
    that turn durability off are refused unless ``unsafe_durability`` (the CLI flag named
    for the risk)."""
    try:
        return SpecParser(text, path, size, unsafe_durability).parse()
    except RecursionError:
        raise SpecError(f"The spec {path} nests arrays or tables too deeply to be a lab spec.",
                        "A spec has [run], [variants.*] and [[workloads]] tables a few "
                        "levels deep; see examples/*.toml.") from None


def load_spec(path: str, size: str = "medium", *, unsafe_durability: bool = False
              ) -> LabSpec:
    """Read a spec file: a regular file of at most ``MAX_SPEC_BYTES`` in UTF-8."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise SpecError(f"The spec {path} is not a regular file.",
                                "Name a .toml file (examples are in examples/).")
            data = fh.read(MAX_SPEC_BYTES + 1)
    except FileNotFoundError:
        raise SpecError(f"The spec {path} does not exist.",
                        "Examples are in the examples/ directory of pgaccel.") from None
    except OSError as e:
        raise SpecError(f"Cannot read the spec {path}: {e.strerror or e}.") from None
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(f"The spec {path} is larger than {MAX_SPEC_BYTES // 1024} kB: not a "
                        "lab spec.", "Name a .toml file (examples are in examples/).")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(f"The spec {path} is not UTF-8 text ({e.reason} at byte {e.start}).",
                        "Save it as UTF-8.") from None
    return parse_spec(text, path, size, unsafe_durability=unsafe_durability)
