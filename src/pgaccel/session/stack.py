"""`pgaccel run --stack`: study 000's layers as one interleaved lab experiment (pure).

Each config adds one layer to the one before it, so the difference between neighbours is
what that layer is worth on this machine:

* ``baseline``  the installed server with its defaults;
* ``settings``  pgaccel's plan for PostgreSQL (as plain ``run``);
* ``os``        the settings plus the Linux layer that can be applied for the run and put back after:
  huge pages reserved to what the server reports and ``huge_pages = on`` (verified in the
  postmaster's memory map), the plan's THP mode and its sysctls (swappiness, writeback,
  scheduler), and the server's code on huge pages (server/hugetext.py) — root only;
* ``build``     the settings and the OS layer on a `pgaccel build` of the same major
  version in the chosen flavor;
* ``pgtune``    PGTune's settings, a reference beside the chain (``--with-pgtune``).

The experiment is a lab spec built as data (its TOML text is only the copy the store keeps,
so a run can be resumed and re-run with ``pgaccel lab``) and run by the runner; :func:`layer_steps` names the comparisons the report shows: each
layer against the one before it and against baseline.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Iterable

from ..specs.spec import LabSpec, OsSettings, VariantSpec, WorkloadEntry
from .request import Protocol

STACKS = ("settings", "os", "build", "full")
LAYERS = ("settings", "os", "build")
THP_KEY = "sys/kernel/mm/transparent_hugepage/enabled"
# sysctls the +os layer leaves out: the huge page pool is sized per server ("auto"), and
# overcommit is advice (it changes what every other program on the host may allocate)
NOT_IN_OS_LAYER = {"vm.nr_hugepages", "vm.overcommit_memory", "vm.overcommit_ratio"}


def layers_of(stack: str) -> tuple[str, ...]:
    """The layers ``--stack`` adds: settings < os < build = full."""
    if stack not in STACKS:
        raise ValueError(f"unknown stack {stack!r}; one of {', '.join(STACKS)}")
    n = {"settings": 1, "os": 2, "build": 3, "full": 3}[stack]
    return LAYERS[:n]


def _value(proposed: Any) -> int | str:
    v = str(proposed)
    return int(v) if v.lstrip("-").isdigit() else v


def os_layer(changes: Iterable[Any], *, host_thp: str | None = "madvise",
             compiler: bool = True) -> tuple[dict[str, Any], list[str]]:
    """The lab ``os`` table of the plan's Linux changes that can be applied for a run and
    restored (THP and sysctls), plus the server's code on huge pages, and what was left out
    with why.  ``changes`` are the ``tune`` Changes of the plan's linux layer (name,
    proposed, advice_only); ``host_thp`` the THP mode now, ``compiler`` whether a C
    compiler can build the code remap library."""
    table: dict[str, Any] = {"nr_hugepages": "auto"}
    sysctl: dict[str, Any] = {}
    sysfs: dict[str, Any] = {}
    left = []
    for c in changes:
        if c.name == THP_KEY:
            table["thp"] = c.proposed
        elif c.advice_only or c.name == "vm.nr_hugepages":
            continue                   # advice; the pool is sized per server ("auto")
        elif c.name in NOT_IN_OS_LAYER:
            left.append(f"{c.name}: advice only")
        elif c.name.startswith("sys/"):
            sysfs[c.name] = _value(c.proposed)
        elif "/" in c.name:
            left.append(f"{c.name}: not a value the os layer can set and put back")
        else:
            sysctl[c.name] = _value(c.proposed)
    if sysctl:
        table["sysctl"] = sysctl
    if sysfs:
        table["sysfs"] = sysfs
    thp = table.get("thp") or host_thp
    if not compiler:
        left.append("the server's code on huge pages: no C compiler to build the remap "
                    "library")
    elif thp in ("madvise", "always"):
        table["text_hugepages"] = True
    else:
        left.append(f"the server's code on huge pages: THP is {thp or 'not in this kernel'}")
    return table, left


def stack_spec(stack: str, layers: Iterable[str], *, workloads: list[str], clients: int,
               scale: int, duration: float, warmup: float, protocol: Protocol,
               os_table: dict[str, Any] | None = None, build_major: int | None = None,
               flavor: str = "lto", with_pgtune: bool = False) -> LabSpec:
    """The lab spec of ``run --stack STACK`` measuring ``layers`` (those of
    :func:`layers_of`, less any this host cannot apply), as data: each layer's config is the
    one before it plus that layer.  Its ``text`` is the same spec as TOML, the copy the store
    keeps (``pgaccel lab --resume`` and a user re-running it read that)."""
    layers = tuple(layers)
    variants = [VariantSpec("baseline", "the installed server with its defaults"),
                VariantSpec("settings", "pgaccel's plan for PostgreSQL", settings_from="pgaccel")]
    prev = variants[-1]
    if "os" in layers:
        prev = VariantSpec("os", "settings + huge pages reserved and on, THP and sysctls from "
                           "the plan", settings={"huge_pages": "on"}, settings_from="pgaccel",
                           os=OsSettings(**(os_table or {"nr_hugepages": "auto"})))
        variants.append(prev)
    if "build" in layers:
        if build_major is None:
            raise ValueError("the build layer needs the installed server's major version")
        prev = dataclasses.replace(prev, name="build", description=(
            f"{prev.name} + PostgreSQL {build_major} built by pgaccel ({flavor})"),
            version=build_major, flavor=flavor, os=dataclasses.replace(prev.os))
        variants.append(prev)
    if with_pgtune:
        variants.append(VariantSpec("pgtune", "PGTune's formulas for this machine",
                                    settings_from="pgtune"))
    for i, v in enumerate(variants):
        v.index = i
    p = protocol
    entries = [WorkloadEntry(w, w, {"duration": duration, "warmup": warmup, "scale": scale,
                                    "options": {}}, [clients], i)
               for i, w in enumerate(workloads)]
    spec = LabSpec(path=f"<run --stack {stack}>", text="", size="medium",
                   name=f"stack-{stack}",
                   description=f"run --stack {stack}: each layer added to the one before",
                   base=["baseline"], variants=variants, workloads=entries,
                   rounds=p.rounds, max_rounds=max(p.rounds, p.max_rounds or p.rounds),
                   duration=duration, warmup=warmup, order=p.order, seed=p.seed,
                   budget_s=p.budget_s, min_effect=p.min_effect, confidence=p.confidence,
                   until_decided=p.until_decided)
    spec.text = spec_toml(spec)
    return spec


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))


def spec_toml(spec: LabSpec) -> str:
    """A lab spec as the TOML ``pgaccel lab`` reads (every variant written out whole, so no
    variant inherits from another)."""
    run = {"rounds": spec.rounds, "max_rounds": spec.max_rounds, "duration": spec.duration,
           "warmup": spec.warmup, "order": spec.order, "seed": spec.seed,
           "min_effect": spec.min_effect, "confidence": spec.confidence,
           "until_decided": spec.until_decided}
    if spec.budget_s:
        run["budget"] = f"{int(spec.budget_s)}s"
    out = [f"name = {_toml(spec.name)}", f"description = {_toml(spec.description)}",
           f"base = {_toml(spec.base[0])}", "", "[run]"]
    out += [f"{k} = {_toml(v)}" for k, v in run.items() if v is not None]
    for v in spec.variants:
        out += ["", "[[variant]]", f"name = {_toml(v.name)}",
                f"description = {_toml(v.description)}"]
        keys = {"settings": v.settings, "settings_from": v.settings_from,
                "version": v.version, "flavor": v.flavor, "bin": v.bin, "build": v.build,
                "os": v.os.to_dict()}
        out += [f"{k} = {_toml(x)}" for k, x in keys.items() if x not in (None, {})]
    for w in spec.workloads:
        out += ["", "[[workload]]", f"name = {_toml(w.name)}"]
        if w.label != w.name:
            out.append(f"label = {_toml(w.label)}")
        out.append(f"clients = [{', '.join(str(c) for c in w.clients)}]")
        out += [f"{k} = {_toml(x)}" for k, x in w.overrides.items()
                if k not in ("duration", "warmup", "options") and x is not None]
        if w.overrides.get("options"):
            out.append(f"options = {_toml(w.overrides['options'])}")
    return "\n".join(out) + "\n"


def layer_steps(variants: list[str]) -> list[tuple[str, str]]:
    """(before, after) pairs the report shows for the chain of layers present in
    ``variants``: each layer against the one before it (the baseline comparisons come from
    the lab's own judging against its base)."""
    chain = [v for v in ("baseline",) + LAYERS if v in variants]
    return list(zip(chain, chain[1:]))
