"""The OS journal: values a run changed are recorded before the first change, and a run
that died without restoring them has them put back at pgaccel's next start.  Files in a
temporary directory stand in for /proc/sys and /sys (the same read/write code); the real
kill -9 of a lab run with OS settings is in test_lab_hugepages.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from pgaccel.osknobs.journal import OsJournal, recover
from pgaccel.osknobs.state import OsState


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _tree(tmp_path):
    thp = tmp_path / "thp"
    thp.write_text("always [madvise] never\n")
    nr = tmp_path / "nr_hugepages"
    nr.write_text("0\n")
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("Hugepagesize:       2048 kB\n")
    return thp, nr, meminfo


def test_originals_are_journaled_before_the_change_and_dropped_after_restore(tmp_path):
    thp, nr, meminfo = _tree(tmp_path)
    j = OsJournal(str(tmp_path / "journal"))
    st = OsState(str(nr), str(thp), str(tmp_path / "sizes"), str(meminfo), journal=j)
    st.ensure({"thp": "never", "nr_hugepages": 40})
    data = json.loads(open(j.path).read())
    assert data["values"] == {str(thp): "madvise", str(nr): "0"}
    assert data["owner"]["pid"] == os.getpid()
    assert nr.read_text().strip() == "40"
    st.restore()
    assert not os.path.exists(j.path)
    assert nr.read_text().strip() == "0"


def test_a_dead_owners_values_are_put_back_and_a_live_owners_are_left(tmp_path):
    thp, nr, _ = _tree(tmp_path)
    d = tmp_path / "journal"
    d.mkdir()
    thp.write_text("never\n")
    nr.write_text("300\n")
    dead = d / "os-journal-1.json"
    dead.write_text(json.dumps({"owner": {"pid": _dead_pid(), "started": 1.0,
                                          "host": os.uname().nodename},
                                "values": {str(thp): "madvise", str(nr): "0"}}))
    live = OsJournal(str(d))
    other = tmp_path / "swappiness"
    other.write_text("60\n")
    live.record(str(other))
    other.write_text("1\n")
    msgs = recover(str(d))
    assert len(msgs) == 1 and "Restored OS values" in msgs[0] and f"{nr} = 0" in msgs[0]
    assert thp.read_text().strip() == "madvise" and nr.read_text().strip() == "0"
    assert not dead.exists()
    assert os.path.exists(live.path) and other.read_text().strip() == "1"   # still running
    assert recover(str(d)) == []


def test_a_value_that_cannot_be_written_keeps_the_journal_and_says_how(tmp_path):
    d = tmp_path / "journal"
    d.mkdir()
    gone = tmp_path / "no-such-dir" / "nr_hugepages"
    f = d / "os-journal-2.json"
    f.write_text(json.dumps({"owner": {"pid": _dead_pid(), "started": 1.0,
                                       "host": os.uname().nodename},
                             "values": {str(gone): "0"}}))
    msgs = recover(str(d))
    assert len(msgs) == 1 and "Could not put back" in msgs[0] and str(f) in msgs[0]
    assert f.exists()


def test_sysctls_through_a_constructed_proc_sys_tree(tmp_path):
    thp, nr, meminfo = _tree(tmp_path)
    vm = tmp_path / "proc-sys" / "vm"
    vm.mkdir(parents=True)
    (vm / "swappiness").write_text("60\n")
    (vm / "dirty_bytes").write_text("0\n")
    j = OsJournal(str(tmp_path / "journal"))
    st = OsState(str(nr), str(thp), str(tmp_path / "sizes"), str(meminfo), journal=j,
                 proc_sys=str(tmp_path / "proc-sys"))
    assert st.path("sysctl:vm.swappiness") == str(vm / "swappiness")
    assert st.read("sysctl:vm.swappiness") == 60
    assert st.ensure({"sysctl:vm.swappiness": 1, "sysctl:vm.dirty_bytes": "536870912"}) == []
    assert (vm / "swappiness").read_text().strip() == "1"
    assert not st.differs({"sysctl:vm.swappiness": "1", "sysctl:vm.dirty_bytes": 536870912})
    assert json.loads(open(j.path).read())["values"] == {str(vm / "swappiness"): "60",
                                                         str(vm / "dirty_bytes"): "0"}
    st.ensure({})                     # another variant: back to the originals
    assert (vm / "swappiness").read_text().strip() == "60"
    st.restore()
    assert not os.path.exists(j.path)
