"""Linux-layer rules (pure) and their renderers: a sysctl.d file, a tuned profile, a script.

Keys: sysctl names (``vm.swappiness``) or paths under / without the leading slash
(``sys/block/vda/queue/scheduler``, ``sys/kernel/mm/transparent_hugepage/enabled``).
vm.* and kernel.* are host-wide, not per container: inside a container every change is
advice for the host's administrator (``advice_only``).  Applying is ``tune/apply.py``'s job.
"""

from __future__ import annotations

import re
import shlex

from .hugepages import estimate_pages, margin
from .inputs import TuneInputs
from .plan import Change, Plan

MB, GB = 1024**2, 1024**3
TUNED = "Red Hat tuned 'postgresql' profile"
THP = "sys/kernel/mm/transparent_hugepage/enabled"
THP_DEFRAG = "sys/kernel/mm/transparent_hugepage/defrag"
MIGRATION_DEBUGFS = "sys/kernel/debug/sched/migration_cost_ns"
_SYSCTL = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")


def is_sysctl(name: str) -> bool:
    return bool(_SYSCTL.match(name)) and "/" not in name


def _kernel_at_least(kernel: str, major: int, minor: int) -> bool | None:
    m = re.match(r"(\d+)\.(\d+)", kernel or "")
    return None if not m else (int(m.group(1)), int(m.group(2))) >= (major, minor)


def device_class(dev) -> str:
    return "virtual" if re.match(r"x?vd[a-z]+$", dev.name) else dev.kind


