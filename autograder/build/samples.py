"""Build the sample submissions that `make grade` grades and the tests check.

    python -m autograder.build.samples          # rewrite the samples
    python -m autograder.build.samples --check  # fail if they are out of date (writes nothing)

The class is data: ``data/sample_submissions/<student>.toml`` says which notebooks a
sample student submits, how each is made from the committed release notebooks, and
what it must score (:mod:`autograder.build.sample_students` reads them;
:mod:`autograder.build.sample_filling` makes the notebooks). Since every sample is
made from what students receive, the samples follow the assignment when it changes.
The folder layout is nbgrader's ``submitted/<student>/week6/<notebook>.ipynb``;
``expected.json``, generated from the student files with points from the course
model, is what ``tests/grading`` holds the grader to. Every file goes through the
repository's check-or-write helper (``autograder/build/generated.py``), and a notebook
that no sample makes any more is removed (``--check``: reported);
``python -m autograder.build.regen`` runs this build with the other generated files.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import nbformat

from ..course import load_course
from ..intake import misplaced_key
from ..notebook import raw_grade_id
from . import sample_students
from .generated import Files, shown, update_command
from .sample_filling import (
    break_metadata,
    cell_surgery,
    cut_in_half,
    released,
    released_constant,
    replace,
    solved,
    untouched,
    with_answers,
)
from .sample_students import RELEASED, Recipe, SampleError

EXPECTED = "expected.json"


def notebook(recipe: Recipe, written: dict[str, dict[str, str]]):
    """The notebook ``recipe`` makes: a notebook object, or raw text for a broken file."""
    release = untouched(recipe.stem)
    if unknown := sorted(set(recipe.named_cells()) - {raw_grade_id(cell) for cell in release.cells}):
        raise SampleError(f"{recipe.student}.toml [notebooks.{recipe.stem}]: no cell of the release "
                          f"{recipe.stem}.ipynb has the grade_id {', '.join(map(repr, unknown))}")
    made = solved(recipe.stem, written) if recipe.base == "solved" else release
    made = replace(made, released(release, recipe.stubs))
    made = replace(made, {grade_id: "".join(released_constant(release, grade_id) if part is RELEASED else part
                                            for part in parts)
                          for grade_id, parts in recipe.cells.items()})
    made = with_answers(made, release, recipe.written)
    if recipe.surgery:
        made = cell_surgery(made, **recipe.surgery)
    if recipe.break_metadata:
        made = break_metadata(made, recipe.break_metadata)
    return cut_in_half(made) if recipe.cut_in_half else made


def expectation(recipe: Recipe) -> dict:
    """What grading ``recipe``'s notebook must give, with its points from the course model."""
    course = load_course().notebook(recipe.stem)
    expected = dict(recipe.expected)
    if "score" not in expected:
        # A full solution loses exactly the points of the solution cells it changes.
        expected["score"] = course.points_except(*recipe.changed_solutions())
    expected.setdefault("max_score", course.auto_points)
    return expected


def report_name(recipe: Recipe) -> str:
    """The name the grader reports the notebook under (a misplaced file's is derived from its path)."""
    return misplaced_key(recipe.below.encode()) if recipe.filed_under else recipe.stem


def outputs() -> Files:
    """What every file of the samples should hold; ``None`` for a notebook that no sample makes any more."""
    folder = sample_students.FOLDER
    written = sample_students.written_answers(folder)
    wanted: Files = {}
    expected = {}
    for student, recipes in sample_students.load_students(folder).items():
        for recipe in recipes:
            made = notebook(recipe, written)
            text = made if isinstance(made, str) else nbformat.writes(made)
            if not (text.endswith("\n") or isinstance(made, str)):
                text += "\n"
            wanted[folder / student / recipe.below] = text.encode("utf-8")
            expected[f"{student}/{report_name(recipe)}"] = expectation(recipe)
    wanted[folder / EXPECTED] = (json.dumps(expected, indent=2, sort_keys=True) + "\n").encode("utf-8")
    for student in sorted(p for p in folder.iterdir() if p.is_dir()):
        for old in sorted(student.rglob("*.ipynb")):
            if ".ipynb_checkpoints" not in old.parts:  # Jupyter's, ignored by git
                wanted.setdefault(old, None)
    return wanted


def summary(files: Files, stale: list[Path]) -> str:
    """The line that ends a run: how many sample notebooks there are, and how many files changed."""
    notebooks = sum(1 for path, data in files.items() if data is not None and path.suffix == ".ipynb")
    return (f"{notebooks} sample notebooks under {shown(sample_students.FOLDER)}/ are up to date"
            + (f" ({len(stale)} file(s) changed)." if stale else "."))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.build.samples", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    return update_command(parser, outputs, SampleError, summary=summary, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
