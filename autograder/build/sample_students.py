"""The sample students, read from their files: what each submits and what it must score.

``data/sample_submissions/<student>.toml`` describes the notebooks of the folder
``<student>/`` beside it, one table per notebook it submits
(``[notebooks.<stem>]``; ``[notebooks."*"]`` is every notebook of the course with
auto-graded cells):

* ``base``: ``"solved"`` (the release with every answer filled in) or ``"release"``
  (as handed out);
* ``stubs``: cells left as released (code or written answers);
* ``cells``: grade_id -> the cell's source, a string or a list of parts joined in
  order: strings, ``{ fragment = NAME }`` (named code, from the file's own
  ``[fragments]`` or the class's ``fragments.toml``), and ``{ released = true }``
  (the released cell without its stub lines, for a cheat that builds on the stub);
* ``written``: grade_id -> a written answer in place of the solved one;
* ``surgery``: ``delete`` (grade_ids), ``rename`` (grade_id -> new grade_id),
  ``duplicate`` (grade_id -> ``{ id, source }``);
* ``break_metadata``: the solution cell whose nbgrader metadata, with two markdown
  cells', is broken;
* ``cut_in_half``: true for a file that is the first half of the notebook's JSON;
* ``filed_under``: a folder below ``week6/`` that the notebook is filed in;
* ``expected``: what grading it must give: ``score`` (by default, for a solved base,
  every auto-graded point except those of the solution cells the recipe changes),
  ``max_score`` (by default the notebook's auto-graded points), and ``statuses``,
  ``messages``, ``needs_bwrap`` as ``tests/grading/test_samples.py`` reads them.

The filling itself is :mod:`autograder.build.sample_filling`; ``expected.json`` and the
notebooks are written by :mod:`autograder.build.samples`.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..course import load_course
from ..paths import SAMPLES

FOLDER = SAMPLES  # the student files, and the notebooks made from them (a test points it at a copy)
FRAGMENTS = "fragments.toml"              # code that several students share, by name
WRITTEN_ANSWERS = "written_answers.toml"  # a solved notebook's written answers: stem -> grade_id -> answer
CLASS_FILES = (FRAGMENTS, WRITTEN_ANSWERS)
EVERY_NOTEBOOK = "*"
BASES = ("solved", "release")
RECIPE_KEYS = {"base", "stubs", "cells", "written", "surgery", "break_metadata", "cut_in_half", "filed_under",
               "expected"}
EXPECTED_KEYS = {"score", "max_score", "statuses", "messages", "needs_bwrap"}
SURGERY_KEYS = {"delete", "rename", "duplicate"}
STUDENT_KEYS = {"notebooks", "fragments"}


class SampleError(ValueError):
    """A student file that the builder cannot follow; the message names the file and the fix."""


class Released:
    """The part of a cell's source that is the released cell without its stub lines."""

    def __repr__(self) -> str:
        return "RELEASED"


RELEASED = Released()


@dataclass(frozen=True)
class Recipe:
    """How one notebook of a sample student is made, and what it must score."""

    student: str
    stem: str
    base: str
    stubs: tuple[str, ...] = ()
    cells: dict[str, tuple[str | Released, ...]] = field(default_factory=dict)
    written: dict[str, str] = field(default_factory=dict)
    surgery: dict = field(default_factory=dict)
    break_metadata: str | None = None
    cut_in_half: bool = False
    filed_under: str | None = None
    expected: dict = field(default_factory=dict)

    @property
    def below(self) -> str:
        """The notebook's path in the student's folder."""
        folder = f"week6/{self.filed_under}" if self.filed_under else "week6"
        return f"{folder}/{self.stem}.ipynb"

    def changed_cells(self) -> list[str]:
        """The grade_ids of the cells the recipe changes or removes (a duplicated cell's first
        copy stays as it was, and is the one graded)."""
        return [*self.stubs, *self.cells, *self.surgery.get("delete", ()), *self.surgery.get("rename", {}),
                *([self.break_metadata] if self.break_metadata else [])]

    def named_cells(self) -> list[str]:
        """Every grade_id the recipe names, each of which must be a cell of the release."""
        return [*self.changed_cells(), *self.written, *self.surgery.get("duplicate", {})]

    def changed_solutions(self) -> list[str]:
        """The course's solution cells of this notebook that the recipe changes or removes."""
        solutions = {item.grade_id for item in load_course().notebook(self.stem).solutions}
        return [grade_id for grade_id in dict.fromkeys(self.changed_cells()) if grade_id in solutions]