def linux_changes(inp: TuneInputs, pg_settings: dict[str, str],
                  huge_pages_reported: int | None = None) -> list[Change]:
    """Linux changes for a server running ``pg_settings``; ``huge_pages_reported`` is the
    server's own ``shared_memory_size_in_huge_pages`` (PG15+) when it could be asked."""
    out: list[Change] = []
    sc = inp.sysctls
    host = inp.container

    def add(name: str, value, reason: str, source: str, rule: str, current=None, **kw) -> None:
        if current is None and is_sysctl(name):
            current = sc.get(name)
        if host and not kw.get("advice_only"):
            kw["advice_only"] = True
            reason += " (host-wide: set it on the container's host)"
        out.append(Change("linux", name, str(value), reason, source, current=current,
                          rule=rule, **kw))

    # huge pages
    if inp.hugepage_bytes:
        hp = inp.hugepage_bytes
        if huge_pages_reported:
            need, how = huge_pages_reported, "postgres -C shared_memory_size_in_huge_pages"
        else:
            need, how = estimate_pages(pg_settings, inp.pg_version, hp), "estimate"
        want = need + margin(need)
        cur = int(sc.get("vm.nr_hugepages", "0") or 0)
        why = (f"{need} x {hp // 1024}kB pages for shared memory ({how}) + {want - need} "
               "spare; restart PostgreSQL afterwards so huge_pages=try uses them")
        if how == "estimate":
            why += f"; PostgreSQL {inp.pg_version} cannot report it, so this is an estimate"
        if cur >= want:
            want, why = cur, f"already {cur} reserved, {need} needed ({how})"
        add("vm.nr_hugepages", want, why, "PostgreSQL docs: Managing Kernel Resources > "
            "Linux Huge Pages; study 004", "os.nr_hugepages",
            inputs={"shared_memory_size_in_huge_pages": need, "hugepage_bytes": hp,
                    "method": how, "margin": want - need})
    # transparent huge pages
    if inp.thp in (None, "always"):
        add(THP, "madvise", "PostgreSQL never asks for THP; 'always' brings compaction stalls "
            "and memory bloat, 'madvise' leaves it to programs that ask", f"{TUNED}; study 004",
            "os.thp", current=inp.thp)
    if inp.thp_defrag == "always":
        add(THP_DEFRAG, "madvise", "no synchronous compaction on page faults", TUNED,
            "os.thp_defrag", current=inp.thp_defrag)
    # memory and writeback
    add("vm.swappiness", 1, "keep the database's memory in RAM; swap only under real pressure",
        TUNED, "os.swappiness")
    m = inp.memory_bytes
    bg, hard = (64 * MB, 512 * MB) if m >= 8 * GB else (max(m // 128, 4 * MB), m // 16)
    bg, hard = bg // MB * MB, hard // MB * MB
    add("vm.dirty_background_bytes", bg, "start background writeback early so checkpoints "
        "do not meet gigabytes of dirty page cache", f"{TUNED}; study 000", "os.dirty_bg")
    add("vm.dirty_bytes", hard, "cap dirty page cache: no multi-second write stalls at fsync",
        f"{TUNED}; study 000", "os.dirty")
    # scheduler
    if not sc or "kernel.sched_autogroup_enabled" in sc:
        add("kernel.sched_autogroup_enabled", 0, "autogroup shares CPU per session, not per "
            "process; a server's backends should compete evenly", TUNED, "os.autogroup")
    new = _kernel_at_least(inp.kernel, 5, 13)
    mig = MIGRATION_DEBUGFS if new else "kernel.sched_migration_cost_ns"
    cur_mig = sc.get("kernel.sched_migration_cost_ns")
    add(mig, 50000000, "keep backends on a warm CPU cache longer (50ms) before migrating"
        + ("; kernels 5.13+ moved it to debugfs (reset at boot)" if new else "")
        + ("; debugfs is not mounted here: mount -t debugfs none /sys/kernel/debug"
           if new and cur_mig is None and sc else ""),
        TUNED, "os.migration_cost", current=cur_mig,
        advice_only=bool(new and cur_mig is None and sc))
    if inp.numa_nodes > 1:
        add("kernel.numa_balancing", 0, f"{inp.numa_nodes} NUMA nodes: automatic balancing "
            "migrates shared_buffers pages back and forth", "PostgreSQL community practice",
            "os.numa_balancing")
    # block devices
    devs = [d for d in inp.devices if not inp.data_device or d.name == inp.data_device]
    for d in devs:
        kind = device_class(d)
        rot = kind == "hdd"
        sched = "mq-deadline" if rot else "none"
        if d.schedulers and sched not in d.schedulers:
            sched = "mq-deadline" if "mq-deadline" in d.schedulers else d.scheduler or sched
        add(f"sys/block/{d.name}/queue/scheduler", sched,
            f"{kind}: " + ("deadline ordering helps a seeking disk" if rot else
                           "the device (or hypervisor) schedules; skip the kernel's queueing"),
            "kernel block-layer docs; tuned throughput-performance", "os.scheduler",
            current=d.scheduler)
        ra = 4096 if rot or inp.workload in ("analytics", "mixed") else 128
        add(f"sys/block/{d.name}/queue/read_ahead_kb", ra,
            "large read-ahead for sequential scans" if ra > 128 else
            "short random reads: read-ahead beyond 128kB wastes I/O and page cache",
            "tuned disk plugin docs", "os.read_ahead",
            current=None if d.read_ahead_kb is None else str(d.read_ahead_kb))
    out += network_advice(inp)
    out += cpu_advice(inp)
    ratio = 80
    add("vm.overcommit_memory", 2, "strict accounting: a backend gets 'out of memory' instead "
        "of the OOM killer taking the postmaster; trade-off: other programs' allocations can "
        f"fail too, so set vm.overcommit_ratio (e.g. {ratio}) to fit RAM and huge pages",
        "PostgreSQL docs: Linux Memory Overcommit", "os.overcommit", advice_only=True,
        inputs={"vm.overcommit_ratio": ratio})
    return out


def network_advice(inp: TuneInputs) -> list[Change]:
    """IRQ affinity and RPS (study 000): advice with exact commands, never applied."""
    c = inp.ncpus
    irq_cpus = f"{c - 1}" if c <= 8 else f"{c - max(1, c // 8)}-{c - 1}"
    rps_mask = format((1 << c) - 1, "x")
    out = []
    for nic in inp.nics or ["IFACE"]:
        cmds = ["systemctl stop irqbalance   # it would move the IRQs back",
                f"for irq in $(ls /sys/class/net/{nic}/device/msi_irqs); do "
                f"echo {irq_cpus} > /proc/irq/$irq/smp_affinity_list; done",
                f"for q in /sys/class/net/{nic}/queues/rx-*; do echo {rps_mask} > "
                "$q/rps_cpus; done"]
        out.append(Change("linux", f"nic/{nic}/irq_affinity", f"irq cpus {irq_cpus}, rps "
                          f"{rps_mask}", "many clients over the network: pin the NIC's "
                          "interrupts to a few cores and spread packet work with RPS",
                          "study 000 (NIC interrupt aggregation)", rule="os.nic",
                          advice_only=True, inputs={"commands": cmds}))
    return out


TEXT_SOURCE = "src/pgaccel/server/ext/hugetext.c"


def cpu_advice(inp: TuneInputs) -> list[Change]:
    """Study 000's code-side levers: the server's code on huge pages and the prefetcher
    policy.  Advice with the reason; pgaccel measures the first in the lab
    (``os.text_hugepages``, and the os layer of ``run --stack``)."""
    out = []
    if inp.thp == "never" or inp.thp is None:
        why = (f"THP is {inp.thp or 'not in this kernel'} here, which it needs (madvise is "
               "enough)")
    else:
        why = ("pgaccel run --stack os measures it on this machine (lab: os.text_hugepages "
               "= true)")
    out.append(Change(
        "linux", "cpu/text_hugepages", "LD_PRELOAD remap of the postmaster's code",
        "the server's code on 2 MB pages: fewer iTLB misses (study 000: 10x fewer); start "
        "the postmaster with pgaccel's hugetext library preloaded (built from "
        f"{TEXT_SOURCE} with cc -O2 -shared -fPIC); {why}",
        "study 000 (code segment on huge pages)", rule="os.text_hugepages", advice_only=True,
        inputs={"commands": [f"cc -O2 -shared -fPIC -o /usr/local/lib/pgaccel-hugetext.so "
                             f"{TEXT_SOURCE}",
                             "systemctl edit postgresql@.service   # [Service] "
                             "Environment=LD_PRELOAD=/usr/local/lib/pgaccel-hugetext.so"]}))
    if inp.virtualized:
        pf, why = "leave as is", ("this is a virtual machine: the hypervisor owns the CPU's "
                                  "prefetcher controls (model-specific registers)")
    elif inp.arch == "aarch64":
        pf, why = "firmware setting", ("ARM servers expose prefetch policy in firmware, if at "
                                       "all; measure before and after with pgaccel lab")
    else:
        pf, why = "measure before changing", (
            "random index lookups gain little from hardware prefetch and scans lose without "
            "it; on Intel the L2 streamer and adjacent-line prefetchers are bits of MSR 0x1a4 "
            "(msr-tools: rdmsr -a 0x1a4); change them only with a pgaccel lab comparison")
    out.append(Change("linux", "cpu/prefetcher", pf, why,
                      "study 000 (prefetcher policy)", rule="os.prefetcher", advice_only=True))
    return out


# -- renderers ----------------------------------------------------------------------------

def _applicable(plan: Plan) -> list[Change]:
    return [c for c in plan.layer("linux") if not c.advice_only]


def _header(plan: Plan, comment: str = "#") -> list[str]:
    i = plan.inputs
    mem = f"{int(i.get('memory_bytes', 0)) / GB:.1f}GB" if i else "?"
    return [f"{comment} Written by pgaccel tune: Linux settings for PostgreSQL "
            f"{i.get('pg_version', '?')} on {i.get('cpus', 0):g} CPUs / {mem} "
            f"({i.get('workload', '?')})."]


def render_sysctl(plan: Plan) -> str:
    """/etc/sysctl.d/90-pgaccel.conf text: the applicable sysctls."""
    lines = _header(plan) + ["# Install as /etc/sysctl.d/90-pgaccel.conf, then: sysctl --system",
                             ""]
    for c in _applicable(plan):
        if is_sysctl(c.name):
            lines += [f"# {c.reason}", f"{c.name} = {c.proposed}"]
    return "\n".join(lines) + "\n"


def render_tuned(plan: Plan) -> str:
    """A tuned profile (/etc/tuned/pgaccel/tuned.conf) holding the same settings."""
    ch = _applicable(plan)
    by = {c.name: c for c in ch}
    lines = _header(plan) + ["", "[main]", "summary=PostgreSQL server, tuned by pgaccel",
                             "include=throughput-performance", ""]
    vm = []
    if THP in by:
        vm.append(f"transparent_hugepages={by[THP].proposed}")
    for k in ("vm.dirty_background_bytes", "vm.dirty_bytes"):   # [vm] keeps *_ratio at 0
        if k in by:
            vm.append(f"{k.split('.', 1)[1]}={by[k].proposed}")
    if vm:
        lines += ["[vm]", *vm, ""]
    sysctls = [c for c in ch if is_sysctl(c.name) and c.name not in
               ("vm.dirty_background_bytes", "vm.dirty_bytes", "kernel.sched_migration_cost_ns")]
    if sysctls:
        lines += ["[sysctl]", *[f"{c.name}={c.proposed}" for c in sysctls], ""]
    mig = by.get(MIGRATION_DEBUGFS) or by.get("kernel.sched_migration_cost_ns")
    if mig:
        lines += ["[scheduler]", f"sched_migration_cost_ns={mig.proposed}", ""]
    devs: dict[str, dict[str, str]] = {}
    for c in ch:
        m = re.match(r"sys/block/([^/]+)/queue/(scheduler|read_ahead_kb)$", c.name)
        if m:
            devs.setdefault(m.group(1), {})[m.group(2)] = c.proposed
    for dev, opts in devs.items():
        lines += [f"[disk_{dev}]", "type=disk", f"devices={dev}"]
        if "scheduler" in opts:
            lines.append(f"elevator={opts['scheduler']}")
        if "read_ahead_kb" in opts:
            lines.append(f"readahead={opts['read_ahead_kb']}")
        lines.append("")
    return "\n".join(lines)


def render_script(plan: Plan) -> str:
    """A POSIX shell script that prints each old value, then sets the new one."""
    lines = ["#!/bin/sh", *_header(plan),
             "# Prints each setting's old value before changing it. Run as root.",
             "set -e", '[ "$(id -u)" = 0 ] || { echo "run this as root" >&2; exit 1; }', ""]
    for c in _applicable(plan):
        lines.append(f"# {c.reason}")
        if is_sysctl(c.name):
            q = shlex.quote(c.name)
            lines += [f'echo "old: {c.name} = $(sysctl -n {q})"',
                      f"sysctl -q -w {shlex.quote(f'{c.name}={c.proposed}')}"]
        else:
            path = shlex.quote("/" + c.name)
            lines += [f"if [ -w {path} ]; then",
                      f'  echo "old: /{c.name} = $(cat {path})"',
                      f"  echo {shlex.quote(c.proposed)} > {path}",
                      f'else echo "skipped: /{c.name} is not available" >&2; fi']
    advice = [c for c in plan.layer("linux") if c.advice_only]
    if advice:
        lines += ["", "# Advice, not run by this script:"]
        for c in advice:
            lines.append(f"#   {c.name} = {c.proposed}: {c.reason}")
            lines += [f"#     {cmd}" for cmd in c.inputs.get("commands", [])]
    return "\n".join(lines) + "\n"

