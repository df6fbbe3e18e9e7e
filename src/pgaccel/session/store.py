"""The results store: one embedded SQLite file with every run, variant, trial and series.

Each trial is committed on its own as soon as it finishes, so an interrupted run keeps all
finished trials and can be resumed.  WAL mode lets ``pgaccel history`` read while a lab run
writes.  Raw logs live beside the database under ``logs/RUN_ID/``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import secrets
import sqlite3
import time
from contextlib import contextmanager
from pathlib import PurePath
from typing import Any, Iterator, Mapping, Sequence, TextIO

from ..errors import UsageError
from ..util import atomic_write, json_text, pid_alive

SCHEMA_VERSION = 1
RUN_KINDS = ("run", "lab", "bench", "calibrate")
RUN_STATUSES = ("running", "finished", "interrupted", "failed")
TRIAL_STATUSES = ("ok", "failed", "invalid")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    finished_at TEXT,
    kind TEXT NOT NULL CHECK (kind IN ('run', 'lab', 'bench', 'calibrate')),
    name TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL CHECK (status IN ('running', 'finished', 'interrupted', 'failed')),
    pid INTEGER,
    host_fingerprint TEXT,
    host_json TEXT,
    spec_json TEXT,
    summary_json TEXT
);
CREATE TABLE IF NOT EXISTS variants (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    settings_json TEXT,
    server_version TEXT,
    bindir TEXT,
    verified_json TEXT,
    PRIMARY KEY (run_id, name)
);
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    variant TEXT NOT NULL,
    workload TEXT NOT NULL,
    round INTEGER NOT NULL,
    clients INTEGER,
    started_at TEXT,
    duration_s REAL,
    status TEXT NOT NULL,
    metrics_json TEXT,
    primary_metric TEXT,
    primary_value REAL
);
CREATE INDEX IF NOT EXISTS trials_run ON trials (run_id, workload, variant);
CREATE TABLE IF NOT EXISTS series (
    trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    values_json TEXT NOT NULL,
    PRIMARY KEY (trial_id, kind)
);
"""


def run_id_in_path(arg: str) -> str:
    """A run id from a path to its run directory or to a file in it; anything without a
    slash is taken as an id (or a prefix of one) as it is."""
    if "/" not in arg:
        return arg
    p = PurePath(arg)
    return p.parent.name if p.suffix in (".json", ".html", ".md") else p.name


def default_store_path() -> str:
    """``$PGACCEL_STORE`` if set, else ``<user data dir>/pgaccel/results.sqlite``."""
    env = os.environ.get("PGACCEL_STORE")
    if env:
        return env
    import platformdirs
    return os.path.join(platformdirs.user_data_dir("pgaccel"), "results.sqlite")