def _read(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise SampleError(f"{path.name}: {err}") from err


def _unknown(where: str, table: dict, known: set[str]) -> None:
    if extra := sorted(set(table) - known):
        raise SampleError(f"{where}: unknown key(s) {extra} (known: {sorted(known)}; "
                          "see autograder/build/sample_students.py)")


def fragments(folder: Path | None = None) -> dict[str, str]:
    """The class's shared code fragments, by name."""
    return _read(Path(folder or FOLDER) / FRAGMENTS)


def written_answers(folder: Path | None = None) -> dict[str, dict[str, str]]:
    """What a student writes in the manually graded markdown cells of a solved notebook."""
    return _read(Path(folder or FOLDER) / WRITTEN_ANSWERS)


def _source(where: str, value, own: dict[str, str], shared: dict[str, str]) -> tuple[str | Released, ...]:
    """A cell's source as its parts: strings, and :data:`RELEASED` where the released cell goes."""
    parts = []
    for part in value if isinstance(value, list) else [value]:
        if isinstance(part, str):
            parts.append(part)
        elif part == {"released": True}:
            parts.append(RELEASED)
        elif isinstance(part, dict) and set(part) == {"fragment"}:
            name = part["fragment"]
            if name in own and name in shared:
                raise SampleError(f"{where}: the fragment {name!r} is both the file's own and in {FRAGMENTS}")
            if name not in own and name not in shared:
                raise SampleError(f"{where}: no fragment {name!r} in the file's [fragments] or in {FRAGMENTS}")
            parts.append(own.get(name, shared.get(name)))
        else:
            raise SampleError(f"{where}: a part must be a string, {{ fragment = NAME }} or {{ released = true }}, "
                              f"not {part!r}")
    return tuple(parts)


def _recipes(student: str, data: dict, shared: dict[str, str]) -> list[Recipe]:
    where = f"{student}.toml"
    _unknown(where, data, STUDENT_KEYS)
    own = data.get("fragments", {})
    recipes = []
    for stem, table in data.get("notebooks", {}).items():
        here = f"{where} [notebooks.{stem}]"
        _unknown(here, table, RECIPE_KEYS)
        _unknown(f"{here} expected", table.get("expected", {}), EXPECTED_KEYS)
        _unknown(f"{here} surgery", table.get("surgery", {}), SURGERY_KEYS)
        if table.get("base") not in BASES:
            raise SampleError(f"{here}: base must be one of {BASES}, not {table.get('base')!r}")
        if "score" not in table.get("expected", {}) and table["base"] != "solved":
            raise SampleError(f"{here}: say its expected score (only a solved base has a default)")
        stems = ([notebook.stem for notebook in load_course().notebooks if notebook.tests]
                 if stem == EVERY_NOTEBOOK else [stem])
        cells = {grade_id: _source(f"{here} cells.{grade_id}", value, own, shared)
                 for grade_id, value in table.get("cells", {}).items()}
        for one in stems:
            recipes.append(Recipe(student, one, table["base"], tuple(table.get("stubs", ())), cells,
                                  dict(table.get("written", {})), dict(table.get("surgery", {})),
                                  table.get("break_metadata"), bool(table.get("cut_in_half", False)),
                                  table.get("filed_under"), dict(table.get("expected", {}))))
    if not recipes:
        raise SampleError(f"{where}: submits no notebook (add a [notebooks.<stem>] table)")
    return recipes


def load_students(folder: Path | None = None) -> dict[str, list[Recipe]]:
    """student -> its notebooks' recipes, from every ``<student>.toml`` of the folder."""
    folder = Path(folder or FOLDER)
    shared = fragments(folder)
    return {path.stem: _recipes(path.stem, _read(path), shared)
            for path in sorted(folder.glob("*.toml")) if path.name not in CLASS_FILES}
