"""Every [run] key of a lab spec at both ends of its documented range (docs/lab.md): the
bound itself is accepted, one step past it is refused at the key's line, and an override in
a size table is reported at the size table's line.  Written after the mutation run
(tools/mutation.sh) showed that no test stood on these bounds."""

from __future__ import annotations

import pytest

from pgaccel.specs.parse import parse_spec
from pgaccel.specs.tomlpos import SpecError

from test_lab_spec import BASE

VARIANTS = BASE[BASE.index("[[variant]]"):]     # the two variants and the workload


def _run(lines: str, size: str = "medium"):
    return parse_spec('name = "t"\n[run]\n' + lines + "\n" + VARIANTS, "t.toml", size)


@pytest.mark.parametrize("lines, attr, value", [
    ("rounds = 1", "rounds", 1),
    ("rounds = 10000", "rounds", 10000),
    ("rounds = 1\nmax_rounds = 1", "max_rounds", 1),
    ("rounds = 1\nmax_rounds = 100000", "max_rounds", 100000),
    ('duration = "1s"', "duration", 1.0),
    ('warmup = "1s"', "warmup", 1.0),
    ('budget = "0.5s"', "budget_s", 0.5),
    ("min_effect = 0", "min_effect", 0.0),
    ("min_effect = 0.99", "min_effect", 0.99),
    ("target_ci_width = 10", "target_ci_width", 10.0),
    ("target_ci_width = 0.001", "target_ci_width", 0.001),
    ("confidence = 0.5", "confidence", 0.5),
    ("confidence = 0.999", "confidence", 0.999),
    ("seed = 7", "seed", 7),
    ('order = "random"', "order", "random"),
    ('order = "roundrobin"', "order", "roundrobin"),
    ("max_rounds = 8\nuntil_decided = true", "until_decided", True),
    ("until_decided = false", "until_decided", False),
    ("", "until_decided", False),
])
def test_bounds_are_accepted(lines, attr, value):
    assert getattr(_run(lines), attr) == value


@pytest.mark.parametrize("lines, line, words", [
    ("rounds = 0", 3, "rounds = 0 is out of range: it must be >= 1"),
    ("rounds = 10001", 3, "rounds = 10001 is out of range: it must be <= 10000"),
    ("rounds = 1\nmax_rounds = 0", 4, "max_rounds = 0 is out of range: it must be >= 1"),
    ("rounds = 1\nmax_rounds = 100001", 4, "it must be <= 100000"),
    # looks planned up to the last round: at most MAX_ROUNDS_CAP (100) of them
    ("rounds = 1\nmax_rounds = 101\nuntil_decided = true", 4,
     "max_rounds = 101 with until_decided = true: rounds are added until decided up to 100"),
    ('duration = "0.5s"', 3, "it must be >= 1"),
    ('warmup = "0.5s"', 3, "it must be >= 1"),
    ('budget = "0s"', 3, "it must be > 0"),
    ("min_effect = -0.01", 3, "it must be >= 0"),
    ("min_effect = 0.991", 3, "it must be <= 0.99"),
    ("target_ci_width = 0", 3, "it must be > 0"),
    ("target_ci_width = 10.5", 3, "it must be <= 10"),
    ("confidence = 0.49", 3, "it must be >= 0.5"),
    ("confidence = 0.9991", 3, "it must be <= 0.999"),
    ('seed = "x"', 3, "seed must be a whole number"),
    ("order = 3", 3, "order must be a string"),
    ("rounds = true", 3, "rounds must be a whole number"),
    ('min_effect = "5%"', 3, "min_effect must be a number"),
    ("[run.medium]\nrounds = 0", 4, "rounds = 0 is out of range"),
    ("[run.medium]\nwarmup = \"0s\"", 4, "warmup"),
    ("small = 3", 3, "run.small must be a table of overrides"),
    ("[run.small]\nspeed = 1", 4, "unknown key 'speed' in [run.small]"),
    ("until_decided = 1", 3, "until_decided must be true or false"),
    ("until_decided = true", 3, "until_decided = true needs max_rounds"),
])
def test_out_of_range_is_refused_at_its_line(lines, line, words):
    with pytest.raises(SpecError) as ei:
        _run(lines)
    assert f"t.toml:{line}:" in ei.value.message and words in ei.value.message


def test_a_size_table_override_is_reported_at_the_size_tables_line():
    # the medium override is out of range; the top-level value is fine
    with pytest.raises(SpecError) as ei:
        _run('confidence = 0.9\n[run.medium]\nconfidence = 0.2')
    assert "t.toml:5:" in ei.value.message
    # the small table does not apply to a medium run, nor its mistakes... until --size small
    assert _run('[run.small]\nrounds = 2').rounds == 5
    assert _run('[run.small]\nrounds = 2', "small").rounds == 2


def test_run_must_be_a_table():
    with pytest.raises(SpecError, match=r"\[run\] must be a table"):
        parse_spec('name = "t"\nrun = 3\n' + VARIANTS, "t.toml")
