"""The fact sheet of a report, computed from a run.json document (pure): what ran, where,
on which servers, with which parameters, and a row per load host (``--client-host``) with
its CPU beside the server's.  The terminal's load-host table reads :func:`client_hosts`
too."""

from __future__ import annotations

import statistics
from datetime import datetime, timezone
from typing import Any, Mapping

from ..metrics import steadiness
from . import format as fmt
from .view import clients, summary_of

# how run.json's trials of a step workload were taken side by side (lab/paired_steps.py and
# the Insert Benchmark's steps in turns: docs/formats.md)
STEP_DESIGNS = {"steps side by side", "load step in slices", "q step in slices",
                "pgbench step in slices",
                "index step in turns", "runs in turns"}


def client_hosts(trials: list[Mapping[str, Any]], server: Mapping[str, Any]
                 ) -> list[dict[str, Any]]:
    """One row per load host (``--client-host``) and client share: its pgbench, the round
    trip measured before the run, and the medians over the trials (``to_dict`` form) of the
    host's CPU use, pgbench's CPU seconds and the server's."""
    seen: dict[tuple[str, int], list[dict]] = {}
    for t in trials:
        m = t.get("metrics") or {}
        for h in m.get("client_hosts") or []:
            seen.setdefault((h.get("host"), h.get("clients")), []).append(
                {**h, "server_cpu_s": m.get("server_cpu_s")})
    before = {h.get("host"): h for h in server.get("client_hosts") or []}

    def med(rows: list[dict], key: str) -> Any:
        xs = [x[key] for x in rows if fmt.known(x.get(key))]
        return statistics.median(xs) if xs else None
    out = [{"host": host, "clients": clients, "pgbench": before.get(host, {}).get("pgbench"),
            "rtt_ms": before.get(host, {}).get("rtt_ms"), "trials": len(rows),
            **{k: med(rows, k) for k in ("host_cpu_util", "client_cpu_s", "server_cpu_s")}}
           for (host, clients), rows in seen.items()]
    measured = {r["host"] for r in out}
    out += [{"host": h, "clients": None, "pgbench": b.get("pgbench"), "rtt_ms": b.get("rtt_ms"),
             "trials": 0} for h, b in before.items() if h not in measured]
    return out


def _applied(w: Mapping[str, Any]) -> dict[str, Any]:
    """A run.json workload's parameters that the workload reads (its ``applies``, written
    since the Insert Benchmark's facts said "scale 10"); all of them in an older run."""
    p = dict(w.get("params") or {})
    keep = w.get("applies")
    return p if keep is None else {k: v for k, v in p.items() if k in keep}


