"""Reports opened in a real browser, as a DBA would open them: the distribution's headless
Chromium loads report.html of a lab run (two configs, a pgbench workload and the Insert
Benchmark's steps), of a bench client sweep and of a calibration, at 900 px wide, written by
`pgaccel report` from runs pgaccel recorded (tests/fixtures/reports/record.py; a live lab run
here took 3.7 minutes for the same checks).  No console
error, no request leaves the file, every chart is drawn with its axis labels, the verdict lines
come first, nothing is wider than the window.  Screenshots are kept in test-artifacts/ (or
$PGACCEL_TEST_ARTIFACTS)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from browser import chromium, visit
from helpers import pgaccel

RECORDED = Path(__file__).resolve().parent / "fixtures" / "reports"
ARTIFACTS = Path(os.environ.get("PGACCEL_TEST_ARTIFACTS")
                 or Path(__file__).resolve().parent.parent / "test-artifacts")

if chromium() is None:
    if os.environ.get("CI"):
        raise RuntimeError("Chromium is missing: install.sh installs it for these tests")
    pytest.skip("no Chromium here (install.sh installs it on Debian; Ubuntu ships it as a "
                "snap only)", allow_module_level=True)

# What the page shows, measured by the browser: every chart's size, shapes and text, where
# the verdict lines are, how wide the page is, and any reference to another origin.
PROBE = r"""(() => {
  const charts = [...document.querySelectorAll('svg.chart')].map(s => {
    const r = s.getBoundingClientRect();
    return {title: (s.querySelector('title') || {}).textContent || '',
            w: r.width, h: r.height,
            shapes: s.querySelectorAll('path, rect, use, circle, polygon').length,
            texts: [...s.querySelectorAll('text')].map(t => t.textContent.trim()),
            boxes: [...s.querySelectorAll('text')].map(t => {
              const b = t.getBoundingClientRect();
              return [t.textContent.trim(), b.left, b.top, b.right, b.bottom];
            })};
  });
  const v = document.getElementById('verdicts');
  const firstH2 = document.querySelector('h2');
  const refs = [...document.querySelectorAll('[src], [href]')]
      .map(e => e.getAttribute('src') || e.getAttribute('href'));
  return {charts, verdictTop: v ? v.getBoundingClientRect().top : null,
          verdictBeforeH2: !!(v && firstH2 &&
              (v.compareDocumentPosition(firstH2) & Node.DOCUMENT_POSITION_FOLLOWING)),
          verdicts: v ? [...v.querySelectorAll('li')].map(li => li.innerText) : [],
          scrollWidth: document.documentElement.scrollWidth,
          refs, rqpsCells: document.querySelectorAll('td.faster, td.slower').length,
          headings: [...document.querySelectorAll('h2')].map(h => h.textContent)};
})()"""


def _label_like(t: str) -> bool:
    return len(t) >= 6 and bool(re.search(r"[a-z]{3}", t))


def _over_title(chart: dict) -> list[str]:
    """Texts of a chart drawn over its title (a value label above the highest dot once
    ran into it when the dot was near the top of the axis)."""
    titles = [b for b in chart["boxes"] if b[0] == chart["title"]]
    if not titles:
        return []
    _, l0, t0, r0, b0 = titles[0]
    return [b[0] for b in chart["boxes"] if b[0] != chart["title"] and b[0]
            and b[1] < r0 - 0.5 and b[3] > l0 + 0.5 and b[2] < b0 - 0.5 and b[4] > t0 + 0.5]


def _open(report: Path, name: str) -> dict:
    page = visit(report.resolve().as_uri(), PROBE, width=900)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"{name}.png").write_bytes(page.screenshot)
    assert page.screenshot.startswith(b"\x89PNG") and len(page.screenshot) > 20_000
    assert page.errors == [], page.errors
    outside = [u for u in page.requests if not u.startswith(("file:", "data:", "about:"))]
    assert outside == [], outside
    r = page.result
    assert all(not re.match(r"^[a-z]+://", ref) or ref.startswith("file:")
               for ref in r["refs"]), r["refs"]
    assert r["charts"], "no chart"
    for c in r["charts"]:
        assert c["w"] > 200 and c["h"] > 100, c["title"]
        assert c["shapes"] > 5, c["title"]
        labels = [t for t in c["texts"] if _label_like(t) and t != c["title"]]
        assert len(labels) >= 2, (c["title"], c["texts"])           # both axes labelled
        assert _over_title(c) == [], (c["title"], _over_title(c))   # nothing runs into it
    assert r["verdictBeforeH2"] and r["verdictTop"] is not None and r["verdictTop"] < 200
    assert r["verdicts"] and r["scrollWidth"] <= 905, r["scrollWidth"]
    return r


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The recorded runs (tests/fixtures/reports/record.py made them with pgaccel on
    throwaway servers) with their reports written again by `pgaccel report DIR`, the path
    a run directory takes after an upgrade or on another machine: from run.json alone."""
    import shutil
    d = tmp_path_factory.mktemp("reports")
    env = {"PGACCEL_STORE": str(d / "empty-store.sqlite")}      # no store holds them
    out = {}
    for name in ("lab", "sweep", "calibrate"):
        shutil.copytree(RECORDED / name, d / name)
        r = pgaccel("report", str(d / name), env=env, timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "Traceback" not in r.stderr
        out[name] = d / name
    return out


def test_lab_report_in_a_browser(runs):
    r = _open(runs["lab"] / "report.html", "lab")
    verdicts = " ".join(r["verdicts"])
    assert "small-buffers vs defaults" in verdicts
    assert re.search(r"faster|slower|equivalent|no significant difference|not enough evidence",
                     verdicts)
    titles = " ".join(c["title"] for c in r["charts"])
    # the lab measures side by side (a server per variant): series per slice; its step
    # workload's rQPS heatmap with the verdicts and the per-operation cost bars
    for what in ("every trial", "throughput per slice", "latency percentiles",
                 "latency distribution", "latency per slice", "CPU per operation",
                 "wait events", "rQPS per step", "CPU µs/op relative to defaults",
                 "KB written/op relative to defaults"):
        assert what in titles, what
    assert any("per step" in h for h in r["headings"]), r["headings"]
    html = (runs["lab"] / "report.html").read_text()
    assert "rQPS and costs per operation of insert-benchmark" in html
    html = (runs["lab"] / "report.html").read_text()
    assert re.search(r"<td>16\.0 MB</td><td class=\"l\">no: reads go", html)  # data vs cache
    md = (runs["lab"] / "report.md").read_text()
    assert md.startswith("# pgaccel lab ") and "small-buffers vs defaults" in md
    assert "**Method.**" in md


def test_sweep_report_in_a_browser(runs):
    r = _open(runs["sweep"] / "report.html", "bench-sweep")
    assert any("throughput by client count" in c["title"] for c in r["charts"])
    assert "select-only, 1 client: " in r["verdicts"][0]


def test_calibration_report_in_a_browser(runs):
    r = _open(runs["calibrate"] / "report.html", "calibrate")
    assert "noise" in r["verdicts"][0] and "smallest detectable difference" in r["verdicts"][0]
    assert any("Noise floor" in h for h in r["headings"])


def test_value_labels_stay_clear_of_the_chart_title(tmp_path):
    """Run 20261125-085928-ed5a's select-only trials: the tuned config's highest trial
    (121,419 tps) sat at the top of the axis, and its two-line label (the geometric mean and
    +7.8%) was drawn over the chart's title.  Drawn as a report draws it, in Chromium."""
    from pgaccel.decide.effect import Comparison
    from pgaccel.report.charts import trials_chart, trials_ylim
    values = {"baseline": [101604, 97053, 99334, 98218, 110792, 107815, 95004, 94943, 96090],
              "tuned": [109850, 111746, 108360, 121419, 107018, 105508, 101614, 102201,
                        103405]}
    cmp = Comparison(ratio=1.078, ci_low=1.004, ci_high=1.157, method="paired-log-t",
                     verdict="faster", n_base=9, n_other=9, p_value=0.0167, explain="",
                     n_pairs=9)
    svg = trials_chart("select-only", "tps", values, {"tuned": cmp}, level="97.9%")
    page = tmp_path / "chart.html"
    page.write_text(f"<!doctype html><html><body>{svg}</body></html>")
    r = visit(page.as_uri(), PROBE, width=900).result
    (chart,) = r["charts"]
    assert any(t.startswith("107,") for t in chart["texts"]), chart["texts"]
    assert _over_title(chart) == [], _over_title(chart)
    # the axis: raised above the label, never past twice the highest trial
    assert trials_ylim(122_000, 121_419, 121_419) == pytest.approx(1.2 * 121_419)
    assert trials_ylim(200_000, 121_419, 121_419) == 200_000
    assert trials_ylim(900_000, 121_419, 121_419) == 2 * 121_419
