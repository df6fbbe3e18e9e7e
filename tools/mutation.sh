#!/usr/bin/env bash
# Mutation testing of pgaccel's pure core (tuning rules, statistics, verdicts, scheduling,
# spec parsing) with mutmut: every small change mutmut makes to those files should make a
# quick test fail.  Files and tests: [tool.mutmut] in pyproject.toml.  Not part of CI: every
# file takes several hours on 2 cores (about 10,000 mutants); one module's mutants take
# minutes.  Prints the score per file and writes every surviving mutant, as a diff, to
# mutants/survivors.txt (see docs/testing.md for how to read them).
#
#   tools/mutation.sh                        # install mutmut if needed, run all, report
#   tools/mutation.sh 'pgaccel.tune.pgtune*' # only that module's mutants (mutmut's names)
#   tools/mutation.sh --report               # report on the last run only
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
if [ ! -x "$py" ]; then
    echo "No .venv here: run ./install.sh first." >&2
    exit 2
fi
if [ "${1:-}" != "--report" ]; then
    "$py" -m pip install -q "mutmut>=3.8,<4"
    rm -rf mutants
    # one worker: the machine this runs on has 2 cores and the tests are CPU-bound
    .venv/bin/mutmut run --max-children "${MUTMUT_CHILDREN:-1}" "$@" | tr '\r' '\n' | tail -n 2
fi
"$py" tools/mutation_report.py
