"""What the benchmarking commands share around an experiment: where a run's files go and
its reports."""

from __future__ import annotations

import os
from typing import Callable


def write_run_reports(run_dir: str, say: Callable[[str], None] = lambda m: None
                      ) -> dict[str, str]:
    """report.html and report.md beside run.json (a failure here never loses the run)."""
    import json
    from ..report.html import write_reports
    try:
        with open(os.path.join(run_dir, "run.json")) as f:
            return write_reports(run_dir, json.load(f))
    except (OSError, ValueError) as e:
        say(f"Could not write the HTML report: {e}")
        return {}


def run_dir_for(out_dir: str | None, run_id: str) -> str:
    if out_dir:
        return out_dir
    from platformdirs import user_data_dir
    return os.path.join(user_data_dir("pgaccel"), "runs", run_id)
