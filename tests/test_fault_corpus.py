"""Bad input and faults, tried as a hostile user would: every case gets the documented exit
code, a one-paragraph message that says what to do, no traceback, no password anywhere
(output or any file pgaccel wrote), no postgres process and no directory left behind.

Most cases fail before anything starts (flags, specs, DSNs, binaries, limits); the last
tests start real servers and fail or are stopped mid-way (a refused setting, too many
clients, Ctrl-C, kill -9, a full disk under the state directory)."""

from __future__ import annotations

import os
import re
import resource
import signal
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from helpers import PGACCEL, pg_ctl, pgaccel_inprocess, postgres_processes_for
import helpers

SECRET = "C0rpusSecretPw"
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples")

TWO = '[[variant]]\nname = "a"\n[[variant]]\nname = "b"\n'
SEL = '[[workload]]\nname = "select-only"\n'
SPECS = {
    "nan.toml": '[run]\nduration = nan\n' + TWO + 'settings = {work_mem="8MB"}\n' + SEL,
    "inf-rate.toml": TWO + 'settings = {work_mem="8MB"}\n' + SEL + "rate = inf\n",
    "typo.toml": "[run]\nroundz = 2\n" + TWO + SEL,
    "broken.toml": "[run\nduration = 5\n",
    "binary.toml": b"\xff\xfe[run]\n",
    "nested.toml": "x = " + "[" * 3000 + "]" * 3000 + "\n",
    "huge-clients.toml": TWO + 'settings = {work_mem="8MB"}\n' + SEL + "clients = 20000\n",
    "one-variant.toml": '[[variant]]\nname = "a"\n' + SEL,
    "no-workload.toml": TWO + 'settings = {work_mem="8MB"}\n',
    "bad-setting.toml": TWO + 'settings = {no_such_guc = "1"}\n' + SEL,
    "fsync-off.toml": TWO + 'settings = {fsync = "off"}\n' + SEL,
    "long-duration.toml": '[run]\nduration = "1000h"\n' + TWO + 'settings = {work_mem="8MB"}\n'
                          + SEL,
}

URI_BAD = f"postgresql://someone:{SECRET}@[::1"
DSN_NOWHERE = f"host=/nonexistent-dir port=1 user=someone password={SECRET}"
URI_REFUSED = f"postgresql://someone:{SECRET}@127.0.0.1:1/db"

