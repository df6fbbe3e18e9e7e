"""Workloads: each a small module registering itself in ``base.REGISTRY``."""

from __future__ import annotations

import importlib

# Modules that register workloads; a module that is absent is skipped.
WORKLOAD_MODULES = ["builtin", "sysbench", "insertbench", "parallel_scan", "in_server_loop",
                    "data_size"]


def load_all() -> None:
    for mod in WORKLOAD_MODULES:
        try:
            importlib.import_module(f".{mod}", __name__)
        except ModuleNotFoundError as e:
            if e.name and e.name.endswith(f"workloads.{mod}"):
                continue
            raise
