"""install.sh on a system it cannot install on: no apt-get/dpkg-query (RHEL, Fedora, Arch,
macOS) must stop at once, install nothing and say what to install, how to point pgaccel at
PostgreSQL and how to install the Python part alone.  The script runs for real, copied into
tmp_path (it works in its own directory), with a PATH holding bash and nothing else, the way
such a system has no apt.  The Debian path is what CI runs (.ci/run); the Ubuntu check is
manual (docs/testing.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from pgaccel.pg.versions import SUPPORTED

SCRIPT = Path(__file__).resolve().parent.parent / "install.sh"


def run_install(tmp_path: Path, *args: str, tools: dict[str, str] | None = None
                ) -> subprocess.CompletedProcess:
    """install.sh copied to tmp_path/repo, run with PATH = a directory holding bash and
    ``tools`` (name -> script text)."""
    repo, path = tmp_path / "repo", tmp_path / "path"
    repo.mkdir()
    path.mkdir()
    shutil.copy(SCRIPT, repo / "install.sh")
    os.symlink(shutil.which("bash"), path / "bash")
    for name, text in (tools or {}).items():
        (path / name).write_text(text)
        (path / name).chmod(0o755)
    return subprocess.run([str(repo / "install.sh"), *args], capture_output=True, text=True,
                          timeout=30, env={"PATH": str(path), "HOME": str(tmp_path)})


def test_without_apt_it_stops_and_says_what_to_install(tmp_path):
    r = run_install(tmp_path)
    assert r.returncode == 1 and r.stdout == ""
    assert "this system has no\napt-get/dpkg-query, so it installed nothing" in r.stderr
    assert f"PostgreSQL {SUPPORTED.start} to {SUPPORTED.stop - 1}: server, client" in r.stderr
    assert "postgresqlNN-server and postgresqlNN-contrib (in /usr/pgsql-NN/bin)" in r.stderr
    assert "Python 3.11 or newer" in r.stderr
    assert "PGACCEL_PG_BIN=DIR" in r.stderr
    assert r.stderr.rstrip().endswith("./install.sh --python-only")
    assert sorted(os.listdir(tmp_path / "repo")) == ["install.sh"]      # no .venv


def test_apt_get_without_dpkg_query_is_not_debian_enough(tmp_path):
    """An apt-get alone (no dpkg-query to tell what is installed) is never run."""
    called = tmp_path / "apt-get-called"
    r = run_install(tmp_path, tools={"apt-get": f"#!/bin/bash\necho \"$@\" > {called}\n"})
    assert r.returncode == 1 and "no\napt-get/dpkg-query" in r.stderr
    assert not called.exists()


def test_python_only_needs_a_python_it_can_use(tmp_path):
    r = run_install(tmp_path, "--python-only")
    assert r.returncode == 1
    assert "needs Python 3.11 or newer with its venv module" in r.stderr
    assert "PYTHON=/path/to/python3.11 ./install.sh --python-only" in r.stderr
    assert sorted(os.listdir(tmp_path / "repo")) == ["install.sh"]
    # a Python too old (3.10, Ubuntu 22.04's) is passed over, not used
    old = "#!/bin/bash\n[ \"$1\" = -c ] && exit 1\necho \"python3 ran: $*\" >&2; exit 9\n"
    (tmp_path / "old").mkdir()
    r = run_install(tmp_path / "old", "--python-only", tools={"python3": old})
    assert r.returncode == 1 and "python3 ran" not in r.stderr
    assert "needs Python 3.11 or newer" in r.stderr


def test_an_unknown_option_is_a_usage_error(tmp_path):
    r = run_install(tmp_path, "--pythononly")
    assert r.returncode == 2
    assert "unknown option --pythononly (usage: ./install.sh [--python-only])" in r.stderr
