"""The server's code on huge pages (study 000's .text remap): smaps read right (pure), the
preload library built and used by a lab variant for real, with its code verified on huge
pages in the postmaster and a backend, the other variant's code on 4 kB pages."""

from __future__ import annotations

import json
import os

import pytest

from pgaccel.osknobs.procfs import parse_smaps, text_huge_kb
from pgaccel.server.hugetext import preload, problems

from helpers import pgaccel

SMAPS = """\
5633875a7000-563387600000 r-xp 000ce000 fe:00 12410912   /usr/lib/postgresql/15/bin/postgres
Size:                356 kB
AnonHugePages:         0 kB
563387600000-563387a00000 r-xp 00000000 00:00 0
Size:               4096 kB
AnonHugePages:      4096 kB
FilePmdMapped:         0 kB
7f00000000-7f00200000 rw-p 00000000 00:00 0
Size:               2048 kB
AnonHugePages:      2048 kB
7f10000000-7f10400000 r-xp 00000000 fe:00 1   /usr/lib/x86_64-linux-gnu/libc.so.6
Size:               4096 kB
AnonHugePages:         0 kB
FilePmdMapped:      2048 kB
"""


def test_code_on_huge_pages_from_smaps():
    # the remapped code (anonymous THP) and file THP of code count; data mappings do not
    assert text_huge_kb(parse_smaps(SMAPS)) == 4096 + 2048
    assert text_huge_kb(parse_smaps("")) == 0


def test_preload_joins_what_is_there():
    assert preload(None, "/x/h.so") == "/x/h.so"
    assert preload("/usr/lib/libjemalloc.so.2", "/x/h.so") == "/usr/lib/libjemalloc.so.2 /x/h.so"
    assert preload("/x/h.so", "/x/h.so") == "/x/h.so"


def test_problems_name_the_thp_mode():
    assert problems("madvise") == [] and problems("always") == []
    assert "THP is 'never'" in problems("never")[0]
    assert "no transparent huge pages" in problems(None)[0]


SPEC = """name = "text"
base = "plain"
[run]
rounds = 2
duration = 2
warmup = 1
[[variant]]
name = "plain"
[[variant]]
name = "huge-text"
os = { text_hugepages = true, thp = "madvise" }
[[workload]]
name = "select-only"
clients = 1
scale = 1
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a lab variant's os table needs root")
def test_lab_variant_runs_its_server_code_on_huge_pages(tmp_path):
    if "[never]" in open("/sys/kernel/mm/transparent_hugepage/enabled").read():
        pytest.skip("THP is off on this host")
    thp_before = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    spec = tmp_path / "text.toml"
    spec.write_text(SPEC)
    r = pgaccel("lab", "--check", "--json", str(spec), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    v = json.loads(r.stdout)["variants"]
    assert v["huge-text"]["verified"]["ok"], v["huge-text"]["verified"]
    assert v["huge-text"]["verified"]["text_huge_kb"] >= 2048     # at least one 2 MB page
    assert v["plain"]["verified"]["text_huge_kb"] == 0
    assert open("/sys/kernel/mm/transparent_hugepage/enabled").read() == thp_before


def test_text_hugepages_must_be_a_boolean(tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text(SPEC.replace("text_hugepages = true", 'text_hugepages = "yes"'))
    r = pgaccel("lab", "--check", str(spec))
    assert r.returncode == 2 and "text_hugepages must be true or false" in r.stderr, r.stderr
    assert "bad.toml:" in r.stderr and "Traceback" not in r.stderr
