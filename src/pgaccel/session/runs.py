"""What the benchmarking commands share around an experiment: the run in the results store,
where its files go, and its reports.

``run``, ``bench``, ``lab`` and ``calibrate`` each start a run the same way
(:func:`start_run`): open the store, create (or resume) the run, record every variant,
choose the run directory, and gather what run.json carries besides the trials.  The
:class:`RunHandle` they get back is what ``lab.experiment.Experiment`` takes as ``store``,
``run_id``, ``run_dir`` and ``info``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..session.store import Store


@dataclass(frozen=True)
class VariantRecord:
    """What the store keeps of a variant (``Store.add_variant``)."""
    name: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    server_version: str | None = None
    bindir: str | None = None
    verified: Any = None          # the lab's verification (huge pages, version, problems)


@dataclass
class RunHandle:
    """A run being recorded: its store (open until :meth:`close`), id, directory and
    run.json's extra keys.  Whatever is added to the run afterwards goes through
    :meth:`amend`, into the store and run.json together."""
    store: Store
    run_id: str
    run_dir: str
    info: dict[str, Any]

    @property
    def store_path(self) -> str:
        return self.store.path

    def close(self) -> None:
        self.store.close()

    def add_to_run_json(self, extra: dict[str, Any]) -> None:
        """Keys run.json gains after the experiment (``run --stack``'s layers and
        profiles), the file replaced atomically; nothing when run.json is not there."""
        import json
        from ..util import atomic_write_json
        path = os.path.join(self.run_dir, "run.json")
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            return
        doc.update(extra)
        atomic_write_json(path, doc)

    def amend(self, summary: dict[str, Any]) -> None:
        """A summary judged again after the experiment (a head-to-head, a calibration):
        the store's copy and run.json's (and summary.json) replaced together."""
        with Store(self.store_path) as store:
            store.set_summary(self.run_id, summary)
        amend_summary(self.run_dir, summary)


def start_run(store_path: str | None, kind: str, name: str,
              variants: Sequence[VariantRecord], *, host: Mapping[str, Any] | None = None,
              spec: Any = None, out_dir: str | None = None,
              info: Mapping[str, Any] | None = None, resume: str | None = None) -> RunHandle:
    """Open the store at ``store_path`` (None: the default), create a run of ``kind``
    named ``name`` (or, with ``resume``, mark that stored run as running again), record
    ``variants`` and choose the run directory (``out_dir`` or the user data dir's
    runs/RUN_ID).  ``info`` (plus ``kind``, and ``host`` when given) goes into run.json."""
    store = Store(store_path)
    try:
        if resume:
            run_id = store.resume_run(resume)["id"]
        else:
            run_id = store.create_run(kind, name, host=host, spec=spec)
        for v in variants:
            store.add_variant(run_id, v.name, settings=v.settings,
                              server_version=v.server_version, bindir=v.bindir,
                              verified=v.verified)
    except BaseException:
        store.close()
        raise
    doc_info: dict[str, Any] = {"kind": kind}
    if host is not None:
        doc_info["host"] = dict(host)
    doc_info.update(info or {})
    return RunHandle(store, run_id, run_dir_for(out_dir, run_id), doc_info)


def amend_summary(run_dir: str | None, summary: dict[str, Any]) -> None:
    """Put a summary computed after the experiment (a calibration's) into run.json and
    summary.json, each replaced atomically."""
    import json
    from ..util import atomic_write_json
    if not run_dir or not os.path.exists(os.path.join(run_dir, "run.json")):
        return
    with open(os.path.join(run_dir, "run.json")) as f:
        doc = json.load(f)
    doc["summary"] = summary
    atomic_write_json(os.path.join(run_dir, "run.json"), doc)
    atomic_write_json(os.path.join(run_dir, "summary.json"), summary)


def write_run_reports(run_dir: str, run_id: str | None = None) -> dict[str, str]:
    """report.html and report.md beside run.json.  Called after the results are stored, so
    a failure here loses nothing: ReportError (exit 9) says how to write them again."""
    import json
    from ..errors import ReportError
    from ..report.html import write_reports
    try:
        with open(os.path.join(run_dir, "run.json")) as f:
            return write_reports(run_dir, json.load(f))
    except (OSError, ValueError) as e:
        again = (f"`pgaccel report {run_id}`" if run_id else
                 "`pgaccel report RUN` (the run id is in run.json)")
        raise ReportError(
            f"The results are saved ({run_dir}/run.json and the results store), but the "
            f"report could not be written: {e}.",
            f"Free space or fix the directory's permissions, then run {again}.") from None


def run_dir_for(out_dir: str | None, run_id: str) -> str:
    if out_dir:
        return out_dir
    from platformdirs import user_data_dir
    return os.path.join(user_data_dir("pgaccel"), "runs", run_id)


def captures_dir(out_dir: str | None) -> str:
    """Where ``run --capture`` keeps its bundle (a new directory): ``OUT/capture`` with
    --out, else the data dir's captures/capture-TIME."""
    import time
    if out_dir:
        return os.path.join(os.path.abspath(out_dir), "capture")
    from platformdirs import user_data_dir
    return os.path.join(user_data_dir("pgaccel"), "captures",
                        time.strftime("capture-%Y%m%d-%H%M%S"))


def run_dir_of(run: dict[str, Any]) -> str:
    """Where a stored run's run.json is: the --out directory it was given, else the data
    dir's runs/RUN_ID."""
    spec = run.get("spec") if isinstance(run.get("spec"), dict) else {}
    return run_dir_for((spec or {}).get("out_dir"), run["id"])


def load_run_doc(run_dir: str, run_id: str) -> dict[str, Any]:
    """The run.json of a stored run, or NotFound saying what still has its data."""
    import json
    from ..errors import NotFound
    path = os.path.join(run_dir, "run.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        why = "is not there" if isinstance(e, FileNotFoundError) else f"cannot be read ({e})"
        raise NotFound(f"Run {run_id}'s {path} {why}, so its report cannot be made.",
                       f"The store still has its trials: `pgaccel show {run_id} --export "
                       "json`.") from None


# -- stored runs ---------------------------------------------------------------------------
def resumable_lab_run(store_path: str | None, ref: str) -> dict[str, Any]:
    """The stored lab run ``ref`` names, if it can be carried on (interrupted or failed);
    UsageError saying why not otherwise."""
    from ..errors import UsageError
    with Store(store_path) as store:
        prior = store.get_run(ref)
    if prior["kind"] != "lab":
        raise UsageError(f"Run {prior['id']} is a {prior['kind']} run, not a lab run.")
    if prior["status"] == "running":
        raise UsageError(f"Run {prior['id']} is still running (pid {prior.get('pid')}).")
    if prior["status"] == "finished":
        raise UsageError(f"Run {prior['id']} already finished.",
                         f"`pgaccel show {prior['id']}` prints its results.")
    return prior


def same_host(run: dict[str, Any], facts: Any) -> bool:
    """Whether a stored run began on this host (or did not say where)."""
    from .store import host_fingerprint
    return run.get("host_fingerprint") in (None, host_fingerprint(facts.to_dict()))
