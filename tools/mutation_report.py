"""Score and surviving mutants of the last mutmut run (tools/mutation.sh).

Reads mutmut's result files (``mutants/**/*.py.meta``) and the mutated sources beside them,
prints killed / total per file and the survivors per function, and writes each survivor's
diff to ``mutants/survivors.txt``.  A survivor whose diff changes only text inside quotes
(a reason, a message) is counted apart from those that change logic."""

from __future__ import annotations

import ast
import difflib
import json
import re
import sys
from pathlib import Path

from mutmut.stats import status_by_exit_code

ROOT = Path("mutants/src")
_QUOTED = re.compile(r"(\"[^\"]*\"|'[^']*')")


def _functions(source: str) -> dict[str, list[str]]:
    lines = source.splitlines()
    return {n.name: lines[n.lineno - 1:n.end_lineno] for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _diff(orig: list[str], mutant: list[str]) -> list[str]:
    return [line for line in difflib.unified_diff(orig[1:], mutant[1:], lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def main() -> int:
    metas = sorted(ROOT.glob("**/*.py.meta"))
    if not metas:
        print("No mutmut results under mutants/: run tools/mutation.sh first.", file=sys.stderr)
        return 2
    out, total_k, total_n = [], 0, 0
    print(f"{'file':34} {'killed':>7} {'of':>5} {'score':>6}  survivors (text only)")
    for meta in metas:
        src = meta.with_suffix("")
        funcs = _functions(src.read_text())
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        status = {k: status_by_exit_code[c] for k, c in codes.items()}
        judged = {k: s for k, s in status.items() if s in ("killed", "survived", "timeout")}
        killed = sum(s != "survived" for s in judged.values())
        survivors = sorted(k for k, s in judged.items() if s == "survived")
        text_only = 0
        for key in survivors:
            name = key.rsplit(".", 1)[-1]
            base = name.rsplit("__mutmut_", 1)[0]
            d = _diff(funcs.get(base + "__mutmut_orig", []), funcs.get(name, []))
            minus = [_QUOTED.sub('""', x[1:]) for x in d if x.startswith("-")]
            plus = [_QUOTED.sub('""', x[1:]) for x in d if x.startswith("+")]
            kind = "text" if minus == plus else "logic"
            text_only += kind == "text"
            out.append(f"## {key} ({kind})\n" + "\n".join(d) + "\n")
        rel = str(src.relative_to(ROOT))
        n = len(judged)
        total_k, total_n = total_k + killed, total_n + n
        untested = sum(s == "no tests" for s in status.values())
        score = f"{killed / n:6.1%}" if n else "     -"
        print(f"{rel:34} {killed:7d} {n:5d} {score}  {len(survivors)} ({text_only})"
              + (f"; {untested} reached by no quick test" if untested else ""))
    print(f"{'all':34} {total_k:7d} {total_n:5d} {total_k / total_n:6.1%}")
    Path("mutants/survivors.txt").write_text("\n".join(out))
    print("Survivors, as diffs: mutants/survivors.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
