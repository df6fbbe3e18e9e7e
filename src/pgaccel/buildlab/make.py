"""Building PostgreSQL: sources -> configure -> make -> (training -> rebuild) -> install,
inside a work directory that becomes an installed build only at its last step (a rename),
so an interrupted build never looks installed."""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
import shutil
import subprocess
import tarfile
import time
from dataclasses import asdict, dataclass
from typing import Callable

from ..errors import Interrupted, NotFound, UsageError
from ..server.discovery import SERVER_ENV_FILE
from ..server import buildcache as cache
from .apt import BuildError, install_packages, missing_packages
from .flavors import BuildRecipe, build_deps, configure_args, configure_env, recipe
from .fetch import Source, find_source

# contrib modules pgaccel's workloads use, built and installed beside the server
CONTRIB = ("pg_prewarm", "pg_stat_statements")
# compiler invocations a full build makes (server, client programs, the contrib above):
# 1,301 in the log of PostgreSQL 18.6 here, the others guessed; only the progress bar and
# the estimate use them
COMPILE_UNITS = {15: 1150, 16: 1200, 17: 1250, 18: 1300}
# seconds per compile unit on one core at -O2: 18.6-o2 took 141 s here with 2 jobs,
# dependencies and fetch included; scaled by flavor cost
SECONDS_PER_UNIT = 0.2
FLAVOR_COST = {"debian": 1.1, "o2": 1.0, "native": 1.3, "lto": 1.6, "pgo": 2.4,
               "lto+pgo": 3.4, "bolt": 1.5}

Phase = Callable[[str, float], None]   # (phase name, fraction of the whole build done)


@dataclass(frozen=True)
class Request:
    version: str                 # "18" or "18.6"
    flavor: str = "o2"
    liburing: bool | None = None
    source: str | None = None    # a tarball or a source tree; else upstream, then Debian
    jobs: int | None = None
    jemalloc: bool = False       # the same build, its server run with libjemalloc preloaded
    source_url: str | None = None  # a mirror of the download site (then only it is tried)


def estimate_seconds(major: int, flavor: str, jobs: int) -> float:
    units = COMPILE_UNITS.get(major, 1300)
    return units * SECONDS_PER_UNIT * FLAVOR_COST.get(flavor, 1.0) / max(1, jobs) + 30


def compiler_id() -> str:
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        return "none"
    r = subprocess.run([cc, "--version"], capture_output=True, text=True)
    return r.stdout.splitlines()[0].strip() if r.stdout else cc


