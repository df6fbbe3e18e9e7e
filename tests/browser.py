"""Open a page in the distribution's headless Chromium and report what a browser saw: console
messages, uncaught exceptions, every network request, the result of a script run in the page,
and a full-page screenshot.  Talks the DevTools protocol over a websocket (websocket-client);
the browser runs in a throwaway profile and is always stopped."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import websocket

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def chromium() -> str | None:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageVisit:
    console: list[dict[str, Any]] = field(default_factory=list)     # {"type", "text"}
    exceptions: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    result: Any = None                                              # the script's value
    screenshot: bytes = b""

    @property
    def errors(self) -> list[str]:
        return self.exceptions + [m["text"] for m in self.console
                                  if m["type"] in ("error", "assert")]


class _Session:
    def __init__(self, ws_url: str):
        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, session: str | None = None, **params) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result") or {}
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        if any(e.get("method") == method for e in self.events):
            return
        while time.monotonic() < end:
            self.ws.settimeout(max(0.1, end - time.monotonic()))
            ev = json.loads(self.ws.recv())
            self.events.append(ev)
            if ev.get("method") == method:
                return
        raise TimeoutError(f"no {method} within {timeout:.0f} s")


def visit(url: str, script: str, width: int = 900) -> PageVisit:
    """Load ``url`` at ``width`` CSS pixels, run ``script`` (an expression whose value is
    JSON-serialisable) once the load event fired, and take a full-page screenshot."""
    exe = chromium()
    if exe is None:
        raise FileNotFoundError("no Chromium (install.sh installs the distribution's)")
    profile = tempfile.mkdtemp(prefix="pgaccel-chromium-")
    proc = subprocess.Popen(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--remote-debugging-port=0", f"--user-data-dir={profile}",
         "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,       # its helpers too, to end them all (_end)
        # its singleton socket's folder (org.chromium.Chromium.*) inside the profile: in
        # /tmp one stayed after every visit
        env={**os.environ, "TMPDIR": profile})
    try:
        port_file = os.path.join(profile, "DevToolsActivePort")
        end = time.monotonic() + 30
        while not os.path.exists(port_file) or len(open(port_file).read().split()) < 2:
            if time.monotonic() > end or proc.poll() is not None:
                raise RuntimeError("Chromium did not open its DevTools port")
            time.sleep(0.1)
        port, path = open(port_file).read().split()[:2]
        s = _Session(f"ws://127.0.0.1:{port}{path}")
        target = s.call("Target.createTarget", url="about:blank")["targetId"]
        sid = s.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            s.call(f"{domain}.enable", session=sid)
        s.call("Emulation.setDeviceMetricsOverride", session=sid, width=width, height=1200,
               deviceScaleFactor=1, mobile=False)
        s.call("Page.navigate", session=sid, url=url)
        s.wait_for("Page.loadEventFired")
        out = PageVisit()
        value = s.call("Runtime.evaluate", session=sid, expression=script,
                       returnByValue=True)
        out.result = (value.get("result") or {}).get("value")
        shot = s.call("Page.captureScreenshot", session=sid, format="png",
                      captureBeyondViewport=True)
        out.screenshot = base64.b64decode(shot["data"])
        for ev in s.events:
            p = ev.get("params") or {}
            m = ev.get("method")
            if m == "Runtime.consoleAPICalled":
                out.console.append({"type": p.get("type"), "text": " ".join(
                    str(a.get("value", a.get("description", ""))) for a in p.get("args", []))})
            elif m == "Runtime.exceptionThrown":
                out.exceptions.append(json.dumps(p.get("exceptionDetails"))[:500])
            elif m == "Log.entryAdded" and (p.get("entry") or {}).get("level") == "error":
                out.console.append({"type": "error", "text": p["entry"].get("text", "")})
            elif m == "Network.requestWillBeSent":
                out.requests.append((p.get("request") or {}).get("url", ""))
        s.ws.close()
        return out
    finally:
        _end(proc)
        shutil.rmtree(profile, ignore_errors=True)


def _end(proc: subprocess.Popen) -> None:
    """End Chromium and every helper process it started (its session's group).  Ending
    the browser alone left helpers that wrote into the profile after it was removed: a
    ``pgaccel-chromium-*`` folder stayed in /tmp after every browser test."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        end = time.monotonic() + wait
        while time.monotonic() < end:
            proc.poll()                       # reap the browser itself
            try:
                os.killpg(proc.pid, 0)        # anyone left in the group?
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            continue
        break
    proc.wait()
