"""Stand-in student solutions for testing the hidden suites, one package per notebook.

``tests/grading/variants/<stem>/`` belongs to the notebook ``<stem>``: a module per
section of the notebook (the sections of its hidden suite, ``autograder/hidden/<stem>/``),
and an ``__init__.py`` that gathers them (:func:`gathered`). A section module holds:

* ``MUTANTS``: rounds of deliberately wrong versions, one typical bug each. In one
  round every mutated name belongs to a different cell; a suite must take points
  off the cells of the round's names, and off no other cell.
* ``ALTERNATIVES``: rounds of correct versions written differently from the
  reference (other random draws, a KV cache, log-sum-exp, ...). A suite must give
  them full marks: tests may check the contract, not the reference's particular choices.
* ``EXTRA_NAMESPACE`` (optional): what the suite needs from a student besides the
  reference modules, for example an answer constant that only the reference computes.

Each round maps a student name (function, class or answer constant) to its
replacement; the name must be one that a solution cell of the notebook defines
(tests/grading/test_suites.py checks that, and that every notebook with auto-graded
points has a package here).
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from types import ModuleType


def of(stem: str) -> ModuleType | None:
    """The variants package of notebook ``stem``; None when there is none."""
    name = f"{__name__}.{stem}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name != name:
            raise
        return None


def stems() -> list[str]:
    """The notebooks that have a variants package."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__))


def gathered(*sections: ModuleType) -> tuple[list[dict], list[dict], dict, Callable[[str], object]]:
    """A notebook's ``MUTANTS``, ``ALTERNATIVES`` and ``EXTRA_NAMESPACE`` from its section modules,
    and a module ``__getattr__`` that finds any other name (a mutant a clause table names) in the
    section that defines it.

    Round i of the notebook is round i of every section together: sections grade different
    cells, so a round still replaces each cell at most once, and the notebook has as many rounds
    as its longest section (every round is a full run of the suite)."""
    def rounds(table: str) -> list[dict]:
        tables = [getattr(section, table, []) for section in sections]
        merged = [{} for _ in range(max(map(len, tables), default=0))]
        for section, section_rounds in zip(sections, tables):
            for index, section_round in enumerate(section_rounds):
                shared = merged[index].keys() & section_round.keys()
                assert not shared, f"{section.__name__}.{table}[{index}] replaces {sorted(shared)} of another section"
                merged[index].update(section_round)
        return merged

    extra = {name: value for section in sections for name, value in getattr(section, "EXTRA_NAMESPACE", {}).items()}

    def __getattr__(name: str) -> object:
        for section in sections:
            if name in vars(section):
                return vars(section)[name]
        raise AttributeError(f"module {sections[0].__package__!r} has no attribute {name!r}")

    return rounds("MUTANTS"), rounds("ALTERNATIVES"), extra, __getattr__
