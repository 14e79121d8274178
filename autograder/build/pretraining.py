"""The course's reference functions for pre-training, offered to ``week6_pretraining``.

``pyproject.toml`` registers :func:`reference_functions` under the entry-point group
``week6_pretraining.functions``, so ``python -m week6_pretraining.train`` and
``.evaluate`` train and score the course's checkpoints with the references while the
pre-training package itself imports nothing of the grader (students install it alone).
"""
from __future__ import annotations

import functools

from ..reference.losses import clm_loss, mlm_loss
from ..reference.masking import continuation_table, mask_tokens, whole_word_mask
from ..reference.span_corruption import random_spans_noise_mask, span_corrupt, span_corruption_loss


def whole_word_masking(tokenizer, device):
    """The reference ``whole_word_mask`` bound to ``tokenizer``'s "##" pieces: a ``mask_fn``."""
    return functools.partial(whole_word_mask, continuation=continuation_table(tokenizer).to(device))


def reference_functions() -> dict:
    """Keyword arguments of ``week6_pretraining.functions.Functions``."""
    return {"mask_fn": mask_tokens, "mlm_loss_fn": mlm_loss, "clm_loss_fn": clm_loss,
            "noise_fn": random_spans_noise_mask, "corrupt_fn": span_corrupt, "span_loss_fn": span_corruption_loss,
            "whole_word_mask_fn": whole_word_masking}
