"""Workload metadata (`pgaccel workloads --json`), parameters, and the client-CPU warning."""

from __future__ import annotations

import json
import os
import time

import pytest

from pgaccel.errors import UsageError
from pgaccel.workloads.base import BenchContext, RunParams, get_workload
from pgaccel.workloads.steps import (HostCpu, StepWorkload, applied_knobs,
                                     client_cpu_warning, describe, list_workloads, option,
                                     params_for, warnings_for)

NAMES = {"select-only", "simple-update", "tpcb-like", "sysbench-read-only",
         "sysbench-read-write", "sysbench-point-select", "sysbench-write-only",
         "insert-benchmark", "parallel-scan", "in-server-loop", "data-size-sweep"}
STEP_WORKLOADS = {"insert-benchmark", "parallel-scan", "in-server-loop", "data-size-sweep"}


def test_every_workload_is_listed_with_its_metadata():
    listed = {w["name"]: w for w in list_workloads()}
    assert NAMES <= set(listed)
    json.dumps(listed)                                  # JSON-serialisable as is
    for name in NAMES:
        w = listed[name]
        assert set(w) == {"name", "summary", "kind", "unit", "writes", "defaults", "knobs"}
        assert w["summary"] and w["unit"]
        assert w["kind"] == ("steps" if name in STEP_WORKLOADS else "single")
        assert w["knobs"] and ("clients" in w["knobs"]) == (name != "parallel-scan")
    assert listed["sysbench-read-write"]["writes"] and not listed["sysbench-read-only"]["writes"]
    assert "driver" in listed["sysbench-read-only"]["knobs"]
    assert "size" in listed["insert-benchmark"]["knobs"]
    assert listed["insert-benchmark"]["unit"] == "inserts/s"
    assert "duration" not in listed["insert-benchmark"]["knobs"]     # sized by `size`


@pytest.mark.parametrize("name, applies", [
    # the Insert Benchmark is sized by its options: no scale, no run length, no threads
    ("insert-benchmark", ["clients", "protocol", "options"]),
    ("select-only", ["clients", "threads", "duration", "warmup", "rate", "protocol", "scale",
                     "options"]),
    # its steps last `duration`; no rate (the loop runs as fast as it goes)
    ("in-server-loop", ["clients", "threads", "duration", "warmup", "protocol", "scale",
                        "options"]),
    ("sysbench-read-only", ["clients", "threads", "duration", "warmup", "rate", "protocol",
                            "scale", "options"]),
])
def test_applied_knobs_are_the_run_parameters_a_workload_reads(name, applies):
    """What run.json says a workload's run was (the lab report's facts read it): the Insert
    Benchmark's said "scale 10", a knob it does not have."""
    assert sorted(applied_knobs(get_workload(name))) == sorted(applies)


def test_params_for_merges_defaults_overrides_and_options():
    wl = get_workload("sysbench-read-only")
    p = params_for(wl)
    assert (p.scale, p.clients, p.options["table_size"]) == (4, 2, 100_000)
    p = params_for(wl, {"clients": 8, "table_size": 500, "driver": "pgbench",
                        "options": {"rand_type": "uniform"}, "rate": None})
    assert p.clients == 8 and p.rate is None
    assert p.options == {"table_size": 500, "driver": "pgbench", "rand_type": "uniform"}
    assert option(p, "table_size", 1, int) == 500 and option(p, "missing", 7, int) == 7
    with pytest.raises(UsageError):
        option(RunParams(options={"n": "lots"}), "n", 1, int)


def test_client_cpu_warning_threshold():
    assert client_cpu_warning(3.9, 10.0) is None
    w = client_cpu_warning(4.5, 10.0)
    assert w and "45%" in w and "load generator" in w
    assert client_cpu_warning(None, 10.0) is None and client_cpu_warning(1.0, 0) is None
    assert warnings_for({"client_cpu_s": 6.0, "host_cpu_busy_s": 10.0})
    assert warnings_for({"client_cpu_s": 1.0, "host_cpu_busy_s": 10.0}) == []
    # a count from a sample of pgbench's log: said when it errs more than 0.5%
    assert warnings_for({"log_sampling": 0.13, "log_lines": 2_300_000,
                         "count_error": 0.00062}) == []
    assert warnings_for({"log_sampling": 0.013, "log_lines": 30_000,
                         "count_error": 0.0057}) == [
        "its count is a 0.013 sample of pgbench's log, 30,000 lines: ±0.57% at one standard "
        "error (the whole log would not have fitted in RAM)"]


def test_host_cpu_counts_busy_time():
    """The host's busy CPU holds this process's own (user) CPU over the interval, and is at
    most every CPU busy for the whole wall time: a tick/second slip or a missing user column
    leaves that range (tests/test_metrics_values.py checks each column by hand)."""
    t0, own0 = time.monotonic(), time.process_time()
    with HostCpu() as h:
        x = 0
        for i in range(3_000_000):
            x += i
    own, wall = time.process_time() - own0, time.monotonic() - t0
    assert own >= 0.05                                 # enough to see a slip of 10 ms ticks
    assert own - 0.03 <= h.busy_s <= wall * os.cpu_count() * 1.05 + 0.03


def test_step_workloads_have_no_single_run():
    wl = get_workload("parallel-scan")
    assert isinstance(wl, StepWorkload) and describe(wl)["kind"] == "steps"
    with pytest.raises(UsageError):
        wl.run(BenchContext(target=None, pgbench="pgbench"), RunParams(), 1)
    assert wl.step_names(RunParams(options={"degrees": "2"})) == [
        "count@0", "count@2", "bitand@0", "bitand@2"]
