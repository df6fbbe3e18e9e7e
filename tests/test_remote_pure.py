"""The pure parts of `--client-host` (workloads/remote.py): URLs, the client split, what the
remote command carries (never a password), and the parsing of what comes back.  The real
thing, over SSH between network namespaces, is tests/test_client_host.py."""

from __future__ import annotations

import base64
import io
import subprocess
import tarfile

import pytest

from pgaccel.errors import UsageError
from pgaccel.workloads import remote


@pytest.mark.parametrize("text,host,user,port", [
    ("ssh://bench@10.0.0.7", "10.0.0.7", "bench", None),
    ("ssh://10.0.0.7:2222", "10.0.0.7", None, 2222),
    ("loadgen-1", "loadgen-1", None, None),
    ("ssh://root@[fd00::2]:22", "fd00::2", "root", 22),
])
def test_client_host_urls(text, host, user, port):
    h = remote.ClientHost.parse(text)
    assert (h.host, h.user, h.port) == (host, user, port)
    argv = h.ssh_argv()
    assert "BatchMode=yes" in argv and argv[-1] == (f"{user}@" if user else "") + host
    assert ("-p" in argv) == (port is not None)


@pytest.mark.parametrize("text", ["http://h", "ssh://u:secret@h", "ssh://h/path", "ssh://",
                                  "ssh://h:port"])
def test_bad_client_host_urls_are_refused(text):
    with pytest.raises(UsageError) as e:
        remote.ClientHost.parse(text)
    assert "secret" not in e.value.message


@pytest.mark.parametrize("clients,hosts,want", [
    (2, 1, [2]), (2, 2, [1, 1]), (5, 2, [3, 2]), (1, 3, [1, 0, 0]), (7, 3, [3, 2, 2])])
def test_split_clients(clients, hosts, want):
    got = remote.split_clients(clients, hosts)
    assert got == want and sum(got) == clients


def test_the_password_goes_on_stdin_never_on_the_command_line():
    env = {"PGHOST": "10.0.0.5", "PGPORT": "5432", "PGUSER": "bench", "PGPASSWORD": "s3cr$t",
           "PGDATABASE": "pgaccel_bench", "PGOPTIONS": "-c work_mem=64MB"}
    safe, password = remote.remote_env(env)
    assert password == "s3cr$t" and "PGPASSWORD" not in safe
    script = remote.remote_script(["-n", "-c", "2", "-f", "a.sql"], safe, "abc",
                                  {"a.sql": "SELECT 1;\n"}, logs=True)
    argv = remote.ClientHost("h").command(script)
    assert all("s3cr$t" not in a for a in argv)
    assert "PGOPTIONS='-c work_mem=64MB'" in script and "IFS= read -r PGPASSWORD" in script
    assert base64.b64encode(b"SELECT 1;\n").decode() in script


@pytest.mark.parametrize("host", ["", "/var/run/postgresql", "localhost", "127.0.0.1", "::1"])
def test_a_server_only_this_machine_reaches_is_refused(host):
    with pytest.raises(UsageError, match="client hosts can reach"):
        remote.remote_env({"PGHOST": host} if host else {})


def test_the_script_runs_and_its_output_parses(tmp_path):
    """The script with a stand-in for pgbench (a shell function printing what pgbench
    prints and writing a log file) run by the local sh: markers, CPU, logs, exit code."""
    script = remote.remote_script(["-n", "-T", "1"], {"PGHOST": "10.0.0.5"}, "t" + tmp_path.name[-6:],
                                  {}, logs=True)
    fake = ('pgbench() { echo "tps = 123.5 (without initial connection time)"; '
            'echo "0 1 250 0 1700000000 5" > tx.1; '
            'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; return 0; }\n')
    script = script.replace("env PGHOST=10.0.0.5 pgbench", "pgbench")
    r = subprocess.run(["sh", "-c", fake + script], input="\n", capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = remote.parse_output(r.stdout)
    assert got["rc"] == 0 and "tps = 123.5" in got["stdout"]
    assert "@@pgaccel" not in got["stdout"]
    assert got["logs"] == {"tx.1": b"0 1 250 0 1700000000 5\n"}
    assert got["client_cpu_s"] is not None and got["client_cpu_s"] >= 0
    assert got["host_cpu_util"] is None or 0 <= got["host_cpu_util"] <= 1


def test_parse_output_reads_times_and_proc_stat():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        data = b"1 2 3\n"
        info = tarfile.TarInfo("tx.42")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    out = "\n".join([
        "@@pgaccel-stat0 cpu  100 0 100 800 0 0 0 0 0 0",
        "transaction type: <builtin: select only>", "tps = 10.0",
        "@@pgaccel-stat1 cpu  150 0 150 900 0 0 0 0 0 0",
        "@@pgaccel-times", "0m0.01s 0m0.02s", "1m2.50s 0m0.25s",
        "@@pgaccel-rc 0",
        "@@pgaccel-logs " + base64.b64encode(buf.getvalue()).decode()])
    got = remote.parse_output(out)
    assert got["client_cpu_s"] == pytest.approx(62.75)
    assert got["host_cpu_util"] == pytest.approx(100 / 200)     # busy 100 of 200 jiffies
    assert got["logs"] == {"tx.42": b"1 2 3\n"}
    assert got["stdout"] == "transaction type: <builtin: select only>\ntps = 10.0\n"
