"""Stand-in students for the hidden suite of exercise3_classification_as_generation.ipynb, in one section."""
from __future__ import annotations

from .. import gathered
from . import exercise3_classification_as_generation

MUTANTS, ALTERNATIVES, EXTRA_NAMESPACE, __getattr__ = gathered(exercise3_classification_as_generation)
