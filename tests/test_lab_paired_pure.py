"""Side by side, the pure parts: the slices' order, what the per-transaction log says about
each slice, and when a server per config does not fit the host."""

import math
import os

import numpy as np
import pytest

from pgaccel.decide.limits import side_by_side_problem
from pgaccel.lab.paired import slice_order
from pgaccel.workloads import pgbench as pgbench_mod
from pgaccel.workloads.pgbench import read_transactions
from pgaccel.workloads.pgbench_logs import (LOG_LINE_BYTES, MIN_SAMPLED_LINES, RAM_DIR,
                                           LogPlace, counted_transactions, lines_missing,
                                           log_place, ram_room)
from pgaccel.workloads.slices import Transactions, log_windows, window_stats

GB = 1 << 30


@pytest.mark.parametrize("names,k,want", [
    (["A", "B"], 1, ["A", "B"]),
    (["A", "B"], 4, ["A", "B", "B", "A", "A", "B", "B", "A"]),
    (["B", "A"], 3, ["B", "A", "A", "B", "B", "A"]),
    (["A", "B", "C"], 2, ["A", "B", "C", "B", "C", "A"]),
    (["A", "B", "C", "D"], 2, ["A", "B", "C", "D", "B", "C", "D", "A"]),
])
def test_slice_order_is_abba(names, k, want):
    got = slice_order(names, k)
    assert got == want
    assert all(got.count(n) == k for n in names)


@pytest.mark.parametrize("n", [3, 4, 5])
def test_three_or_more_never_run_two_slices_in_a_row_and_share_every_place(n):
    """With A B C D D C B A the first and last ran two slices in a row, the second of them
    about 3% faster, and the base (always first or last) came out ahead by about 1%."""
    from pgaccel.lab.paired import turns_of
    assert turns_of(n) == "rotated" and turns_of(2) == "ABBA"     # as run.json says
    names = [chr(65 + i) for i in range(n)]
    got = slice_order(names, 4 * n)
    assert all(a != b for a, b in zip(got, got[1:]))
    for name in names:                         # each place of a turn equally often
        places = [got[t * n:(t + 1) * n].index(name) for t in range(4 * n)]
        assert sorted(places) == sorted(list(range(n)) * 4)


def _log(rows):
    """Arrays as read_transactions gives: rows of (end s, latency ms, failed)."""
    return (np.array([int(round(e * 1e6)) for e, _, _ in rows], dtype=np.int64),
            np.array([int(round(lat * 1e3)) for _, lat, _ in rows], dtype=np.int64),
            np.array([f for _, _, f in rows], dtype=bool))


def test_window_counts_transactions_ending_inside_and_times_only_those_begun_inside():
    rows = [
        (100.2, 1.0, False), (100.5, 1.0, False), (100.9, 2.0, False),   # window 1
        (101.5, 1.0, False),                                              # between: no
        (102.05, 1100.0, False),   # began 100.95 in window 1, ended in window 2: counted,
                                   # not timed (the pause is in its latency)
        (102.5, 3.0, False), (102.7, 0.0, True),                          # window 2
        (103.0, 1.0, False),                                              # end is exclusive
    ]
    ws = window_stats(*_log(rows), [(100.0, 101.0), (102.0, 103.0)])
    assert ws.ops == 5 and ws.failed == 1
    assert ws.seconds == pytest.approx(2.0)
    assert ws.rates == pytest.approx([3.0, 2.0])
    assert ws.throughput == pytest.approx(2.5)
    assert ws.p50_ms == pytest.approx([1.0, 3.0])
    assert ws.latency_ms["max"] == pytest.approx(3.0)            # not 1,100 ms
    assert ws.latency_ms["p50"] == pytest.approx(1.5)         # of 1, 1, 2 and 3 ms
    qs = [q for q, _ in ws.latency_ms["cdf"]]
    assert qs[0] == 0.0 and qs[-1] == 1.0


def test_a_window_without_transactions_has_rate_zero_and_no_latency():
    ws = window_stats(*_log([(5.5, 1.0, False)]), [(1.0, 2.0), (5.0, 6.0)])
    assert ws.rates == [0.0, 1.0] and ws.ops == 1
    assert math.isnan(ws.p50_ms[0]) and ws.p50_ms[1] == pytest.approx(1.0)


