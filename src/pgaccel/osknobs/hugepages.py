"""Huge pages, pure: what a lab variant claims about its shared memory and whether the
server's memory map agrees, the page size a server maps with, the pool's key and label."""

from __future__ import annotations

from typing import Any


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


def page_kb(settings: dict[str, Any], default_kb: int) -> int:
    """The huge page size (kB) a server with ``settings`` maps its shared memory with:
    ``huge_page_size`` ('1GB', '2MB', a number of kB; 0 or unset: the kernel's default)."""
    raw = str(settings.get("huge_page_size", "0")).strip()
    if raw in ("", "0"):
        return default_kb
    from ..pg.values import setting_bytes
    return setting_bytes(raw, "kB") // 1024


def nr_key(kb: int, default_kb: int) -> str:
    """OsState's key for the reservation of ``kb`` pages: ``nr_hugepages`` for the default
    size (vm.nr_hugepages), ``nr_hugepages@1048576`` for another."""
    return "nr_hugepages" if kb == default_kb else f"nr_hugepages@{kb}"


def size_label(kb: int) -> str:
    return f"{kb // 1048576} GB" if kb % 1048576 == 0 else (
        f"{kb // 1024} MB" if kb % 1024 == 0 else f"{kb} kB")


def auto_hugepages(server_pages: int | None, estimate: int, kb: int = 2048) -> int:
    """Pages (of ``kb`` kB) to reserve for ``nr_hugepages = "auto"``: the server's count
    (or the estimate when the server cannot say) plus ``tune.hugepages.margin``."""
    from ..tune.hugepages import margin
    n = server_pages if server_pages else estimate
    return n + margin(n, kb * 1024)


