"""The reference values: the seed switch, the record file, the tables regen writes, and the measured runs.

The runs themselves are measured by ``benchmarks/reference_values.py`` (about 1.5 hours of full-mode
notebooks on a 2-core CPU), not here; these tests check that what it wrote covers every experiment
of the notebooks with at least three seeds, and that the tables and README are written from it.
"""
from __future__ import annotations

import json
import math

import pytest

from autograder.build import reference_tables
from autograder.course import load_course
from week6_helpers.reference import (
    HUB_USER_VARIABLE,
    RECORD_VARIABLE,
    SEED_VARIABLE,
    STUDENT_VARIABLE,
    experiment_seed,
    record,
    student_seed,
)


# ------------------------------------------------------------------------------ the seed switch
@pytest.fixture
def no_student(monkeypatch):
    for variable in (SEED_VARIABLE, STUDENT_VARIABLE, HUB_USER_VARIABLE):
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


def test_the_seed_is_the_students_unless_the_course_sets_one(no_student, capsys):
    assert experiment_seed() == 0
    assert "No student id" in capsys.readouterr().out, "a run without an id says how to enter it"
    no_student.setenv(HUB_USER_VARIABLE, "hub-user")
    assert experiment_seed() == student_seed("hub-user")
    no_student.setenv(STUDENT_VARIABLE, "Alice")
    assert experiment_seed() == student_seed("alice"), "the id is read without case or surrounding spaces"
    assert experiment_seed(" bob ") == student_seed("bob"), "the notebook's STUDENT_ID line comes first"
    assert "student id 'bob'" in capsys.readouterr().out
    no_student.setenv(SEED_VARIABLE, " 2 ")
    assert experiment_seed("bob") == 2, "the course's reference runs set WEEK6_SEED"


def test_student_seeds_are_fixed_distinct_and_never_a_reference_seed():
    seeds = {student_seed(f"student{i}") for i in range(2000)}
    assert len(seeds) >= 1998 and min(seeds) >= 1000, "two students share a seed by rare chance only"
    assert student_seed("alice") == student_seed("ALICE ") == 352956, "the seed is public: a hash of the id"


@pytest.mark.parametrize("raw, words", [("two", "not a whole number"), ("-1", "negative"), ("1.5", "not a whole number")])
def test_a_bad_seed_says_what_is_wrong_and_how_to_fix_it(monkeypatch, raw, words):
    monkeypatch.setenv(SEED_VARIABLE, raw)
    with pytest.raises(ValueError, match=words) as error:
        experiment_seed()
    assert SEED_VARIABLE in str(error.value)


