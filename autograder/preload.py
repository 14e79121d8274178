"""What every grading process needs, imported once by the fork server (``runner.py``).

The lists are derived, not repeated: the transformers modules behind the hidden
suites' fixtures (``grading.FIXTURE_MODULES``) and every reference module. A module
that fails to import here costs time, never correctness: the job imports it itself
and reports the error where it matters.
"""
from __future__ import annotations

import contextlib
import importlib
import pkgutil

import pytest  # noqa: F401
import torch  # noqa: F401

import autograder.reference as reference
from autograder import grading
from autograder.sandbox import launcher  # noqa: F401

MODULES = sorted({module for modules in grading.FIXTURE_MODULES.values() for module in modules}
                 | {"week6_helpers.assets"}
                 | {f"{reference.__name__}.{info.name}" for info in pkgutil.iter_modules(reference.__path__)})

for _name in MODULES:
    with contextlib.suppress(ImportError):
        importlib.import_module(_name)
