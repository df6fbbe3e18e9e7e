"""Variants made real: the server each one runs on, its OS settings, and proof that it is
what it claims.

* **Servers.**  A variant names its binaries with ``bin = DIR`` or ``version = N`` (else the
  default installation).  :func:`resolve_servers` maps each to an installation or skips it
  with a message naming how to get that version; variants sharing a bin directory share one
  throwaway cluster.
* **OS settings.**  ``vm.nr_hugepages`` (a count, or ``auto``: the server's own
  ``shared_memory_size_in_huge_pages`` plus a margin) and the THP mode are set before each
  trial of the variant that asks for them and put back before any other variant's trial
  and at the end (:class:`OsState`, which reads and writes through ``osknobs.knob``,
  the same writer ``tune --apply-os`` uses).  The server is stopped before the kernel's
  huge page pool changes.
* **Verification** (:func:`runtime_problems`, :class:`VariantManager`): the server version
  is the variant's; huge pages are really backing shared memory when the variant asks for
  them (``huge_pages=on`` or a huge page reservation) — read from the postmaster's
  ``/proc/PID/smaps`` (a hugetlb mapping) and, on 17+, ``huge_pages_status`` — and not
  when it says ``huge_pages=off``; the THP mode and page reservation are the requested ones;
  settings (io_method on 18+ included) are checked by the trial runner in pg_settings.

Parsing and judging are pure functions over text; reading /proc and writing /proc/sys and
/sys are the thin layer (:class:`OsState`, :func:`read_text`).  Servers are started and
stopped through their targets (``server.target.LocalTarget``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..apply.state import crash_point
from ..errors import ServerError, UsageError
from ..server.discovery import Installation
from ..server.target import LocalTarget
from ..osknobs.hugepages import (auto_hugepages, claims_huge_pages, huge_page_problems, nr_key,
                                  page_kb, size_label)
from ..osknobs.knob import read_text
from ..osknobs.procfs import hugetlb_kb, parse_smaps, text_huge_kb
from ..osknobs.state import SYSCTL, SYSFS, OsState
from ..pg.values import DURABILITY, turns_off_durability
from ..specs.spec import VariantSpec


def install_hint(major: int) -> str:
    return (f"PostgreSQL {major} is not installed: `pgaccel build {major}` (or "
            f"flavor = \"...\" in the variant, built on demand), "
            f"`apt-get install postgresql-{major}` from the PGDG repository "
            "(https://wiki.postgresql.org/wiki/Apt), or point the variant at a bin directory "
            "with bin = \"...\".")


# -- servers (pure over a list of installations) -------------------------------------------
@dataclass
class Resolved:
    variant: VariantSpec
    inst: Installation | None
    skipped: str | None = None


def resolve_servers(variants: Iterable[VariantSpec], installations: list[Installation],
                    default: Installation | None,
                    probe: Callable[[str], Installation | None] | None = None
                    ) -> list[Resolved]:
    """Each variant's installation, or why it is skipped.

    ``installations`` are those found on the host; ``probe(dir)`` looks at a ``bin``
    directory discovery did not list (default: none)."""
    by_dir = {os.path.realpath(i.bindir): i for i in installations}
    out = []
    for v in variants:
        if v.bin:
            inst = by_dir.get(os.path.realpath(v.bin)) or (probe(v.bin) if probe else None)
            if inst is None or not inst.is_server:
                what = ("holds no PostgreSQL server (postgres, initdb and pg_ctl)"
                        if inst is not None or os.path.isdir(v.bin) else "does not exist")
                out.append(Resolved(v, None, f"variant {v.name!r} skipped: {v.bin} {what}. "
                                    "Install PostgreSQL there or fix bin = \"...\"."))
                continue
            out.append(Resolved(v, inst))
        elif v.version:
            cands = [i for i in installations if i.major == v.version and i.is_server]
            if not cands:
                out.append(Resolved(v, None, f"variant {v.name!r} skipped: "
                                    + install_hint(v.version)))
                continue
            out.append(Resolved(v, max(cands, key=lambda i: i.version)))
        elif default is None:
            out.append(Resolved(v, None, f"variant {v.name!r} skipped: no PostgreSQL server "
                                "was found on this machine."))
        else:
            out.append(Resolved(v, default))
    return out


def choose_base(preferred: list[str], runnable: list[str]) -> tuple[str, str | None]:
    """The base variant: the first of ``preferred`` that can run; a note when it is not
    the first one named.  UsageError when none of them can."""
    for i, name in enumerate(preferred):
        if name in runnable:
            note = None if i == 0 else (f"base variant {preferred[0]!r} cannot run here; "
                                        f"comparing against {name!r} instead")
            return name, note
    raise UsageError(f"The base variant ({' or '.join(preferred)}) cannot run on this machine.",
                     "Install its server, or name another base = [...] in the spec.")


# -- a variant on its server ---------------------------------------------------------------
@dataclass
class LabVariant:
    spec: VariantSpec
    inst: Installation
    ctx: Any                                   # workloads.base.BenchContext
    settings: dict[str, str] = field(default_factory=dict)   # final (settings_from applied)
    os_target: dict[str, Any] = field(default_factory=dict)  # nr_hugepages resolved
    verified: dict[str, Any] = field(default_factory=dict)
    os_problems: list[str] = field(default_factory=list)    # found before any start
    server_env: dict[str, str] = field(default_factory=dict)  # e.g. the hugetext preload

    @property
    def name(self) -> str:
        return self.spec.name


def server_facts(db) -> dict[str, Any]:
    """What verification reads from a running server (a ``server.database.Database``)."""
    facts: dict[str, Any] = {"server_version_num": db.version_num, "major": db.major,
                             "server_version": db.version}
    rows = db.settings(["io_method", "huge_pages_status", "shared_memory_size", "huge_pages",
                        "data_checksums", *DURABILITY])
    for name, row in rows.items():
        if name in DURABILITY:
            continue
        facts[name] = row["setting"]
        if name == "shared_memory_size" and row["unit"] == "MB":
            facts["shared_memory_kb"] = int(row["setting"]) * 1024
    # read back, not taken from the spec: what `lab --allow-unsafe-durability` let it run
    off = [f"{n}={rows[n]['setting']}" for n in sorted(DURABILITY)
           if n in rows and turns_off_durability(n, rows[n]["setting"])]
    if off:
        facts["durability_off"] = off
    return facts


def runtime_problems(lv: LabVariant, facts: dict[str, Any], smaps_text: str,
                     thp_now: str | None, nr_now: int | None) -> list[str]:
    """Everything about a running variant that contradicts its spec (pure)."""
    problems = []
    if facts.get("major") is not None and facts["major"] != lv.inst.major:
        problems.append(f"the server is PostgreSQL {facts.get('server_version')}, not "
                        f"{lv.inst.major} from {lv.inst.bindir}")
    if lv.spec.version and facts.get("major") not in (None, lv.spec.version):
        problems.append(f"the server is PostgreSQL {facts.get('major')}, the variant asks "
                        f"for {lv.spec.version}")
    sums = facts.get("data_checksums")
    if sums is not None and (sums == "on") != lv.spec.data_checksums:
        problems.append(f"data checksums are {sums}, the variant asks for "
                        f"{'on' if lv.spec.data_checksums else 'off'}")
    claim = claims_huge_pages(lv.settings, lv.os_target.get("nr_hugepages"))
    mapped = hugetlb_kb(parse_smaps(smaps_text))
    problems += huge_page_problems(claim, mapped, facts.get("huge_pages_status"),
                                   facts.get("shared_memory_kb"))
    if "thp" in lv.os_target and thp_now != lv.os_target["thp"]:
        problems.append(f"transparent huge pages are {thp_now!r}, the variant asks for "
                        f"{lv.os_target['thp']!r}")
    want_nr = lv.os_target.get("nr_hugepages")
    if want_nr is not None and nr_now is not None and nr_now < want_nr:
        size = size_label(lv.os_target["page_kb"]) if lv.os_target.get("page_kb") else ""
        problems.append(f"{size + ' ' if size else ''}huge pages reserved: {nr_now}, the "
                        f"variant reserved {want_nr}")
    return problems


class VariantManager:
    """The experiment's hooks: OS state before each trial, checks after it, restore at the
    end.  Only one server runs at a time: others are stopped before a trial."""

    def __init__(self, variants: dict[str, LabVariant], os_state: OsState | None = None):
        self.variants = variants
        if os_state is None:
            from ..osknobs.journal import OsJournal
            os_state = OsState(journal=OsJournal())
        self.os_state = os_state
        self.uses_os = any(v.spec.os for v in variants.values())

    def _servers(self) -> list[LocalTarget]:
        """The local targets the variants run on, one per cluster."""
        seen, out = set(), []
        for lv in self.variants.values():
            t = lv.ctx.target
            if isinstance(t, LocalTarget) and id(t.cluster) not in seen:
                seen.add(id(t.cluster))
                out.append(t)
        return out

    def resolve_os(self) -> None:
        """Turn ``nr_hugepages = "auto"`` into a count of the pages the variant's server
        maps (``huge_page_size``: the kernel's default or another size it offers, such as
        1 GB; needs the cluster stopped).  A page size the kernel does not offer is a
        problem of the variant (``os_problems``), found before any server starts."""
        from ..tune.hugepages import estimate_pages
        default_kb = self.os_state.default_kb()
        for lv in self.variants.values():
            o = lv.spec.os.to_dict()
            if o.get("text_hugepages"):
                self._resolve_text(lv)
            kb = page_kb(lv.settings, default_kb)
            if kb != default_kb and not self.os_state.offers(kb):
                lv.os_problems.append(
                    f"huge_page_size = {lv.settings.get('huge_page_size')}: this kernel offers "
                    f"no {size_label(kb)} huge pages ({self.os_state.size_dir(kb)} does not "
                    "exist; x86-64 needs the pdpe1gb CPU flag for 1 GB pages)")
                continue
            if o.get("nr_hugepages") == "auto":
                server = lv.ctx.target
                if server.running():
                    server.stop()
                n = server.huge_pages(lv.settings)
                est = estimate_pages(lv.settings, lv.inst.major, kb * 1024)
                o["nr_hugepages"] = auto_hugepages(n, est, kb)
                o["nr_hugepages_from"] = ("postgres -C shared_memory_size_in_huge_pages" if n
                                          else "estimate")
            lv.os_target = {k: v for k, v in o.items() if k in ("nr_hugepages", "thp")}
            for table, prefix in (("sysctl", SYSCTL), ("sysfs", SYSFS)):
                for name, value in (o.get(table) or {}).items():
                    key = prefix + name
                    if self.os_state.read(key) is None:
                        lv.os_problems.append(f"{table} {name}: this machine has no "
                                              f"{self.os_state.path(key)}")
                    lv.os_target[key] = value
            if "nr_hugepages" in lv.os_target:
                lv.os_target["page_kb"] = kb
            if "nr_hugepages_from" in o:
                lv.verified["nr_hugepages_from"] = o["nr_hugepages_from"]

    def _resolve_text(self, lv: LabVariant) -> None:
        """``text_hugepages``: the remap library compiled, THP able to give the pages (the
        variant's own thp mode, else the host's)."""
        from ..errors import PgaccelError
        from ..server import hugetext
        thp = lv.spec.os.thp or self.os_state.read("thp")
        why = hugetext.problems(thp)
        if not why:
            try:
                lib = hugetext.library()
            except PgaccelError as e:
                why = [e.message]
            else:
                from ..server.discovery import server_env
                lv.server_env = {"LD_PRELOAD": hugetext.preload(
                    server_env(lv.inst.bindir).get("LD_PRELOAD"), lib)}
        lv.os_problems += why

    def _desired(self, lv: LabVariant) -> dict[str, Any]:
        """The variant's OS target as OsState keys (the reservation keyed by page size)."""
        t = dict(lv.os_target)
        kb = t.pop("page_kb", None)
        if "nr_hugepages" in t and kb:
            t[nr_key(kb, self.os_state.default_kb())] = t.pop("nr_hugepages")
        return t

    def _desired_together(self) -> dict[str, Any]:
        """Side by side, what every variant needs of the host at once: the host-wide values
        they agree on (``lab/sharing.py``) and each page size's reservations added up, so
        that no variant's turn gives back another's pool."""
        out: dict[str, Any] = {}
        for lv in self.variants.values():
            for key, value in self._desired(lv).items():
                if key.startswith("nr_hugepages"):
                    out[key] = out.get(key, 0) + int(value)
                else:
                    out[key] = value
        return out

    def before_trial(self, name: str, ctx: Any, *, together: bool = False) -> None:
        """The host and ``ctx``'s server made ready for ``name``'s trial: alone, every other
        server stopped; ``together`` (a round side by side, ``lab/paired.py``), the others
        left running (they share the host's values, ``lab/sharing.py``)."""
        mine = ctx.target if isinstance(ctx.target, LocalTarget) else None
        for t in self._servers() if not together else []:     # one server at a time
            if (mine is None or t.cluster is not mine.cluster) and t.running():
                t.stop()
        if mine is not None:
            env = self.variants[name].server_env
            if mine.cluster.extra_env != env:
                if mine.running():
                    mine.stop()           # the environment is read at start
                mine.cluster.extra_env = dict(env)
        if not self.uses_os:
            return
        lv = self.variants[name]
        desired = self._desired_together() if together else self._desired(lv)
        reserve = lv.os_target.get("nr_hugepages")
        if reserve or self.os_state.differs(desired):
            if mine is not None and mine.running():
                mine.stop()               # release huge pages before the pool changes
            problems = self.os_state.ensure(desired)
            crash_point("lab-os-changed")
            if reserve and not problems:
                problems = self.os_state.top_up(int(reserve), lv.os_target.get("page_kb"))
            if problems:
                raise ServerError(f"Variant {name!r}: the OS settings did not take effect: "
                                  + "; ".join(problems) + ".",
                                  "Free memory (huge pages need contiguous memory) or lower "
                                  "the reservation.")

    def check(self, name: str, ctx: Any = None) -> tuple[dict[str, Any], list[str]]:
        """Facts and problems of the variant's running server (``ctx``'s: side by side the
        servers of a rotation group take turns; else the variant's own)."""
        lv = self.variants[name]
        target = (ctx or lv.ctx).target
        with target.database() as db:
            facts = server_facts(db)
        pid = target.postmaster_pid()
        smaps = read_text(f"/proc/{pid}/smaps") if pid else ""
        facts["hugetlb_kb"] = hugetlb_kb(parse_smaps(smaps))
        facts["text_huge_kb"] = text_huge_kb(parse_smaps(smaps))
        if lv.spec.os.text_hugepages and not facts["text_huge_kb"]:
            problems_text = ["the server's code is not on huge pages (no huge-page-backed "
                             "executable mapping in the postmaster's smaps)"]
        else:
            problems_text = []
        thp = self.os_state.read("thp")
        kb = lv.os_target.get("page_kb")
        nr = self.os_state.read(nr_key(kb, self.os_state.default_kb()) if kb
                                else "nr_hugepages")
        facts.update(thp=thp, nr_hugepages=nr)
        problems = runtime_problems(lv, facts, smaps, thp, nr) + problems_text
        for key, want in lv.os_target.items():
            if key.startswith((SYSCTL, SYSFS)):
                got = self.os_state.read(key)
                facts[key] = got
                if str(got) != str(want):
                    problems.append(f"{key.split(':', 1)[1]} is {got}, the variant asks for "
                                    f"{want}")
        return facts, problems

    def after_trial(self, name: str, ctx: Any, trials: list[Any]) -> list[str]:
        _facts, problems = self.check(name, ctx)
        if self.variants[name].os_target:
            crash_point("lab-os-in-use")    # its server runs on the changed OS right now
        return problems

    def verify(self, name: str) -> dict[str, Any]:
        """Start the variant as a trial would and check everything; the result is stored
        as the variant's ``verified`` record (``ok``, ``problems``, server facts)."""
        from .settings import verify_settings
        lv = self.variants[name]
        target = lv.ctx.target
        if lv.os_problems:
            lv.verified.update(ok=False, problems=list(lv.os_problems))
            return lv.verified
        try:
            self.before_trial(name, lv.ctx)
            target.apply(dict(lv.settings))
        except ServerError as e:
            lv.verified.update(ok=False, problems=[e.message])
            return lv.verified
        bad = verify_settings(target, dict(lv.settings))
        problems = [f"{m['name']} is {m['actual']!r}, expected {m['expected']!r}" for m in bad]
        facts, more = self.check(name)
        lv.verified.update(ok=not (problems or more), problems=problems + more,
                           bindir=lv.inst.bindir, **facts)
        return lv.verified

    def restore(self) -> None:
        if self.uses_os:
            for t in self._servers():
                try:
                    if t.running():
                        t.stop()
                except Exception:
                    pass
            self.os_state.restore()