def host_fingerprint(facts: Mapping[str, Any]) -> str:
    """A short stable hash of what makes two hosts comparable: architecture, CPU model,
    logical CPUs, memory (rounded to GiB) and kernel release.  Accepts ``HostFacts.to_dict()``
    (arch, cpu_model, logical_cpus, memory_total_bytes, kernel) or the short names
    ``cpus`` / ``memory_bytes``."""
    mem = facts.get("memory_total_bytes", facts.get("memory_bytes")) or 0
    key = {
        "arch": str(facts.get("arch") or ""),
        "cpu_model": " ".join(str(facts.get("cpu_model") or "").split()),
        "cpus": int(facts.get("logical_cpus", facts.get("cpus")) or 0),
        "memory_gib": int(round(int(mem) / 2**30)),
        "kernel": str(facts.get("kernel") or ""),
    }
    blob = json.dumps(key, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _dump(obj: Any) -> str | None:
    return None if obj is None else json_text(obj, indent=None)


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        elif isinstance(v, (list, tuple)):
            out[key] = json_text(v, indent=None)
        else:
            out[key] = v
    return out


class Store:
    """The results database.  ``Store(None)`` opens :func:`default_store_path`."""

    def __init__(self, path: str | None = None):
        self.path = os.path.abspath(path or default_store_path())
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA foreign_keys = ON")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA busy_timeout = 30000")
            version = self._version()
            if version is None:
                with self._tx():
                    for stmt in filter(str.strip, _SCHEMA.split(";")):
                        self._db.execute(stmt)
                    if self._version() is None:
                        self._db.execute("INSERT INTO schema_version VALUES (?)",
                                         (SCHEMA_VERSION,))
                version = self._version()
            if version is not None and version > SCHEMA_VERSION:
                raise UsageError(f"The results store {self.path} has schema version "
                                 f"{version}; this pgaccel knows {SCHEMA_VERSION}.",
                                 "Upgrade pgaccel or pass --store with another file.")
        except sqlite3.DatabaseError as e:
            raise UsageError(f"Cannot open the results store {self.path}: {e}.",
                             "Pass --store PATH (or set $PGACCEL_STORE) to use another "
                             "file.") from e

    # -- plumbing ------------------------------------------------------------------------
    def _version(self) -> int | None:
        if not self._db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                "name = 'schema_version'").fetchone():
            return None
        return self._db.execute("SELECT max(version) FROM schema_version").fetchone()[0]

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def log_dir(self, run_id: str) -> str:
        """Directory for a run's raw logs, beside the database (created)."""
        d = os.path.join(os.path.dirname(self.path), "logs", run_id)
        os.makedirs(d, exist_ok=True)
        return d

    # -- writing -------------------------------------------------------------------------
    def create_run(self, kind: str, name: str = "", *, host: Mapping[str, Any] | None = None,
                   spec: Any = None) -> str:
        """A new run with status 'running'; returns its id, e.g. '20261121-193301-ab12'."""
        if kind not in RUN_KINDS:
            raise ValueError(f"kind must be one of {RUN_KINDS}")
        fp = host_fingerprint(host) if host else None
        for _ in range(20):
            rid = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)
            try:
                with self._tx() as db:
                    db.execute("INSERT INTO runs (id, created_at, kind, name, status, pid, "
                               "host_fingerprint, host_json, spec_json) "
                               "VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?)",
                               (rid, _now(), kind, name, os.getpid(), fp, _dump(host),
                                _dump(spec)))
                return rid
            except sqlite3.IntegrityError:
                continue
        raise RuntimeError("could not allocate a unique run id")  # pragma: no cover

    def add_variant(self, run_id: str, name: str, *, settings: Mapping[str, Any] | None = None,
                    server_version: str | None = None, bindir: str | None = None,
                    verified: Any = None) -> None:
        """Record (or update, e.g. after verification) a variant of a run."""
        with self._tx() as db:
            db.execute("INSERT INTO variants VALUES (?, ?, ?, ?, ?, ?) "
                       "ON CONFLICT (run_id, name) DO UPDATE SET settings_json = "
                       "excluded.settings_json, server_version = excluded.server_version, "
                       "bindir = excluded.bindir, verified_json = excluded.verified_json",
                       (run_id, name, _dump(dict(settings or {})), server_version, bindir,
                        _dump(verified)))

    def add_trial(self, run_id: str, *, variant: str, workload: str, round: int,
                  clients: int | None = None, started_at: str | None = None,
                  duration_s: float | None = None, status: str = "ok",
                  metrics: Mapping[str, Any] | None = None, primary_metric: str = "tps",
                  primary_value: float | None = None,
                  series: Mapping[str, Sequence[float]] | None = None) -> int:
        """Write one finished trial and its per-second series atomically and commit.
        ``primary_value`` defaults to ``metrics[primary_metric]``.  Returns the trial id."""
        if status not in TRIAL_STATUSES:
            raise ValueError(f"trial status must be one of {TRIAL_STATUSES}")
        metrics = dict(metrics or {})
        if primary_value is None and isinstance(metrics.get(primary_metric), (int, float)):
            primary_value = float(metrics[primary_metric])
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO trials (run_id, variant, workload, round, clients, started_at, "
                "duration_s, status, metrics_json, primary_metric, primary_value) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, variant, workload, int(round), clients, started_at or _now(),
                 duration_s, status, _dump(metrics), primary_metric, primary_value))
            tid = int(cur.lastrowid)
            for kind, values in (series or {}).items():
                db.execute("INSERT INTO series VALUES (?, ?, ?)",
                           (tid, kind, json_text([float(v) for v in values], indent=None)))
        return tid

    def finish_run(self, run_id: str, status: str = "finished", summary: Any = None) -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {RUN_STATUSES}")
        with self._tx() as db:
            db.execute("UPDATE runs SET status = ?, finished_at = ?, "
                       "summary_json = coalesce(?, summary_json) WHERE id = ?",
                       (status, _now() if status != "running" else None, _dump(summary),
                        run_id))

    def set_summary(self, run_id: str, summary: Any) -> None:
        """Replace a run's summary (one judged again after the experiment), its status as
        it is."""
        with self._tx() as db:
            db.execute("UPDATE runs SET summary_json = ? WHERE id = ?", (_dump(summary), run_id))

    def resume_run(self, run_id: str) -> dict:
        """Mark a stopped run as running again (by this process); returns :meth:`get_run`."""
        rid = self.resolve(run_id)
        with self._tx() as db:
            db.execute("UPDATE runs SET status = 'running', finished_at = NULL, pid = ? "
                       "WHERE id = ?", (os.getpid(), rid))
        return self.get_run(rid)

    # -- reading -------------------------------------------------------------------------
    def resolve(self, prefix: str) -> str:
        """The full id of the run whose id is ``prefix`` or starts with it (unique), or of
        the run whose directory (or a file in it: run.json, report.html) ``prefix`` names,
        as the end of a run prints them."""
        prefix = run_id_in_path(prefix)
        rows = self._db.execute("SELECT id FROM runs WHERE id = ? OR substr(id, 1, ?) = ? "
                                "ORDER BY id LIMIT 11", (prefix, len(prefix), prefix)).fetchall()
        ids = [r[0] for r in rows]
        if prefix in ids:
            return prefix
        if not ids:
            raise UsageError(f"No run {prefix!r} in {self.path}.",
                             "`pgaccel history` lists the stored runs.")
        if len(ids) > 1:
            shown = ", ".join(ids[:10]) + (" ..." if len(ids) > 10 else "")
            raise UsageError(f"Run id prefix {prefix!r} is ambiguous: {shown}.",
                             "Give more characters of the id.")
        return ids[0]

    def _run_dict(self, row: sqlite3.Row) -> dict:
        d = dict(row)
        d.pop("results_json", None)   # a column older stores still have; never used
        for col in ("host", "spec", "summary"):
            d[col] = _load(d.pop(f"{col}_json"))
        # a 'running' run whose process is gone was interrupted (killed, machine rebooted)
        if d["status"] == "running" and not pid_alive(d.get("pid")):
            d["status"] = "interrupted"
        return d

    def list_runs(self, limit: int | None = 50, kind: str | None = None) -> list[dict]:
        """Newest first; with trial counts, without trials."""
        q = ("SELECT r.*, (SELECT count(*) FROM trials t WHERE t.run_id = r.id) AS n_trials "
             "FROM runs r" + (" WHERE kind = ?" if kind else "") + " ORDER BY id DESC")
        args: list[Any] = [kind] if kind else []
        if limit is not None:
            q += " LIMIT ?"
            args.append(limit)
        return [self._run_dict(r) for r in self._db.execute(q, args)]

    def trials_for(self, run_id: str, *, workload: str | None = None,
                   variant: str | None = None, status: str | None = None,
                   with_series: bool = False) -> list[dict]:
        """Trials of a run in the order they were written (filters optional)."""
        q, args = "SELECT * FROM trials WHERE run_id = ?", [run_id]
        for col, val in (("workload", workload), ("variant", variant), ("status", status)):
            if val is not None:
                q += f" AND {col} = ?"
                args.append(val)
        out = []
        for r in self._db.execute(q + " ORDER BY id", args).fetchall():
            t = dict(r)
            t["metrics"] = _load(t.pop("metrics_json")) or {}
            if with_series:
                t["series"] = {s["kind"]: json.loads(s["values_json"]) for s in self._db.execute(
                    "SELECT kind, values_json FROM series WHERE trial_id = ?", (t["id"],))}
            out.append(t)
        return out

    def get_run(self, run_id: str, *, with_series: bool = False) -> dict:
        """The run (id or unique prefix) with its ``variants`` and ``trials``."""
        rid = self.resolve(run_id)
        run = self._run_dict(self._db.execute("SELECT * FROM runs WHERE id = ?",
                                              (rid,)).fetchone())
        run["variants"] = []
        for r in self._db.execute("SELECT * FROM variants WHERE run_id = ? ORDER BY rowid",
                                  (rid,)):
            v = dict(r)
            v["settings"] = _load(v.pop("settings_json")) or {}
            v["verified"] = _load(v.pop("verified_json"))
            run["variants"].append(v)
        run["trials"] = self.trials_for(rid, with_series=with_series)
        return run

    # -- export --------------------------------------------------------------------------
    def export_json(self, run_id: str) -> dict:
        """Everything about a run, series included, as JSON-serializable data."""
        return self.get_run(run_id, with_series=True)

    def export_csv(self, run_id: str, dest: str | TextIO) -> int:
        """One row per trial with metrics flattened (``latency.p99``), rounds numbered from 1
        as `pgaccel show` numbers them, to ``dest`` (a path, replaced atomically, or an open
        text stream such as stdout); returns the row count."""
        rid = self.resolve(run_id)
        trials = self.trials_for(rid)
        fixed = ["run_id", "trial_id", "variant", "workload", "round", "clients", "started_at",
                 "duration_s", "status", "primary_metric", "primary_value"]
        rows, extra = [], []
        for t in trials:
            flat = _flatten(t["metrics"], "metric.")
            extra += [k for k in flat if k not in extra]
            row = {k: t.get(k) for k in fixed}
            row["trial_id"] = t["id"]
            row["round"] = t["round"] + 1
            row.update(flat)
            rows.append(row)
        buf = io.StringIO(newline="")
        w = csv.DictWriter(buf, fieldnames=fixed + extra, restval="")
        w.writeheader()
        w.writerows(rows)
        if isinstance(dest, str):
            atomic_write(dest, buf.getvalue())
        else:
            dest.write(buf.getvalue())
        return len(rows)
