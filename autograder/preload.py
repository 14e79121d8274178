"""What every grading process needs, imported once by the fork server (``runner.py``).

The lists are derived, not repeated: the transformers modules that the hidden
suites' fixtures declare (``autograder.drivers.models``), every reference module,
the course model and the hidden suites' modules. A module that fails to import here costs time, never
correctness: the job imports it itself and reports the error where it matters.
"""
from __future__ import annotations

import contextlib
import gc
import importlib
import pkgutil
import sys

import pytest  # noqa: F401
import torch  # noqa: F401

import autograder.reference as reference
from autograder import grading
from autograder.drivers import models, probes  # noqa: F401  (registers the fixtures)
from autograder.pytest_plugin import HIDDEN_DIR, suite_modules
from autograder.sandbox import worker  # noqa: F401
from autograder.sandbox.fixtures import fixture_imports

MODULES = sorted(set(fixture_imports())
                 | {"week6_helpers.assets"}
                 | {f"{reference.__name__}.{info.name}" for info in pkgutil.iter_modules(reference.__path__)})

for _name in MODULES:
    with contextlib.suppress(ImportError):
        importlib.import_module(_name)

# The course model: every job plans from the instructor notebooks read here, once.
with contextlib.suppress(Exception):
    grading.load_course()

# The hidden suites' modules, under the names pytest's "prepend" import mode gives them
# (a suite is a package below HIDDEN_DIR, which pytest puts first on sys.path): a job's
# pytest finds each one imported and collects it without executing it again. Nothing
# runs at import but definitions and module-level caches, which stay empty here, so
# every job still starts from a clean suite.
with contextlib.suppress(Exception):
    if str(HIDDEN_DIR) not in sys.path:
        sys.path.insert(0, str(HIDDEN_DIR))
    for _stem in sorted(path.name for path in HIDDEN_DIR.iterdir() if (path / "__init__.py").is_file()):
        for _module in suite_modules(_stem):
            importlib.import_module(_stem if _module.stem == "__init__" else f"{_stem}.{_module.stem}")

# Everything imported so far lives as long as the process: out of the garbage
# collector's sight, a collection in a job scans only what the job made, and the
# forked jobs share these pages instead of copying them when a collection touches them.
gc.freeze()
