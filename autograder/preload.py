"""What every grading process needs, imported once by the fork server (``runner.py``).

The lists are derived, not repeated: the transformers modules that the hidden
suites' fixtures declare (``autograder.drivers.models``), every reference module,
and the course model. A module that fails to import here costs time, never
correctness: the job imports it itself and reports the error where it matters.
"""
from __future__ import annotations

import contextlib
import gc
import importlib
import pkgutil

import pytest  # noqa: F401
import torch  # noqa: F401

import autograder.reference as reference
from autograder import grading
from autograder.drivers import models, probes  # noqa: F401  (registers the fixtures)
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

# Everything imported so far lives as long as the process: out of the garbage
# collector's sight, a collection in a job scans only what the job made, and the
# forked jobs share these pages instead of copying them when a collection touches them.
gc.freeze()