class Builder:
    """One build, from a request to an installed, named build."""

    def __init__(self, req: Request, root: str | None = None,
                 on_phase: Phase | None = None, say: Callable[[str], None] | None = None,
                 confirm_install: Callable[[str], bool] | None = None):
        self.req = req
        self.root = cache.ensure_dir(root or cache.builds_dir())
        self.on_phase = on_phase or (lambda p, f: None)
        self.say = say or (lambda s: None)
        self.confirm_install = confirm_install
        self.jobs = req.jobs or (os.cpu_count() or 1)
        self._log = None
        self._units = 0

    # -- the steps ------------------------------------------------------------------------
    def fetch(self) -> Source:
        """The sources alone, downloaded and verified into the cache (``build
        --fetch-only``): what a machine without network then builds with ``--source``."""
        cache.sweep(self.root)
        self.on_phase("fetch", 0.0)
        src = find_source(self.req, self.root, self.say, progress=lambda f: self.on_phase(
            "fetch", f))
        self.say(f"source: {src.describe()}")
        return src

    def run(self) -> tuple[cache.Build, bool]:
        """(the build, True when it was built now / False when the cache had it)."""
        cache.sweep(self.root)
        self.on_phase("fetch", 0.0)
        src = find_source(self.req, self.root, self.say,
                          progress=lambda f: self.on_phase("fetch", 0.03 * f))
        self.say(f"source: {src.describe()}")
        try:
            r = recipe(src.version, self.req.flavor, source_sha256=src.sha256,
                       compiler=compiler_id(), liburing=self.req.liburing,
                       jemalloc=self.req.jemalloc)
        except ValueError as e:
            raise UsageError(f"pgaccel build: {e}.", None) from None
        have = cache.load(self.root, r.name)
        if have is not None and have.key == r.key():
            return have, False
        if self.req.jemalloc:
            return self._with_jemalloc(r), True
        work = os.path.join(self.root, f".work-{r.name}-{os.getpid()}")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        os.chmod(work, 0o755)
        logpath = os.path.join(work, "build.log")
        failed_log = os.path.join(self.root, f"{r.name}.failed.log")
        t0 = time.monotonic()
        try:
            with open(logpath, "w") as self._log:
                self._deps(r)
                self.on_phase("extract", 0.03)
                srcdir = self._extract(src, work)
                final = os.path.join(self.root, r.name)
                stage = os.path.join(work, "stage")
                training = None
                if r.pgo:
                    profile = os.path.join(work, "profile")
                    os.makedirs(profile)
                    # both passes compile in the same directory: gcc names each object's
                    # profile after the object's path
                    bdir = os.path.join(work, "b")
                    self._compile(r, srcdir, bdir, final, os.path.join(work, "stage-instr"),
                                  "instrument", profile, (0.05, 0.40))
                    self.on_phase("train", 0.40)
                    from .train import train
                    training = train(os.path.join(work, "stage-instr") + final, profile,
                                     self._log, self.say)
                    self._sh(["make", "clean"], bdir)
                    # configure's own test programs were profiled too; their profiles would
                    # not match the next configure's (gcc: coverage mismatch, an error)
                    for f in glob.glob(os.path.join(profile, "*conftest*")):
                        os.unlink(f)
                    self._compile(r, srcdir, bdir, final, stage, "final", profile,
                                  (0.55, 0.97))
                else:
                    self._compile(r, srcdir, os.path.join(work, "b"), final, stage, "final",
                                  "", (0.05, 0.70 if r.bolt else 0.97))
                staged = stage + final
                if r.bolt:
                    from . import bolt
                    from .train import train
                    self.on_phase("train", 0.75)
                    training = bolt.optimize(staged, work, self._log, self.say,
                                             lambda p, d: train(p, d, self._log, self.say))
                self._smoke(staged, r)
                manifest = {"key": r.key(), "recipe": asdict(r), "source": {
                    **src.origin, "sha256": src.sha256, "version": src.version},
                    "build_seconds": round(time.monotonic() - t0, 1), "jobs": self.jobs,
                    "size_bytes": cache.dir_size(staged), "training": training,
                    "compile_units": self._units,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
                with open(os.path.join(staged, cache.MANIFEST), "w") as f:
                    json.dump(manifest, f, indent=2)
            shutil.copy(logpath, os.path.join(staged, "build.log"))
            self._install(staged, final)
            self.on_phase("done", 1.0)
        except KeyboardInterrupt:
            raise Interrupted(f"The build of {r.name} was interrupted; nothing was installed.",
                              None) from None
        except BaseException as e:
            if os.path.exists(logpath):
                shutil.copy(logpath, failed_log)
            if isinstance(e, BuildError) and failed_log not in (e.hint or ""):
                e.hint = f"{e.hint or ''} The full log: {failed_log}".strip()
            raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if os.path.exists(failed_log):
            os.unlink(failed_log)
        b = cache.load(self.root, r.name)
        assert b is not None
        return b, True

    def _with_jemalloc(self, r: BuildRecipe) -> cache.Build:
        """The build without jemalloc (made first when missing), copied under its own name
        with a server environment that preloads libjemalloc (server.discovery.server_env)."""
        base, _ = Builder(dataclasses.replace(self.req, jemalloc=False), self.root,
                          self.on_phase, self.say, self.confirm_install).run()
        work = os.path.join(self.root, f".work-{r.name}-{os.getpid()}")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        t0 = time.monotonic()
        try:
            with open(os.path.join(work, "build.log"), "w") as self._log:
                self._deps(r)
            lib = next(iter(sorted(glob.glob("/usr/lib/*/libjemalloc.so.2")
                                   + glob.glob("/usr/lib/libjemalloc.so.2"))), None)
            if lib is None:
                raise BuildError("libjemalloc.so.2 is not on this machine after installing "
                                 "libjemalloc2.", "Install jemalloc and run the build again.")
            staged = os.path.join(work, "stage")
            shutil.copytree(base.path, staged, symlinks=True)
            with open(os.path.join(staged, SERVER_ENV_FILE), "w") as f:
                f.write(f"LD_PRELOAD={lib}\n")
            manifest = {**base.manifest, "key": r.key(), "recipe": dataclasses.asdict(r),
                        "jemalloc": lib, "derived_from": base.name,
                        "build_seconds": round(time.monotonic() - t0, 1),
                        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
            with open(os.path.join(staged, cache.MANIFEST), "w") as f:
                json.dump(manifest, f, indent=2)
            self._install(staged, os.path.join(self.root, r.name))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        b = cache.load(self.root, r.name)
        assert b is not None
        self.on_phase("done", 1.0)
        return b

    def _deps(self, r: BuildRecipe) -> None:
        deps = missing_packages(build_deps(r))
        if not deps.missing:
            return
        if os.geteuid() == 0 and self.confirm_install is not None and not self.confirm_install(
                f"The build needs {len(deps.missing)} Debian packages: "
                f"{' '.join(deps.missing)}. Install them with apt?"):
            raise NotFound("The build dependencies are not installed.",
                           f"Run `{deps.install_line}`, or pass --yes to let pgaccel do it.")
        self.on_phase("deps", 0.01)
        self.say(f"installing build dependencies: {' '.join(deps.missing)}")
        install_packages(deps, self._log)

    def _extract(self, src: Source, work: str) -> str:
        if src.tree:
            return src.tree
        assert src.tarball
        dest = os.path.join(work, "src")
        with tarfile.open(src.tarball) as t:
            t.extractall(dest, filter="data") if hasattr(tarfile, "data_filter") \
                else t.extractall(dest)
        tops = os.listdir(dest)
        if len(tops) != 1:
            raise BuildError(f"{src.tarball} does not unpack to one directory.", None)
        return os.path.join(dest, tops[0])

    def _sh(self, args: list[str], cwd: str, env: dict | None = None,
            span: tuple[float, float] | None = None, units: int = 0) -> None:
        self._log.write(f"\n$ {' '.join(args)}    (in {cwd})\n")
        self._log.flush()
        p = subprocess.Popen(args, cwd=cwd, env={**os.environ, "LC_ALL": "C", **(env or {})},
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             errors="replace", stdin=subprocess.DEVNULL)
        assert p.stdout
        n = 0
        try:
            for line in p.stdout:
                self._log.write(line)
                if span and re.match(r"^(gcc|cc|clang)\b.* -c ", line):
                    n += 1
                    frac = min(n / max(units, 1), 1.0)
                    self.on_phase("compile", span[0] + (span[1] - span[0]) * frac)
            rc = p.wait()
        except BaseException:
            p.kill()
            p.wait()
            raise
        self._units += n
        if rc != 0:
            self._log.flush()
            tail = _error_tail(self._log.name)
            raise BuildError(f"`{' '.join(args[:3])}` failed in {cwd} (exit {rc}): {tail}",
                             None)

    def _compile(self, r: BuildRecipe, srcdir: str, bdir: str, prefix: str, stage: str,
                 stage_name: str, profile: str, span: tuple[float, float]) -> None:
        os.makedirs(bdir, exist_ok=True)
        env = configure_env(r, stage_name, profile)
        self.on_phase("configure", span[0])
        self.say(f"configure ({stage_name}): CFLAGS={env['CFLAGS']!r}")
        self._sh([os.path.join(srcdir, "configure"), *configure_args(r, prefix)], bdir, env)
        units = COMPILE_UNITS.get(r.major, 1300)
        j = f"-j{self.jobs}"
        # an instrumented libpq links gcov's exit handling; libpq's "must not call exit"
        # check is skipped for coverage builds, and this pass is one
        extra = ["enable_coverage=yes"] if stage_name == "instrument" else []
        self._sh(["make", j, *extra], bdir, span=span, units=units)
        for c in CONTRIB:
            self._sh(["make", j, *extra, "-C", f"contrib/{c}"], bdir)
        self.on_phase("install", span[1])
        self._sh(["make", *extra, "install", f"DESTDIR={stage}"], bdir)
        for c in CONTRIB:
            self._sh(["make", *extra, "-C", f"contrib/{c}", "install", f"DESTDIR={stage}"],
                     bdir)

    def _smoke(self, staged: str, r: BuildRecipe) -> None:
        out = subprocess.run([os.path.join(staged, "bin", "postgres"), "--version"],
                             capture_output=True, text=True)
        if r.version not in out.stdout:
            raise BuildError(f"The new postgres says {out.stdout.strip()!r}, not {r.version}.",
                             None)

    def _install(self, staged: str, final: str) -> None:
        """The staged prefix takes the build's name in one rename (an old build of that name,
        with other flags, is moved aside first and removed after).  Everything in it is
        made readable by all, as a package's files are: built as root under a strict umask
        (077, as hardened hosts and CI set it) it would be root's alone, and the server's
        own user could not run it."""
        _readable_by_all(staged)
        old = None
        if os.path.exists(final):
            old = os.path.join(self.root, f".removing-{os.path.basename(final)}-{os.getpid()}")
            os.rename(final, old)
        os.rename(staged, final)
        if old:
            shutil.rmtree(old, ignore_errors=True)


def _readable_by_all(top: str) -> None:
    """go+r on every file and go+rx on every directory under ``top`` (and on it), go+x on
    the files their owner may execute; symbolic links are left as they are."""
    def widen(path: str, directory: bool) -> None:
        mode = os.lstat(path).st_mode
        add = 0o055 if directory or mode & 0o100 else 0o044
        if mode & add != add:
            os.chmod(path, (mode & 0o7777) | add)
    widen(top, True)
    for d, dirs, files in os.walk(top):
        for name in dirs:
            p = os.path.join(d, name)
            if not os.path.islink(p):
                widen(p, True)
        for name in files:
            p = os.path.join(d, name)
            if not os.path.islink(p):
                widen(p, False)


def _error_tail(logpath: str, n: int = 4) -> str:
    try:
        with open(logpath, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    errs = [ln for ln in lines if re.search(r"error|Error|ERROR", ln)]
    return " | ".join((errs or lines)[-n:])[-600:]
