"""osknobs/procfs.py: the one parser of each kernel format, on texts written here (the
real files' layout; values chosen so that each field lands somewhere a slip would show)."""

from __future__ import annotations

import pytest

from pgaccel.errors import UsageError
from pgaccel.osknobs.procfs import (hugetlb_kb, parse_bracketed, parse_meminfo, parse_smaps,
                                    text_huge_kb, thp_mode)
from pgaccel.pg.settings import check_name, settable

SMAPS = """\
Size:                  8 kB
55d0c0a00000-55d0c0b00000 r-xp 00000000 08:01 1234     /usr/lib/postgresql/15/bin/postgres
Size:               1024 kB
KernelPageSize:        4 kB
AnonHugePages:      2048 kB
FilePmdMapped:      4096 kB
7f0000000000-7f0000400000 rw-p 00000000 00:00 0
Size:               4096 kB
AnonHugePages:      2048 kB
7fe2db600000-7fe2ece00000 rw-s 00000000 00:11 84266      /anon_hugepage (deleted)
Size:             286720 kB
KernelPageSize:        4 kB
Shared_Hugetlb:        0 kB
7fe300000000-7fe300200000 r-xp 00000000 00:00 0
Size:               2048 kB
AnonHugePages:      1024 kB
FilePmdMapped:       512 kB
7fe400000000-7fe400100000 rw-s 00000000 00:01 9
"""


def test_smaps_fields_land_on_their_own_mapping():
    maps = parse_smaps(SMAPS)
    # the kB line before the first mapping belongs to none
    assert [m["size_kb"] for m in maps] == [1024, 4096, 286720, 2048, 0]
    assert [m["perms"] for m in maps] == ["r-xp", "rw-p", "rw-s", "r-xp", "rw-s"]
    # AnonHugePages and FilePmdMapped add up per mapping
    assert [m["thp_kb"] for m in maps] == [6144, 2048, 0, 1536, 0]
    # a mapping without KernelPageSize is on 4 kB pages; no Hugetlb lines: 0
    assert maps[4] == {"name": "", "perms": "rw-s", "size_kb": 0, "page_kb": 4,
                       "hugetlb_kb": 0, "thp_kb": 0}


def test_hugetlb_counts_each_sign_of_explicit_huge_pages():
    maps = parse_smaps(SMAPS)
    # /anon_hugepage on 4 kB page size lines still counts by its name (MAP_HUGETLB)
    assert hugetlb_kb(maps) == 286720
    plain = [{"name": "x", "perms": "rw-s", "size_kb": 100, "page_kb": 4, "hugetlb_kb": 0,
              "thp_kb": 0}]
    assert hugetlb_kb(plain) == 0
    assert hugetlb_kb([{**plain[0], "hugetlb_kb": 2048}]) == 100      # by its Hugetlb lines
    assert hugetlb_kb([{**plain[0], "page_kb": 2048}]) == 100         # by its page size


def test_code_on_transparent_huge_pages_counts_executable_mappings_only():
    assert text_huge_kb(parse_smaps(SMAPS)) == 6144 + 1536
    assert text_huge_kb([]) == 0


@pytest.mark.parametrize("text,mode", [
    ("always [madvise] never\n", "madvise"), ("[always] madvise never", "always"),
    ("[never]", "never"), ("madvise", None), ("", None), (None, None)])
def test_thp_mode_is_the_bracketed_choice(text, mode):
    assert thp_mode(text) == mode


def test_bracketed_lists_and_meminfo():
    assert parse_bracketed("none") == ("none", ["none"])
    assert parse_bracketed("[mq-deadline] none") == ("mq-deadline", ["mq-deadline", "none"])
    m = parse_meminfo("MemTotal: 1000 kB\nHugePages_Total: 7\nHugepagesize: 2048 kB\n")
    assert m == {"MemTotal": 1024000, "HugePages_Total": 7, "Hugepagesize": 2097152}


def test_setting_names_and_target_kinds_are_checked_with_what_to_do():
    with pytest.raises(UsageError) as e:
        check_name("shared buffers")
    assert "'shared buffers' is not a valid PostgreSQL setting name" in str(e.value)
    assert "letters, digits, '_' and '.'" in e.value.hint
    assert check_name("pg_stat_statements.max") == "pg_stat_statements.max"
    with pytest.raises(ValueError, match="unknown target kind 'cloud'"):
        settable("user", "cloud")
