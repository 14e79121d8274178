"""Stand-in students for the losses section of part_b_bert_gpt.ipynb (B2): the two pre-training losses."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from autograder.reference import losses

from ._common import _on_cpu


def clm_loss_unshifted(logits, input_ids, attention_mask=None):
    labels = input_ids if attention_mask is None else input_ids.masked_fill(attention_mask == 0, -100)
    return losses.mlm_loss(logits, labels)


def clm_loss_nan_when_empty(logits, input_ids, attention_mask=None):
    targets = input_ids[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, 1:] == 0, -100)
    return F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-100)


def mlm_loss_over_all_positions(logits, labels):
    """Divides by every position instead of the labelled ones."""
    flat = logits.float().reshape(-1, logits.size(-1))
    total = F.cross_entropy(flat, labels.reshape(-1), ignore_index=-100, reduction="sum")
    return total / labels.numel()


def clm_loss_by_hand(logits, input_ids, attention_mask=None):
    log_probs = logits.float().log_softmax(-1)[:, :-1]
    picked = log_probs.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    weight = torch.ones_like(picked) if attention_mask is None else attention_mask[:, 1:].float()
    return -(picked * weight).sum() / weight.sum().clamp(min=1)


def _naive_log_softmax(x):
    e = torch.exp(x)
    return torch.log(e / e.sum(-1, keepdim=True))


def clm_loss_ignores_mask(logits, input_ids, attention_mask=None):
    return losses.clm_loss(logits, input_ids)


def clm_loss_mean_of_sequences(logits, input_ids, attention_mask=None):
    """Every sequence weighs the same, not every token."""
    rows = [losses.clm_loss(logits[b:b + 1], input_ids[b:b + 1],
                            None if attention_mask is None else attention_mask[b:b + 1])
            for b in range(logits.size(0))]
    return torch.stack(rows).mean()


def clm_loss_mask_of_inputs(logits, input_ids, attention_mask=None):
    """Masks a target when the token that predicts it is padding (attention_mask[:, :-1])."""
    targets = input_ids[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, :-1] == 0, -100)
    return losses.mlm_loss(logits[:, :-1], targets)


def clm_loss_naive_softmax(logits, input_ids, attention_mask=None):
    log_probs = _naive_log_softmax(logits.float())[:, :-1]
    picked = log_probs.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    weight = torch.ones_like(picked) if attention_mask is None else attention_mask[:, 1:].float()
    return -(picked * weight).sum() / weight.sum().clamp(min=1)


def clm_loss_in_input_dtype(logits, input_ids, attention_mask=None):
    log_probs = logits.log_softmax(-1)[:, :-1]
    picked = log_probs.gather(-1, input_ids[:, 1:, None]).squeeze(-1).float()
    weight = torch.ones_like(picked) if attention_mask is None else attention_mask[:, 1:].float()
    return -(picked * weight).sum() / weight.sum().clamp(min=1)


def clm_loss_as_float(logits, input_ids, attention_mask=None):
    return float(losses.clm_loss(logits, input_ids, attention_mask))


clm_loss_on_cpu = _on_cpu(losses.clm_loss)


def mlm_loss_batched_only(logits, labels):
    """Flattens the first two dimensions: right for [B, T, V], wrong for [N, V]."""
    return losses.mlm_loss(logits.flatten(0, 1), labels.flatten(0, 1) if labels.dim() > 1 else labels)


def mlm_loss_nan_when_empty(logits, labels):
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100)


def mlm_loss_naive_softmax(logits, labels):
    flat, targets = _naive_log_softmax(logits.float().reshape(-1, logits.size(-1))), labels.reshape(-1)
    chosen = targets != -100
    return -flat[chosen].gather(-1, targets[chosen, None]).sum() / chosen.sum().clamp(min=1)


def mlm_loss_in_input_dtype(logits, labels):
    flat, targets = logits.reshape(-1, logits.size(-1)).log_softmax(-1), labels.reshape(-1)
    chosen = targets != -100
    return -flat[chosen].gather(-1, targets[chosen, None]).float().sum() / chosen.sum().clamp(min=1)


mlm_loss_on_cpu = _on_cpu(losses.mlm_loss)


def clm_loss_per_token(logits, input_ids, attention_mask=None):
    v = logits.size(-1)
    per_token = F.cross_entropy(logits[:, :-1].float().reshape(-1, v), input_ids[:, 1:].reshape(-1), reduction="none")
    weight = (torch.ones_like(per_token) if attention_mask is None
              else attention_mask[:, 1:].reshape(-1).to(per_token.dtype))
    return (per_token * weight).sum() / weight.sum().clamp(min=1)


def mlm_loss_by_logsumexp(logits, labels):
    x, y = logits.float().reshape(-1, logits.size(-1)), labels.reshape(-1)
    chosen = y != -100
    x, y = x[chosen], y[chosen]
    return (x.logsumexp(-1) - x.gather(-1, y[:, None]).squeeze(-1)).sum() / chosen.sum().clamp(min=1)


def mlm_loss_by_nll(logits, labels):
    log_probs = logits.float().reshape(-1, logits.size(-1)).log_softmax(-1)
    total = F.nll_loss(log_probs, labels.reshape(-1), ignore_index=-100, reduction="sum")
    return total / (labels != -100).sum().clamp(min=1)


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"clm_loss": clm_loss_unshifted, "mlm_loss": mlm_loss_over_all_positions},
    {"clm_loss": clm_loss_nan_when_empty},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"clm_loss": clm_loss_by_hand},
    {"clm_loss": clm_loss_per_token, "mlm_loss": mlm_loss_by_logsumexp},
    {"mlm_loss": mlm_loss_by_nll},
]
