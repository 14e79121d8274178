"""Stand-in students for the hidden suite of Part B (fine-tuning and LoRA), by section."""
from __future__ import annotations

from .. import gathered
from . import adapters, answers, finetuning, lora

MUTANTS, ALTERNATIVES, EXTRA_NAMESPACE, __getattr__ = gathered(finetuning, lora, adapters, answers)