def test_windows_count_transactions_of_logs_read_one_after_the_other():
    """read_transactions joins one log per pgbench thread, so the ends are not in order:
    each window still counts and times exactly its own transactions."""
    thread1 = [(100.1, 2.0, False), (100.3, 4.0, False), (102.2, 5.0, False),
               (104.5, 1.0, False)]
    thread2 = [(100.2, 6.0, False), (100.95, 1.0, True), (102.1, 3.0, False),
               (102.4, 7.0, False), (102.45, 9.0, False), (103.5, 1.0, False)]
    ws = window_stats(*_log(thread1 + thread2),
                      [(100.0, 101.0), (102.0, 102.5), (104.0, 105.0)])
    assert ws.rates == pytest.approx([3.0, 8.0, 1.0]) and ws.failed == 1
    assert ws.p50_ms == pytest.approx([4.0, 6.0, 1.0])           # 2 4 6; 3 5 7 9; 1
    assert ws.latency_ms["max"] == pytest.approx(9.0)            # 103.5 is in no window
    assert ws.latency_ms["mean"] == pytest.approx(37.0 / 8)


def test_many_windows_each_hold_their_own_transactions():
    """600 windows (a minute of slices), a transaction every millisecond of each, ends
    shuffled: every window 100 transactions, its median latency its own."""
    rng = np.random.default_rng(5)
    rows = [(w * 0.11 + 0.0005 + k / 1000, 0.1 + w / 1000, False)
            for w in range(600) for k in range(100)]
    rows = [rows[i] for i in rng.permutation(len(rows))]
    wins = [(w * 0.11, w * 0.11 + 0.1) for w in range(600)]
    ws = window_stats(*_log(rows), wins)
    assert ws.rates == pytest.approx([1000.0] * 600) and ws.ops == 60_000
    assert ws.p50_ms == pytest.approx([0.1 + w / 1000 for w in range(600)])


def test_read_transactions_reads_words_in_pieces(tmp_path, monkeypatch):
    """A log with failed and skipped transactions is read in pieces with numpy's parser;
    pieces that end mid-line lose nothing."""
    monkeypatch.setattr(pgbench_mod, "_CHUNK", 40)
    words = ["failed", "skipped", "serialization", "deadlock"]
    lines = [f"{i % 2} {i} {words[i % 4] if i % 3 == 0 else 100 + i} 0 {1700000000 + i} {i}"
             for i in range(30)]
    (tmp_path / "tx.1").write_text("\n".join(lines) + "\n")
    ends, lats, failed = read_transactions([str(tmp_path / "tx.1")])
    assert ends.tolist() == [(1700000000 + i) * 1_000_000 + i for i in range(30)]
    assert lats.tolist() == [0 if i % 3 == 0 else 100 + i for i in range(30)]
    assert failed.tolist() == [i % 3 == 0 for i in range(30)]
    (tmp_path / "tx.2").write_text("0 1 failed 0 1700000000 5\n0 2 30 0 1700000001 6\n0 3 4")
    ends, lats, failed = read_transactions([str(tmp_path / "tx.2")])      # cut short too
    assert ends.tolist() == [1700000000_000005, 1700000001_000006]
    assert lats.tolist() == [0, 30] and failed.tolist() == [True, False]


def test_read_transactions_parses_pgbench_log_lines(tmp_path):
    f = tmp_path / "tx.123"
    f.write_text("0 1 250 0 1700000000 500000\n"
                 "1 1 failed 0 1700000001 10\n"
                 "2 7 1200 0 1700000001 999999 0 0\n"
                 "\n")
    ends, lats, failed = read_transactions([str(f)])
    assert ends.tolist() == [1700000000_500000, 1700000001_000010, 1700000001_999999]
    assert lats.tolist() == [250, 0, 1200]
    assert failed.tolist() == [False, True, False]


