"""The package's shape: no import cycle, and each folder imports only the layers below it
(docs/architecture.md).  Reads the source with ``ast``; every import counts, also those
inside functions (a lazy import is still a dependency), except under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PKG = SRC / "pgaccel"

# folder (or top-level module) -> what it may import besides itself
BASE = {"errors", "util", "__init__"}
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "util": {"errors"},
    "heap": set(),            # the process's C allocator, set once at start (cli)
    "__init__": set(),
    "pg": BASE,
    "probe": BASE | {"pg", "osknobs.procfs"},
    "tune": BASE | {"pg", "probe.facts"},
    # discovery lists the builds of `pgaccel build` (the cache's listing, which imports
    # nothing of pgaccel's but errors and util)
    "server": BASE | {"pg"},
    # the Linux layer: kernel file parsers (procfs, pure), the operations on one value, a
    # plan's changes, a measurement's held values and their journal
    "osknobs": BASE | {"pg", "tune"},
    "metrics": BASE | {"pg", "server"},
    # the pure decision core: effects, verdicts, schedules, the limits of a run
    "decide": BASE | {"pg", "metrics.noise", "metrics.registry"},
    "workloads": BASE | {"pg", "server", "metrics", "capture"},
    "specs": BASE | {"pg", "decide", "workloads", "buildlab"},
    # captured workloads: what a server ran (pure) and the bundle on disk
    "capture": BASE | {"pg"},
    "apply": BASE | {"pg", "probe", "tune", "server", "osknobs"},
    "buildlab": BASE | {"pg", "server"},
    "lab": BASE | {"pg", "probe", "tune", "server", "metrics", "decide", "workloads", "specs",
                   "apply", "buildlab", "osknobs"},
    "report": BASE | {"pg", "tune", "apply", "decide", "metrics"},
    "session": BASE | {"pg", "probe", "tune", "server", "metrics", "decide", "workloads",
                       "specs", "apply", "lab", "report", "buildlab", "osknobs", "capture"},
    "cli": BASE | {"pg", "probe", "tune", "server", "metrics", "decide", "workloads", "specs",
                   "apply", "lab", "report", "session", "buildlab", "osknobs", "capture", "heap"},
}
# cli modules every command may use (runstack is run's --stack half, search tune's --search
# half, neither a command); a
# command never imports another command
CLI_SHARED = {"pgaccel.cli", "pgaccel.cli.common", "pgaccel.cli.progress",
              "pgaccel.cli.runstack", "pgaccel.cli.search"}


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PKG.rglob("*.py")}


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                lines.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return lines


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The pgaccel modules ``name`` imports (``from X import Y`` counts X.Y when that is a
    module, else X)."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_lines(tree)
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("pgaccel"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("pgaccel"):
                continue
            for a in node.names:
                sub = f"{mod}.{a.name}"
                out.add(sub if sub in known else mod)
    out.discard(name)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {n: {m for m in imports_of(n, p, known) if m in known} for n, p in mods.items()}


def layer_of(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def violations(g: dict[str, set[str]]) -> list[str]:
    bad = []
    for mod, deps in sorted(g.items()):
        layer = layer_of(mod)
        allowed = ALLOWED.get(layer)
        assert allowed is not None, f"{mod}: folder {layer!r} has no rule in ALLOWED"
        for dep in sorted(deps):
            dl = layer_of(dep)
            if dl == layer:
                if layer == "cli" and mod not in CLI_SHARED and dep not in CLI_SHARED:
                    bad.append(f"{mod} -> {dep}: a command imports another command")
                continue
            sub = ".".join(dep.split(".")[1:3])
            if dl not in allowed and sub not in allowed:
                bad.append(f"{mod} -> {dep}: {layer}/ may not import {dl}/")
    return bad


def test_no_import_cycle() -> None:
    assert cycles(graph()) == []


def test_layers_import_only_downwards() -> None:
    assert violations(graph()) == []


def test_rules_catch_what_they_forbid() -> None:
    """The checks themselves: a made-up graph with a cycle, a workload reaching into the lab,
    pure tune reaching a server, and one command importing another."""
    g = {
        "pgaccel.lab.trial": {"pgaccel.workloads.steps"},
        "pgaccel.workloads.steps": {"pgaccel.lab.trial"},
        "pgaccel.tune.rules": {"pgaccel.server.target", "pgaccel.pg.values",
                               "pgaccel.probe.facts"},
        "pgaccel.tune.inputs": {"pgaccel.probe.host"},
        "pgaccel.cli.run": {"pgaccel.cli.bench", "pgaccel.cli.common"},
    }
    assert cycles(g) == [["pgaccel.lab.trial", "pgaccel.workloads.steps"]]
    assert violations(g) == [
        "pgaccel.cli.run -> pgaccel.cli.bench: a command imports another command",
        "pgaccel.tune.inputs -> pgaccel.probe.host: tune/ may not import probe/",
        "pgaccel.tune.rules -> pgaccel.server.target: tune/ may not import server/",
        "pgaccel.workloads.steps -> pgaccel.lab.trial: workloads/ may not import lab/",
    ]


# what only session/ may open: a command builds a request and renders what comes back
RUN_OWNERS = {"pgaccel.server.target": "open_target", "pgaccel.session.store": "Store",
              "pgaccel.lab.experiment": "Experiment"}


def commands_that_open_runs() -> list[str]:
    bad = []
    for name, path in sorted(modules().items()):
        if layer_of(name) != "cli":
            continue
        deps = imports_of(name, path, set(modules())) & set(RUN_OWNERS)
        names = {a.name for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.ImportFrom) for a in node.names}
        bad += [f"{name} imports {dep}" for dep in sorted(deps)]
        bad += [f"{name} imports {n}" for n in sorted(names & set(RUN_OWNERS.values()))]
    return bad


def test_no_command_opens_a_target_a_store_or_an_experiment() -> None:
    assert commands_that_open_runs() == []


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["-V"]])
def test_help_and_version_load_no_heavy_library(args: list[str]) -> None:
    """`pgaccel --help` lists the commands without importing them: no SciPy, NumPy,
    matplotlib or psycopg."""
    code = ("import sys\nfrom pgaccel.cli import cli\n"
            f"try:\n    cli.main({args!r}, standalone_mode=False)\nexcept SystemExit:\n    pass\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
            "{'scipy', 'numpy', 'matplotlib', 'psycopg'})\nprint('HEAVY', heavy)\n")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stdout, r.stdout
    if args == ["--help"]:
        for name in ("probe", "tune", "run", "bench", "lab", "calibrate", "show"):
            assert f"  {name} " in r.stdout
