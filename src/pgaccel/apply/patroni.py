"""Apply a plan through Patroni's REST API (`tune --apply --patroni URL`), and roll it back.

Patroni owns its members' configuration: a setting written on one member with ALTER SYSTEM
or in a file is overwritten or differs between members.  So the plan goes where Patroni
reads it, the cluster's dynamic configuration (``PATCH /config``,
``postgresql.parameters``), leaving out what Patroni manages itself (``tune/fleet.py``).
Each member then applies it on its next loop: a reload, or a ``pending_restart`` flag for
restart-level parameters.  pgaccel waits for those flags and restarts the pending members
through Patroni (``POST /restart`` with ``restart_pending``), replicas first and the leader
last, one at a time, as ``patronictl restart --pending`` does.

The saved state keeps the dynamic configuration from before (a copy, and each changed
parameter's previous value, absent = ``None``); rollback PATCHes those back (``null``
removes a parameter pgaccel added) and restarts what is pending again.  With ``--dsn``
(user, password and database; host and port come from each member) the values are
verified on every member with SQL; without it, through Patroni's flags only.

REST credentials, when the API asks for them, come from ``PATRONI_RESTAPI_USERNAME`` and
``PATRONI_RESTAPI_PASSWORD`` (Patroni's own names), never from the command line; the URL is
stored and shown without them.
"""

from __future__ import annotations

import base64
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict
from typing import Any

from ..errors import ConnectError, PgaccelError, ServerError, UsageError
from ..pg.values import same_value
from ..tune import fleet
from ..tune.plan import Plan
from .conf import postgres_changes
from .reports import Applied, ApplyReport, RollbackReport
from .state import State, StateStore

WAIT_S = 120.0


# -- the REST API (thin) -----------------------------------------------------------------------

def base_url(url: str) -> str:
    """``host:8008`` or ``http://user:pw@host:8008/`` -> ``http://host:8008`` (no credentials)."""
    if "://" not in url:
        url = "http://" + url
    p = urllib.parse.urlsplit(url)
    if p.scheme not in ("http", "https") or not p.hostname:
        raise UsageError(f"--patroni {url!r} is not a Patroni REST API address.",
                         "Give its URL, for example http://10.0.0.5:8008.")
    host = f"[{p.hostname}]" if ":" in p.hostname else p.hostname
    return f"{p.scheme}://{host}{f':{p.port}' if p.port else ''}"


class PatroniAPI:
    def __init__(self, url: str, timeout: float = 30.0):
        self.url = base_url(url)
        self.timeout = timeout
        user = os.environ.get("PATRONI_RESTAPI_USERNAME")
        pw = os.environ.get("PATRONI_RESTAPI_PASSWORD")
        self._auth = ("Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()
                      if user and pw else None)

    def call(self, method: str, path: str, body: Any = None, url: str | None = None) -> Any:
        req = urllib.request.Request((url or self.url) + path, method=method,
                                     data=None if body is None else json.dumps(body).encode())
        req.add_header("Content-Type", "application/json")
        if self._auth:
            req.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                text = r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            msg = e.read().decode("utf-8", "replace").strip()[:300]
            if e.code in (401, 403):
                raise ConnectError(f"Patroni at {url or self.url} refused {method} {path} "
                                   f"({e.code}): {msg}",
                                   "Set PATRONI_RESTAPI_USERNAME and PATRONI_RESTAPI_PASSWORD "
                                   "to the REST API's credentials.") from None
            if method == "GET" and e.code == 503:       # /patroni of a member not running
                try:
                    return json.loads(msg)
                except ValueError:
                    pass
            raise ServerError(f"Patroni at {url or self.url} answered {method} {path} with "
                              f"{e.code}: {msg}", "Check Patroni's log on that member.") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ConnectError(f"Could not reach Patroni's REST API at {url or self.url}: "
                               f"{reason}.", "Check the address and port (restapi.listen in "
                               "patroni.yml) and that Patroni runs.") from None
        try:
            return json.loads(text) if text.strip() else {}
        except ValueError:
            return {"message": text.strip()}

    def config(self) -> dict:
        return self.call("GET", "/config")

    def members(self) -> list[dict]:
        return list(self.call("GET", "/cluster").get("members", []))

    def member(self, m: dict) -> dict:
        return self.call("GET", "/patroni", url=member_base(m))


def member_base(m: dict) -> str:
    """A member's REST base URL from its ``api_url`` (``http://h:8008/patroni``)."""
    p = urllib.parse.urlsplit(m["api_url"])
    return f"{p.scheme}://{p.netloc}"


# -- waiting and restarting ---------------------------------------------------------------------

def _loop_wait(config: dict) -> float:
    try:
        return float(config.get("loop_wait", 10))
    except (TypeError, ValueError):
        return 10.0


RUNNING = ("running", "streaming")     # a member's states that count as up


