"""Stand-in students for the hidden suite of Part B (BERT and GPT), by section."""
from __future__ import annotations

from .. import gathered
from . import attention, decoding, encoder, losses, masking

MUTANTS, ALTERNATIVES, EXTRA_NAMESPACE, __getattr__ = gathered(masking, attention, losses, decoding, encoder)
