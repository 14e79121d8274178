"""The two pre-training objectives as cross-entropy losses.

Causal LM (GPT):  L = -1/N * sum_t log p(x_{t+1} | x_1..x_t)   every next token is a target.
Masked LM (BERT): L = -1/N * sum_{i in M} log p(x_i | x with M corrupted)   only the selected set M.

Both are a mean of per-token cross-entropies over the positions that count, so
both are written with one helper that sums and divides by the count itself:
``F.cross_entropy(reduction="mean")`` would return NaN (0 / 0) when no position
counts, while sum / max(count, 1) returns a differentiable 0.
"""

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100  # label value that marks "no prediction here"


def _mean_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over targets != -100, in float32; 0.0 when there are none."""
    # Upcast: a softmax over tens of thousands of classes in float16/bfloat16
    # loses most of the probability mass of rare tokens to rounding.
    logits = logits.float().reshape(-1, logits.size(-1))
    targets = targets.reshape(-1).to(logits.device)
    total = F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX, reduction="sum")
    count = (targets != IGNORE_INDEX).sum()
    return total / count.clamp(min=1)


def clm_loss(
    logits: torch.Tensor,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal language-modelling loss: each position predicts the next token.

    Args:
        logits: [B, T, V] scores of a causal LM; ``logits[:, t]`` has read tokens
            0..t and is scored against ``input_ids[:, t + 1]``. The last position
            has no next token and is not scored, so T - 1 targets per row.
        input_ids: LongTensor [B, T], the same tokens the model read.
        attention_mask: optional [B, T] of 1 (real token) / 0 (padding). A target
            whose mask is 0 is ignored; which inputs the model read is not
            affected (that is the model's business). None: every target counts.

    Returns:
        The mean of -log p(target) over all scored targets of the batch (every
        token weighs the same, not every sequence), as a 0-dim float32 tensor on
        the device of ``logits``, computed in float32 whatever the logits' dtype.
        When nothing is scored (T == 1, or all targets masked) it is 0.0 and
        still differentiable. Equals the ``loss`` a ``transformers`` causal LM
        returns for ``labels = input_ids`` with padding replaced by -100.

    Not graded: gradients.
    """
    targets = input_ids[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, 1:] == 0, IGNORE_INDEX)
    return _mean_cross_entropy(logits[:, :-1], targets)


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Masked language-modelling loss: cross-entropy at the selected positions only.

    Args:
        logits: [..., V] scores (typically [B, T, V]), any floating dtype.
        labels: LongTensor [...] (the leading shape of ``logits``), holding the
            original token where a prediction is required and -100 elsewhere,
            as produced by ``masking.mask_tokens``.

    Returns:
        The mean of -log p(label) over positions with label != -100, as a 0-dim
        float32 tensor on the device of ``logits``; 0.0 (differentiable) when no
        position is labelled. Equals
        ``F.cross_entropy(logits.float().view(-1, V), labels.view(-1), ignore_index=-100)``
        whenever at least one label is set.

    Not graded: gradients.
    """
    return _mean_cross_entropy(logits, labels)
