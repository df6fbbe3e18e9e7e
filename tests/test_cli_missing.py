"""A Python package pgaccel needs is missing: one paragraph and exit 3, never a traceback
(issue 41: with a dependency missing, the error handler itself raised one).  Each case runs
the real CLI in a fresh interpreter with the package made unimportable."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run(hidden: str, *args: str) -> subprocess.CompletedProcess:
    code = (f"import sys; sys.modules[{hidden!r}] = None; sys.argv = ['pgaccel', *{args!r}]\n"
            "from pgaccel.cli import main; main()")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("hidden,args", [
    ("click", ("probe",)),            # imported by the command line itself
    ("rich", ("probe",)),
    ("psycopg", ("run", "--quick", "--yes")),   # imported by a command, lazily
    ("scipy", ("run", "--quick", "--yes")),
])
def test_a_missing_package_is_one_paragraph_and_exit_3(hidden, args):
    r = _run(hidden, *args)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"pgaccel: the Python package '{hidden}' cannot be imported")
    assert "./install.sh" in lines[0]


def test_a_broken_import_inside_pgaccel_stays_a_bug_with_its_traceback():
    from pgaccel.errors import is_missing_dependency
    assert not is_missing_dependency(ModuleNotFoundError("x", name="pgaccel.nope"))
    assert not is_missing_dependency(ImportError("cannot import name 'x'"))   # no name
    assert is_missing_dependency(ModuleNotFoundError("x", name="scipy.stats"))


def test_a_refused_flag_is_said_without_importing_scipy():
    """Flags are checked before SciPy's statistics are imported (a second of a refusal's
    2.1 s went to them): with SciPy unimportable, a bad --clients still gets its own
    message and exit 2, and a command that measures says SciPy is missing (above)."""
    r = _run("scipy", "bench", "--clients", "abc")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Cannot read the list 'abc'" in r.stderr and "scipy" not in r.stderr