def _check_healthy(members: list[dict]) -> None:
    bad = [f"{m.get('name')} is {m.get('state')}" for m in members
           if m.get("state") not in RUNNING]
    if not members:
        raise ServerError("Patroni lists no members in this cluster.",
                          "Point --patroni at a member of a running cluster.")
    if bad:
        raise ServerError("Not every member is running (" + "; ".join(bad) + "): pgaccel "
                          "changes a cluster's configuration only when it is healthy.",
                          "Wait until `patronictl list` shows every member running.")


def wait_applied(api: PatroniAPI, loop_wait: float, want_pending: bool) -> list[dict]:
    """Give every member a loop to pick up the new configuration; with restart-level
    changes, until every member shows ``pending_restart``.  The members, as last seen."""
    deadline = time.monotonic() + max(WAIT_S, 6 * loop_wait)
    time.sleep(min(loop_wait, 10.0) + 1.0)
    while True:
        members = api.members()
        if not want_pending or all(m.get("pending_restart") for m in members):
            return members
        if time.monotonic() > deadline:
            slow = [m["name"] for m in members if not m.get("pending_restart")]
            raise ServerError("These members did not flag the restart the new settings "
                              f"need within {int(max(WAIT_S, 6 * loop_wait))} s: "
                              + ", ".join(slow) + ".", "Check Patroni's log on them.")
        time.sleep(1.0)


def restart_pending(api: PatroniAPI, members: list[dict]) -> list[str]:
    """Restart the members with a pending restart through Patroni, replicas first, the
    leader last, each waited for; the names restarted."""
    order = sorted((m for m in members if m.get("pending_restart")),
                   key=lambda m: m.get("role") in ("leader", "master", "standby_leader"))
    done = []
    for m in order:
        api.call("POST", "/restart", {"restart_pending": True}, url=member_base(m))
        deadline = time.monotonic() + WAIT_S
        while True:
            st = api.member(m)
            if st.get("state") == "running" and not st.get("pending_restart"):
                break
            if time.monotonic() > deadline:
                raise ServerError(f"Member {m['name']} did not come back running after its "
                                  f"restart (state {st.get('state')}).",
                                  "Check Patroni's and PostgreSQL's logs on it.")
            time.sleep(1.0)
        done.append(m["name"])
    if done:
        _wait_cluster_settled(api, done)
    return done