# ------------------------------------------------------------------------------ record
def test_record_shows_the_values_and_writes_nothing_in_a_students_notebook(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv(RECORD_VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    record("an experiment", {"accuracy": 0.5})
    assert list(tmp_path.iterdir()) == []
    assert "Recorded for your answers (an experiment, seed" in capsys.readouterr().out


def test_record_appends_one_line_per_call_with_plain_numbers(monkeypatch, tmp_path):
    import numpy as np
    import torch

    target = tmp_path / "records.jsonl"
    monkeypatch.setenv(RECORD_VARIABLE, str(target))
    record("B3", {"tensor": torch.tensor(0.25), "numpy": np.float32(0.5), "diverged": math.nan})
    record("B6", {"int": 3})
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert lines == [{"experiment": "B3", "values": {"tensor": 0.25, "numpy": 0.5, "diverged": None}},
                     {"experiment": "B6", "values": {"int": 3.0}}]


# ------------------------------------------------------------------------------ the tables
def _run(stem, mode, seed, values, seconds=10.0):
    return {"notebook": stem, "mode": mode, "seed": seed, "seconds": seconds, "code": "x", "values": values}


def test_a_table_gives_mean_spread_range_and_the_fast_mode_value():
    runs = [_run("nb", "full", seed, {"E": {"accuracy": value, "loss": 1.0}}) for seed, value in enumerate((0.8, 0.9, 0.85))]
    runs.append(_run("nb", "fast", 0, {"E": {"accuracy": 0.5}}))
    text = reference_tables.table("nb", "E", runs)
    assert "**What you should see: E.**" in text
    assert "| accuracy | 0.850 ± 0.050 | 0.800 to 0.900 | 0.500 |" in text
    assert "| loss | 1.000 ± 0.000 | 1.000 to 1.000 | not in fast mode |" in text
    assert "`WEEK6_SEED` = 0, 1, 2" in text


def test_a_diverged_run_is_shown_as_such_not_averaged_away():
    runs = [_run("nb", "full", seed, {"E": {"loss": value}}) for seed, value in enumerate((1.0, None, 3.0))]
    assert "| loss | 2.000 ± 1.414 | 1.000 to 3.000 (1 diverged) | not in fast mode |" in reference_tables.table("nb", "E", runs)


def test_a_row_of_fast_mode_only_is_marked_and_a_spread_keeps_the_means_precision():
    runs = [_run("nb", "full", seed, {"E": {"ratio": value}}) for seed, value in enumerate((340.0, 350.0, 360.0))]
    runs.append(_run("nb", "fast", 0, {"E": {"ratio": 300.0, "n = 32": 0.5}}))
    text = reference_tables.table("nb", "E", runs)
    assert "| ratio | 350 ± 10 | 340 to 360 | 300 |" in text
    assert "| n = 32 | not in full mode |  | 0.500 |" in text


def test_an_unmeasured_experiment_says_so_and_invents_nothing():
    text = reference_tables.table("nb", "E", [_run("nb", "fast", 0, {"E": {"accuracy": 0.5}})])
    assert "has not measured" in text and "0.5" not in text


def _write_notebook(folder, cells):
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (folder / "nb.ipynb").write_text(json.dumps(notebook), encoding="utf-8")


def _code(source):
    return {"cell_type": "code", "id": "c", "metadata": {}, "source": source, "outputs": [], "execution_count": None}


def _table_cell(name):
    return {"cell_type": "markdown", "id": "t", "metadata": {"week6": {"reference_values": name}}, "source": ""}


def test_a_record_call_without_its_table_cell_is_an_error_naming_both(tmp_path):
    _write_notebook(tmp_path, [_code('record("Learning curve", {"a": 1})')])
    with pytest.raises(reference_tables.TablesError, match=r"nb.ipynb: record\('Learning curve'.*no markdown cell"):
        reference_tables.notebook_outputs([], source=tmp_path)


def test_a_table_cell_without_its_record_call_is_an_error(tmp_path):
    _write_notebook(tmp_path, [_code("x = 1"), _table_cell("Gone")])
    with pytest.raises(reference_tables.TablesError, match="'Gone' has no record"):
        reference_tables.notebook_outputs([], source=tmp_path)


def test_the_table_cell_is_filled_from_the_runs(tmp_path):
    _write_notebook(tmp_path, [_code('record("E", {"a": 1})'), _table_cell("E")])
    runs = [_run("nb", "full", seed, {"E": {"a": 1.0}}) for seed in range(3)]
    (written,) = reference_tables.notebook_outputs(runs, source=tmp_path).values()
    cell = json.loads(written)["cells"][1]
    assert "".join(cell["source"]).endswith("| a | 1.000 ± 0.000 | 1.000 to 1.000 | not in fast mode |")


def test_the_readme_times_are_the_fast_run_and_the_median_full_run():
    text = "intro\n| notebook | fast mode | full mode |\n| `nb` | 1 s | 2 s |\n| `other` | 3 s | 4 s |"
    runs = [_run("nb", "fast", 0, {}, 7.4)] + [_run("nb", "full", s, {}, t) for s, t in enumerate((50.0, 70.0, 60.2))]
    assert reference_tables.with_run_times(text, runs).splitlines()[2:] == ["| `nb` | 7 s | 60 s |", "| `other` | 3 s | 4 s |"]


# ------------------------------------------------------------------------------ the measured runs
def test_every_experiment_of_the_notebooks_is_measured_under_three_seeds_and_in_fast_mode():
    runs = reference_tables.load_runs()
    problems = []
    for stem in load_course().stems:
        notebook = json.loads((reference_tables.SOURCE / f"{stem}.ipynb").read_text(encoding="utf-8"))
        names = reference_tables.recorded_names(notebook)
        full = [run for run in runs if run["notebook"] == stem and run["mode"] == "full"]
        fast = [run for run in runs if run["notebook"] == stem and run["mode"] == "fast"]
        if names and len({run["seed"] for run in full}) < 3:
            problems.append(f"{stem}: full mode measured under seeds {sorted(run['seed'] for run in full)}")
        for name in names:
            for run in full + fast:
                if not run["values"].get(name):
                    problems.append(f"{stem}: {name!r} missing from the {run['mode']} run of seed {run['seed']}")
    assert not problems, ("run `python benchmarks/reference_values.py` (it measures only what is missing):\n"
                          + "\n".join(problems))


def test_every_notebook_has_at_least_one_reference_table():
    for stem in load_course().stems:
        notebook = json.loads((reference_tables.SOURCE / f"{stem}.ipynb").read_text(encoding="utf-8"))
        assert reference_tables.table_cells(notebook), f"{stem} states no reference values"
