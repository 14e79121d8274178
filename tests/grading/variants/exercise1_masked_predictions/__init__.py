"""Stand-in students for the hidden suite of exercise1_masked_predictions.ipynb, in one section."""
from __future__ import annotations

from .. import gathered
from . import exercise1_masked_predictions

MUTANTS, ALTERNATIVES, EXTRA_NAMESPACE, __getattr__ = gathered(exercise1_masked_predictions)