@pytest.mark.parametrize("text, ends, lats", [
    # every line numbers: numpy's parser, as many columns as the options give
    ("0 1 250 0 1700000000 500000\n3 9 77 1 1700000002 5\n",
     [1700000000_500000, 1700000002_000005], [250, 77]),
    ("0 1 250 0 1700000000 500000 12 0\n0 2 260 0 1700000000 600000 3 0\n",
     [1700000000_500000, 1700000000_600000], [250, 260]),
    # a line cut short (pgbench killed while writing): the others still read
    ("0 1 250 0 1700000000 500000\n0 2 26", [1700000000_500000], [250]),
    ("", [], []),
])
def test_read_transactions_reads_every_good_log_alike(tmp_path, text, ends, lats):
    (tmp_path / "tx.1").write_text(text)
    (tmp_path / "tx.2").write_text("5 1 10 0 1700000009 1\n")
    e, lat, bad = read_transactions([str(tmp_path / "tx.1"), str(tmp_path / "tx.2")])
    assert e.tolist() == ends + [1700000009_000001] and lat.tolist() == lats + [10]
    assert bad.tolist() == [False] * (len(ends) + 1) and e.dtype == lat.dtype == np.int64


@pytest.mark.parametrize("sb,avail,disk,free,kw,words", [
    ([GB // 8, 6 * GB], 24 * GB, GB, 100 * GB, {}, None),
    ([GB // 8, 5 * GB, 5 * GB], 24 * GB, GB, 100 * GB, {}, None),      # 10.1 of 24: fits
    ([GB // 8, 6 * GB, 6 * GB], 24 * GB, GB, 100 * GB, {}, "more than half"),  # 12.1
    # a server fills at most the data it reads: 3 x 0.4 GB, whatever shared_buffers says
    ([GB // 8, 6 * GB, 6 * GB], 24 * GB, GB, 100 * GB, {"data_bytes": 2 * GB // 5}, None),
    # ... unless the kernel commits strictly: then all of shared_buffers counts at start
    ([GB // 8, 6 * GB, 6 * GB], 24 * GB, GB, 100 * GB,
     {"data_bytes": 2 * GB // 5, "strict_overcommit": True}, "more than half"),
    ([6 * GB, 6 * GB], 20 * GB, GB, 100 * GB, {}, "more than half"),
    ([GB // 8, GB // 8], 24 * GB, 3 * GB, 5 * GB, {}, "free"),
    ([GB // 8, GB // 8], 24 * GB, None, None, {}, None),              # unknown: no objection
    ([GB // 8, GB // 8], 24 * GB, GB, 100 * GB, {"hugepages_reserved": 512},
     "would compete"),
])
def test_side_by_side_needs_memory_and_disk_for_all(sb, avail, disk, free, kw, words):
    got = side_by_side_problem(sb, avail, disk, free, **kw)
    if words is None:
        assert got is None
    else:
        assert got and words in got


@pytest.mark.parametrize("max_connections, clients, words", [
    ("100", 95, None), ("100", 96, "max_connections = 100 is too few for 96 clients"),
    (20, 15, None), (20, 16, "(pgaccel needs 5 more)"),
    (None, 10_000, None), ("(needs superuser or pg_read_all_settings)", 500, None),
])
def test_connections_leave_room_for_pgaccels_own_sessions(max_connections, clients, words):
    from pgaccel.decide.limits import connections_problem
    got = connections_problem(max_connections, clients)
    assert (got is None) if words is None else (words in got)


# -- which lab variants can share the host (lab/sharing.py) --------------------------------
from pgaccel.lab.sharing import host_conflict, rotation_groups  # noqa: E402
from pgaccel.pg.versions import checksum_initdb_args  # noqa: E402


@pytest.mark.parametrize("targets,conflict", [
    ({"4k": {"thp": "never"}, "2m": {"thp": "never", "nr_hugepages": 600, "page_kb": 2048}},
     None),                                           # a pool is per server, THP agrees
    ({"a": {}, "b": {}}, None),
    ({"a": {"thp": "never"}, "b": {}}, "transparent huge pages differently (a: never, b: unset)"),
    ({"a": {"thp": "never"}, "b": {"thp": "always"}}, "(a: never, b: always)"),
    ({"a": {"sysctl:vm.swappiness": 1}, "b": {"sysctl:vm.swappiness": 1}}, None),
    ({"a": {"sysctl:vm.swappiness": 1}, "b": {"sysctl:vm.swappiness": 60}},
     "vm.swappiness differently (a: 1, b: 60)"),
    ({"a": {"sysfs:sys/block/sda/queue/scheduler": "none"}, "b": {}, "c": {}},
     "sys/block/sda/queue/scheduler differently (a: none, b: unset, c: unset)"),
])
def test_variants_share_the_host_only_where_every_host_wide_value_agrees(targets, conflict):
    got = host_conflict(targets)
    if conflict is None:
        assert got is None
    else:
        assert got is not None and conflict in got and "one value at a time" in got


def test_servers_rotate_only_within_an_installation_and_never_with_a_huge_page_pool():
    servers = {"a": ("/15", False), "b": ("/15", False), "c": ("/18", False),
               "d": ("/18", False), "e": ("/18", True), "f": ("/15", False)}
    groups = rotation_groups(servers, {"f": True})
    assert groups["a"] == groups["b"] != groups["c"]
    assert groups["c"] == groups["d"] != groups["e"]          # checksums on: another server
    assert groups["f"] not in {groups[x] for x in "abcde"}    # its pool stays with it
    assert len(set(groups.values())) == 4


@pytest.mark.parametrize("major,on,args", [
    (15, False, []),                          # off is 13-17's default: nothing to say
    (17, False, []),
    (18, False, ["--no-data-checksums"]),     # 18's initdb turns them on unless told
    (19, False, ["--no-data-checksums"]),
    (15, True, ["--data-checksums"]),
    (18, True, ["--data-checksums"]),
])
def test_data_checksums_are_named_to_initdb_where_the_version_default_differs(major, on, args):
    assert checksum_initdb_args(major, on) == args


from pgaccel.lab.paired_steps import step_order  # noqa: E402


def test_steps_side_by_side_alternate_who_goes_first_from_step_to_step():
    names = ["base", "b", "c"]
    assert [step_order(names, k) for k in range(4)] == [names, names[::-1], names,
                                                         names[::-1]]
    # with trial_order's ABBA rounds, each variant goes first equally often over 4 rounds
    from pgaccel.decide.schedule import trial_order
    firsts = []
    for r in range(4):
        order = [n for _, n in trial_order(["A", "B"], r + 1, "abba", 0, start_round=r)]
        firsts += [step_order(order, k)[0] for k in range(5)]
    assert firsts.count("A") == firsts.count("B") == 10


from pgaccel.lab.paired_lsteps import take_turns  # noqa: E402


@pytest.mark.parametrize("names, turn, done, want", [
    ("AB", 0, set(), ["A", "B"]),
    ("AB", 1, set(), ["B", "A"]),
    ("ABC", 2, set(), ["C", "A", "B"]),   # three or more rotate
    ("ABC", 3, set(), ["A", "B", "C"]),
    ("ABC", 1, {"A"}, ["B", "C"]),        # one whose commits are done drops out
    ("ABC", 1, {"A", "C"}, ["B"]),        # the last one goes on alone
    ("AB", 4, {"A", "B"}, []),
])
def test_load_slices_take_turns_abba_without_those_done(names, turn, done, want):
    assert take_turns(list(names), turn, done) == want


from pgaccel.cli.progress import design_line  # noqa: E402
from pgaccel.lab.paired import STEP_SLICE_S  # noqa: E402
from pgaccel.workloads.steps import MAX_RUNS, RepeatPlan, enough_runs  # noqa: E402


def _plan(repeats, seconds=None):
    return RepeatPlan("s", "queries/s", repeats, lambda: None, lambda: 0.0,
                      lambda t, r: r, seconds=seconds)


@pytest.mark.parametrize("repeats, seconds, times, done", [
    (3, None, [[1, 1], [1, 1]], False),                  # a fixed count: 3 runs each
    (3, None, [[1, 1, 1], [1, 1, 1]], True),
    (3, 2.0, [[1, 1, 1], [0.5, 0.5, 0.5]], False),       # B's runs add up to 1.5 s of 2
    (3, 2.0, [[1, 1, 1, 1], [0.5, 0.5, 0.5, 0.5]], True),
    (3, 0.1, [[1, 1], [1, 1]], False),                   # the seconds, but not 3 runs yet
    (3, 9e9, [[0.0] * MAX_RUNS, [0.0] * MAX_RUNS], True),  # a cap where runs take no time
])
def test_a_step_of_runs_ends_after_its_count_and_once_every_variant_had_its_seconds(
        repeats, seconds, times, done):
    assert enough_runs(_plan(repeats, seconds), times) is done


def test_the_design_line_says_how_each_step_workload_takes_its_turns():
    base = {"design": "side by side", "servers": 2, "slices": False}
    line = design_line({**base, "steps": ["in-server-loop", "parallel-scan"]}, "variants")
    assert line.endswith(
        "in a step workload step by step, the same step of every variant in turn "
        "(in-server-loop's loop calls in turns call by call, client i's backend of every "
        "variant on one CPU, its select-only in 0.25-second slices; parallel-scan's timed "
        "runs in turns run by run, every variant's backend on one CPU)."), line
    assert "Insert Benchmark" not in line
    ib = design_line({**base, "steps": ["insert-benchmark"], "pin": False}, "variants")
    step_s = f"{STEP_SLICE_S:g}"
    assert ib.endswith(f"the Insert Benchmark's load steps in {step_s}-second slices until "
                       "each is done, l.x index by index, its query steps with every "
                       f"server's writers at once and the queries in {step_s}-second "
                       "slices).")
    old = design_line({**base, "steps": True}, "variants")     # a run.json before the names
    assert old.endswith("the same step of every variant in turn.")


def test_logs_go_to_ram_only_when_a_tmpfs_surely_holds_them(tmp_path):
    work = str(tmp_path)
    assert log_place(work, None) == LogPlace(work)             # no bound: as before
    assert ram_room(ram_dir=work) == 0                          # not a tmpfs: no room
    assert log_place(work, 1e6, ram_dir=work) == LogPlace(work)
    with open("/proc/mounts") as fh:
        shm = any(f.split()[1:3] == [RAM_DIR, "tmpfs"] for f in fh)
    if not shm:
        pytest.skip("no tmpfs at /dev/shm here")
    free = os.statvfs(RAM_DIR).f_bavail * os.statvfs(RAM_DIR).f_frsize
    assert 0 < ram_room() <= free / 2                           # half its free room at most
    assert log_place(work, min(1e6, free / 4)) == LogPlace(RAM_DIR)


MB = 1e6


@pytest.mark.parametrize("bound,siblings,room,want", [
    (100 * MB, 1, 400 * MB, LogPlace(RAM_DIR, 1.0)),            # fits whole
    (100 * MB, 4, 400 * MB, LogPlace(RAM_DIR, 1.0)),            # a quarter each: just
    (100 * MB, 5, 400 * MB, LogPlace(RAM_DIR, 0.8)),            # 80 MB each: a sample
    (5.9e9, 4, 5.75e9, LogPlace(RAM_DIR, 0.2436)),              # medium's q step, four
    (3e9, 1, 1e9, LogPlace(RAM_DIR, 0.3333)),                   # rounded down, 4 digits
    (1e13, 1, 1e9, LogPlace(RAM_DIR, 0.0001)),                  # a million lines still
    (1e13, 1, 4e7, LogPlace("/w", 1.0)),                        # fewer: whole, on disk
    (1e9, 3, MIN_SAMPLED_LINES * LOG_LINE_BYTES * 3, LogPlace(RAM_DIR, 0.048)),
    (1e9, 3, MIN_SAMPLED_LINES * LOG_LINE_BYTES * 3 - 3, LogPlace("/w", 1.0)),
])
def test_a_log_too_large_for_its_share_of_ram_is_sampled_to_fit(bound, siblings, room, want):
    got = log_place("/w", bound, siblings, room=room)
    assert got == want
    if got.dir == RAM_DIR:                       # what it logs fits its share
        assert bound * got.sampling <= room / siblings
    # a count known exactly (a load step's -t) is never sampled: whole in RAM, or on disk
    exact = log_place("/w", bound, siblings, room=room, may_sample=False)
    assert exact == (LogPlace(RAM_DIR) if want == LogPlace(RAM_DIR) else LogPlace("/w"))


def test_a_sample_that_lost_lines_is_told_from_one_that_is_only_small():
    assert lines_missing(99, 100, 1.0) and not lines_missing(100, 100, 1.0)
    # 1,000,000 counted at 0.1: 100,000 expected, sd 300
    assert not lines_missing(100_000, 1_000_000, 0.1)
    assert not lines_missing(98_500, 1_000_000, 0.1)            # 5 sd short: chance
    assert lines_missing(98_000, 1_000_000, 0.1)                # 6.7 sd: lost
    assert lines_missing(60_000, 1_000_000, 0.1)                # a full disk half way


def test_a_sampled_log_counts_each_line_for_the_transactions_it_stands_for():
    """At a sampling rate of 0.25 each logged transaction stands for four: the windows'
    rates, ops and failures are four times the lines'; latencies are the lines' own; the
    count's error is sqrt((1 - 0.25) / lines)."""
    rows = [(100.0 + k / 100, 1.0 + (k % 3), k % 10 == 9) for k in range(100)]   # 1 s
    whole = window_stats(*_log(rows), [(100.0, 100.5), (100.5, 101.0)])
    log = Transactions(*_log(rows), sampling=0.25)
    ws = log_windows(log, [(100.0, 100.5), (100.5, 101.0)])
    assert (whole.ops, whole.failed, whole.rates) == (90, 10, [90.0, 90.0])
    assert (ws.ops, ws.failed) == (360, 40)
    assert ws.rates == pytest.approx([360.0, 360.0])
    assert ws.throughput == pytest.approx(360.0)
    assert ws.latency_ms == whole.latency_ms and ws.p50_ms == whole.p50_ms
    assert ws.logged == 100 and whole.count_error == 0.0
    assert ws.count_error == pytest.approx(math.sqrt(0.75 / 100))


# pgbench 18's summary of a run of two scripts, from its format strings (pgbench 15 has no
# per-script "actually processed" line)
PGBENCH18_TWO_SCRIPTS = """\
transaction type: multiple scripts
scaling factor: 1
query mode: prepared
number of clients: 1
number of threads: 1
maximum number of tries: 1
duration: 86400 s
number of transactions actually processed: 264718
number of failed transactions: 0 (0.000%)
latency average = 0.015 ms
initial connection time = 2.104 ms
tps = 66179.500000 (without initial connection time)
SQL script 1: q1.sql
 - weight: 1 (targets 50.0% of total)
 - number of transactions actually processed: 132359 (tps = 33089.750000)
 - number of failed transactions: 0 (0.000%)
SQL script 2: q2.sql
 - weight: 1 (targets 50.0% of total)
 - number of transactions actually processed: 132359 (tps = 33089.750000)
 - number of failed transactions: 0 (0.000%)
"""


def test_counted_transactions_reads_the_runs_total_not_each_scripts():
    assert counted_transactions(PGBENCH18_TWO_SCRIPTS) == 264718
    assert counted_transactions("number of transactions actually processed: 2020/2020\n") == 2020
    assert counted_transactions("") == 0                        # it printed no summary


def test_the_facts_say_which_steps_counted_a_sample_and_how_close():
    from pgaccel.report.facts import facts, sampled_text

    def trial(wl, m):
        return {"variant": "A", "workload": wl, "round": 0, "metrics": m}
    whole = [trial("insert-benchmark/l.i0", {"ops": 10})]
    assert sampled_text(whole) == ""
    assert "pgbench's logs sampled" not in dict(facts({"run_id": "r", "trials": whole,
                                                         "workloads": []}))
    trials = whole + [
        trial("insert-benchmark/qr100", {"log_sampling": 0.2436, "count_error": 0.00031}),
        trial("insert-benchmark/qr100", {"log_sampling": 0.25, "count_error": 0.00052}),
        trial("insert-benchmark/qp100", {"log_sampling": 0.5, "count_error": 0.0002}),
        trial("insert-benchmark/qp100", {"log_sampling": 0.4953, "count_error": 0.0001})]
    text = sampled_text(trials)
    assert text.endswith("insert-benchmark/qr100 (24.36%–25% of its transactions, 2 "
                         "trials; count error at most 0.052%); insert-benchmark/qp100 "
                         "(49.53%–50% of its transactions, 2 trials; count error at most "
                         "0.02%)")
    assert "l.i0" not in text
    assert dict(facts({"run_id": "r", "trials": trials, "workloads": []}))[
        "pgbench's logs sampled"] == text
