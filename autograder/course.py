"""The course's structure, read once from the source notebooks: the one place that knows it.

:data:`NOTEBOOK_ORDER` is the week's notebooks in the course's order (Part A, Part B:
BERT and GPT, then fine-tuning, then programming exercises 1-5). :func:`load_course`
reads ``solutions/week6/*.ipynb`` into a :class:`Course`: the notebooks in that
order and, for each, its nbgrader items in cell order:

* ``setup``: a locked cell of imports and constants (``setup_<name>``);
* ``solution``: a graded function, class or answer constant, linked to its
  visible-test cell ``test_<grade_id>``;
* ``test``: a visible-test cell, with the points its hidden tests award, linked to
  the solution cell it grades;
* ``written``: a written answer (markdown), with the points a TA awards by hand, and
  the experiments whose recorded values it quotes (``quotes``: the formgrader shows
  the TA what the student's notebook recorded for them, ``autograder/printed.py``).

Each notebook also knows its "What you should see" tables (``tables``: experiment
name -> the table's markdown), which a quoted experiment must have.

The handout's grading map, ``nbgrader export``'s column order, the student bundle's
table of points, the sample submissions' expected scores and the tests read the
course from here instead of keeping their own lists. Cells are classified only by
the validated accessors of :mod:`autograder.notebook` (docs/authoring.md describes
the kinds). A notebook on disk that the order does not name, a notebook the order
names that is missing, malformed metadata, a duplicated ``grade_id`` or a solution
without its test cell is a :class:`CourseError` that says what to fix.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .notebook import (
    _nbgrader,
    cell_points,
    cell_source,
    is_setup,
    is_solution_code,
    is_test_cell,
    is_written_answer,
    metadata_problem,
    quoted_experiments,
    reference_table,
    source_notebook_path,
)
from .paths import ASSIGNMENT, REPO, SOURCE_DIR

# The course's order of the week's notebooks, and its only home: every other module
# reads it through load_course() (tests/grading/test_course.py checks that).
NOTEBOOK_ORDER = (
    "part_a_discovery",
    "part_b_bert_gpt",
    "part_b_finetuning",
    "exercise1_masked_predictions",
    "exercise2_finetune_vs_scratch",
    "exercise3_classification_as_generation",
    "exercise4_model_size",
    "exercise5_span_corruption",
)

SETUP, SOLUTION, TEST, WRITTEN = "setup", "solution", "test", "written"
KINDS = (SETUP, SOLUTION, TEST, WRITTEN)
GRADED_KINDS = (TEST, WRITTEN)  # the kinds that carry points
TEST_PREFIX = "test_"


class CourseError(Exception):
    """The source notebooks and the course's structure disagree; the message says what to fix."""


class UnknownNotebook(CourseError, LookupError):
    """A stem that is not one of the course's notebooks."""


@dataclass(frozen=True)
class Item:
    """One nbgrader cell of a source notebook."""

    notebook: str        # the notebook's stem
    grade_id: str
    kind: str            # one of KINDS
    points: float        # a test cell's or written answer's points; 0 for setup and solution cells
    index: int           # the cell's position in the source notebook
    test: str | None = None      # a solution cell: the grade_id of its visible-test cell
    solution: str | None = None  # a test cell: the grade_id of the solution cell it grades
    source: str = field(default="", repr=False, compare=False)  # the instructor's cell (a setup cell's code)
    quotes: tuple[str, ...] = ()  # a written answer: the experiments whose recorded values it quotes

    @property
    def graded(self) -> bool:
        """True for the cells that carry points (test cells and written answers)."""
        return self.kind in GRADED_KINDS


class PointTotals:
    """The auto-graded, written and total points of what holds items: a notebook, the course."""

    def of_kind(self, kind: str) -> Sequence[Item]:
        raise NotImplementedError

    @property
    def auto_points(self) -> float:
        return float(sum(item.points for item in self.of_kind(TEST)))

    @property
    def written_points(self) -> float:
        return float(sum(item.points for item in self.of_kind(WRITTEN)))

    @property
    def points(self) -> float:
        return self.auto_points + self.written_points