def client_host_facts(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The fact sheet's row per load host (:func:`client_hosts`)."""
    rows = []
    for r in client_hosts(doc.get("trials") or [], doc.get("server") or {}):
        bits = [str(r.get("pgbench") or "pgbench ?"),
                f"SELECT 1 round trip {fmt.ms(r.get('rtt_ms'))} ms before the run"]
        if r["trials"]:
            bits.append(f"{r['clients']} clients; per trial (median): host CPU "
                        f"{fmt.share(r['host_cpu_util'])} busy, pgbench "
                        f"{fmt.number(r['client_cpu_s'], 2)} s CPU, the server "
                        f"{fmt.number(r['server_cpu_s'], 2)} s")
        rows.append((f"client host {r['host']}", "; ".join(bits)))
    return rows


def facts(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The fact sheet: what ran, where, on which servers, with which parameters."""
    host = doc.get("host") or {}
    run_id = str(doc.get("run_id", ""))
    try:
        when = datetime.strptime(run_id[:15], "%Y%m%d-%H%M%S").replace(tzinfo=timezone.utc)
        started = when.strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        started = "–"
    virt = " (virtual machine)" if "hypervisor" in (host.get("cpu_flags") or []) else ""
    rows = [("run", f"{run_id} ({doc.get('kind', 'run')}, {doc.get('status', '?')}), "
                    f"started {started}"),
            ("pgaccel", str(doc.get("pgaccel_version") or "not recorded")),
            ("host", f"{host.get('cpu_model', '?')}{virt}, {host.get('logical_cpus', '?')} "
                     f"logical CPUs, {fmt.size(host.get('memory_total_bytes') or 0)} RAM, "
                     f"{host.get('arch', '?')}, Linux {host.get('kernel', '?')}, THP "
                     f"{host.get('thp_enabled', '?')}")]
    if (steady := steadiness.text(doc.get("cpu_steadiness"))):
        rows.append(("CPU steadiness", steady))
    if doc.get("target"):
        sums = (doc.get("server") or {}).get("data_checksums")
        rows.insert(2, ("target", str(doc["target"])
                        + (f"; data checksums {sums}" if sums else "")))
    verified = doc.get("verified") or {}
    servers = {}
    for name, v in verified.items():
        if isinstance(v, dict) and v.get("server_version"):
            sums = (f", data checksums {v['data_checksums']}" if v.get("data_checksums")
                    else "")
            if v.get("durability_off"):      # asked for with --allow-unsafe-durability
                sums += ", durability off (" + ", ".join(v["durability_off"]) + ")"
            servers.setdefault(f"PostgreSQL {v['server_version']} ({v.get('bindir', '?')})"
                               f"{sums}", []).append(name)
    for server, names in servers.items():
        rows.append((f"server of {', '.join(names)}", server))
    same: dict[tuple, list[int]] = {}      # one row for a sweep's client counts
    for w in doc.get("workloads") or []:
        p = _applied(w)
        n = p.pop("clients", None)
        key = (w.get("key") or w.get("workload"), repr(sorted(p.items(), key=str)))
        same.setdefault(key, [])
        if n is not None:
            same[key].append(n)
    for w in doc.get("workloads") or []:
        p = _applied(w)
        key = (w.get("key") or w.get("workload"),
               repr(sorted(((k, v) for k, v in p.items() if k != "clients"), key=str)))
        counts = same.pop(key, None)
        if counts is None:
            continue
        stepped = any(str(t.get("workload", "")).startswith(f"{w.get('workload')}/")
                      for t in doc.get("trials") or [])
        bits = [(", ".join(map(str, sorted(set(counts)))) + " clients") if len(counts) > 1
                else clients(counts[0]) if counts else ""]
        if not stepped:
            bits += [f"{fmt.general(p.get('duration'))} s measured",
                     f"{fmt.general(p.get('warmup'))} s warm-up at most",
                     (f"{p['threads']} load-generator threads" if p.get("threads")
                      else "a load-generator thread per client")]
        elif "applies" in w and "duration" in p:     # it says its steps last a duration
            bits += [f"{fmt.general(p['duration'])} s measured per step"] + (
                [f"{fmt.general(p['warmup'])} s warm-up at most"] if "warmup" in p else [])
        else:             # a step measured to its own end: no run length, no warm-up
            bits += ["each step runs to its own end (no fixed length)"]
        bits += [f"scale {p['scale']}"] if p.get("scale") is not None else []
        bits += [f"protocol {p['protocol']}"] if p.get("protocol") else []
        bits += [f"rate {p['rate']}/s"] if p.get("rate") else []
        bits += [f"{k}={v}" for k, v in (p.get("options") or {}).items()]
        rows.append((f"workload {key[0]}", ", ".join(b for b in bits if b)))
    rows += client_host_facts(doc)
    rows += [(f"sized to the host ({label})", sized_text(d))
             for label, d in (doc.get("sized") or {}).items()]
    if (text := sampled_text(doc.get("trials") or [])):
        rows.append(("pgbench's logs sampled", text))
    s = summary_of(doc)
    per: dict[tuple, set] = {}                 # rounds run, per measure
    for t in doc.get("trials") or []:
        per.setdefault((t.get("workload"), t.get("clients")), set()).add(t.get("round"))
    lo, done = (min(map(len, per.values())), max(map(len, per.values()))) if per else (0, 0)
    asked = doc.get("rounds", "?")
    rounds = (f"{lo}–{done} rounds" if lo != done else
              f"{done} round{'' if done == 1 else 's'}") + (
        f" (at least {asked} asked, more until decided or out of budget)"
        if isinstance(asked, int) and done > asked else "")
    rows.append(("protocol", f"{rounds}, order "
                             f"{doc.get('order', '?')}, {fmt.level(s.confidence)} intervals, "
                             f"minimum effect {fmt.percent(s.min_effect)}"))
    how = measured_how(doc)
    if how:
        rows.append(("measured", how))
    rows += [("note", str(n)) for n in doc.get("notes") or []]
    return rows


def sampled_text(trials: list[Mapping[str, Any]]) -> str:
    """Which measures counted a sample of pgbench's log (``pgbench_logs.log_place``: the
    whole would not have fitted in RAM), at what share, and the most that put on a trial's
    count (one standard error); "" when every log was whole."""
    per: dict[str, list[tuple[float, float]]] = {}
    for t in trials:
        m = t.get("metrics") or {}
        if fmt.known(m.get("log_sampling")):
            per.setdefault(str(t.get("workload")), []).append(
                (float(m["log_sampling"]), float(m.get("count_error") or 0.0)))
    if not per:
        return ""
    parts = []
    for name, xs in per.items():
        lo, hi = (f"{100 * min(x[0] for x in xs):.4g}%",
                  f"{100 * max(x[0] for x in xs):.4g}%")
        share = lo if lo == hi else f"{lo}–{hi}"
        parts.append(f"{name} ({share} of its transactions, {len(xs)} trial"
                     f"{'' if len(xs) == 1 else 's'}; count error at most "
                     f"{100 * max(x[1] for x in xs):.2g}%)")
    return ("logged a sample of the transactions where the whole log would not have fitted "
            "in RAM, each line counted for the transactions it stands for: "
            + "; ".join(parts))


def sized_text(d: Mapping[str, Any]) -> str:
    """What a workload sized to the host (``Experiment._size_to_host``, run.json's
    ``sized``) measured and chose, in a sentence."""
    given = d.get("given") or {}
    ran = (f"l.i0 alone ran {fmt.number(d.get('probe_inserts_per_s'))} inserts/s "
           f"({fmt.number(d.get('probe_rows'))} rows)")
    if float(d.get("factor") or 1) >= 1:
        return (f"{ran}, so the rows given ({fmt.number(given.get('rows_per_table'))} a "
                f"table) last at most about {fmt.general(d.get('load_seconds'))} s of l.i0 a "
                "variant: kept")
    return (f"{ran}: {fmt.number(d.get('rows_per_table'))} rows a table (given "
            f"{fmt.number(given.get('rows_per_table'))}), l.i1 "
            f"{fmt.number(d.get('i1_rows'))} (given {fmt.number(given.get('i1_rows'))}), "
            f"l.i2 {fmt.number(d.get('i2_rows'))} (given {fmt.number(given.get('i2_rows'))}), "
            f"{fmt.percent(float(d.get('factor') or 0), 0)} of the rows, so l.i0 lasts about "
            f"{fmt.general(d.get('load_seconds'))} s a variant"
            + (f"; l.x builds its indexes {d['index_passes']} times (given "
               f"{given.get('index_passes')}), so it indexes at least the rows given"
               if d.get("index_passes") not in (None, given.get("index_passes")) else ""))


def measured_how(doc: Mapping[str, Any]) -> str | None:
    """How `run` took its trials (run.json's ``measurement``): side by side or one config
    at a time, and why."""
    m = doc.get("measurement") or {}
    if m.get("design") == "side by side":
        sliced = [t["metrics"] for t in doc.get("trials") or []
                  if (t.get("metrics") or {}).get("design") == "side by side"]
        slices = {m_.get("slices") for m_ in sliced}
        n = "/".join(str(x) for x in sorted(x for x in slices if x)) or "?"
        # runs before November 27 took 1-second slices and did not always say so
        lengths = sorted({float(m_.get("slice_s") or 1.0) for m_ in sliced}) or [1.0]
        each = "/".join(fmt.short(x) for x in lengths)
        what = "variant" if doc.get("kind") == "lab" else "config"
        stepped = any((t.get("metrics") or {}).get("design") in STEP_DESIGNS
                      for t in doc.get("trials") or [])
        sliced_steps = [t["metrics"] for t in doc.get("trials") or []
                        if (t.get("metrics") or {}).get("design") in STEP_DESIGNS
                        and t["metrics"].get("slice_s")]
        step_lengths = sorted({float(m_["slice_s"]) for m_ in sliced_steps})
        kinds = {m_["design"] for m_ in sliced_steps}
        which = ("load and query steps" if kinds & {"load step in slices", "q step in slices"}
                 else "")
        if "pgbench step in slices" in kinds:
            which = " and ".join(x for x in (which, "pgbench steps") if x)
        in_slices = (f", its {which} in slices of "
                     f"{'/'.join(fmt.short(x) for x in step_lengths)} s" if step_lengths
                     else "")
        x_steps = [t["metrics"] for t in doc.get("trials") or []
                   if (t.get("metrics") or {}).get("design") == "index step in turns"]
        passes = max((int((m_.get("extra") or {}).get("index_passes") or 1)
                      for m_ in x_steps), default=1)
        by_index = ("" if not x_steps else ", l.x index by index" + (
            f" (every index built {passes} times, each but the last dropped untimed)"
            if passes > 1 else ""))
        q_pins = [t["metrics"]["pinned"] for t in doc.get("trials") or []
                  if (t.get("metrics") or {}).get("design") == "q step in slices"
                  and t["metrics"].get("pinned")]
        q_placed = f", its query steps' {_placed(q_pins)}" if q_pins else ""
        run_cpus = {_run_cpus(t["metrics"]) for t in doc.get("trials") or []
                    if (t.get("metrics") or {}).get("design") == "runs in turns"}
        by_run = ("" if not run_cpus else ", each step's timed runs in turns run by run"
                  + (_on_cpus(run_cpus.pop())
                     if len(run_cpus) == 1 and None not in run_cpus else ""))
        # three or more take turns rotated (lab/paired.turn_order) since November 28
        step_turns = ("A B C, then B C A" if m.get("turns") == "rotated"
                      else "A B, then B A")
        steps = ("; a step workload ran the same step of every variant in turn "
                 f"({step_turns}), an untimed CHECKPOINT after each" + in_slices + by_index
                 + by_run + q_placed if stepped else "")
        if stepped and not slices:
            return (f"side by side: a throwaway server per {what} "
                    f"({m.get('servers', '?')}), every server ready at once each round"
                    + steps)
        rotate = ("servers of one installation rotate over its variants every round (a "
                  "variant with a huge page pool of its own keeps its server)"
                  if what == "variant" else "servers rotate over the configs every round")
        # runs before November 28 took A B C C B A with three or more too
        order = ("rotated: A B C, B C A, ..." if m.get("turns") == "rotated" else "ABBA")
        return (f"side by side: a throwaway server per {what} ({m.get('servers', '?')}), "
                f"each round {n} slices of {each} s per {what} taking turns ({order}), the "
                f"idle {what}'s pgbench stopped; {rotate}"
                + placement(doc.get("trials") or []) + steps)
    if m.get("design") == "one at a time":
        if doc.get("kind") == "lab":
            return f"one variant at a time ({m.get('why') or 'no reason recorded'})"
        return f"one config at a time on one server ({m.get('why') or 'no reason recorded'})"
    return None


def placement(trials: list[Mapping[str, Any]]) -> str:
    """Where the side-by-side trials' load ran (``workloads/pinning.py``), per workload
    when they differ, for :func:`measured_how`."""
    by_wl: dict[str, list[Mapping[str, Any]]] = {}
    for t in trials:
        m = t.get("metrics") or {}
        if m.get("design") == "side by side" and m.get("pinned"):
            by_wl.setdefault(t.get("workload", "?"), []).append(m["pinned"])
    said = {w: _placed(pins) for w, pins in by_wl.items()}
    if not said:
        return ""
    if len(set(said.values())) == 1:
        return "; " + next(iter(said.values()))
    return "".join(f"; {w}: {text}" for w, text in said.items())


def _placed(pins: list[Mapping[str, Any]]) -> str:
    on = [p for p in pins if p.get("on")]
    failed = [p for p in pins if not p.get("on") and p.get("problem")]
    if not on and not failed:
        why = next((p["why"] for p in pins if p.get("why")), "--no-pin")
        return f"pgbench and the backends placed by the scheduler ({why})"
    cpus = (on or failed)[0].get("cpus") or {}
    where = ", ".join(f"CPU {c}: {n} client{'s' if n != 1 else ''}" for c, n in cpus.items())
    out = f"each pgbench on one CPU with its connections' backends ({where})"
    if failed:
        out += (f", except in {len(failed)} of {len(pins)} trials "
                f"({failed[0].get('problem')})")
    return out


def server_versions(doc: Mapping[str, Any]) -> list[str]:
    """The PostgreSQL versions the run's configs ran, in order, once each."""
    out = [(doc.get("server") or {}).get("version")]
    out += [v.get("server_version", "").split(" ")[0] for v in (doc.get("verified") or {}).values()
            if isinstance(v, dict)]
    return list(dict.fromkeys(x for x in out if x))


def _run_cpus(m: dict) -> tuple[int, ...] | None:
    """The CPUs a "runs in turns" trial's backends ran on, client by client (runs before
    ``backend_cpus`` recorded one ``backend_cpu``); None where they were not placed."""
    cpus = m.get("backend_cpus")
    if cpus:
        return tuple(cpus)
    return (m["backend_cpu"],) if m.get("backend_cpu") is not None else None


def _on_cpus(cpus: tuple[int, ...]) -> str:
    if len(cpus) == 1:
        return f", every backend on CPU {cpus[0]}"
    rest = ", ".join(f"client {i + 1}'s on CPU {c}" for i, c in enumerate(cpus[1:], 1))
    return f", client 1's backend of every variant on CPU {cpus[0]}, {rest}"
