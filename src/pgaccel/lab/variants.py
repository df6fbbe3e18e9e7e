"""Variants made real: the server each one runs on, its OS settings, and proof that it is
what it claims.

* **Servers.**  A variant names its binaries with ``bin = DIR`` or ``version = N`` (else the
  default installation).  :func:`resolve_servers` maps each to an installation or skips it
  with a message naming how to get that version; variants sharing a bin directory share one
  throwaway cluster.
* **OS settings.**  ``vm.nr_hugepages`` (a count, or ``auto``: the server's own
  ``shared_memory_size_in_huge_pages`` plus a margin) and the THP mode are set before each
  trial of the variant that asks for them and put back before any other variant's trial
  and at the end (:class:`OsState`, which reads and writes through ``apply.ossettings``,
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
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..apply.ossettings import key_path, read_value, write_value
from ..errors import ServerError, UsageError
from ..server.discovery import Installation
from ..server.target import LocalTarget
from ..tune.linux import THP
from .spec import VariantSpec

NR_HUGEPAGES = key_path("vm.nr_hugepages")
THP_ENABLED = key_path(THP)
MEMINFO = "/proc/meminfo"


def install_hint(major: int) -> str:
    return (f"PostgreSQL {major} is not installed: pgaccel's build support (planned) or "
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


# -- huge pages and THP (pure) -------------------------------------------------------------
def thp_mode(text: str) -> str | None:
    """The selected mode of ``/sys/kernel/mm/transparent_hugepage/enabled``."""
    m = re.search(r"\[(\w+)\]", text or "")
    return m.group(1) if m else None


def parse_meminfo(text: str) -> dict[str, int]:
    """``HugePages_Total`` and friends as ints (kB values in kB)."""
    out = {}
    for line in (text or "").splitlines():
        m = re.match(r"(\w+):\s+(\d+)", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def parse_smaps(text: str) -> list[dict[str, Any]]:
    """Mappings of ``/proc/PID/smaps``: name, size_kb, page_kb, hugetlb_kb."""
    maps: list[dict[str, Any]] = []
    for line in (text or "").splitlines():
        head = re.match(r"^[0-9a-f]+-[0-9a-f]+\s+\S+\s+\S+\s+\S+\s+\d+\s*(.*)$", line)
        if head:
            maps.append({"name": head.group(1).strip(), "size_kb": 0, "page_kb": 4,
                         "hugetlb_kb": 0})
            continue
        m = re.match(r"^(\w+):\s+(\d+) kB", line)
        if m and maps:
            key, val = m.group(1), int(m.group(2))
            if key == "Size":
                maps[-1]["size_kb"] = val
            elif key == "KernelPageSize":
                maps[-1]["page_kb"] = val
            elif key in ("Shared_Hugetlb", "Private_Hugetlb"):
                maps[-1]["hugetlb_kb"] += val
    return maps


def hugetlb_kb(maps: list[dict[str, Any]]) -> int:
    """Size of the mappings backed by explicit huge pages (hugetlbfs / MAP_HUGETLB)."""
    return sum(m["size_kb"] for m in maps
               if m["page_kb"] > 4 or "anon_hugepage" in m["name"] or m["hugetlb_kb"] > 0)


def claims_huge_pages(settings: dict[str, str], nr_hugepages: int | str | None) -> bool | None:
    """True: the variant says its shared memory is on huge pages (huge_pages=on, or it
    reserves pages); False: it says huge_pages=off; None: it leaves it to the server."""
    hp = str(settings.get("huge_pages", "")).strip().lower()
    if nr_hugepages not in (None, 0, "0"):
        return True
    if hp == "on":
        return True
    if hp == "off":
        return False
    return None


def huge_page_problems(claim: bool | None, mapped_kb: int, status: str | None,
                       shared_memory_kb: int | None = None) -> list[str]:
    """Why the server's shared memory contradicts the variant's claim (empty when not).

    ``mapped_kb``: hugetlb-backed mappings of the postmaster; ``status``: SHOW
    huge_pages_status (17+; None before); ``shared_memory_kb``: SHOW shared_memory_size
    (15+; None before)."""
    if claim is None:
        return []
    used = mapped_kb > 0 or (status or "").lower() == "on"
    if claim and not used:
        return ["the server's shared memory is on 4 kB pages: no huge pages are in use"
                + (f" (huge_pages_status = {status})" if status else "")]
    if claim and shared_memory_kb and mapped_kb and mapped_kb < shared_memory_kb * 0.9:
        return [f"only {mapped_kb} kB of {shared_memory_kb} kB shared memory is on huge pages"]
    if claim is False and used:
        return [f"huge_pages=off, yet {mapped_kb} kB of the server's memory is on huge pages"]
    return []


def auto_hugepages(server_pages: int | None, estimate: int) -> int:
    """Pages to reserve for ``nr_hugepages = "auto"``: the server's count (or the estimate
    when the server cannot say) plus ``tune.hugepages.margin``."""
    from ..tune.hugepages import margin
    n = server_pages if server_pages else estimate
    return n + margin(n)


# -- the OS layer (thin) -------------------------------------------------------------------
def read_text(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


class OsState:
    """Sets ``nr_hugepages`` and the THP mode, remembering the originals to put back.

    Reads and writes go through ``apply.ossettings`` (``read_value``: the bracketed choice
    of a sysfs list; ``write_value``), the one writer of OS values."""

    def __init__(self, nr_path: str = NR_HUGEPAGES, thp_path: str = THP_ENABLED):
        self.paths = {"nr_hugepages": nr_path, "thp": thp_path}
        self.original: dict[str, Any] = {}

    def read(self, key: str) -> Any:
        value = read_value(self.paths[key])
        if key == "thp":
            return value or None
        try:
            return int(value or "")
        except ValueError:
            return None

    def _write(self, key: str, value: Any) -> None:
        try:
            write_value(self.paths[key], value)
        except PermissionError:
            raise UsageError(f"Cannot set {key} ({self.paths[key]}): permission denied.",
                             "OS settings in a lab spec need root.") from None
        except OSError as e:
            raise ServerError(f"Cannot set {key} = {value}: {e}.",
                              "The kernel refused the value; check it is supported.") from None

    @staticmethod
    def _ok(key: str, got: Any, want: Any, restoring: bool) -> bool:
        # a variant's page reservation is a minimum (it may have been topped up because
        # other servers on the host took pages); restoring the original is exact
        if key == "nr_hugepages" and not restoring and isinstance(got, int):
            return got >= want
        return got == want

    def differs(self, desired: dict[str, Any]) -> bool:
        keys = set(desired) | set(self.original)
        return any(not self._ok(k, self.read(k), desired.get(k, self.original.get(k)),
                                k not in desired) for k in keys)

    def ensure(self, desired: dict[str, Any]) -> list[str]:
        """Make the OS match ``desired`` (other keys back to their originals); problems
        when the kernel did not do what was asked."""
        problems = []
        for key in sorted(set(desired) | set(self.original)):
            want = desired.get(key, self.original.get(key))
            if want is None:
                continue
            if key not in self.original:
                self.original[key] = self.read(key)
            restoring = key not in desired
            if not self._ok(key, self.read(key), want, restoring):
                self._write(key, want)
            got = self.read(key)
            if not self._ok(key, got, want, restoring):
                problems.append(f"{key} is {got}, asked for {want}"
                                + (" (the kernel could not find that much contiguous free "
                                   "memory)" if key == "nr_hugepages" else ""))
        return problems

    def top_up(self, free_needed: int) -> list[str]:
        """Grow the huge page pool until ``free_needed`` pages are free: other servers on
        the host (PostgreSQL's default is huge_pages=try) take free pages when they start."""
        info = parse_meminfo(read_text(MEMINFO))
        free, total = info.get("HugePages_Free", 0), info.get("HugePages_Total", 0)
        if free >= free_needed:
            return []
        self.original.setdefault("nr_hugepages", self.read("nr_hugepages"))
        self._write("nr_hugepages", total + free_needed - free)
        free = parse_meminfo(read_text(MEMINFO)).get("HugePages_Free", 0)
        return [] if free >= free_needed else [
            f"only {free} huge pages are free, {free_needed} needed (the kernel could not find "
            "that much contiguous free memory)"]

    def restore(self) -> None:
        for key, value in self.original.items():
            if value is not None and self.read(key) != value:
                try:
                    self._write(key, value)
                except Exception:  # best effort on the way out
                    pass


# -- a variant on its server ---------------------------------------------------------------
@dataclass
class LabVariant:
    spec: VariantSpec
    inst: Installation
    ctx: Any                                   # workloads.base.BenchContext
    settings: dict[str, str] = field(default_factory=dict)   # final (settings_from applied)
    os_target: dict[str, Any] = field(default_factory=dict)  # nr_hugepages resolved
    verified: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name


def server_facts(conn) -> dict[str, Any]:
    """What verification reads from a running server (thin)."""
    num = conn.info.server_version
    facts: dict[str, Any] = {"server_version_num": num, "major": num // 10000}
    facts["server_version"] = conn.execute("SHOW server_version").fetchone()[0]
    for name in ("io_method", "huge_pages_status", "shared_memory_size", "huge_pages"):
        row = conn.execute("SELECT setting, unit FROM pg_settings WHERE name = %s",
                           (name,)).fetchone()
        if row:
            facts[name] = row[0]
            if name == "shared_memory_size" and row[1] == "MB":
                facts["shared_memory_kb"] = int(row[0]) * 1024
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
    claim = claims_huge_pages(lv.settings, lv.os_target.get("nr_hugepages"))
    mapped = hugetlb_kb(parse_smaps(smaps_text))
    problems += huge_page_problems(claim, mapped, facts.get("huge_pages_status"),
                                   facts.get("shared_memory_kb"))
    if "thp" in lv.os_target and thp_now != lv.os_target["thp"]:
        problems.append(f"transparent huge pages are {thp_now!r}, the variant asks for "
                        f"{lv.os_target['thp']!r}")
    want_nr = lv.os_target.get("nr_hugepages")
    if want_nr is not None and nr_now is not None and nr_now < want_nr:
        problems.append(f"vm.nr_hugepages is {nr_now}, the variant reserved {want_nr}")
    return problems


class VariantManager:
    """The experiment's hooks: OS state before each trial, checks after it, restore at the
    end.  Only one server runs at a time: others are stopped before a trial."""

    def __init__(self, variants: dict[str, LabVariant], os_state: OsState | None = None):
        self.variants = variants
        self.os_state = os_state or OsState()
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
        """Turn ``nr_hugepages = "auto"`` into a count (needs the cluster stopped)."""
        from ..tune.hugepages import estimate_pages
        for lv in self.variants.values():
            o = lv.spec.os.to_dict()
            if o.get("nr_hugepages") == "auto":
                server = lv.ctx.target
                if server.running():
                    server.stop()
                n = server.huge_pages(lv.settings)
                size_kb = parse_meminfo(read_text(MEMINFO)).get("Hugepagesize", 2048)
                est = estimate_pages(lv.settings, lv.inst.major, size_kb * 1024)
                o["nr_hugepages"] = auto_hugepages(n, est)
                o["nr_hugepages_from"] = ("postgres -C shared_memory_size_in_huge_pages" if n
                                          else "estimate")
            lv.os_target = {k: v for k, v in o.items() if k in ("nr_hugepages", "thp")}
            if "nr_hugepages_from" in o:
                lv.verified["nr_hugepages_from"] = o["nr_hugepages_from"]

    def before_trial(self, name: str, ctx: Any) -> None:
        mine = ctx.target if isinstance(ctx.target, LocalTarget) else None
        for t in self._servers():         # one server at a time
            if (mine is None or t.cluster is not mine.cluster) and t.running():
                t.stop()
        if not self.uses_os:
            return
        desired = self.variants[name].os_target
        reserve = desired.get("nr_hugepages")
        if reserve or self.os_state.differs(desired):
            if mine is not None and mine.running():
                mine.stop()               # release huge pages before the pool changes
            problems = self.os_state.ensure(desired)
            if reserve and not problems:
                problems = self.os_state.top_up(int(reserve))
            if problems:
                raise ServerError(f"Variant {name!r}: the OS settings did not take effect: "
                                  + "; ".join(problems) + ".",
                                  "Free memory (huge pages need contiguous memory) or lower "
                                  "the reservation.")

    def check(self, name: str) -> tuple[dict[str, Any], list[str]]:
        """Facts and problems of the variant's running server."""
        lv = self.variants[name]
        with lv.ctx.target.connect() as conn:
            facts = server_facts(conn)
        pid = lv.ctx.target.postmaster_pid()
        smaps = read_text(f"/proc/{pid}/smaps") if pid else ""
        facts["hugetlb_kb"] = hugetlb_kb(parse_smaps(smaps))
        thp = self.os_state.read("thp")
        nr = self.os_state.read("nr_hugepages")
        facts.update(thp=thp, nr_hugepages=nr)
        return facts, runtime_problems(lv, facts, smaps, thp, nr)

    def after_trial(self, name: str, ctx: Any, trials: list[Any]) -> list[str]:
        _facts, problems = self.check(name)
        return problems

    def verify(self, name: str) -> dict[str, Any]:
        """Start the variant as a trial would and check everything; the result is stored
        as the variant's ``verified`` record (``ok``, ``problems``, server facts)."""
        from .settings import verify_settings
        lv = self.variants[name]
        target = lv.ctx.target
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
