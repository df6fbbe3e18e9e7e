"""The Linux layer applied and rolled back: for real where this machine allows it as root
(reserving huge pages), and through a constructed /proc/sys + /sys tree otherwise, through
the same code path (tune/osapply.py, the plan from probe_host(root))."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

import pytest

from pgaccel.errors import OsApplyError
from pgaccel.probe.host import probe_host
from pgaccel.server.osuser import server_user
from pgaccel.osknobs import apply as osapply
from pgaccel.osknobs import knob
from pgaccel.apply.local import apply_linux
from pgaccel.tune.engine import plan_for_target
from pgaccel.tune.linux import THP
from pgaccel.tune.plan import Change
from pgaccel.apply.rollback import rollback
from pgaccel.apply.state import StateStore

from helpers import PGACCEL, pgaccel

TREE = {
    "proc/sys/vm/swappiness": "60\n",
    "proc/sys/vm/nr_hugepages": "0\n",
    "proc/sys/vm/dirty_bytes": "0\n",
    "proc/sys/vm/dirty_background_bytes": "0\n",
    "proc/sys/vm/dirty_ratio": "20\n",
    "proc/sys/vm/dirty_background_ratio": "10\n",
    "proc/sys/vm/overcommit_memory": "0\n",
    "proc/sys/kernel/sched_autogroup_enabled": "1\n",
    "proc/sys/kernel/osrelease": "6.1.0-test\n",
    "sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never\n",
    "sys/kernel/mm/transparent_hugepage/defrag": "always defer [madvise] never\n",
    "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages": "0\n",
    "sys/block/vda/queue/scheduler": "[mq-deadline] kyber bfq none\n",
    "sys/block/vda/queue/read_ahead_kb": "4096\n",
    "sys/block/vda/queue/rotational": "1\n",
    "sys/block/vda/size": "209715200\n",
}


def make_tree(root: str) -> str:
    """This machine's CPUs and memory, with Linux settings a DBA would want changed."""
    for rel, text in TREE.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
    for rel in ("proc/cpuinfo", "proc/meminfo"):
        shutil.copyfile("/" + rel, os.path.join(root, rel))
    with open(os.path.join(root, "arch"), "w") as f:
        f.write(os.uname().machine + "\n")
    return root


def snapshot(root: str) -> dict[str, str]:
    return {rel: open(os.path.join(root, rel)).read() for rel in TREE}


def linux_plan(root: str):
    return plan_for_target(probe_host(root), {"pg_version": 15}, None, None,
                           layers=("linux",), huge_pages=300)


# -- pure ---------------------------------------------------------------------------------

def test_keys_paths_and_values():
    assert knob.key_path("vm.swappiness", "/r") == "/r/proc/sys/vm/swappiness"
    assert knob.key_path(THP, "/") == "/sys/kernel/mm/transparent_hugepage/enabled"
    assert knob.normalise("always [madvise] never\n") == "madvise"
    assert knob.normalise(" 4096\t8192 \n") == "4096 8192"
    assert knob.same("[none] mq-deadline", "none") and not knob.same("1", "60")
    with pytest.raises(OsApplyError, match="--apply-os"):
        osapply.check_allowed(True, apply_os=False)
    with pytest.raises(OsApplyError, match="needs root"):
        osapply.check_allowed(False)


# -- a constructed tree, same code path -----------------------------------------------------

def test_constructed_tree_apply_and_restore(tmp_path):
    root = make_tree(str(tmp_path / "root"))
    before = snapshot(root)
    plan = linux_plan(root)
    want = {c.name: c.proposed for c in osapply.applicable(plan.changes)}
    assert want["vm.swappiness"] == "1" and want[THP] == "madvise"
    assert want["sys/block/vda/queue/scheduler"] == "none"     # virtio disk: host schedules
    assert want["vm.nr_hugepages"] == str(300 + 6)
    done, skipped = osapply.apply_os(plan.changes, root, is_root=True)
    got = {i.key: knob.read_value(i.path) for i in done}
    assert got == {c: v for c, v in want.items() if c not in dict(skipped)}
    assert got["vm.swappiness"] == "1" and got[THP] == "madvise"
    assert got["vm.nr_hugepages"] == "306" and got["kernel.sched_autogroup_enabled"] == "0"
    assert got["sys/block/vda/queue/scheduler"] == "none"
    assert got["sys/block/vda/queue/read_ahead_kb"] == "128"
    assert "sys/kernel/mm/transparent_hugepage/defrag" not in got      # not 'always': no change
    assert any("advice only" in why for _, why in skipped)               # overcommit, NIC
    prev = {i.key: i.previous for i in done}
    assert prev[THP] == "always" and prev["sys/block/vda/queue/scheduler"] == "mq-deadline"
    osapply.restore_os(done, is_root=True)
    after = snapshot(root)
    for rel, text in before.items():
        assert knob.normalise(after[rel]) == knob.normalise(text), rel