# (id, args, exit code, a regular expression the message must match)
CASES = [
    ("duration-nan", ["run", "--duration", "nan"], 2, r"not a finite number"),
    ("duration-inf", ["run", "--duration", "inf"], 2, r"not in the range"),
    ("duration-negative", ["bench", "--duration", "-5"], 2, r"not in the range"),
    ("duration-huge", ["run", "--duration", "1e9"], 2, r"not in the range 2<=x<=604800"),
    ("warmup-nan", ["bench", "--warmup", "nan"], 2, r"not a finite number"),
    ("rate-nan", ["bench", "--rate", "nan"], 2, r"not a finite number"),
    ("rate-zero", ["bench", "--rate", "0"], 2, r"not in the range"),
    ("clients-huge", ["bench", "--clients", "100000"], 2, r"clients = 100000 is out of range"),
    ("clients-text", ["bench", "--clients", "abc"], 2, r"Cannot read the list 'abc'"),
    ("clients-zero", ["bench", "--clients", "0"], 2, r"positive integers"),
    ("run-clients-huge", ["run", "--clients", "100000"], 2, r"not in the range"),
    ("threads-over-clients", ["bench", "--threads", "8", "--clients", "2"], 2,
     r"threads = 8 is more than clients = 2"),
    ("scale-zero", ["bench", "--scale", "0"], 2, r"not in the range"),
    ("scale-huge", ["bench", "--scale", "10000000"], 2, r"not in the range"),
    ("scale-past-disk", ["run", "--scale", "90000", "--yes"], 7,
     r"the cluster and its data need about .* free"),
    ("trials-zero", ["bench", "--trials", "0"], 2, r"not in the range"),
    ("rounds-huge", ["run", "--rounds", "100000"], 2, r"not in the range"),
    ("long-run-unconfirmed", ["run", "--rounds", "500", "--duration", "60"], 2,
     r"estimated to take 4\d\.\d h.*--yes"),
    ("unknown-workload", ["bench", "-w", "no-such"], 2, r"Unknown workload 'no-such'"),
    ("set-not-pair", ["bench", "--set", "noequals"], 2, r"is not NAME=VALUE"),
    ("option-not-pair", ["bench", "--option", "x"], 2, r"is not NAME=VALUE"),
    ("protocol-bogus", ["bench", "--protocol", "bogus"], 2, r"is not one of"),
    ("workloads-empty", ["run", "--workloads", ""], 2, r"--workloads is empty"),
    ("calibrate-one-round", ["calibrate", "--rounds", "1"], 2, r"not in the range"),
    ("port-zero", ["probe", "--port", "0"], 2, r"not in the range"),
    ("history-limit-zero", ["history", "--limit", "0"], 2, r"not in the range"),
    ("no-such-command", ["nosuchcommand"], 2, r"No such command"),
    ("tune-memory-bogus", ["tune", "--memory", "bogus"], 2, r"not a size"),
    ("tune-cpus-zero", ["tune", "--cpus", "0"], 2, r"not in the range"),
    ("tune-fsync-off", ["tune", "--set", "fsync=off", "--apply"], 2,
     r"Refusing to turn durability off.*--allow-unsafe-durability"),
    ("tune-set-bogus-value", ["tune", "--set", "shared_buffers=bogus"], 2,
     r"--set shared_buffers=bogus: the server would refuse it"),
    ("tune-set-unknown", ["tune", "--set", "no_such_guc=1"], 2, r"no such parameter"),
    ("tune-dry-run-alone", ["tune", "--dry-run"], 2, r"--dry-run goes with"),
    ("tune-restart-cmd-alone", ["tune", "--restart-cmd", "x"], 2, r"goes with --pgdata"),
    ("tune-apply-os-dsn", ["tune", "--apply-os", "--dsn", DSN_NOWHERE], 2,
     r"--apply-os changes this machine"),
    ("tune-pg-version-9", ["tune", "--pg-version", "9"], 2, r"not supported"),
    ("rollback-no-state", ["rollback", "nosuch"], 2, r"No state 'nosuch'"),
    ("rollback-list-extra", ["rollback", "--list", "extra"], 2, r"--list takes no STATE"),
    ("dsn-unparseable-probe", ["probe", "--dsn", URI_BAD], 2, r"not a valid connection string"),
    ("dsn-unparseable-bench", ["bench", "--dsn", URI_BAD], 2, r"not a valid connection string"),
    ("dsn-unparseable-tune", ["tune", "--dsn", URI_BAD], 2, r"not a valid connection string"),
    ("dsn-no-socket", ["probe", "--dsn", DSN_NOWHERE], 5, r"Could not connect"),
    ("dsn-refused", ["tune", "--dsn", URI_REFUSED], 5, r"Could not connect.*Connection refused"),
    ("dsn-and-pgdata", ["run", "--dsn", DSN_NOWHERE, "--pgdata", "/y"], 2,
     r"name two different servers"),
    ("pgdata-missing", ["probe", "--pgdata", "/nonexistent"], 2,
     r"not a PostgreSQL data directory"),
    ("pgdata-not-cluster", ["probe", "--pgdata", "/usr"], 2, r"not a PostgreSQL data directory"),
    ("pg-bin-missing", ["probe", "--pg-bin", "/nonexistent"], 3, r"no PostgreSQL programs"),
    ("pg-bin-wrong", ["bench", "--pg-bin", "/usr/sbin"], 3, r"no PostgreSQL programs"),
    ("spec-missing", ["lab", "nosuch.toml"], 2, r"does not exist"),
    ("spec-dev-zero", ["lab", "/dev/zero"], 2, r"not a regular file"),
    ("spec-directory", ["lab", "/usr"], 2, r"is a directory"),
    ("spec-nested", ["lab", "{d}/nested.toml"], 2, r"nests arrays or tables too deeply"),
    ("spec-nan", ["lab", "{d}/nan.toml"], 2, r"nan.toml:2: nan is not a duration"),
    ("spec-rate-inf", ["lab", "{d}/inf-rate.toml"], 2, r"rate must be a finite number"),
    ("spec-typo", ["lab", "{d}/typo.toml"], 2, r"unknown key 'roundz'.*Did you mean 'rounds'"),
    ("spec-broken", ["lab", "{d}/broken.toml"], 2, r"not valid TOML"),
    ("spec-binary", ["lab", "{d}/binary.toml"], 2, r"not UTF-8 text"),
    ("spec-clients", ["lab", "{d}/huge-clients.toml"], 2, r"out of range"),
    ("spec-one-variant", ["lab", "{d}/one-variant.toml"], 2, r"at least two variants"),
    ("spec-no-workload", ["lab", "{d}/no-workload.toml"], 2, r"workload"),
    ("spec-unknown-setting", ["lab", "--check", "{d}/bad-setting.toml"], 2, r"no_such_guc"),
    ("spec-fsync-off", ["lab", "{d}/fsync-off.toml"], 2, r"fsync"),
    ("spec-long-unconfirmed", ["lab", "{d}/long-duration.toml"], 2,
     r"(estimated to take|out of range)"),
    ("lab-budget-bogus", ["lab", "--budget", "bogus", os.path.join(EXAMPLES, "hugepages.toml")],
     2, r"--budget: 'bogus' is not a duration"),
    ("show-no-run", ["show", "nosuchrun"], 2, r"No run 'nosuchrun'"),
    ("compare-no-run", ["compare", "a", "b"], 2, r"No run 'a'"),
]


