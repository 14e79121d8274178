"""Stand-in students for the hidden suite of exercise2_finetune_vs_scratch.ipynb, in one section."""
from __future__ import annotations

from .. import gathered
from . import exercise2_finetune_vs_scratch

MUTANTS, ALTERNATIVES, EXTRA_NAMESPACE, __getattr__ = gathered(exercise2_finetune_vs_scratch)
