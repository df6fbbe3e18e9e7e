"""Lab variants that name a build (``build = "18-lto"``) or ask for one (``version = 18``,
``flavor = "pgo"``): each becomes a variant with the build's bin directory, built on demand
after the time estimate is shown and accepted."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable

from ..server import buildcache as cache
from ..buildlab.make import Builder, Request, estimate_seconds
from ..errors import PgaccelError, UsageError
from ..specs.spec import VariantSpec
from ..server.discovery import PLAIN_BUILD_FLAVORS, Installation

# a plain `version = N` with no installed server of that major takes a cached build, these
# flavors first
PREFERRED = PLAIN_BUILD_FLAVORS


def _cached(major: int, flavor: str | None, builds: list[cache.Build]) -> cache.Build | None:
    if flavor:
        return cache.match(builds, f"{major}-{flavor}")
    mine = [b for b in builds if b.version.split(".")[0] == str(major)]
    for fl in PREFERRED:
        hit = [b for b in mine if b.flavor == fl]
        if hit:
            return hit[0]
    return mine[0] if mine else None


def brief(message: str, limit: int = 160) -> str:
    """A build failure's first line, at most ``limit`` characters: a substitution is said in
    one line (the whole message is in the build's own output above it).  A longer line is
    cut after its first sentence, else after its last clause (``;``, ``:``) that fits, else
    between words, and ends in " …", never inside a word."""
    first = (message.strip().splitlines() or [""])[0].strip()
    if len(first) <= limit:
        return first
    head = first[:limit - 1]
    for sep in (". ", "; ", ": "):
        at = head.find(sep) if sep == ". " else head.rfind(sep)
        if at >= 20:
            return head[:at + 1] + " …"
    at = head.rfind(" ")
    return (head[:at] if at > 0 else head[:limit - 2]).rstrip() + " …"


def substitute(v: VariantSpec, installations: list[Installation], builds: list[cache.Build],
               why: str) -> VariantSpec | None:
    """``v`` on the first of its ``substitute`` majors this machine has (an installed server,
    else a cached build), its ``substituted`` line saying so; None when it has none."""
    for major in v.substitute:
        insts = [x for x in installations if x.major == major and x.is_server]
        if insts:
            inst = max(insts, key=lambda x: x.version)
            bindir, what = inst.bindir, f"the installed PostgreSQL {inst.version}"
        else:
            b = _cached(major, v.flavor, builds) or _cached(major, None, builds)
            if b is None:
                continue
            bindir, what = b.bindir, f"the build {b.name}"
        line = (f"variant {v.name!r}: PostgreSQL {v.version} {why}; substituted {what} "
                f"({bindir})")
        return dataclasses.replace(v, bin=bindir, version=major, flavor=None, build=None,
                                   substituted=line)
    return None


def realize_builds(variants: list[VariantSpec], installations: list[Installation], *,
                   yes: bool, ask: Callable[[str], bool] | None,
                   say: Callable[[str], None], check: bool = False) -> list[VariantSpec]:
    """The variants with every build they name or ask for as ``bin``; a variant whose
    version can be neither found nor built runs its ``substitute`` (said in one line).
    ``check`` (``lab --check``) builds nothing: a build not cached is a variant to
    substitute, or the error that says how to build it."""
    builds = cache.list_builds()
    todo: dict[tuple[int, str], list[int]] = {}
    out = list(variants)
    for i, v in enumerate(variants):
        if v.build:
            b = cache.resolve(v.build)
            out[i] = dataclasses.replace(v, bin=b.bindir)
        elif v.version and v.flavor:
            b = _cached(v.version, v.flavor, builds)
            if b:
                out[i] = dataclasses.replace(v, bin=b.bindir)
            else:
                todo.setdefault((v.version, v.flavor), []).append(i)
        elif v.version and not any(x.major == v.version and x.is_server
                                   for x in installations):
            b = _cached(v.version, None, builds)
            if b:
                say(f"variant {v.name!r}: PostgreSQL {v.version} is not installed; using the "
                    f"build {b.name}")
                out[i] = dataclasses.replace(v, bin=b.bindir)
            else:
                sub = substitute(v, installations, builds, "is neither installed nor built")
                if sub is not None:
                    out[i] = sub              # said with the lab's notes
    if todo and check:
        subs = {i: substitute(out[i], installations, builds,
                              "is not built (lab --check builds nothing)")
                for idx in todo.values() for i in idx}
        if all(x is not None for x in subs.values()):
            for i, sub in subs.items():
                out[i] = sub
            return out
    if todo:
        jobs = os.cpu_count() or 1
        est = sum(estimate_seconds(m, f, jobs) for m, f in todo)
        what = ", ".join(f"PostgreSQL {m} ({f})" for m, f in todo)
        q = f"The spec needs builds that are not cached: {what}; about {est / 60:.0f} min."
        if not yes:
            if ask is None:
                cmds = "; ".join(f"pgaccel build {m} --flavor {f}" for m, f in todo)
                raise UsageError(q, f"Build them first ({cmds}) or pass --yes to build them "
                                 "now.")
            if not ask(q + " Build them now?"):
                raise UsageError("Not built.", "Build them with `pgaccel build` and run again.")
        for (major, flavor), idx in todo.items():
            say(f"building PostgreSQL {major} ({flavor}) ...")
            try:
                b, _ = Builder(Request(str(major), flavor), say=lambda s: say(f"  {s}"),
                               confirm_install=lambda q: True).run()
            except PgaccelError as e:
                subs = [substitute(out[i], installations, builds,
                                   f"could not be built ({brief(e.message)})") for i in idx]
                if any(x is None for x in subs):
                    raise
                for i, sub in zip(idx, subs):
                    out[i] = sub              # said with the lab's notes
                continue
            say(f"built {b.name} in {b.manifest['build_seconds'] / 60:.1f} min")
            for i in idx:
                out[i] = dataclasses.replace(out[i], bin=b.bindir)
    return out