@pytest.fixture
def tmp_path():
    """A directory the unprivileged server user can reach (pytest's own are 0700 root's)."""
    d = tempfile.mkdtemp(prefix="corpus-", dir="/tmp")
    os.chmod(d, 0o711)
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def _env(tmp_path) -> dict[str, str]:
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    os.chmod(scratch, 0o1777)
    return {**os.environ, "PGPASSWORD": SECRET, "TMPDIR": str(scratch),
            "PGACCEL_STATE_DIR": str(tmp_path / "states"),
            "PGACCEL_STORE": str(tmp_path / "store.db"),
            "PGACCEL_RUNS_DIR": str(tmp_path / "runs")}


def _written(tmp_path) -> str:
    """Everything pgaccel wrote under tmp_path (for the password check)."""
    parts = []
    for root, _, files in os.walk(tmp_path):
        for f in files:
            try:
                parts.append(open(os.path.join(root, f), "rb").read().decode("latin-1"))
            except OSError:
                pass
    return "".join(parts)


def check_clean(r: subprocess.CompletedProcess, tmp_path, code: int, pattern: str) -> None:
    text = r.stdout + r.stderr
    assert r.returncode == code, (r.returncode, text[-3000:])
    assert "Traceback" not in text, text[-3000:]
    assert re.search(pattern, text, re.S), (pattern, text[-3000:])
    assert SECRET not in text and SECRET not in _written(tmp_path)
    assert os.listdir(tmp_path / "tmp") == []                 # no temp directory left
    assert postgres_processes_for(str(tmp_path)) == []        # no server left running


def run_pgaccel(args, tmp_path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*PGACCEL, *args], capture_output=True, text=True,
                          env=_env(tmp_path), stdin=subprocess.DEVNULL, timeout=300, **kw)


def _case_args(args, tmp_path) -> list[str]:
    """The case's arguments, its specs written under tmp_path/specs ({d})."""
    d = tmp_path / "specs"
    d.mkdir()
    for name, text in SPECS.items():
        (d / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    return [a.replace("{d}", str(d)) for a in args]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_cleanly(case, tmp_path):
    _, args, code, pattern = case
    args = _case_args(args, tmp_path)
    # in this process through the console script's entry point: each case fails before
    # anything starts, so a fresh interpreter (a second a case) would test nothing more;
    # the real command line's exit codes and output are the cases below and test_cli's
    r = pgaccel_inprocess(*args, env=_env(tmp_path), cwd=str(tmp_path))
    check_clean(r, tmp_path, code, pattern)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in (
    "clients-text", "spec-typo", "spec-nested", "dsn-refused", "tune-fsync-off")],
    ids=lambda c: c[0])
def test_bad_input_through_the_real_command_line(case, tmp_path):
    """A few of the cases above through the installed console script in a new process:
    what the in-process cases stand for (exit code, stderr, nothing left behind)."""
    _, args, code, pattern = case
    args = _case_args(args, tmp_path)
    r = run_pgaccel(args, tmp_path, cwd=str(tmp_path))
    check_clean(r, tmp_path, code, pattern)


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)


def test_too_few_open_files_for_the_clients_is_refused_before_starting(tmp_path):
    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    r = run_pgaccel(["bench", "--clients", "300", "--duration", "2"], tmp_path,
                    preexec_fn=low_limit)
    check_clean(r, tmp_path, 2, r"300 clients need 303 open files.*at most 256")


# -- faults with a real server ---------------------------------------------------------------

def test_a_setting_the_server_refuses_at_start(tmp_path):
    r = run_pgaccel(["bench", "--set", "shared_buffers=4TB", "--duration", "2"], tmp_path)
    check_clean(r, tmp_path, 4, r"shared_buffers")


def test_more_clients_than_the_server_accepts(tmp_path):
    r = run_pgaccel(["run", "--quick", "--clients", "500", "--workloads", "select-only"],
                    tmp_path)
    check_clean(r, tmp_path, 2, r"max_connections")


def _is_measuring_pgbench(proc) -> bool:
    """True for a pgbench running a timed test; False for one that is gone (short-lived
    children such as psql or pg_ctl exit between the listing and the look)."""
    import psutil
    try:
        return proc.name() == "pgbench" and "-T" in proc.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return False


