"""A machine reached over SSH: the system's ``ssh`` client (or ``$PGACCEL_SSH``, e.g.
``ssh -F FILE``) with ``BatchMode``, so keys, agents and known_hosts are the user's own and
pgaccel never asks for or passes an SSH password.  Used for load hosts (``--client-host``,
workloads/remote.py) and the server's host (``--server-host``, probe/remote.py)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import BenchError, UsageError


@dataclass(frozen=True)
class SshHost:
    host: str
    user: str | None = None
    port: int | None = None
    role: str = "client"               # what the host is for, in messages

    @classmethod
    def parse(cls, text: str, option: str = "--client-host") -> "SshHost":
        url = text if "://" in text else "ssh://" + text
        p = urlsplit(url)
        shown = re.sub(r"(//[^/@:]*):[^/@]*@", r"\1:***@", text)     # never a password
        if p.scheme != "ssh" or not p.hostname or p.path not in ("", "/") or p.password:
            raise UsageError(f"{option} {shown!r} is not ssh://[user@]host[:port].",
                             f"Example: {option} ssh://bench@10.0.0.7 (keys as your own "
                             "ssh uses them; never a password in the URL).")
        try:
            port = p.port
        except ValueError:
            raise UsageError(f"{option} {shown!r}: the port is not a number.") from None
        return cls(p.hostname, p.username, port, option.strip("-").split("-")[0])

    @property
    def label(self) -> str:
        return (f"{self.user}@" if self.user else "") + self.host + \
            (f":{self.port}" if self.port else "")

    @property
    def ssh_hint(self) -> str:
        return "ssh " + (f"-p {self.port} " if self.port else "") + \
            (f"{self.user}@" if self.user else "") + self.host

    def ssh_argv(self) -> list[str]:
        base = shlex.split(os.environ.get("PGACCEL_SSH") or "ssh")
        return [*base, "-o", "BatchMode=yes", "-o", "ConnectTimeout=15",
                *(["-p", str(self.port)] if self.port else []),
                (f"{self.user}@" if self.user else "") + self.host]

    def command(self, script: str) -> list[str]:
        """The local argv that runs ``script`` with sh on the host."""
        return [*self.ssh_argv(), "--", "sh -c " + shlex.quote(script)]

    def run(self, script: str, stdin: str = "", timeout: float = 120
            ) -> subprocess.CompletedProcess:
        try:
            r = subprocess.run(self.command(script), input=stdin, capture_output=True,
                               text=True, timeout=timeout)
        except FileNotFoundError:
            raise BenchError("The ssh client is not installed on this machine.",
                             "Install it (Debian: apt-get install openssh-client).") from None
        except subprocess.TimeoutExpired:
            raise BenchError(f"Client host {self.label} did not answer within {timeout:.0f} s.",
                             "Check that ssh to it works without a prompt.") from None
        if r.returncode == 255:
            err = (r.stderr.strip().splitlines() or ["ssh failed"])[-1]
            raise BenchError(f"Could not reach {self.role} host {self.label} over ssh: {err}",
                             f"Check that `{self.ssh_hint} true` works without a prompt "
                             "(keys, known_hosts; pgaccel uses BatchMode).")
        return r
