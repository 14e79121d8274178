"""Stand-in students for the hidden suite of exercise5_span_corruption.ipynb, in one section."""
from __future__ import annotations

from .. import gathered
from . import exercise5_span_corruption

MUTANTS, ALTERNATIVES, EXTRA_NAMESPACE, __getattr__ = gathered(exercise5_span_corruption)
