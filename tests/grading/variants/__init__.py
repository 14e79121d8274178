"""Stand-in student solutions for testing the hidden suites, one module per notebook.

``tests/grading/variants/<stem>.py`` belongs to the notebook ``<stem>`` and holds:

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
points has a module here).
"""
from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def of(stem: str) -> ModuleType | None:
    """The variants module of notebook ``stem``; None when there is none."""
    name = f"{__name__}.{stem}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name != name:
            raise
        return None


def stems() -> list[str]:
    """The notebooks that have a variants module."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__))
