"""`run --stack`: the layers each stack adds, the OS layer taken from the plan, the lab spec
it writes (parsed by the lab's own parser) and the comparisons the report shows."""

from __future__ import annotations

from types import SimpleNamespace as C

import pytest

from pgaccel.specs.parse import parse_spec
from pgaccel.session.request import Protocol
from pgaccel.session.stack import THP_KEY, layer_steps, layers_of, os_layer, stack_spec


@pytest.mark.parametrize("stack,layers", [
    ("settings", ("settings",)), ("os", ("settings", "os")),
    ("build", ("settings", "os", "build")), ("full", ("settings", "os", "build"))])
def test_layers_of_each_stack(stack, layers):
    assert layers_of(stack) == layers


def test_unknown_stack():
    with pytest.raises(ValueError, match="unknown stack"):
        layers_of("kernel")


def ch(name, proposed, advice_only=False):
    return C(name=name, proposed=proposed, advice_only=advice_only)


def test_os_layer_from_the_plans_linux_changes():
    table, left = os_layer([
        ch("vm.nr_hugepages", "70"), ch(THP_KEY, "madvise"), ch("vm.swappiness", "1"),
        ch("vm.dirty_background_bytes", "67108864"), ch("kernel.sched_autogroup_enabled", "0"),
        ch("sys/kernel/debug/sched/migration_cost_ns", "50000000"),
        ch("sys/block/vda/queue/scheduler", "none"),
        ch("vm.overcommit_memory", "2", advice_only=True), ch("net.core.somaxconn", "4096",
                                                               advice_only=True)])
    assert table == {"nr_hugepages": "auto", "thp": "madvise",
                     "sysctl": {"vm.swappiness": 1, "vm.dirty_background_bytes": 67108864,
                                "kernel.sched_autogroup_enabled": 0},
                     "sysfs": {"sys/kernel/debug/sched/migration_cost_ns": 50000000,
                               "sys/block/vda/queue/scheduler": "none"},
                     "text_hugepages": True}
    assert left == []
    # a debugfs value the plan could only advise (debugfs not mounted) stays out
    table, left = os_layer([ch("sys/kernel/debug/sched/migration_cost_ns", "50000000",
                               advice_only=True), ch("nic/eth0/irq_affinity", "x")])
    assert "sysfs" not in table
    assert left == ["nic/eth0/irq_affinity: not a value the os layer can set and put back"]


def _spec(stack, layers, **kw):
    """The stack's spec as data, checked equal to its stored TOML copy read back (what
    `pgaccel lab --resume` and a user re-running it get)."""
    args = dict(workloads=["select-only", "tpcb-like"], clients=4, scale=20, duration=6.0,
                warmup=6.0, build_major=15, flavor="lto",
                protocol=Protocol(rounds=3, max_rounds=10, budget_s=360, min_effect=0.02,
                                  until_decided=True))
    args.update(kw)
    spec = stack_spec(stack, layers, **args)
    back = parse_spec(spec.text, spec.path, "medium")
    assert back.to_dict() == spec.to_dict()
    return spec


def test_full_stack_spec_chains_each_layer_on_the_one_before():
    s = _spec("full", layers_of("full"), with_pgtune=True,
              os_table={"nr_hugepages": "auto", "thp": "madvise",
                        "sysctl": {"vm.swappiness": 1}})
    v = {x.name: x for x in s.variants}
    assert list(v) == ["baseline", "settings", "os", "build", "pgtune"]
    assert s.base == ["baseline"]
    assert v["baseline"].settings == {} and v["baseline"].settings_from is None
    assert v["settings"].settings_from == "pgaccel" and not v["settings"].os
    assert v["os"].settings == {"huge_pages": "on"} and v["os"].settings_from == "pgaccel"
    assert v["os"].os.to_dict() == {"nr_hugepages": "auto", "thp": "madvise",
                                    "sysctl": {"vm.swappiness": 1}}
    # the build layer keeps everything of the os layer and changes only the binary
    b = v["build"]
    assert (b.settings, b.os.to_dict(), b.settings_from) == (
        v["os"].settings, v["os"].os.to_dict(), "pgaccel")
    assert (b.version, b.flavor) == (15, "lto")
    assert v["pgtune"].settings_from == "pgtune" and not v["pgtune"].os
    assert (s.rounds, s.max_rounds, s.duration, s.warmup, s.budget_s, s.until_decided) == (
        3, 10, 6.0, 6.0, 360.0, True)
    assert [w.name for w in s.workloads] == ["select-only", "tpcb-like"]
    assert all(w.clients == [4] and w.overrides["scale"] == 20 for w in s.workloads)


def test_without_root_the_build_layer_follows_settings():
    s = _spec("full", ("settings", "build"))
    v = {x.name: x for x in s.variants}
    assert list(v) == ["baseline", "settings", "build"]
    assert not v["build"].os and v["build"].settings == {}
    assert layer_steps(list(v)) == [("baseline", "settings"), ("settings", "build")]


def test_layer_steps_follow_the_chain_and_skip_the_reference():
    assert layer_steps(["baseline", "settings", "os", "build", "pgtune"]) == [
        ("baseline", "settings"), ("settings", "os"), ("os", "build")]
    assert layer_steps(["baseline", "settings"]) == [("baseline", "settings")]


@pytest.mark.parametrize("host_thp, plan_thp, compiler, text, left", [
    ("madvise", None, True, True, None),
    ("always", "madvise", True, True, None),
    ("never", None, True, None, "the server's code on huge pages: THP is never"),
    (None, None, True, None, "the server's code on huge pages: THP is not in this kernel"),
    ("madvise", None, False, None, "the server's code on huge pages: no C compiler to build "
                                   "the remap library")])
def test_os_layer_puts_the_servers_code_on_huge_pages_when_it_can(host_thp, plan_thp,
                                                                     compiler, text, left):
    changes = [ch(THP_KEY, plan_thp)] if plan_thp else []
    table, notes = os_layer(changes, host_thp=host_thp, compiler=compiler)
    assert table.get("text_hugepages") is text
    assert notes == ([left] if left else [])
    # the text table round-trips through the lab spec
    s = _spec("os", layers_of("os"), os_table=table)
    assert {v.name: v for v in s.variants}["os"].os.text_hugepages is text
