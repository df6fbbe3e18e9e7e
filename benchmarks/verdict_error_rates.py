"""How often pgaccel's verdicts are wrong, or undecided, on this machine (issue 10).

Three measurements, each repeated ``--repeats`` times with the installed `pgaccel`:

* **A/A false positives**: `pgaccel calibrate` runs two identical configurations in
  interleaved rounds; a verdict of "faster" or "slower" is a false positive (target: at most
  5% of experiments).
* **Planted slowdown**: `pgaccel lab` compares the server defaults with a configuration that
  is slower by a known amount; the amount is first measured by one long reference
  experiment (``--reference-rounds``), then short experiments count how often the verdict is
  "slower" (target: 19 of 20).  The slowdown is planted with a setting that costs CPU per
  statement (``--plant``, default: log a random 20% of statements to the server's log
  file, ``log_min_duration_sample = 0, log_statement_sample_rate = 0.2``).
* **Decisive quick runs**: `pgaccel run --quick` repeated; how often every workload gets a
  decisive verdict (faster, slower or equivalent; target: 4 of 5).

Usage:  python benchmarks/verdict_error_rates.py [--repeats 20] [--only aa,planted,quick]
        [--rounds 5] [--duration 6] [--json out.json]
Every figure is printed with the command that made it.  Takes long: about 2 minutes per A/A
experiment and 6 per quick run on a 2-core VM.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter

PGACCEL = os.path.join(os.path.dirname(sys.executable), "pgaccel")

PLANTED_SPEC = """name = "planted"
base = "default"
[run]
rounds = {rounds}
duration = {duration}
warmup = 4
[[variant]]
name = "default"
[[variant]]
name = "planted"
settings = {{ {plant} }}
[[workload]]
name = "select-only"
clients = 2
scale = 10
"""


def pgaccel(*args: str) -> dict:
    cmd = [PGACCEL, *args, "--json", "--yes"]
    r = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
    return json.loads(r.stdout)


def aa(repeats: int, rounds: int, duration: float) -> dict:
    args = ["calibrate", "-w", "select-only", "--rounds", str(rounds), "--duration",
            str(duration), "--warmup", "4", "--scale", "10"]
    verdicts: Counter = Counter()
    for _ in range(repeats):
        a = pgaccel(*args)["aa"]
        verdicts[a["verdict"]] += 1
        print("A/A experiment:", a["verdict"], json.dumps({k: a.get(k) for k in
              ("ratio", "ci_low", "ci_high")}), flush=True)
    false = verdicts["faster"] + verdicts["slower"]
    return {"command": "pgaccel " + " ".join(args), "repeats": repeats,
            "verdicts": dict(verdicts), "false_positive_rate": false / repeats}


def planted(repeats: int, rounds: int, duration: float, plant: str,
            reference_rounds: int) -> dict:
    def lab(n: int) -> dict:
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write(PLANTED_SPEC.format(rounds=n, duration=duration, plant=plant))
        try:
            s = pgaccel("lab", f.name)
        finally:
            os.unlink(f.name)
        return s["workloads"][0]["comparisons"]["planted"]
    ref = lab(reference_rounds)
    print("planted reference:", json.dumps(ref), flush=True)
    verdicts: Counter = Counter()
    for _ in range(repeats):
        c = lab(rounds)
        verdicts[c["verdict"]] += 1
        print("planted experiment:", c["verdict"], round(c["ratio"], 4), flush=True)
    return {"plant": plant, "reference": {"rounds": reference_rounds, "ratio": ref["ratio"],
                                          "ci": [ref["ci_low"], ref["ci_high"]],
                                          "verdict": ref["verdict"]},
            "repeats": repeats, "rounds": rounds, "verdicts": dict(verdicts),
            "detected_rate": verdicts["slower"] / repeats,
            "wrong_sign": verdicts["faster"]}


def quick(repeats: int) -> dict:
    """Repeated `run --quick`: decisive verdicts, and each config's trial CV per workload."""
    decisive = 0
    per_run = []
    for _ in range(repeats):
        t0 = time.monotonic()
        s = pgaccel("run", "--quick")
        run = {"seconds": round(time.monotonic() - t0)}
        for w in s["workloads"]:
            c = w["comparisons"]["tuned"]
            run[w["workload"]] = {
                "verdict": c["verdict"], "ratio": round(c["ratio"], 4),
                "ci": [round(c["ci_low"], 4), round(c["ci_high"], 4)],
                "cv": {k: round(v["cv"], 4) for k, v in w["variants"].items()},
                "trials": {k: v["n"] for k, v in w["variants"].items()},
                "drifting": [k for k, v in w["variants"].items() if v.get("drifting")],
                "noisy_trials": sum(v.get("noisy_trials", 0) for v in w["variants"].values())}
        per_run.append(run)
        print("quick run:", json.dumps(run), flush=True)
        decisive += all(v["verdict"] != "not enough evidence"
                        for k, v in run.items() if k != "seconds")
    return {"command": "pgaccel run --quick", "repeats": repeats, "runs": per_run,
            "decisive_runs": decisive}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=6)
    ap.add_argument("--reference-rounds", type=int, default=15)
    ap.add_argument("--plant", default='log_min_duration_sample = 0, '
                    'log_statement_sample_rate = 0.2')
    ap.add_argument("--only", default="aa,planted,quick")
    ap.add_argument("--json", dest="json_out")
    a = ap.parse_args()
    parts = set(a.only.split(","))
    out: dict = {}
    if "aa" in parts:
        out["aa"] = aa(a.repeats, a.rounds, a.duration)
        print("A/A:", json.dumps(out["aa"]), flush=True)
    if "planted" in parts:
        out["planted"] = planted(a.repeats, a.rounds, a.duration, a.plant, a.reference_rounds)
        print("planted:", json.dumps(out["planted"]), flush=True)
    if "quick" in parts:
        out["quick"] = quick(min(a.repeats, 5))
        print("quick:", json.dumps(out["quick"]), flush=True)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