def test_constructed_tree_refused_without_root(tmp_path):
    root = make_tree(str(tmp_path / "root"))
    before = snapshot(root)
    plan = linux_plan(root)
    store = StateStore(str(tmp_path / "states"))
    with pytest.raises(OsApplyError, match="needs root"):
        osapply.apply_os(plan.changes, root, is_root=False)
    with pytest.raises(OsApplyError, match="needs root"):
        apply_linux(plan.changes, store, root=root, is_root=False)
    assert snapshot(root) == before and store.states() == []


def test_state_and_rollback_through_the_store(tmp_path):
    root = make_tree(str(tmp_path / "root"))
    before = snapshot(root)
    store = StateStore(str(tmp_path / "states"))
    plan = linux_plan(root)
    dry = apply_linux(plan.changes, store, root=root, is_root=True, dry_run=True)
    assert dry.os_applied and snapshot(root) == before and store.states() == []
    rep = apply_linux(plan.changes, store, root=root, is_root=True, plan_dict=plan.to_dict())
    m = json.load(open(os.path.join(rep.state_dir, "manifest.json")))
    prev = {i["key"]: i["previous"] for i in m["os"]["items"]}
    assert prev["vm.swappiness"] == "60" and prev[THP] == "always"
    assert m["plan"]["changes"] and m["keys"] == [f"os:{os.path.realpath(root)}"]
    assert knob.read_value(knob.key_path("vm.swappiness", root)) == "1"
    with pytest.raises(OsApplyError, match="needs root"):
        rollback(store, is_root=False)                    # nothing restored without root
    assert knob.read_value(knob.key_path("vm.swappiness", root)) == "1"
    r = rollback(store, is_root=True)
    assert r.undone == [rep.state_id] and any("vm.swappiness" in x for x in r.os_restored)
    assert {k: knob.normalise(v) for k, v in snapshot(root).items()} == \
        {k: knob.normalise(v) for k, v in before.items()}


def test_a_value_that_does_not_stick_undoes_the_rest(tmp_path):
    root = make_tree(str(tmp_path / "root"))
    before = snapshot(root)
    # reads back as '' whatever is written: like huge pages the kernel could not reserve
    bad = os.path.join(root, "proc/sys/vm/dirty_bytes")
    os.unlink(bad)
    os.symlink("/dev/null", bad)
    changes = [Change("linux", "vm.swappiness", "1", ""),
               Change("linux", THP, "madvise", ""),
               Change("linux", "vm.dirty_bytes", "536870912", "")]
    with pytest.raises(OsApplyError, match="vm.dirty_bytes.*reads back as ''.*restored"):
        osapply.apply_os(changes, root, is_root=True)
    for rel in ("proc/sys/vm/swappiness", "sys/kernel/mm/transparent_hugepage/enabled"):
        now = open(os.path.join(root, rel)).read()
        assert knob.normalise(now) == knob.normalise(before[rel]), rel


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_real_kernel_refuses_a_value():
    """The real /proc/sys rejects a malformed value (EINVAL) and nothing changes."""
    path = "/proc/sys/vm/swappiness"
    old = open(path).read()
    with pytest.raises(OsApplyError, match="vm.swappiness.*refused"):
        osapply.apply_os([Change("linux", "vm.swappiness", "not-a-number", "")])
    assert open(path).read() == old


# -- the command line -------------------------------------------------------------------------