def _start_bench(tmp_path) -> subprocess.Popen:
    p = subprocess.Popen([*PGACCEL, "bench", "--duration", "60", "--warmup", "0", "--scale",
                          "1"], env=_env(tmp_path), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    import psutil
    while time.monotonic() < deadline:            # until pgbench measures
        if any(_is_measuring_pgbench(k) for k in psutil.Process(p.pid).children(recursive=True)):
            return p
        assert p.poll() is None, p.communicate()
        time.sleep(0.2)
    raise AssertionError("pgbench never started")


def test_ctrl_c_during_a_bench(tmp_path):
    p = _start_bench(tmp_path)
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    check_clean(subprocess.CompletedProcess(p.args, p.returncode, out, err), tmp_path, 130,
                r"interrupted")


def test_kill_9_during_a_bench_leaves_nothing_once_the_reaper_ran(tmp_path):
    p = _start_bench(tmp_path)
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (os.listdir(tmp_path / "tmp")
                                           or postgres_processes_for(str(tmp_path))):
        time.sleep(0.5)
    assert os.listdir(tmp_path / "tmp") == []          # cluster and pgbench logs both gone
    assert postgres_processes_for(str(tmp_path)) == []


@pytest.fixture
def user_cluster(inst):
    yield from helpers.user_cluster(inst, listen="")


@pytest.fixture
def full_dir(tmp_path):
    d = tmp_path / "full"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {r.stderr.strip()}")
    try:
        subprocess.run(["dd", "if=/dev/zero", f"of={d}/fill", "bs=4k"], capture_output=True)
        yield d
    finally:
        subprocess.run(["umount", str(d)], capture_output=True)


def test_state_dir_on_a_full_disk(user_cluster, full_dir, tmp_path):
    c = user_cluster
    pg_ctl(c, "start")
    conf = os.path.join(c.pgdata, "postgresql.conf")
    before = open(conf, "rb").read()
    env = {**_env(tmp_path), "PGACCEL_STATE_DIR": str(full_dir / "states")}
    r = subprocess.run([*PGACCEL, "tune", "--pgdata", c.pgdata, "--apply"], env=env,
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 7, r.stderr
    assert "Traceback" not in r.stderr and "Nothing was changed" in r.stderr
    assert open(conf, "rb").read() == before
    assert not os.path.exists(os.path.join(c.pgdata, "pgaccel.conf"))
    assert not os.path.exists(full_dir / "states") or os.listdir(full_dir / "states") == []


def _start_side_by_side_run(tmp_path) -> tuple[subprocess.Popen, list]:
    """`run` with a server per config; returns once all pgbench processes of a round side
    by side exist (started with -l and no progress lines; select-only's 2 clients run as
    one pgbench per CPU, up to 2, for each server), with them."""
    import psutil
    want = 2 * min(2, len(os.sched_getaffinity(0)))
    p = subprocess.Popen([*PGACCEL, "run", "--workloads", "select-only", "--scale", "1",
                          "--duration", "30", "--warmup", "1", "--rounds", "1", "--clients",
                          "2", "--yes"], env=_env(tmp_path), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        found = [k for k in psutil.Process(p.pid).children(recursive=True)
                 if _is_measuring_pgbench(k) and "-P" not in _cmdline(k)]
        if len(found) == want:
            time.sleep(2)                       # inside the warm-ups or slices
            return p, found
        assert p.poll() is None, p.communicate()
        time.sleep(0.2)
    raise AssertionError("the side-by-side pgbench processes never started")


def _cmdline(proc) -> list[str]:
    import psutil
    try:
        return proc.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return []


def _gone(procs, timeout: float = 30) -> bool:
    import psutil
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = []
        for k in procs:
            try:
                if k.is_running() and k.status() != psutil.STATUS_ZOMBIE:
                    alive.append(k)
            except psutil.NoSuchProcess:
                pass
        if not alive:
            return True
        time.sleep(0.3)
    return False


def test_ctrl_c_while_configs_take_turns_leaves_no_server_and_no_stopped_pgbench(tmp_path):
    p, pgbenches = _start_side_by_side_run(tmp_path)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    check_clean(subprocess.CompletedProcess(p.args, p.returncode, out, err), tmp_path, 130,
                r"interrupted")
    assert _gone(pgbenches, timeout=5)


def test_kill_9_while_configs_take_turns_takes_the_stopped_pgbench_along(tmp_path):
    """A pgbench stopped with SIGSTOP would wait for ever once pgaccel is gone: it is killed
    with its parent (PR_SET_PDEATHSIG), and the reapers remove both clusters."""
    p, pgbenches = _start_side_by_side_run(tmp_path)
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=60)
    assert _gone(pgbenches)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (os.listdir(tmp_path / "tmp")
                                           or postgres_processes_for(str(tmp_path))):
        time.sleep(0.5)
    assert os.listdir(tmp_path / "tmp") == []
    assert postgres_processes_for(str(tmp_path)) == []
