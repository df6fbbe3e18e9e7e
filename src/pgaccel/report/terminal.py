"""Terminal rendering of experiment summaries (rich tables) from ``decide.judge`` results."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from ..decide.results import HeadToHead, Summary
from ..decide.effect import WORTH_ROUNDS, Comparison
from . import format as fmt

VERDICT_STYLE = {"faster": "bold green", "slower": "bold red", "equivalent": "cyan",
                 "no significant difference": "yellow", "not enough evidence": "magenta"}


def verdict_text(c: Comparison, cost: bool = False) -> str:
    """'equivalent ±2%', 'not enough evidence (+4 rounds)', 'faster' ('cheaper' and
    'costlier' for a cost such as CPU per operation)."""
    if cost and c.verdict in ("faster", "slower"):
        return "cheaper" if c.verdict == "faster" else "costlier"
    if c.verdict == "equivalent":
        return f"equivalent ±{fmt.share(c.min_effect)}"
    if c.verdict == "not enough evidence" and c.more_rounds and c.more_rounds <= WORTH_ROUNDS:
        return f"not enough evidence (+{c.more_rounds} round{'s' if c.more_rounds != 1 else ''})"
    return c.verdict


def rounds_time(c: Comparison, round_s: float | None) -> str | None:
    """How long the further rounds an undecided comparison needs would take, "about 4
    minutes at 17 s a round"; None when decided, when more rounds would probably not decide
    (more than ``WORTH_ROUNDS``), or without the pace (``WorkloadResult.round_s``)."""
    more = c.more_rounds
    if c.verdict != "not enough evidence" or more is None or more > WORTH_ROUNDS or not round_s:
        return None
    secs = more * round_s
    return f"about {fmt.duration(secs)} at {fmt.seconds(round_s)} a round"


def more_rounds_text(c: Comparison, round_s: float | None) -> str | None:
    """What would probably decide an undecided comparison, and how long it takes: "about 13
    more rounds would probably decide, about 4 minutes at 17 s a round"; None when decided
    or when more rounds would probably not decide."""
    more = c.more_rounds
    if c.verdict != "not enough evidence" or more is None or more > WORTH_ROUNDS:
        return None
    text = f"about {more} more round{'s' if more != 1 else ''} would probably decide"
    time_ = rounds_time(c, round_s)
    return f"{text}, {time_}" if time_ else text


def verdict(c: Comparison | None, cost: bool = False) -> str:
    """The verdict in its colour (rich markup), uncoloured for a word without one (a stored
    run's, from another version); empty without a comparison."""
    if not c:
        return ""
    return styled(c.verdict, verdict_text(c, cost))


def styled(word: str, text: str | None = None) -> str:
    """``text`` (default: the verdict ``word`` itself) in ``word``'s colour as rich markup;
    plain for a word without a colour (a stored run's, from another version)."""
    text = word if text is None else text
    style = VERDICT_STYLE.get(word)
    return f"[{style}]{text}[/]" if style else text


# columns a narrow terminal leaves out, the first first: the verdict and the effect never go
NARROW_DROPS = ("client CPU", "p95 ms", "srv µs/op", "CV")


def fitted_table(console: Console, title: str,
                 columns: list[tuple[str, dict[str, Any]]], rows: list[list[str]],
                 drops: tuple[str, ...] = NARROW_DROPS) -> Table:
    """A table of ``columns`` (header, rich column options) that fits ``console.width``:
    columns named in ``drops`` are left out, in that order, until its natural width fits
    (rich would otherwise squeeze every column, and an 80-column terminal showed "fa…" for
    "faster")."""
    keep = [h for h, _ in columns]
    while True:
        t = Table(title=title, title_justify="left")
        for h, opts in columns:
            if h in keep:
                t.add_column(h, **opts)
        for r in rows:
            t.add_row(*(cell for (h, _), cell in zip(columns, r) if h in keep))
        left = [d for d in drops if d in keep]
        natural = Measurement.get(console, console.options.update_width(10_000), t).maximum
        if not left or natural <= console.width:
            return t
        keep.remove(left[0])


def render_summary(console: Console, summary: Summary, title: str = "") -> None:
    base = summary.base
    for w in summary.workloads:
        ci = f"{fmt.level(w.level(summary.confidence))} CI"
        right = {"justify": "right"}
        # on a terminal too narrow even without the optional columns, a long config name
        # folds: the verdict ("equivalent" is 10 wide) and the effect stay whole
        columns = [("config", {"overflow": "fold"}), ("n", right),
                   (f"median {w.unit}", {"justify": "right", "no_wrap": True}),
                   ("CV", right), ("p95 ms", right), ("srv µs/op", right),
                   ("client CPU", right),
                   (f"vs {base} ({ci})", {"justify": "right", "no_wrap": True}),
                   ("verdict", {"min_width": 10})]
        rows = []
        for name, v in w.variants.items():
            cmp = w.comparisons.get(name)
            ratio = fmt.ratio_ci(cmp.ratio, cmp.ci_low, cmp.ci_high) if cmp else "baseline"
            rows.append([name, str(v.n), fmt.number(v.median), fmt.cv(v.cv),
                         fmt.ms(v.latency_p95_ms), fmt.us(v.server_cpu_us_per_op),
                         fmt.share(v.client_cpu_share), ratio, verdict(cmp)])
        console.print(fitted_table(console, f"{title}{w.workload} ({w.clients} clients, "
                                            f"{w.unit})", columns, rows))
        for name, cmp in w.comparisons.items():
            cpu = w.cpu_comparisons.get(name)
            if cpu:
                console.print(f"  {name}: server CPU per operation "
                              f"{fmt.ratio_ci(cpu.ratio, cpu.ci_low, cpu.ci_high)} "
                              f"{verdict(cpu, cost=True)}")
            console.print(f"  [dim]{name}: {cmp.explain}[/dim]")
            time_ = rounds_time(cmp, w.round_s)
            if time_:
                console.print(f"  {name}: those {cmp.more_rounds} rounds would take {time_} "
                              "(a --budget that much longer, or --rounds)")
        for line in state_warnings(w):
            console.print(f"  [yellow]{line}[/yellow]")
    for name, o in summary.overall.items():
        if o.workloads > 1:
            console.print(f"[bold]{name}[/bold] over {o.workloads} workloads: geometric mean "
                          f"{fmt.pct_change(o.geomean_ratio)} "
                          f"({fmt.interval(o.ci_low, o.ci_high)})")
    note = looks_note(summary)
    if note:
        console.print(f"[dim]{note}[/dim]")


def looks_note(s: Summary) -> str | None:
    """Why the intervals are wider than the level asked for, when rounds were added until
    decided (decide/sequential.py): each measure's level and the rounds it was judged after;
    None otherwise."""
    if s.nominal_confidence is None or not s.looks:
        return None
    first, last = s.looks
    seen: dict[tuple[float, int], list[str]] = {}
    for w in s.workloads:
        c = next(iter(w.comparisons.values()), None)
        if c is not None:
            n = c.n_pairs or min(c.n_base, c.n_other)
            seen.setdefault((c.confidence, n), []).append(w.workload)
    if len(seen) > 1:
        at = "the level of each measure's last look (" + "; ".join(
            f"{', '.join(names)}: {fmt.level(level)} after {n} rounds"
            for (level, n), names in seen.items()) + ")"
    elif seen:
        (level, n), = seen
        at = f"{fmt.level(level)}, the level of the look after {n} rounds"
    else:
        at = fmt.level(s.confidence)
    if len(set(s.last_looks.values())) > 1:
        span = (f"from {first} to the last its share of the budget reached ("
                + ", ".join(f"{label.split(' c=')[0]}: {n}"
                            for label, n in s.last_looks.items()) + ")")
    else:
        span = f"from {first} to {last}"
    return (f"Intervals are at {at}, not {fmt.level(s.nominal_confidence)}: the run looked "
            f"after every round {span} and stopped when decided, and the "
            f"looks share the {fmt.level(1 - s.nominal_confidence)} chance of 'faster' or "
            f"'slower' between identical configs, little of it early and most at the last.")


def _and(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" and {items[-1]}"


def state_warnings(w) -> list[str]:
    """Noisy-host trials per config of one measure, and drift across rounds: the one every
    config shares, or else each config's own."""
    out = []
    shared = w.drifting
    if shared:
        head = (f"Every config's throughput drifted {fmt.pct_change(1 + w.drift_total)} "
                f"over the rounds ({fmt.pct_change(1 + w.drift_per_round)} a round, "
                f"p={fmt.pvalue(w.drift_p)})")
        why = (_host_speed(w, w.drift_total) or ": the host changed during the run and the "
               "trials did not start from the same state")
        out.append(head + why + "; the paired comparison cancels a drift shared by a round's "
                   "configs, each config's median does not.")
    slow = getattr(w, "slow_rounds", None) or {}
    if slow:
        rs = sorted(slow)
        which = ("round " if len(rs) == 1 else "rounds ") + _and([str(r + 1) for r in rs])
        out.append(f"The CPUs ran slower in {which} for every config alike (the CPU speed "
                   f"probe took {_and([f'{slow[r]:.0%}' for r in rs])} longer than in "
                   "the other rounds): the paired comparison cancels it, each config's median "
                   "does not.")
    split = getattr(w, "states", None)
    if split is not None:
        out.append(states_line(split))
    for name, v in w.variants.items():
        if v.noisy_trials:
            out.append(f"{name}: {v.noisy_trials} of {v.n} trials ran on a noisy host "
                       f"({v.noise_why}).")
        if getattr(v, "stalled_trials", 0):
            out.append(f"{name}: {v.stalled_trials} of {v.n} trials stalled ({v.stall_why}): "
                       "the server or the host stopped the load, and those trials' rates "
                       "count the stop (look at their series).")
        if v.drifting and not shared:
            why = (_host_speed(v, v.drift_total)
                   or ": the trials did not start from the same state")
            out.append(f"{name}: throughput drifted {fmt.pct_change(1 + v.drift_total)} over "
                       f"the rounds ({fmt.pct_change(1 + v.drift_per_round)} a round, "
                       f"p={fmt.pvalue(v.drift_p)}){why}; the paired comparison cancels drift "
                       "shared by a round's configs.")
    return out


def _host_speed(x, drift_total: float) -> str:
    """The clause that blames the host for a throughput drift, or "": where ``x`` (a
    measure, or one config of it) had its load generator's CPU per operation drift
    significantly the other way, since that work per operation does not change."""
    cli, p = getattr(x, "client_cpu_drift_total", None), getattr(x, "client_cpu_drift_p", None)
    if cli is None or p is None or p >= 0.05 or cli * drift_total >= 0:
        return ""
    return (f" while the load generator's CPU per operation moved {fmt.pct_change(1 + cli)} "
            f"(p={fmt.pvalue(p)}; its work per operation does not change): the host ran "
            f"{'faster' if cli < 0 else 'slower'} as the run went on")


def states_line(split) -> str:
    """What a measure whose trials ran in two states (decide/states.py) says."""
    (l0, l1, ln), (h0, h1, hn) = split.light, split.heavy
    n = ln + hn

    def rng(a: float, b: float) -> str:
        return f"{a:,.0f}" if round(a) == round(b) else f"{a:,.0f}–{b:,.0f}"
    line = (f"The trials ran in two states: {rng(l0, l1)} buffer accesses per operation in "
            f"{ln} of {n}, {rng(h0, h1)} in {hn}: the state the data was left in (what autovacuum "
            "and autoanalyze had done, say) can move the rate more than the configs do")
    if split.mixed:
        rs = sorted(split.mixed)
        which = ("round " if len(rs) == 1 else "rounds ") + _and([str(r + 1) for r in rs])
        each = "; ".join(", ".join(f"{v} {s}" for v, s in split.mixed[r].items()) for r in rs)
        line += f"; {which} paired trials in different states ({each})"
    else:
        line += "; every round's trials were in one state, so the pairs compare like with like"
    return line + "."


def render_plan_changes(console: Console, changes: list[dict[str, Any]],
                        not_tested: list[str] | None = None) -> None:
    t = Table(title="Tuned configuration (vs server defaults)", title_justify="left")
    for col in ("setting", "default", "tuned", "restart", "why"):
        t.add_column(col, overflow="fold")
    for c in changes:
        t.add_row(c["name"], str(c.get("current") or ""), str(c["proposed"]),
                  "yes" if c.get("restart") else "", c.get("reason", ""))
    console.print(t)
    if not_tested:
        console.print(f"[yellow]Not measured on this target (need a restart or reload): "
                      f"{', '.join(not_tested)}[/yellow]")


def render_head_to_head(dest, rows: list[HeadToHead], confidence: float = 0.95) -> None:
    ci = f"{fmt.level(confidence)} CI"
    t = Table(title=f"pgaccel's plan vs PGTune's (ratio of geometric means, {ci})",
              title_justify="left")
    for col in ("workload", "tuned / pgtune", ci, "verdict"):
        t.add_column(col)
    for r in rows:
        c = r.comparison
        t.add_row(f"{r.workload} c={r.clients}", fmt.pct_change(c.ratio),
                  fmt.interval(c.ci_low, c.ci_high), verdict(c))
    dest.print(t)


def render_layers(dest, steps: list[dict], confidence: float = 0.95) -> None:
    """`run --stack`: each layer against the one before it and against baseline."""
    if not steps:
        return
    ci = f"{fmt.level(confidence)} CI"
    t = Table(title=f"What each layer is worth (ratio of geometric means, {ci})",
              title_justify="left")
    for col in ("workload", "layer", "vs the layer before", "verdict", "vs baseline",
                "verdict"):
        t.add_column(col)
    for s in steps:
        cells = []
        for key in ("vs_previous", "vs_baseline"):
            c = Comparison.from_dict(s[key]) if s.get(key) else None
            cells += ([fmt.ratio_ci(c.ratio, c.ci_low, c.ci_high), verdict(c)] if c
                      else ["-", ""])
        t.add_row(f"{s['workload']} c={s['clients']}", f"{s['previous']} → {s['layer']}",
                  *cells)
    dest.print(t)


def render_client_hosts(rows: list[dict[str, Any]], dest) -> None:
    """The load hosts' CPU beside the server's (``facts.client_hosts`` rows)."""
    t = Table(title="Load from client hosts (medians over trials)", title_justify="left")
    for col in ("host", "clients", "host CPU busy", "pgbench CPU s", "server CPU s",
                "SELECT 1 round trip"):
        t.add_column(col, justify="left" if col == "host" else "right")
    for r in rows:
        if r["trials"]:
            t.add_row(r["host"], str(r["clients"]), fmt.share(r["host_cpu_util"]),
                      fmt.number(r["client_cpu_s"], 2), fmt.number(r["server_cpu_s"], 2),
                      f"{fmt.ms(r['rtt_ms'])} ms")
    dest.print(t)


def render_group_effects(dest, rows: list[dict[str, Any]], confidence: float = 0.95) -> None:
    """`run --explain`: which settings made the verdict."""
    ci = f"{fmt.level(confidence)} CI"
    for r in rows:
        t = Table(title=f"{r['workload']} c={r['clients']}: what each group of the plan is "
                        f"worth (the whole plan / the plan without the group, {ci})",
                  title_justify="left")
        for col in ("group", "settings", "effect", ci, "verdict"):
            t.add_column(col, overflow="fold")
        for g in sorted(r["groups"], key=lambda g: g["comparison"].ratio):
            c = g["comparison"]
            t.add_row(g["group"], ", ".join(g["settings"]), fmt.pct_change(c.ratio),
                      fmt.interval(c.ci_low, c.ci_high), verdict(c))
        dest.print(t)
        w = r["whole"]
        if w is not None:
            dest.print(f"The groups' effects multiply to {fmt.pct_change(r['product'])}; the "
                       f"whole plan against the defaults: {fmt.pct_change(w.ratio)} ({ci} "
                       f"{fmt.interval(w.ci_low, w.ci_high)}): "
                       + ("inside its interval." if r["within"] else
                          "no interval yet to hold it." if r["within"] is None else
                          "outside it: the groups interact (one's effect depends on "
                          "another's)."), soft_wrap=True)
        # the whole plan slower than the plan without a group: that group costs
        slower = [g["group"] for g in r["groups"] if g["comparison"].verdict == "slower"]
        if slower:
            dest.print(f"Leaving out {', '.join(slower)} made the plan faster: prove the plan "
                       f"without {'them' if len(slower) > 1 else 'it'} with `pgaccel run "
                       f"--without {','.join(slower)}` (same workloads).", style="yellow",
                       soft_wrap=True)
