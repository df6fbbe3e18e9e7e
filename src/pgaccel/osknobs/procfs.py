"""The one parser of each kernel file format pgaccel reads (pure; the callers read the
files, under a root that tests construct)."""

from __future__ import annotations

import re
from typing import Any

_MAP_HEAD = re.compile(r"^[0-9a-f]+-[0-9a-f]+\s+(\S+)\s+\S+\s+\S+\s+\d+\s*(.*)$")
_KB_FIELD = re.compile(r"^(\w+):\s+(\d+) kB")


def parse_bracketed(text: str) -> tuple[str | None, list[str]]:
    """A sysfs choice list: 'always [madvise] never' -> ('madvise', ['always', 'madvise',
    'never']).  A single option without brackets ('none') is taken as the active one."""
    words = (text or "").split()
    options = [w.strip("[]") for w in words]
    active = next((w[1:-1] for w in words if w.startswith("[") and w.endswith("]")), None)
    if active is None and len(options) == 1:
        active = options[0]
    return active, options


def thp_mode(text: str) -> str | None:
    """The selected mode of ``/sys/kernel/mm/transparent_hugepage/enabled`` (None: no
    selection, e.g. an empty or missing file)."""
    active, _ = parse_bracketed(text)
    return active if "[" in (text or "") else None


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo -> {'MemTotal': bytes, 'Hugepagesize': bytes, 'HugePages_Total':
    count, ...}: fields given in kB come out in bytes, counts as they are."""
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        m = re.match(r"([^:\s]+):\s+(\d+)(?:\s+(kB))?", line)
        if m:
            out[m.group(1)] = int(m.group(2)) * (1024 if m.group(3) else 1)
    return out


def parse_smaps(text: str) -> list[dict[str, Any]]:
    """The mappings of ``/proc/PID/smaps``: name, perms ('r-xp'), size_kb, page_kb
    (KernelPageSize), hugetlb_kb (Shared_ + Private_Hugetlb) and thp_kb (AnonHugePages +
    FilePmdMapped: transparent huge pages)."""
    maps: list[dict[str, Any]] = []
    for line in (text or "").splitlines():
        head = _MAP_HEAD.match(line)
        if head:
            maps.append({"name": head.group(2).strip(), "perms": head.group(1), "size_kb": 0,
                         "page_kb": 4, "hugetlb_kb": 0, "thp_kb": 0})
            continue
        m = _KB_FIELD.match(line)
        if m and maps:
            key, val = m.group(1), int(m.group(2))
            if key == "Size":
                maps[-1]["size_kb"] = val
            elif key == "KernelPageSize":
                maps[-1]["page_kb"] = val
            elif key in ("Shared_Hugetlb", "Private_Hugetlb"):
                maps[-1]["hugetlb_kb"] += val
            elif key in ("AnonHugePages", "FilePmdMapped"):
                maps[-1]["thp_kb"] += val
    return maps


def hugetlb_kb(maps: list[dict[str, Any]]) -> int:
    """Size of the mappings backed by explicit huge pages (hugetlbfs / MAP_HUGETLB)."""
    return sum(m["size_kb"] for m in maps
               if m["page_kb"] > 4 or "anon_hugepage" in m["name"] or m["hugetlb_kb"] > 0)


def text_huge_kb(maps: list[dict[str, Any]]) -> int:
    """kB of executable mappings on transparent huge pages (the server's code remapped
    onto anonymous THP, or file THP where the kernel maps code that way)."""
    return sum(m["thp_kb"] for m in maps if "x" in m["perms"])
