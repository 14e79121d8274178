"""Adding a graded function, end to end, as docs/authoring.md tells a maintainer to.

In a copy of the repository, ``count_masked`` (the number of True entries of a boolean
tensor, 2 points in two hidden tests) joins exercise 5 through exactly three hand-edited
files: the source notebook (a solution cell and a visible-test cell), the reference
module and the hidden suite's section of the item. Everything else must follow from them:

- ``python -m autograder.build.regen`` brings every derived file up to date (the release, the
  handout's boxes and grading map, the samples and their expected scores), and
  ``--check`` passes after it; the repository's own checks of the handout and of the
  notebook conventions pass in the copy;
- ``python -m autograder grade`` gives a student whose notebook is filled in the way the
  samples are (``autograder/build/sample_filling.py``) full marks, the two new points
  included, and a student who counts the False entries loses exactly the two points of
  ``test_count_masked``, with messages that name the function;
- the contract meta-tests fail until the function's clause table, its one-clause mutants
  and two alternative implementations are added (two more files), and pass after.

The copy is a git repository of its own, so ``git status`` says which files were edited
by hand and which were regenerated. About half a minute (marked slow): nbgrader generates
the release twice, pytest checks the handout and the notebooks, and the grader starts once.
Two fast tests pin the rules that spare the walk-through a fourth edit: an item that
``TOPICS`` does not name is counted next to its neighbour in the notebook, and the boxes
of ``handouts/week6.md`` are written from the topics.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.course import load_course
from autograder.paths import REPO
from handouts import BuildError
from handouts.build import SOURCE_MD, TOPICS
from handouts.grading_map import notebook_items, with_unlisted_items
from handouts.where_boxes import with_item_boxes

STEM = "exercise5_span_corruption"
NAME = "count_masked"
NEW_POINTS = 2
AFTER = "test_span_corrupt"  # the visible-test cell the two new cells follow
NOTEBOOK = f"solutions/week6/{STEM}.ipynb"
REFERENCE = "autograder/reference/span_corruption.py"
SUITE = f"autograder/hidden/{STEM}/test_{STEM}.py"  # the notebook's one section
HAND_EDITED = {NOTEBOOK, REFERENCE, SUITE}
# The two edits that keep the test suite green: the contract, clause by clause, and its stand-ins.
CLAUSES = f"autograder/reference/clauses/{STEM}/{STEM}.toml"
VARIANTS = f"tests/grading/variants/{STEM}/{STEM}.py"
# Where regeneration may write, and what it must have rewritten for this function.
DERIVED_PLACES = ("README.md", "assignments/week6/", "handouts/week6.md", "handouts/week6.html",
                  "handouts/grading_map.md", "data/sample_submissions/")
REGENERATED = {"README.md", f"assignments/week6/{STEM}.ipynb", "handouts/week6.md", "handouts/week6.html",
               "handouts/grading_map.md", f"data/sample_submissions/alice_full_solution/week6/{STEM}.ipynb",
               "data/sample_submissions/expected.json"}

SIGNATURE = '''def count_masked(mask: torch.Tensor) -> int:
    """The number of True entries of a boolean mask.

    Args:
        mask: BoolTensor of any shape (an empty one too), on any device.

    Returns:
        How many entries are True, as a Python int (not a tensor).
    """
'''
SOLUTION_CELL = SIGNATURE + "    ### BEGIN SOLUTION\n    return int(mask.sum())\n    ### END SOLUTION"
WRONG_CELL = SIGNATURE + "    return int((~mask).sum())\n"
VISIBLE_TEST_CELL = f'''mask = torch.tensor([[True, False, True], [False, False, True]])
assert count_masked(mask) == 3, f"3 True entries, got {{count_masked(mask)}}"
assert type(count_masked(mask)) is int, "return a Python int, not a tensor"
print("count_masked: visible tests passed")

### BEGIN HIDDEN TESTS
# Graded by {SUITE} (grade_id test_{NAME}); not shipped to students.
### END HIDDEN TESTS'''
REFERENCE_FUNCTION = '''

def count_masked(mask: torch.Tensor) -> int:
    """The number of True entries of the boolean tensor ``mask`` (any shape), as a Python int."""
    return int(mask.sum())
'''
HIDDEN_TESTS = f'''

# =============================================================== count_masked ({NEW_POINTS})
@graded("test_count_masked")
def test_count_masked_random_masks(student):
    for seed, shape in enumerate([(7,), (3, 5), (2, 3, 4)]):
        mask = torch.rand(shape, generator=_gen(seed)) < 0.4
        expect_equal(student.call(mask), span_corruption.count_masked(mask),
                     what=f"count_masked of a random mask of shape {{shape}}")


@graded("test_count_masked")
def test_count_masked_edge_cases(student):
    masks = {{"an empty mask": torch.zeros(0, dtype=torch.bool), "a mask with no True entry":
             torch.zeros(4, dtype=torch.bool), "a mask of True entries only": torch.ones(2, 3, dtype=torch.bool)}}
    for name, mask in masks.items():
        expect_equal(student.call(mask), span_corruption.count_masked(mask), what=f"count_masked of {{name}}")
'''
CLAUSE_TABLE = f'''
[[{NAME}]]
id = "counts_true"
clause = "returns the number of True entries of mask, for any shape"
test = "test_{NAME}_random_masks"
mutant = "{NAME}_counts_false"

[[{NAME}]]
id = "edge_cases"
clause = "an empty mask and a mask without True entries count 0"
rule = "mask: BoolTensor of any shape (an empty one too), on any device."
test = "test_{NAME}_edge_cases"
mutant = "{NAME}_at_least_one"
'''
# Appended to the section's variants module: the mutants the table names, and two correct
# implementations written differently from the reference, added to ALTERNATIVES.
STAND_INS = f'''


def {NAME}_counts_false(mask):
    return int((~mask).sum())


def {NAME}_at_least_one(mask):
    return max(1, int(mask.sum()))


def {NAME}_by_nonzero(mask):
    return int(mask.count_nonzero())


def {NAME}_by_loop(mask):
    return sum(1 for value in mask.flatten().tolist() if value)


ALTERNATIVES += [{{"{NAME}": {NAME}_by_nonzero}}, {{"{NAME}": {NAME}_by_loop}}]
'''
# Run in the copy: the two students' notebooks, filled in as the samples are
# (solved(): the release with every solution cell taken from the source notebook).
WRITE_STUDENTS = """
import sys
from pathlib import Path

