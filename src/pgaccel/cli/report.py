"""`pgaccel report RUN`: a stored run's report, made again from its run.json (after an
upgrade of pgaccel, or in another format)."""

from __future__ import annotations

import sys

import click

from ..util import json_text
from .common import STORE_OPT, console

FORMATS = ("html", "md", "json", "csv")


def _search_report(ref: str, form: str | None, output: str | None) -> bool:
    """The page of a search when ``ref`` names one (its id or directory): True if written."""
    import os
    from ..errors import UsageError
    from ..session.search import load_search, searches_dir
    path = ref if os.path.isfile(os.path.join(ref, "search.json")) else \
        os.path.join(searches_dir(), ref)
    if not os.path.isfile(os.path.join(path, "search.json")):
        return False
    if form not in (None, "html", "json"):
        raise UsageError(f"A search's report is html (its page) or json (its journal), not "
                         f"{form}.", "Give --format html or json, or none.")
    from ..report.search_html import render_search_html, write_search_report
    journal = load_search(path)
    if form is None:
        console.print(f"Report of search {journal['id']}: "
                      f"{write_search_report(path, journal)}")
        return True
    text = render_search_html(journal) if form == "html" else \
        json_text(journal) + "\n"
    if output in (None, "-"):
        sys.stdout.write(text)
    else:
        from ..util import atomic_write
        atomic_write(output, text)
        console.print(f"Report of search {journal['id']} ({form}): {output}")
    return True


@click.command()
@click.argument("run_id", metavar="RUN")
@click.option("--format", "-f", "form", type=click.Choice(FORMATS),
              help="One format (default: report.html and report.md beside run.json); csv: "
                   "one row per trial with every metric.")
@click.option("--output", "-o", metavar="PATH", type=click.Path(dir_okay=False),
              help="With --format: the file to write ('-' or none: stdout).")
@STORE_OPT
def report(run_id, form, output, store_path) -> None:
    """Write the report of a stored run (id, unique prefix or its run directory) again: report.html and
    report.md in its run directory, or one format to a file or stdout.  A run directory
    needs no store (its run.json is enough; csv needs the store's trials).  The id of a search
    (`tune --search`) writes the search's page, report.html in its directory."""
    from ..errors import UsageError
    from ..session.runs import load_run_doc, run_dir_of
    from ..session.stored import export_csv, stored_run
    if output and not form:
        raise UsageError("--output names the file of one format.",
                         "Add --format html, md, json or csv.")
    if _search_report(run_id, form, output):
        return
    if form == "csv":                      # one row per trial, from the store
        to_stdout = output in (None, "-")
        rid, n = export_csv(store_path, run_id, sys.stdout if to_stdout else output)
        if not to_stdout:
            console.print(f"Report of {rid} (csv, {n} trials): {output}")
        return
    import os
    if os.path.isfile(os.path.join(run_id, "run.json")):
        # a run directory: run.json is all a report needs, so one copied from another
        # machine (or kept after its store is gone) is reported without the store
        run_dir = run_id
        doc = load_run_doc(run_dir, run_id)
        rid = str(doc.get("run_id") or run_id)
    else:
        run = stored_run(store_path, run_id)
        run_dir, rid = run_dir_of(run), run["id"]
        doc = load_run_doc(run_dir, rid)
    from ..report.html import render_html, render_markdown
    if not form:
        from ..session.runs import write_run_reports
        paths = write_run_reports(run_dir, rid)
        console.print(f"Report of {rid}: {paths['html']} and {paths['markdown']}")
        return
    text = {"html": lambda: render_html(doc), "md": lambda: render_markdown(doc),
            "json": lambda: json_text(doc) + "\n"}[form]()
    if output in (None, "-"):
        sys.stdout.write(text)
        return
    from ..util import atomic_write
    atomic_write(output, text)
    console.print(f"Report of {rid} ({form}): {output}")

