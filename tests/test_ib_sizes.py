"""The Insert Benchmark's load steps sized to the host (``load_seconds``): the sizes chosen
from a measured rate, the sentence that tells them, the knob's bounds, and a resumed run
taking the sizes its stored rounds ran with instead of measuring again."""

from __future__ import annotations

import pytest

from pgaccel.decide.model import Trial, Variant, WorkloadSpec
from pgaccel.errors import UsageError
from pgaccel.lab.experiment import Experiment
from pgaccel.report.facts import facts, sized_text
from pgaccel.workloads.base import RunParams, get_workload
from pgaccel.workloads.ibscripts import SIZE_FLOOR, config, host_sizes

EXAMPLE = {"rows_per_table": 500_000, "i1_rows": 100_000, "i2_rows": 20_000, "index_passes": 2}


def cfg(clients=2, **over):
    return config(RunParams(clients=clients, options={**EXAMPLE, **over}))


@pytest.mark.parametrize("rate, secs, want", [
    # this 2.3 GHz VM: 75,000 inserts/s, 6 s a variant -> 225,000 rows a table of 500,000;
    # l.x's two passes over 45% of the rows become five (2 / 0.45 = 4.4, rounded up)
    (75_000, 6, (225_000, 45_000, 9_000, 5, 0.45)),
    # rounded to 100s: 77,777 * 7 / 2 = 272,219.5 a table (54.4439% of every size)
    (77_777, 7, (272_200, 54_400, 10_900, 4, 0.5444)),
    # exactly half the rows: exactly twice the passes (not three from rounding error)
    (50_000, 10, (250_000, 50_000, 10_000, 4, 0.5)),
    # a host that loads the rows given within the seconds keeps them (never more)
    (400_000, 6, (500_000, 100_000, 20_000, 2, 1.0)),
    (1_000_000, 60, (500_000, 100_000, 20_000, 2, 1.0)),
    # a very slow host stops at the floor, not at a queue of a few commits, and at 10 passes
    (1_000, 6, (20_000, 5_000, 1_000, 10, 0.04)),
])
def test_the_load_steps_are_cut_by_one_share_so_l_i0_lasts_the_seconds(rate, secs, want):
    got = host_sizes(cfg(), rate, secs)
    assert (got["rows_per_table"], got["i1_rows"], got["i2_rows"],
            got["index_passes"]) == want[:4]
    assert got["factor"] == pytest.approx(want[4], abs=1e-4)


def test_sizes_follow_the_tables_and_never_rise_above_what_is_given():
    # four tables share the rate: each gets a quarter of 75,000 * 6
    assert host_sizes(cfg(clients=4), 75_000, 6)["rows_per_table"] == 112_500 // 100 * 100
    # a size given below the floor stays as given
    small = host_sizes(cfg(i2_rows=500), 1_000, 6)
    assert small["i2_rows"] == 500 and small["rows_per_table"] == SIZE_FLOOR["rows_per_table"]
    for bad in ((0, 6), (75_000, 0), (-1, 6)):
        with pytest.raises(ValueError):
            host_sizes(cfg(), *bad)


def test_load_seconds_out_of_bounds_is_refused_before_anything_runs():
    wl = get_workload("insert-benchmark")
    for bad in ("0.1", "7200", "-3"):
        with pytest.raises(UsageError, match="load_seconds"):
            wl.size_to_host(None, RunParams(clients=2, options={**EXAMPLE,
                                                                "load_seconds": bad}))
    # without the knob (or with 0, in any spelling) nothing is measured (no server needed)
    for off in ({}, {"load_seconds": 0}, {"load_seconds": "0.0"}, {"load_seconds": ""}):
        params = RunParams(clients=2, options={**EXAMPLE, **off})
        assert not wl.sizes_to_host(params)
        assert wl.size_to_host(None, params) is None
    assert wl.sizes_to_host(RunParams(clients=2, options={**EXAMPLE, "load_seconds": "5"}))
    assert "load_seconds" in wl.knobs


SIZED = {"load_seconds": 6.0, "probe_rows": 200_000, "probe_inserts_per_s": 74_210.4,
         "given": dict(EXAMPLE), "rows_per_table": 222_600, "i1_rows": 44_500,
         "i2_rows": 8_900, "index_passes": 5, "factor": 0.4452}


def test_the_sizes_are_said_in_one_sentence():
    assert sized_text(SIZED) == (
        "l.i0 alone ran 74,210 inserts/s (200,000 rows): 222,600 rows a table (given "
        "500,000), l.i1 44,500 (given 100,000), l.i2 8,900 (given 20,000), 45% of the rows, "
        "so l.i0 lasts about 6 s a variant; l.x builds its indexes 5 times (given 2), so it "
        "indexes at least the rows given")
    kept = {**SIZED, "probe_inserts_per_s": 400_000, **EXAMPLE, "factor": 1.0}
    assert sized_text(kept) == (
        "l.i0 alone ran 400,000 inserts/s (200,000 rows), so the rows given (500,000 a "
        "table) last at most about 6 s of l.i0 a variant: kept")
    rows = dict(facts({"run_id": "20261129-140000-abcd", "sized": {
        "insert-benchmark c=2": SIZED}, "trials": [], "workloads": []}))
    assert rows["sized to the host (insert-benchmark c=2)"] == sized_text(SIZED)


def test_a_resumed_run_takes_the_sizes_its_stored_rounds_ran_with():
    """No server: the stored trials say the sizes, so nothing is measured again (a
    measurement would need the base's server, which this experiment does not have)."""
    wl = get_workload("insert-benchmark")
    ws = WorkloadSpec(wl, RunParams(clients=2, options={**EXAMPLE, "load_seconds": 6}))
    stored = Trial("A", "insert-benchmark/l.i0", 0, 2, 0.0, 70_000.0, "inserts/s",
                   {"sized": SIZED, "step": "l.i0"})
    other = Trial("A", "insert-benchmark/l.i0", 0, 4, 0.0, 70_000.0, "inserts/s",
                  {"sized": {**SIZED, "rows_per_table": 1}, "step": "l.i0"})   # c=4's
    said = []
    exp = Experiment(None, [Variant("A"), Variant("B")], [ws], trials=[other, stored],
                     on_event=lambda kind, **kw: said.append((kind, kw)))
    exp._size_to_host(ws)
    opts = ws.params.options
    assert (opts["rows_per_table"], opts["i1_rows"], opts["i2_rows"],
            opts["index_passes"]) == (222_600, 44_500, 8_900, 5)
    assert exp.info["sized"]["insert-benchmark c=2"] == SIZED
    assert [k for k, _ in said] == ["sized"] and said[0][1]["resumed"] is True