def _wait_cluster_settled(api: PatroniAPI, names: list[str]) -> None:
    """Until the cluster view (what ``patronictl list`` shows, kept in the DCS and
    updated on each member's next loop) agrees with the members: the restarted ones
    running and no longer flagged.  Without this wait a caller reading ``/cluster`` right
    after the restarts could still see ``pending_restart`` (the last loop's report)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        members = {m.get("name"): m for m in api.members()}
        stale = [n for n in names if n not in members
                 or members[n].get("pending_restart")
                 or members[n].get("state") not in RUNNING]
        if not stale:
            return
        if time.monotonic() > deadline:
            raise ServerError("Patroni's cluster view still shows a restart pending or a "
                              "member not running after the restarts: " + ", ".join(stale)
                              + ".", "Check `patronictl list` and Patroni's log on them.")
        time.sleep(1.0)


def verify_members(members: list[dict], dsn: str, want: dict[str, str | None]
                   ) -> dict[str, dict[str, str]]:
    """Every member's values of ``want`` (None: back to the server's default, not checked
    by value) over SQL; raises when one differs.  member -> name -> SHOW value."""
    from psycopg import conninfo
    from ..server.target import DsnTarget
    out: dict[str, dict[str, str]] = {}
    wrong = []
    for m in members:
        try:
            member = DsnTarget(conninfo.make_conninfo(dsn, host=m["host"], port=str(m["port"])))
            rows = member.pg_settings(want)
        except ConnectError as e:
            raise ConnectError(f"Could not connect to member {m['name']} "
                               f"({m['host']}:{m['port']}) to verify: {e.message}",
                               "Give --dsn with a user (and password) every member accepts."
                               ) from None
        out[m["name"]] = {name: r["shown"] for name, r in rows.items()}
        for name, r in rows.items():
            v, pending = want[name], r["pending_restart"]
            if pending or (v is not None and not same_value(v, r["setting"], r["unit"],
                                                            r["vartype"], name)):
                wrong.append(f"{m['name']}: {name} = {r['shown']}"
                             + (" (restart pending)" if pending else ""))
    if wrong:
        raise ServerError("After the change these members do not show the planned values: "
                          + "; ".join(wrong) + ".",
                          "A member's local configuration may override the dynamic one "
                          "(postgresql.parameters in its patroni.yml).")
    return out


# -- apply ---------------------------------------------------------------------------------------

def apply_patroni(url: str, plan: Plan, store: StateStore, *, dsn: str | None = None,
                  plan_dict: dict | None = None, dry_run: bool = False,
                  allow_unsafe_durability: bool = False) -> ApplyReport:
    api = PatroniAPI(url)
    postgres_changes(plan.changes, None, allow_unsafe_durability)   # refuse unsafe values
    info = api.call("GET", "/patroni")
    scope = (info.get("patroni") or {}).get("scope") or "?"
    sysid = info.get("database_system_identifier")
    members = api.members()
    config = api.config()
    current = dict((config.get("postgresql") or {}).get("parameters") or {})
    r = fleet.patroni_plan(plan)
    report = ApplyReport(f"Patroni cluster {scope!r} at {api.url} ({len(members)} members)",
                         dry_run=dry_run)
    report.skipped = list(r.left_out.items())
    todo = {n: v for n, v in r.settings.items()
            if n not in current or str(current[n]) != v}
    report.unchanged = [n for n in r.settings if n not in todo]
    report.diff = json.dumps({"postgresql": {"parameters": todo}}, indent=2) + "\n"
    if dry_run or not todo:
        if not todo and not dry_run:
            report.notes.append("Patroni's dynamic configuration already has every value.")
        return report
    _check_healthy(members)
    state = store.new({"kind": "patroni", "url": api.url, "scope": scope,
                       "system_identifier": sysid, "key": f"patroni:{scope}:{sysid}"},
                      plan_dict)
    state.backup_bytes("patroni-config.json", json.dumps(config, indent=2).encode())
    restart = set(r.restart)
    report.applied = [Applied(n, v, n in restart, previous=_text(current.get(n)),
                              previous_auto=_text(current.get(n))) for n, v in todo.items()]
    state.data["postgres"] = {"applied": [asdict(a) for a in report.applied],
                              "skipped": report.skipped}
    state.data["patroni"] = {"previous": {n: current.get(n) for n in todo}}
    state.save()
    report.state_id, report.state_dir = state.id, state.dir
    try:
        api.call("PATCH", "/config", {"postgresql": {"parameters": todo}})
        report.reloaded = True
        seen = wait_applied(api, _loop_wait(config), want_pending=bool(restart & set(todo)))
        restarted = restart_pending(api, seen)
        report.notes += _restart_note(restarted)
        report.restarted = bool(restarted)
        members = api.members()
        if dsn:
            shown = verify_members(members, dsn, dict(todo))
            for a in report.applied:
                a.shown = next(iter(shown.values()), {}).get(a.name)
        else:
            report.notes.append("Verified through Patroni's restart flags only: give --dsn "
                                "(user and password; host and port come from each member) "
                                "to check every member's values.")
    except (PgaccelError, KeyboardInterrupt):
        _put_back(api, state.data["patroni"]["previous"])
        state.finish("failed")
        raise
    state.finish("applied")
    return report


def _text(v: Any) -> str | None:
    return None if v is None else str(v)


def _restart_note(names: list[str]) -> list[str]:
    return ([f"Restarted through Patroni for restart-level settings: {', '.join(names)} "
             "(replicas first, the leader last)."] if names else [])


def _put_back(api: PatroniAPI, previous: dict[str, Any]) -> None:
    """Best effort after a failure: the previous values back into the dynamic config."""
    try:
        api.call("PATCH", "/config", {"postgresql": {"parameters": previous}})
    except PgaccelError:
        pass


# -- rollback --------------------------------------------------------------------------------------

def rollback_patroni(chain: list[State], report: RollbackReport, dsn: str | None) -> None:
    """Undo ``chain`` (newest first, one Patroni cluster): the parameters pgaccel changed
    get their values from before the oldest state (``null`` removes one it added), then
    the pending members are restarted and, with ``dsn``, the values checked."""
    t = chain[-1].data["target"]
    api = PatroniAPI(t["url"])
    previous: dict[str, Any] = {}
    for s in chain:                                  # newest first: the oldest wins
        previous.update(s.data.get("patroni", {}).get("previous", {}))
    config = api.config()
    _check_healthy(api.members())
    api.call("PATCH", "/config", {"postgresql": {"parameters": previous}})
    report.reloaded = True
    restart = {a["name"] for s in chain for a in s.data.get("postgres", {}).get("applied", [])
               if a.get("restart")}
    seen = wait_applied(api, _loop_wait(config), want_pending=bool(restart))
    names = restart_pending(api, seen)
    report.restarted = bool(names)
    report.notes += _restart_note(names)
    now = (api.config().get("postgresql") or {}).get("parameters") or {}
    wrong = [n for n, v in previous.items() if _text(now.get(n)) != _text(v)]
    if wrong:
        raise ServerError("Patroni's dynamic configuration does not show the previous values "
                          "of: " + ", ".join(wrong) + ".",
                          f"The configuration from before is saved in {chain[-1].dir}.")
    report.settings = {n: ("(unset: the server's default)" if v is None else str(v))
                       for n, v in previous.items()}
    if dsn:
        verify_members(api.members(), dsn, {n: _text(v) for n, v in previous.items()})