@dataclass(frozen=True)
class Notebook(PointTotals):
    """A source notebook and its items, in cell order."""

    stem: str
    path: Path
    items: tuple[Item, ...]
    # experiment -> its "What you should see" table (markdown), in the notebook's order
    tables: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def filename(self) -> str:
        return f"{self.stem}.ipynb"

    def of_kind(self, kind: str) -> tuple[Item, ...]:
        _check_kind(kind)
        return tuple(item for item in self.items if item.kind == kind)

    @property
    def setup(self) -> tuple[Item, ...]:
        return self.of_kind(SETUP)

    @property
    def solutions(self) -> tuple[Item, ...]:
        return self.of_kind(SOLUTION)

    @property
    def tests(self) -> tuple[Item, ...]:
        return self.of_kind(TEST)

    @property
    def written(self) -> tuple[Item, ...]:
        return self.of_kind(WRITTEN)

    @property
    def graded(self) -> tuple[Item, ...]:
        """Test cells and written answers, in cell order."""
        return tuple(item for item in self.items if item.graded)

    @property
    def test_points(self) -> dict[str, float]:
        """grade_id -> points of every visible-test cell (what the hidden suite awards)."""
        return {item.grade_id: item.points for item in self.tests}

    def item(self, grade_id: str) -> Item:
        for item in self.items:
            if item.grade_id == grade_id:
                return item
        raise KeyError(f"{self.filename} has no cell with grade_id {grade_id!r}")

    def test_of(self, solution: str) -> Item:
        """The visible-test cell that grades the solution cell ``solution``."""
        item = self.item(solution)
        if item.kind != SOLUTION:
            raise KeyError(f"{self.filename}: {solution!r} is a {item.kind} cell, not a solution cell")
        return self.item(item.test)

    def points_except(self, *solutions: str) -> float:
        """Auto-graded points left when the tests of these solution cells earn nothing."""
        lost = {self.test_of(solution).grade_id for solution in solutions}
        return float(sum(item.points for item in self.tests if item.grade_id not in lost))


@dataclass(frozen=True)
class Course(PointTotals):
    """The week's notebooks in the course's order."""

    source_dir: Path
    notebooks: tuple[Notebook, ...]

    @property
    def stems(self) -> list[str]:
        return [notebook.stem for notebook in self.notebooks]

    def notebook(self, stem: str) -> Notebook:
        for notebook in self.notebooks:
            if notebook.stem == stem:
                return notebook
        raise UnknownNotebook(f"'{stem}' is not one of the course's notebooks "
                              f"(known: {', '.join(self.stems)}; the order is NOTEBOOK_ORDER in autograder/course.py)")

    def items(self, kind: str | None = None) -> list[Item]:
        """Every item of every notebook, in order; only those of ``kind`` when given."""
        if kind is not None:
            _check_kind(kind)
        return [item for notebook in self.notebooks for item in notebook.items if kind is None or item.kind == kind]

    def of_kind(self, kind: str) -> list[Item]:
        return self.items(kind)


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown item kind {kind!r} (one of {', '.join(KINDS)})")


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


def _kind(cell) -> str | None:
    """The kind of a cell whose metadata :func:`metadata_problem` accepted; None for text and experiments."""
    if is_setup(cell):
        return SETUP
    if is_solution_code(cell):
        return SOLUTION
    if is_test_cell(cell):
        return TEST
    if is_written_answer(cell):
        return WRITTEN
    return None


