"""Reading the results store for `history`, `show`, `compare` and `report`: each function
opens the store, answers and closes it, so the commands render plain data."""

from __future__ import annotations

from typing import Any, TextIO

from .store import Store


def list_runs(store_path: str | None, *, limit: int, kind: str | None
              ) -> tuple[str, list[dict[str, Any]]]:
    """(the store's path, its runs newest first)."""
    with Store(store_path) as store:
        return store.path, store.list_runs(limit=limit, kind=kind)


def stored_run(store_path: str | None, ref: str) -> dict[str, Any]:
    """One run (id, unique prefix or run directory) with its variants and trials."""
    with Store(store_path) as store:
        return store.get_run(store.resolve(ref))


def export_json(store_path: str | None, ref: str) -> dict[str, Any]:
    """Everything about one run, series included."""
    with Store(store_path) as store:
        return store.export_json(store.resolve(ref))


def export_csv(store_path: str | None, ref: str, output: str | TextIO) -> tuple[str, int]:
    """One row per trial to ``output`` (a path or a text stream): (run id, rows)."""
    with Store(store_path) as store:
        rid = store.resolve(ref)
        return rid, store.export_csv(rid, output)


def compare_stored(store_path: str | None, ref_a: str, ref_b: str, *,
                   min_effect: float) -> dict[str, Any]:
    """Run B against run A (decide/crossrun.compare_runs)."""
    from ..decide.crossrun import compare_runs
    with Store(store_path) as store:
        return compare_runs(store.get_run(ref_a), store.get_run(ref_b), min_effect=min_effect)