import nbformat

from autograder.build.sample_filling import replace, solved

stem, name, wrong_cell, out = sys.argv[1:]
correct = solved(stem)
for student, notebook in {"correct_student": correct,
                          "wrong_student": replace(correct, {name: wrong_cell})}.items():
    folder = Path(out) / student / "week6"
    folder.mkdir(parents=True)
    nbformat.write(notebook, folder / f"{stem}.ipynb")
"""


# ------------------------------------------------------------------------------ the copy
def git(copy: Path, *args: str) -> str:
    command = ["git", "-c", "user.name=test_authoring", "-c", "user.email=test_authoring@localhost",
               "-c", "commit.gpgsign=false", "-C", str(copy), *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def copy_of_the_repository(into: Path) -> Path:
    """The repository's files (tracked, and new ones git does not ignore) as a git repository
    of its own with one commit, so that ``git status`` shows what changes from here on."""
    listed = git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for name in filter(None, listed):
        source, target = REPO / name, into / name
        if os.path.lexists(source):  # a file deleted in the working tree is still in the index
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)
    git(into, "init", "--quiet")
    git(into, "add", "--all", "--force")
    git(into, "commit", "--quiet", "--no-verify", "-m", "the course before the new function")
    return into


def changed_files(copy: Path) -> set[str]:
    return {line[3:] for line in git(copy, "status", "--porcelain", "--untracked-files=all").splitlines()}


def in_copy(copy: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    """``python *args`` run from the copy, which it imports instead of this checkout; the
    environment's ``bin/`` first on PATH, as ``make`` puts it (nbgrader runs alembic from it)."""
    env = dict(os.environ, PYTHONPATH=str(copy),
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    return subprocess.run([sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True,
                          timeout=timeout)


def log(result: subprocess.CompletedProcess) -> str:
    return f"exit status {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"


# ------------------------------------------------------------------------------ the three edits
def add_the_cells(copy: Path) -> None:
    """The solution cell and its visible-test cell, right after the cell ``AFTER``."""
    path = copy / NOTEBOOK
    notebook = nbformat.read(path, as_version=4)
    solution = nbformat.v4.new_code_cell(SOLUTION_CELL, metadata={"nbgrader": {
        "grade": False, "grade_id": NAME, "locked": False, "schema_version": 3, "solution": True, "task": False}})
    test = nbformat.v4.new_code_cell(VISIBLE_TEST_CELL, metadata={"nbgrader": {
        "grade": True, "grade_id": f"test_{NAME}", "locked": True, "points": NEW_POINTS, "schema_version": 3,
        "solution": False, "task": False}})
    solution["id"], test["id"] = NAME.replace("_", "-"), f"test-{NAME}".replace("_", "-")
    after = next(index for index, cell in enumerate(notebook.cells)
                 if cell.metadata.get("nbgrader", {}).get("grade_id") == AFTER)
    notebook.cells[after + 1:after + 1] = [solution, test]
    nbformat.write(notebook, path)


def append(copy: Path, relative: str, text: str) -> None:
    with (copy / relative).open("a", encoding="utf-8") as handle:
        handle.write(text)


def add_the_function_by_hand(copy: Path) -> None:
    add_the_cells(copy)
    append(copy, REFERENCE, REFERENCE_FUNCTION)
    append(copy, SUITE, HIDDEN_TESTS)


# ------------------------------------------------------------------------------ checks
def check_what_was_regenerated(copy: Path, regenerated: set[str]) -> None:
    outside = sorted(path for path in regenerated if not path.startswith(DERIVED_PLACES))
    assert not outside, f"regeneration wrote outside the derived files: {outside}"
    assert REGENERATED <= regenerated, f"not regenerated: {sorted(REGENERATED - regenerated)}"
    release = (copy / "assignments" / "week6" / f"{STEM}.ipynb").read_text(encoding="utf-8")
    assert f"def {NAME}(" in release and "return int(mask.sum())" not in release and "HIDDEN TESTS" not in release
    box_line = f"> - `{STEM}.ipynb` → `{NAME}` (graded by `test_{NAME}`, {NEW_POINTS} points)"
    assert box_line in (copy / "handouts" / "week6.md").read_text(encoding="utf-8").splitlines()
    grading_map = (copy / "handouts" / "grading_map.md").read_text(encoding="utf-8")
    assert f"| `{NAME}` | `test_{NAME}` | auto | {NEW_POINTS} |" in grading_map
    expected = json.loads((copy / "data" / "sample_submissions" / "expected.json").read_text())
    full = load_course().notebook(STEM).auto_points + NEW_POINTS
    assert expected[f"alice_full_solution/{STEM}"] == {"score": full, "max_score": full}


def grade_two_students(copy: Path, scratch: Path) -> dict[str, dict]:
    """The reports of a correct and a wrong ``count_masked``, graded by the copy's grader."""
    submitted, out = scratch / "submitted", scratch / "grades"
    written = in_copy(copy, "-c", WRITE_STUDENTS, STEM, NAME, WRONG_CELL, str(submitted), timeout=300)
    assert written.returncode == 0, log(written)
    graded = in_copy(copy, "-m", "autograder", "grade", str(submitted), "--out", str(out), "--device", "cpu",
                     timeout=1200)
    assert graded.returncode == 0, log(graded)
    return {student: json.loads((out / student / f"{STEM}.json").read_text())
            for student in ("correct_student", "wrong_student")}


def points_of(report: dict, cell: str) -> tuple[float, float]:
    tests = [test for test in report["tests"] if test["grade_id"] == cell]
    return sum(test["points"] for test in tests), sum(test["max_points"] for test in tests)


# ------------------------------------------------------------------------------ the walk-through
@pytest.mark.slow
def test_a_function_added_in_three_files_is_regenerated_and_graded(tmp_path):
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and a git checkout of the repository")
    copy = copy_of_the_repository(tmp_path / "course")
    add_the_function_by_hand(copy)
    assert changed_files(copy) == HAND_EDITED, "the walk-through edits exactly three files by hand"

    regen = in_copy(copy, "-m", "autograder.build.regen", timeout=600)
    assert regen.returncode == 0, log(regen)
    check_what_was_regenerated(copy, changed_files(copy) - HAND_EDITED)
    check = in_copy(copy, "-m", "autograder.build.regen", "--check", timeout=600)
    assert check.returncode == 0, log(check)
    meta = in_copy(copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_handout.py",
                   "tests/test_notebooks.py", "-k", "not release_matches_nbgrader_output", timeout=600)
    assert meta.returncode == 0, log(meta)

    reports = grade_two_students(copy, tmp_path)
    full = load_course().notebook(STEM).auto_points + NEW_POINTS
    correct, wrong = reports["correct_student"], reports["wrong_student"]
    assert (correct["outcome"], correct["score"], correct["max_score"]) == ("graded", full, full), correct["tests"]
    assert points_of(correct, f"test_{NAME}") == (NEW_POINTS, NEW_POINTS)
    assert (wrong["score"], wrong["max_score"]) == (full - NEW_POINTS, full)
    assert points_of(wrong, f"test_{NAME}") == (0, NEW_POINTS)
    failed = [test for test in wrong["tests"] if test["status"] != "passed"]
    assert {test["grade_id"] for test in failed} == {f"test_{NAME}"}, failed
    assert all(test["status"] == "failed" and NAME in test["message"] for test in failed), failed

    # The contract meta-test asks for the clause table; with it and the stand-ins, it passes.
    meta_tests = ("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/grading/test_clauses.py",
                  "tests/grading/test_suites.py", "tests/grading/test_docstring_rules.py", "-k", STEM)
    without = in_copy(copy, *meta_tests, timeout=600)
    assert without.returncode != 0 and NAME in without.stdout, log(without)
    append(copy, CLAUSES, CLAUSE_TABLE)
    append(copy, VARIANTS, STAND_INS)
    with_contract = in_copy(copy, *meta_tests, timeout=600)
    assert with_contract.returncode == 0, log(with_contract)


# ------------------------------------------------------------------------------ what is derived
def test_an_item_left_out_of_topics_is_counted_next_to_its_neighbour_in_the_notebook():
    items = notebook_items()
    complete = with_unlisted_items(items, TOPICS)  # TOPICS itself may already leave items out
    for left_out in [(STEM, "random_spans_noise_mask"), (STEM, "span_corrupt")]:  # the first item, then one after it
        fewer = [(key, title, [entry for entry in entries if entry != left_out]) for key, title, entries in complete]
        assert with_unlisted_items(items, fewer) == complete


def test_the_boxes_of_the_handout_are_written_from_the_topics():
    markdown = SOURCE_MD.read_text(encoding="utf-8")
    line = f"> - `{STEM}.ipynb` → `span_corrupt` (graded by `test_span_corrupt`, 4 points)"
    assert line in markdown.split("\n")
    stale = markdown.replace(line + "\n", "").replace("(graded by `test_random_spans_noise_mask`, 4 points)",
                                                      "(graded by `test_random_spans_noise_mask`, 5 points)")
    items = notebook_items()
    topics = with_unlisted_items(items, TOPICS)
    assert with_item_boxes(stale, items, topics) == markdown
    with pytest.raises(BuildError, match="topic P9"):
        with_item_boxes(markdown.replace("<!-- graded items: P5 -->", "<!-- graded items: P9 -->"), items, topics)