def test_cli_apply_os_on_a_tree_and_rollback(tmp_path):
    root = make_tree(str(tmp_path / "root"))
    before = snapshot(root)
    env = {"PGACCEL_STATE_DIR": str(tmp_path / "states")}
    r = pgaccel("tune", "--layer", "linux", "--os-root", root, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert snapshot(root) == before                          # a plan changes nothing
    r = pgaccel("tune", "--apply-os", "--os-root", root, "--format", "json", env=env,
                timeout=120)
    assert "Traceback" not in r.stderr and r.returncode == 0, r.stderr
    d = json.loads(r.stdout)["apply"]
    assert {i["key"] for i in d["os_applied"]} >= {"vm.swappiness", THP}
    assert knob.read_value(os.path.join(root, "proc/sys/vm/swappiness")) == "1"
    r = pgaccel("rollback", env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert {k: knob.normalise(v) for k, v in snapshot(root).items()} == \
        {k: knob.normalise(v) for k, v in before.items()}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to an unprivileged user")
def _command_for(user: str, env: dict) -> list[str]:
    """How ``user`` runs this pgaccel: the virtualenv's script, or, when the virtualenv's
    interpreter is out of the user's reach (a pyenv under /root), the system Python of the
    same version with the virtualenv's packages and the source on PYTHONPATH."""
    def works(cmd, extra=None):
        return subprocess.run(["runuser", "-u", user, "--", *cmd, "--version"],
                              capture_output=True, text=True, timeout=60,
                              env={**env, **(extra or {})}).returncode == 0
    if works([PGACCEL[0]]):
        return [PGACCEL[0]]
    import site
    import sys
    system = shutil.which("python3", path="/usr/bin:/bin")
    same = system and subprocess.run(
        [system, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
        text=True).stdout.strip() == str(tuple(sys.version_info[:2]))
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env["PYTHONPATH"] = os.pathsep.join([*site.getsitepackages(), src])
    cmd = ["env", f"PYTHONPATH={env['PYTHONPATH']}", system or "python3", "-c",
           "import sys; sys.argv[0] = 'pgaccel'; from pgaccel.cli import main; main()"]
    if not same or not works(cmd):
        pytest.skip(f"{user} can read neither this virtualenv's interpreter nor a system "
                    "Python of the same version")
    return cmd


def test_cli_apply_os_refused_for_a_non_root_user():
    user = server_user()
    base = tempfile.mkdtemp(prefix="pgaccel-ostree-")
    try:
        os.chmod(base, 0o755)
        root = make_tree(os.path.join(base, "root"))
        for d, _, files in os.walk(base):           # the user *could* write every file
            os.chown(d, user.uid, user.gid)
            for f in files:
                os.chown(os.path.join(d, f), user.uid, user.gid)
        before = snapshot(root)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(HOME=base, PGACCEL_STATE_DIR=os.path.join(base, "states"))
        cmd = _command_for(user.name, env)
        r = subprocess.run(["runuser", "-u", user.name, "--", *cmd,
                            "tune", "--apply-os", "--os-root", root], capture_output=True,
                           text=True, timeout=120, env=env)
        assert "Traceback" not in r.stderr
        assert r.returncode == OsApplyError.exit_code, r.stderr
        assert "needs root" in r.stderr
        assert snapshot(root) == before and not os.path.exists(os.path.join(base, "states"))
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- for real: reserve huge pages, then restore the old count exactly ---------------------------

NR = "/proc/sys/vm/nr_hugepages"


@pytest.mark.skipif(os.geteuid() != 0 or not os.access(NR, os.W_OK),
                    reason="needs root and a writable /proc/sys/vm/nr_hugepages")
def test_real_huge_pages_reserved_and_restored(tmp_path):
    old = int(open(NR).read())
    store = StateStore(str(tmp_path / "states"))
    want = old + 16
    try:
        rep = apply_linux([Change("linux", "vm.nr_hugepages", str(want), "test")], store)
        assert int(open(NR).read()) == want
        meminfo = dict(line.split(":", 1) for line in open("/proc/meminfo"))
        assert int(meminfo["HugePages_Total"]) == want
        assert rep.os_applied[0]["previous"] == str(old)
        rollback(store)
        assert int(open(NR).read()) == old
        meminfo = dict(line.split(":", 1) for line in open("/proc/meminfo"))
        assert int(meminfo["HugePages_Total"]) == old
    finally:
        if int(open(NR).read()) == want:          # only undo our own change
            with open(NR, "w") as f:
                f.write(str(old))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_real_dirty_bytes_come_back_through_their_ratio():
    """vm.dirty_background_bytes refuses 0; the way back to the default (bytes 0, ratio N)
    is writing the ratio, which the apply recorded before its first write."""
    b, r = "/proc/sys/vm/dirty_background_bytes", "/proc/sys/vm/dirty_background_ratio"
    old = {b: open(b).read(), r: open(r).read()}
    if old[b].strip() != "0":
        pytest.skip("this host already uses dirty_background_bytes")
    try:
        done, _ = osapply.apply_os([Change("linux", "vm.dirty_background_bytes", "67108864",
                                           "")])
        assert open(b).read().strip() == "67108864" and open(r).read().strip() == "0"
        assert done[0].partner_previous == old[r].strip()
        osapply.restore_os(done)
        assert {b: open(b).read(), r: open(r).read()} == old
    finally:
        if open(b).read() != old[b]:
            with open(r, "w") as f:
                f.write(old[r])
