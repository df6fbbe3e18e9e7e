"""pg/settings.py: the one precedence of a measurement's settings, what each kind of target
may set, and the two encodings of ``-c`` options (pure); and the experiment applying that
precedence the same way for every command."""

from __future__ import annotations

import shlex

import pytest

from pgaccel.errors import UsageError
from pgaccel.lab.experiment import Experiment
from pgaccel.decide.model import Variant, WorkloadSpec
from pgaccel.pg.settings import (command_line, effective, libpq_options, settable,
                                 unsettable)
from pgaccel.workloads.base import RunParams, get_workload


# -- precedence ----------------------------------------------------------------------------
def test_each_level_wins_over_the_ones_before_it():
    e = effective(base={"a": "1", "b": "1", "c": "1", "d": "1"},
                  variant={"b": "2", "c": "2", "d": "2"},
                  required={"c": "3", "d": "3"},
                  overrides={"d": "4"})
    assert e.settings == {"a": "1", "b": "2", "c": "3", "d": "4"}


def test_what_a_higher_level_replaced_is_said_but_not_the_variant_over_its_base():
    e = effective(base={"work_mem": "4MB"}, variant={"work_mem": "8MB", "jit": "off"},
                  required={"jit": "off", "max_parallel_workers": "8"},
                  overrides={"max_parallel_workers": "2"})
    # the variant's own value over its computed base is what a variant is for: not noted;
    # the same value again (jit) is not a replacement
    assert e.replaced == ["max_parallel_workers = 2 (the run's --set) replaces 8 (the "
                          "workload's)"]
    e = effective(variant={"shared_buffers": "1GB"}, required={"shared_buffers": "256MB"})
    assert e.settings == {"shared_buffers": "256MB"}
    assert e.replaced == ["shared_buffers = 256MB (the workload's) replaces 1GB (the "
                          "config's own)"]
    assert effective() == effective(base={}, variant={}, required={}, overrides={})
    assert effective().settings == {} and effective().replaced == []


# -- what a target may set -----------------------------------------------------------------
@pytest.mark.parametrize("context, local, dsn", [
    ("user", True, True), ("superuser", True, True),
    ("sighup", True, False), ("postmaster", True, False), ("backend", True, False),
    ("superuser-backend", True, False),
    ("internal", False, False),          # fixed at build or initdb time: no target
    (None, False, False),                # a name the server does not know
])
def test_settable_by_context_and_target_kind(context, local, dsn):
    assert settable(context, "throwaway") is local
    assert settable(context, "pgdata") is local
    assert settable(context, "dsn") is dsn


def test_unsettable_lists_what_a_target_cannot_set_sorted():
    contexts = {"work_mem": "user", "shared_buffers": "postmaster", "block_size": "internal",
                "log_min_duration_statement": "superuser"}
    names = ["shared_buffers", "work_mem", "nosuch", "block_size",
             "log_min_duration_statement"]
    assert unsettable(names, contexts, "dsn") == ["block_size", "nosuch", "shared_buffers"]
    assert unsettable(names, contexts, "throwaway") == ["block_size", "nosuch"]
    with pytest.raises(ValueError):
        settable("user", "remote")


# -- encodings -----------------------------------------------------------------------------
def test_command_line_is_one_shell_word_per_setting():
    text = command_line({"work_mem": "4MB", "search_path": "a, b",
                         "application_name": "it's"})
    assert shlex.split(text) == ["-cwork_mem=4MB", "-csearch_path=a, b",
                                 "-capplication_name=it's"]
    assert command_line({}) == ""


def test_libpq_options_escape_spaces_and_backslashes():
    assert libpq_options({"search_path": "a, b", "x.y": "c\\d"}) == \
        "-c search_path=a,\\ b -c x.y=c\\\\d"
    assert libpq_options({}) is None


@pytest.mark.parametrize("name", ["work mem", "1abc", "a;b", "", "x=y"])
def test_a_bad_name_is_a_usage_error_in_both_encodings(name):
    with pytest.raises(UsageError):
        command_line({name: "1"})
    with pytest.raises(UsageError):
        libpq_options({name: "1"})


# -- every command's experiment applies the one precedence ----------------------------------
def test_the_experiment_gives_each_config_the_same_precedence():
    """The workload's requirements win over a config's own settings and the run's --set over
    both, for preparing, burn-in and every trial alike (``Experiment.settings_for``).  Before,
    ``bench --set`` won while preparing and lost in every trial of a step workload."""
    wl = get_workload("parallel-scan")
    ws = WorkloadSpec(wl, RunParams(clients=1, options={"degrees": "0,2,6"}))
    need = wl.required_settings(ws.params)
    assert need == {"max_worker_processes": "8", "max_parallel_workers": "8"}
    events = []
    exp = Experiment(None, [Variant("a", {"max_parallel_workers": "16", "work_mem": "8MB"}),
                            Variant("b", {})], [ws],
                     overrides={"max_worker_processes": "12"},
                     on_event=lambda kind, **kw: events.append((kind, kw["variant"])))
    assert exp.settings_for("a", ws) == {"max_parallel_workers": "8", "work_mem": "8MB",
                                         "max_worker_processes": "12"}
    assert exp.settings_for("b", ws) == {"max_worker_processes": "12",
                                         "max_parallel_workers": "8"}
    exp.settings_for("a", ws)                 # noted and told once per config and workload
    assert events == [("settings_replaced", "a"), ("settings_replaced", "b")]
    assert exp.info["settings_replaced"][ws.label] == {
        "a": ["max_parallel_workers = 8 (the workload's) replaces 16 (the config's own)",
              "max_worker_processes = 12 (the run's --set) replaces 8 (the workload's)"],
        "b": ["max_worker_processes = 12 (the run's --set) replaces 8 (the workload's)"]}
    # a workload without requirements and a run without overrides: the config as it is
    so = WorkloadSpec(get_workload("select-only"), RunParams(clients=1))
    plain = Experiment(None, [Variant("a", {"work_mem": "8MB"})], [so])
    assert plain.settings_for("a", so) == {"work_mem": "8MB"}
    assert "settings_replaced" not in plain.info
