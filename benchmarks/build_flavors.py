"""What each build flavor is worth on this machine (issue 11): build every flavor of one
PostgreSQL version with `pgaccel build`, then compare them side by side in one interleaved
experiment (`pgaccel lab examples/build-flavors.toml`) against `debian`.

Prints, per flavor: build time, binary size (the postgres executable and the whole install),
and select-only / tpcb-like throughput with the 95% interval of the ratio to `debian`.

Usage:  python benchmarks/build_flavors.py [--version 18] [--rounds 4] [--duration 10]
        [--flavors debian,o2,native,lto,pgo,lto+pgo,bolt] [--json out.json]
Takes long: every flavor is compiled (PGO twice, with a training run between), then the
experiment runs: flavors x 2 workloads x rounds trials of --duration seconds plus warm-up
and restarts (about 25 minutes for the defaults on a 2-core VM).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

PGACCEL = os.path.join(os.path.dirname(sys.executable), "pgaccel")
HERE = os.path.dirname(os.path.abspath(__file__))


def pgaccel(*args: str) -> dict:
    cmd = [PGACCEL, *args, "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
    return json.loads(r.stdout)


def spec(version: str, flavors: list[str], rounds: int, duration: int) -> str:
    """examples/build-flavors.toml's experiment for these flavors (debian first, the base),
    with the rounds and trial length given (its `small` size, so the scales stay small)."""
    with open(os.path.join(HERE, "..", "examples", "build-flavors.toml")) as fh:
        example = fh.read()
    head, _, rest = example.partition("[[variant]]")
    workloads = rest[rest.index("[[workload]]"):]
    head = re.sub(r"^small = .*$", f"small = {{ rounds = {rounds}, max_rounds = {rounds}, "
                  f"duration = {duration}, warmup = {max(3, duration // 3)}, budget = \"3h\" }}",
                  head, flags=re.M)
    variants = [f'[[variant]]\nname = "{f}"\nversion = {version}\nflavor = "{f}"\n'
                + ('settings = { shared_buffers = "1GB", max_wal_size = "4GB" }\n'
                   if f == "debian" else 'base = "debian"\n')
                for f in ["debian"] + [f for f in flavors if f != "debian"]]
    return head + "\n".join(variants) + "\n" + workloads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--version", default="18")
    ap.add_argument("--flavors", default="debian,o2,native,lto,pgo,lto+pgo,bolt")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--duration", type=int, default=10, help="seconds per trial")
    ap.add_argument("--json", dest="json_out")
    a = ap.parse_args()
    flavors = a.flavors.split(",")
    builds = {}
    for f in flavors:
        b = pgaccel("build", a.version, "--flavor", f, "--yes")["build"]
        exe = os.path.getsize(os.path.join(b["bindir"], "postgres"))
        builds[f] = {"name": b["name"], "build_seconds": b["build_seconds"],
                     "postgres_bytes": exe, "install_bytes": b["size_bytes"],
                     "cflags": b["cflags"]}
        print(f"built {b['name']}: {b['build_seconds'] / 60:.1f} min, postgres "
              f"{exe / 1e6:.1f} MB", flush=True)
    # the experiment: every flavor of the same version, as built above, against debian
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as fh:
        fh.write(spec(a.version, flavors, a.rounds, a.duration))
    try:
        s = pgaccel("lab", fh.name, "--size", "small", "--yes")
    finally:
        os.unlink(fh.name)
    rows = []
    for w in s["workloads"]:
        for f in flavors:
            v = w["variants"].get(f) or {}
            c = w["comparisons"].get(f)
            rows.append({"workload": w["workload"], "flavor": f, "trials": v.get("n"),
                         "median": v.get("median"),
                         "ratio": c["ratio"] if c else 1.0,
                         "ci": [c["ci_low"], c["ci_high"]] if c else None,
                         "verdict": c["verdict"] if c else "reference"})
    print(f"\n{'workload':<14} {'flavor':<9} {'build':>7} {'postgres':>9} {'median':>10} "
          f"{'vs debian (95% CI)':>28} verdict")
    for r in rows:
        b = builds[r["flavor"]]
        ci = (f"{(r['ratio'] - 1) * 100:+.1f}% ({(r['ci'][0] - 1) * 100:+.1f} .. "
              f"{(r['ci'][1] - 1) * 100:+.1f})" if r["ci"] else "reference")
        print(f"{r['workload']:<14} {r['flavor']:<9} {b['build_seconds'] / 60:>6.1f}m "
              f"{b['postgres_bytes'] / 1e6:>7.1f}MB {r['median'] or 0:>10,.0f} {ci:>28} "
              f"{r['verdict']}")
    if a.json_out:
        with open(a.json_out, "w") as fh:
            json.dump({"builds": builds, "rows": rows, "run_id": s.get("run_id")}, fh,
                      indent=2)


if __name__ == "__main__":
    main()
