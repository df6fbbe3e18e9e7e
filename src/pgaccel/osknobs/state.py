"""``OsState``: the OS values a lab variant or ``run --stack`` holds for a measurement — a
huge page reservation of any page size the kernel offers (2 MB through ``vm.nr_hugepages``,
others such as 1 GB through ``/sys/kernel/mm/hugepages``), the THP mode, sysctls and sysfs
values — remembered (and journaled) before the first change and put back afterwards.
Reads and writes go through ``osknobs.knob``."""

from __future__ import annotations

import os
from typing import Any

from ..errors import ServerError, UsageError
from ..tune.linux import THP
from .hugepages import nr_key, size_label
from .knob import key_path, partner_path, read_text, read_value, write_value
from .procfs import parse_meminfo

NR_HUGEPAGES = key_path("vm.nr_hugepages")
THP_ENABLED = key_path(THP)
MEMINFO = "/proc/meminfo"
HUGEPAGES_DIR = "/sys/kernel/mm/hugepages"


SYSCTL = "sysctl:"      # OsState's key prefix of a /proc/sys value (sysctl:vm.swappiness)
SYSFS = "sysfs:"        # ... of a /sys value (sysfs:sys/block/vda/queue/scheduler)


class OsState:
    """Sets huge page reservations and the THP mode, remembering the originals to put back.

    Keys: ``thp``, ``nr_hugepages`` (the default page size, vm.nr_hugepages),
    ``nr_hugepages@KB`` (pages of KB kB, ``<sizes_dir>/hugepages-KBkB/nr_hugepages``) and
    ``sysctl:NAME`` (``/proc/sys/NAME`` with dots as slashes) and ``sysfs:PATH``
    (``/PATH``, under ``root``: a block device's queue, the scheduler's debugfs knobs).
    Reads and writes go through ``osknobs.knob`` (``read_value``: the bracketed choice of a
    sysfs list; ``write_value``), the one writer of OS values."""

    def __init__(self, nr_path: str = NR_HUGEPAGES, thp_path: str = THP_ENABLED,
                 sizes_dir: str = HUGEPAGES_DIR, meminfo: str = MEMINFO,
                 journal: Any = None, proc_sys: str = "/proc/sys", root: str = "/"):
        self.paths = {"nr_hugepages": nr_path, "thp": thp_path}
        self.proc_sys, self.root = proc_sys, root
        self.sizes_dir, self.meminfo = sizes_dir, meminfo
        self.original: dict[str, Any] = {}
        # osknobs.journal.OsJournal: each original is journaled before the first change,
        # so a killed run's values are put back at pgaccel's next start
        self.journal = journal

    def _partner(self, key: str) -> str | None:
        """The ratio key a *_bytes sysctl is exclusive with (``knob.EXCLUSIVE``)."""
        part = partner_path(self.path(key)) if key.startswith(SYSCTL) else None
        if part is None:
            return None
        return SYSCTL + os.path.relpath(part, self.proc_sys).replace("/", ".")

    def _remember(self, key: str) -> None:
        for k in (key, self._partner(key)):
            if k is not None and k not in self.original:
                if self.journal is not None:
                    self.journal.record(self.path(k))
                self.original[k] = self.read(k)

    def default_kb(self) -> int:
        return parse_meminfo(read_text(self.meminfo)).get("Hugepagesize", 2048 * 1024) // 1024

    def size_dir(self, kb: int) -> str:
        return os.path.join(self.sizes_dir, f"hugepages-{kb}kB")

    def offers(self, kb: int) -> bool:
        """Whether the kernel has a pool of ``kb`` pages."""
        return kb == self.default_kb() or os.path.isdir(self.size_dir(kb))

    def path(self, key: str) -> str:
        if key.startswith(SYSCTL):
            return os.path.join(self.proc_sys, *key[len(SYSCTL):].split("."))
        if key.startswith(SYSFS):
            return os.path.join(self.root, key[len(SYSFS):])
        if key.startswith("nr_hugepages@"):
            return os.path.join(self.size_dir(int(key.split("@")[1])), "nr_hugepages")
        return self.paths[key]

    def read(self, key: str) -> Any:
        value = read_value(self.path(key))
        if key == "thp":
            return value or None
        if key.startswith((SYSCTL, SYSFS)):
            return int(value) if value and value.lstrip("-").isdigit() else value
        try:
            return int(value or "")
        except ValueError:
            return None

    def _write(self, key: str, value: Any) -> None:
        try:
            try:
                write_value(self.path(key), value)
            except OSError:
                part = self._partner(key)
                if not (part and str(value) == "0" and self.original.get(part)):
                    raise
                # the kernel refuses 0 for a *_bytes sysctl: its ratio's old value brings it
                key, value = part, self.original[part]
                write_value(self.path(key), value)
        except PermissionError:
            raise UsageError(f"Cannot set {key} ({self.path(key)}): permission denied.",
                             "OS settings in a lab spec need root.") from None
        except OSError as e:
            raise ServerError(f"Cannot set {key} = {value}: {e}.",
                              "The kernel refused the value; check it is supported.") from None

    @staticmethod
    def _ok(key: str, got: Any, want: Any, restoring: bool) -> bool:
        # a variant's page reservation is a minimum (it may have been topped up because
        # other servers on the host took pages); restoring the original is exact
        if key.startswith("nr_hugepages") and not restoring and isinstance(got, int):
            return got >= want
        if key.startswith((SYSCTL, SYSFS)):
            return str(got) == str(want)
        return got == want

    def _keys(self, desired: dict[str, Any]) -> list[str]:
        """Keys to bring to their desired (or original) value: a ratio whose *_bytes
        partner is desired follows that partner (the kernel zeroes it)."""
        implied = {self._partner(k) for k in desired} - set(desired)
        return sorted((set(desired) | set(self.original)) - implied)

    def differs(self, desired: dict[str, Any]) -> bool:
        keys = self._keys(desired)
        return any(not self._ok(k, self.read(k), desired.get(k, self.original.get(k)),
                                k not in desired) for k in keys)

    def ensure(self, desired: dict[str, Any]) -> list[str]:
        """Make the OS match ``desired`` (other keys back to their originals); problems
        when the kernel did not do what was asked."""
        problems = []
        for key in self._keys(desired):
            want = desired.get(key, self.original.get(key))
            if want is None:
                continue
            self._remember(key)
            restoring = key not in desired
            if not self._ok(key, self.read(key), want, restoring):
                self._write(key, want)
            got = self.read(key)
            if not self._ok(key, got, want, restoring):
                problems.append(f"{key} is {got}, asked for {want}"
                                + (" (the kernel could not find that much contiguous free "
                                   "memory)" if key.startswith("nr_hugepages") else ""))
        return problems

    def _pool(self, kb: int | None) -> tuple[int, int]:
        """(free, total) pages of the ``kb`` pool (None: the default size); free less the
        pages a running server has mapped but not yet touched (reserved: the kernel will
        not give them to another)."""
        if kb is None or kb == self.default_kb():
            info = parse_meminfo(read_text(self.meminfo))
            return (info.get("HugePages_Free", 0) - info.get("HugePages_Rsvd", 0),
                    info.get("HugePages_Total", 0))
        d = self.size_dir(kb)
        def num(name: str) -> int:
            try:
                return int(read_text(os.path.join(d, name)).strip() or 0)
            except ValueError:
                return 0
        return num("free_hugepages") - num("resv_hugepages"), num("nr_hugepages")

    def top_up(self, free_needed: int, kb: int | None = None) -> list[str]:
        """Grow the huge page pool (of ``kb`` pages; None: the default size) until
        ``free_needed`` pages are free: other servers on the host (PostgreSQL's default is
        huge_pages=try) take free pages when they start."""
        key = nr_key(kb, self.default_kb()) if kb else "nr_hugepages"
        free, total = self._pool(kb)
        if free >= free_needed:
            return []
        self._remember(key)
        self._write(key, total + free_needed - free)
        free, _ = self._pool(kb)
        return [] if free >= free_needed else [
            f"only {free} huge pages of {size_label(kb or self.default_kb())} are free, "
            f"{free_needed} needed (the kernel could not find that much contiguous free "
            "memory)"]

    def restore(self) -> None:
        ok = True
        for key, value in self.original.items():
            if value is not None and self.read(key) != value:
                try:
                    self._write(key, value)
                except Exception:  # best effort on the way out; the journal stays
                    ok = False
        if ok and self.journal is not None:
            self.journal.done()