def read_source_notebook(stem: str, path: Path) -> tuple[tuple[Item, ...], dict[str, str]]:
    """(the items, the reference tables) of one source notebook; raises :class:`CourseError` for
    what the grader cannot use."""
    import nbformat  # 0.9 s of imports: only where a notebook is read

    where = _shown(path)
    try:
        notebook = nbformat.read(path, as_version=4)
    except Exception as err:  # nbformat raises several unrelated types for bad files
        raise CourseError(f"{where} is not a readable notebook: {err}") from err
    tables = {}
    for cell in notebook.cells:
        experiment = reference_table(cell)
        if experiment:
            tables[experiment] = cell_source(cell)
    quotes: dict[str, tuple[str, ...]] = {}
    found: list[tuple[int, str, str, float, str]] = []  # (index, grade_id, kind, points, source)
    for index, cell in enumerate(notebook.cells):
        why = metadata_problem(cell)
        if why is not None:
            raise CourseError(f"{where}, cell {index + 1}: {why}; fix its nbgrader metadata (docs/authoring.md)")
        meta = _nbgrader(cell)
        kind = _kind(cell)
        if kind is None:
            if meta.get("grade") or meta.get("task"):
                raise CourseError(f"{where}, cell {index + 1} ({meta.get('grade_id', 'no grade_id')}): a graded "
                                  f"{cell.get('cell_type')} cell that is neither a visible-test cell nor a written "
                                  "answer; the grader supports only the cell kinds of docs/authoring.md")
            continue
        grade_id, points = cell_points(cell)
        if not grade_id:
            raise CourseError(f"{where}, cell {index + 1}: a {kind} cell without a grade_id")
        try:
            quotes[grade_id] = quoted_experiments(cell)
        except ValueError as err:
            raise CourseError(f"{where}, cell {index + 1} ({grade_id}): {err} (docs/authoring.md)") from None
        if quotes[grade_id] and kind != WRITTEN:
            raise CourseError(f"{where}, cell {index + 1} ({grade_id}): only a written answer quotes experiments")
        for experiment in quotes[grade_id]:
            if experiment not in tables:
                raise CourseError(f"{where}, cell {index + 1} ({grade_id}) quotes the experiment {experiment!r}, "
                                  "but the notebook has no \"What you should see\" table of that name: name an "
                                  f"experiment the notebook records (one of: {', '.join(tables) or 'none'})")
        found.append((index, grade_id, kind, points if kind in GRADED_KINDS else 0.0, cell_source(cell)))

    seen: dict[str, int] = {}
    for index, grade_id, *_ in found:
        if grade_id in seen:
            raise CourseError(f"{where}: cells {seen[grade_id] + 1} and {index + 1} share the grade_id "
                              f"{grade_id!r}; every grade_id must be unique")
        seen[grade_id] = index
    kinds = {grade_id: kind for _, grade_id, kind, *_ in found}
    items = []
    for index, grade_id, kind, points, source in found:
        test = solution = None
        if kind == SOLUTION:
            test = TEST_PREFIX + grade_id
            if kinds.get(test) != TEST:
                raise CourseError(f"{where}: the solution cell {grade_id!r} has no visible-test cell {test!r} "
                                  "(docs/authoring.md)")
        elif kind == TEST:
            solution = grade_id.removeprefix(TEST_PREFIX)
            if not grade_id.startswith(TEST_PREFIX) or kinds.get(solution) != SOLUTION:
                raise CourseError(f"{where}: the visible-test cell {grade_id!r} is not named test_<solution> "
                                  "after a solution cell of the notebook (docs/authoring.md)")
        items.append(Item(stem, grade_id, kind, float(points), index, test=test, solution=solution, source=source,
                          quotes=quotes[grade_id]))
    return tuple(items), tables


def read_course(source_dir: Path = SOURCE_DIR, order: tuple[str, ...] = NOTEBOOK_ORDER) -> Course:
    """Read the course from ``source_dir/week6/`` (uncached; :func:`load_course` caches it)."""
    source_dir = Path(source_dir)
    folder = source_dir / ASSIGNMENT
    present = sorted(path.stem for path in folder.glob("*.ipynb"))
    unlisted = [stem for stem in present if stem not in order]
    missing = [stem for stem in order if stem not in present]
    problems = []
    if unlisted:
        problems.append(f"{', '.join(f'{stem}.ipynb' for stem in unlisted)} in {_shown(folder)} "
                        f"{'is' if len(unlisted) == 1 else 'are'} not in the course's order: add "
                        f"{'it' if len(unlisted) == 1 else 'them'} to NOTEBOOK_ORDER in autograder/course.py "
                        "(and at least one of its graded items to TOPICS in handouts/build.py), or remove the file")
    if missing:
        problems.append(f"NOTEBOOK_ORDER in autograder/course.py names "
                        f"{', '.join(f'{stem}.ipynb' for stem in missing)}, missing from {_shown(folder)}: "
                        "restore the notebook, or remove it from NOTEBOOK_ORDER")
    if problems:
        raise CourseError("; ".join(problems))
    notebooks = []
    for stem in order:
        path = source_notebook_path(stem, source_dir)
        items, tables = read_source_notebook(stem, path)
        notebooks.append(Notebook(stem, path, items, tables))
    return Course(source_dir, tuple(notebooks))


@functools.lru_cache(maxsize=None)
def load_course(source_dir: Path = SOURCE_DIR) -> Course:
    """The course read from ``source_dir`` (``solutions/``), once per process.

    The notebooks are read at the first call; a process that edits them (a test)
    calls ``load_course.cache_clear()``."""
    return read_course(Path(source_dir))
