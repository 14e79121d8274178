"""Stand-in students for the hidden suite of exercise 1 (masked predictions)."""
from __future__ import annotations

import math

import torch

from autograder.reference import arithmetic, scoring


# ---------------------------------------------------------------- wrong
def _one_sequence(logits, input_ids):
    return (logits[0] if logits.dim() == 3 else logits), (input_ids[0] if input_ids.dim() == 2 else input_ids)


def top_k_renormalised_over_k(logits, input_ids, mask_token_id, k=5):
    """Softmax over the k best logits only: the k probabilities sum to one."""
    logits, input_ids = _one_sequence(logits, input_ids)
    if not 1 <= k <= logits.size(-1):
        raise ValueError("bad k")
    rows = logits[(input_ids == mask_token_id).to(logits.device)].float()
    top = rows.topk(k, dim=-1)
    return top.values.softmax(-1), top.indices


def top_k_first_blank_only(logits, input_ids, mask_token_id, k=5):
    probs, ids = scoring.top_k_mask_predictions(logits, input_ids, mask_token_id, k)
    return probs[:1], ids[:1]


def top_k_bert_mask_id(logits, input_ids, mask_token_id, k=5):
    """Looks for BERT's id 103 instead of the argument."""
    return scoring.top_k_mask_predictions(logits, input_ids, 103, k)


def top_k_softmax_in_input_dtype(logits, input_ids, mask_token_id, k=5):
    logits, input_ids = _one_sequence(logits, input_ids)
    if not 1 <= k <= logits.size(-1):
        raise ValueError("bad k")
    rows = logits[(input_ids == mask_token_id).to(logits.device)]
    top = rows.softmax(-1).topk(k, dim=-1)
    return top.values.float(), top.indices


def top_k_in_place(logits, input_ids, mask_token_id, k=5):
    """Right answer, but subtracts the maximum from the caller's logits in place."""
    logits.sub_(logits.max())
    return scoring.top_k_mask_predictions(logits, input_ids, mask_token_id, k)


def top_k_no_range_check(logits, input_ids, mask_token_id, k=5):
    logits, input_ids = _one_sequence(logits, input_ids)
    k = max(1, min(k, logits.size(-1)))
    return scoring.top_k_mask_predictions(logits, input_ids, mask_token_id, k)


# ---------------------------------------------------------------- correct, written differently
def top_k_by_log_softmax_and_sort(logits, input_ids, mask_token_id, k=5):
    """Loops over the positions, sorts log-probabilities in float64, exponentiates at the end."""
    logits = logits.reshape(-1, logits.size(-1))
    input_ids = input_ids.reshape(-1).cpu()
    if k < 1 or k > logits.size(-1):
        raise ValueError(f"k={k} out of range")
    probs, ids = [], []
    for position in range(input_ids.numel()):
        if int(input_ids[position]) == mask_token_id:
            row = torch.log_softmax(logits[position].double(), dim=-1)
            values, order = torch.sort(row, descending=True)
            probs.append(values[:k].exp().float())
            ids.append(order[:k])
    if not probs:
        return (torch.zeros(0, k, dtype=torch.float32, device=logits.device),
                torch.zeros(0, k, dtype=torch.long, device=logits.device))
    return torch.stack(probs), torch.stack(ids)


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"top_k_mask_predictions": top_k_renormalised_over_k},
    {"top_k_mask_predictions": top_k_first_blank_only},
    {"top_k_mask_predictions": top_k_bert_mask_id},
    {"top_k_mask_predictions": top_k_softmax_in_input_dtype},
    {"top_k_mask_predictions": top_k_in_place},
    {"top_k_mask_predictions": top_k_no_range_check},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"top_k_mask_predictions": top_k_by_log_softmax_and_sort},
]


# ---------------------------------------------------------------- wrong in one clause each
# Named by the clause tables (autograder/reference/clauses/exercise1_masked_predictions/).
def top_k_one_sequence_without_batch_dim(logits, input_ids, mask_token_id, k=5):
    if logits.dim() != 2 or input_ids.dim() != 1:
        raise ValueError("expected logits [T, V] and input_ids [T]")
    return scoring.top_k_mask_predictions(logits, input_ids, mask_token_id, k)


def top_k_default_three(logits, input_ids, mask_token_id, k=3):
    return scoring.top_k_mask_predictions(logits, input_ids, mask_token_id, k)


def top_k_empty_without_columns(logits, input_ids, mask_token_id, k=5):
    probs, ids = scoring.top_k_mask_predictions(logits, input_ids, mask_token_id, k)
    return (probs, ids) if len(ids) else (probs.reshape(0), ids.reshape(0))


def top_k_naive_softmax(logits, input_ids, mask_token_id, k=5):
    logits, input_ids = _one_sequence(logits, input_ids)
    if not 1 <= k <= logits.size(-1):
        raise ValueError("bad k")
    rows = logits[(input_ids == mask_token_id).to(logits.device)].float()
    e = rows.exp()
    top = (e / e.sum(-1, keepdim=True)).topk(k, dim=-1)
    return top.values, top.indices


def top_k_results_on_cpu(logits, input_ids, mask_token_id, k=5):
    probs, ids = scoring.top_k_mask_predictions(logits, input_ids, mask_token_id, k)
    return probs.cpu(), ids.cpu()


def top_k_ids_on_their_own_device(logits, input_ids, mask_token_id, k=5):
    """Indexes the logits with positions on the device of input_ids."""
    logits, input_ids = _one_sequence(logits, input_ids)
    if not 1 <= k <= logits.size(-1):
        raise ValueError("bad k")
    positions = torch.nonzero(input_ids == mask_token_id).flatten()
    top = logits.index_select(0, positions).float().softmax(-1).topk(k, dim=-1)
    return top.values, top.indices


# ---------------------------------------------------------------- more correct ones, written differently
def top_k_by_boolean_rows(logits, input_ids, mask_token_id, k=5):
    """Selects the [MASK] rows with a boolean mask; probabilities from a float64 log-sum-exp."""
    logits = logits.squeeze(0) if logits.dim() == 3 else logits
    input_ids = input_ids.squeeze(0) if input_ids.dim() == 2 else input_ids
    if not 1 <= k <= logits.size(-1):
        raise ValueError(f"k must be in [1, {logits.size(-1)}]")
    rows = logits[(input_ids == mask_token_id).to(logits.device)].double()
    values, ids = rows.topk(k, dim=-1)
    return (values - rows.logsumexp(-1, keepdim=True)).exp().float(), ids


ALTERNATIVES += [{"top_k_mask_predictions": top_k_by_boolean_rows}]


# ---------------------------------------------------------------- bits_per_example
def bits_by_ratio_of_rates(seq_len, *, mask_rate, mlm_bits_per_target, clm_bits_per_target):
    """Correct: the ratio from the per-token rates, the counts from it."""
    if seq_len < 2 or not (0 < mask_rate <= 1) or min(mlm_bits_per_target, clm_bits_per_target) < 0:
        raise ValueError("out of range")
    counts = {"mlm_targets": seq_len * mask_rate, "clm_targets": seq_len - 1.0}
    bits = {"mlm_bits": counts["mlm_targets"] * mlm_bits_per_target,
            "clm_bits": counts["clm_targets"] * clm_bits_per_target}
    ratio = ((seq_len - 1) * clm_bits_per_target) / (seq_len * mask_rate * mlm_bits_per_target) \
        if mlm_bits_per_target else math.inf
    return {**counts, **bits, "clm_over_mlm": float(ratio)}


def bits_in_one_expression(seq_len, *, mask_rate, mlm_bits_per_target, clm_bits_per_target):
    """Correct: checks with explicit raises, floats through float()."""
    for ok, message in ((seq_len >= 2, "seq_len"), (0 < mask_rate <= 1, "mask_rate"),
                        (mlm_bits_per_target >= 0 and clm_bits_per_target >= 0, "bits")):
        if not ok:
            raise ValueError(message)
    m, c = float(mask_rate * seq_len), float(seq_len - 1)
    mb, cb = float(m * mlm_bits_per_target), float(c * clm_bits_per_target)
    return dict(mlm_targets=m, clm_targets=c, mlm_bits=mb, clm_bits=cb, clm_over_mlm=cb / mb if mb > 0 else math.inf)


def _bits(seq_len, mask_rate, mlm, clm):
    return arithmetic.bits_per_example(seq_len, mask_rate=mask_rate, mlm_bits_per_target=mlm, clm_bits_per_target=clm)


def bits_clm_counts_every_token(seq_len, *, mask_rate, mlm_bits_per_target, clm_bits_per_target):
    out = _bits(seq_len, mask_rate, mlm_bits_per_target, clm_bits_per_target)
    clm_bits = seq_len * clm_bits_per_target
    return {**out, "clm_targets": float(seq_len), "clm_bits": clm_bits,
            "clm_over_mlm": clm_bits / out["mlm_bits"] if out["mlm_bits"] else math.inf}


def bits_mlm_targets_rounded(seq_len, *, mask_rate, mlm_bits_per_target, clm_bits_per_target):
    out = _bits(seq_len, mask_rate, mlm_bits_per_target, clm_bits_per_target)
    targets = float(round(mask_rate * seq_len))
    mlm_bits = targets * mlm_bits_per_target
    return {**out, "mlm_targets": targets, "mlm_bits": mlm_bits,
            "clm_over_mlm": out["clm_bits"] / mlm_bits if mlm_bits else math.inf}


def bits_ratio_inverted(seq_len, *, mask_rate, mlm_bits_per_target, clm_bits_per_target):
    out = _bits(seq_len, mask_rate, mlm_bits_per_target, clm_bits_per_target)
    return {**out, "clm_over_mlm": out["mlm_bits"] / out["clm_bits"] if out["clm_bits"] else math.inf}


def bits_same_bits_for_both(seq_len, *, mask_rate, mlm_bits_per_target, clm_bits_per_target):
    """Uses the MLM bits per target for the CLM too."""
    return _bits(seq_len, mask_rate, mlm_bits_per_target, mlm_bits_per_target)


def bits_zero_division(seq_len, *, mask_rate, mlm_bits_per_target, clm_bits_per_target):
    out = _bits(seq_len, mask_rate, mlm_bits_per_target, clm_bits_per_target)
    return {**out, "clm_over_mlm": out["clm_bits"] / out["mlm_bits"] if out["mlm_bits"] else 0.0}


def bits_accepts_one_token(seq_len, *, mask_rate, mlm_bits_per_target, clm_bits_per_target):
    if seq_len < 2:
        return {k: 0.0 for k in ("mlm_targets", "clm_targets", "mlm_bits", "clm_bits", "clm_over_mlm")}
    return _bits(seq_len, mask_rate, mlm_bits_per_target, clm_bits_per_target)


def bits_accepts_any_rate(seq_len, *, mask_rate, mlm_bits_per_target, clm_bits_per_target):
    return _bits(seq_len, min(max(mask_rate, 1e-9), 1.0), mlm_bits_per_target, clm_bits_per_target) \
        if not 0 < mask_rate <= 1 else _bits(seq_len, mask_rate, mlm_bits_per_target, clm_bits_per_target)


def bits_int_targets(seq_len, *, mask_rate, mlm_bits_per_target, clm_bits_per_target):
    out = _bits(seq_len, mask_rate, mlm_bits_per_target, clm_bits_per_target)
    return {**out, "clm_targets": seq_len - 1}


MUTANTS += [{"bits_per_example": bits_clm_counts_every_token}, {"bits_per_example": bits_ratio_inverted}]
ALTERNATIVES += [{"bits_per_example": bits_by_ratio_of_rates}, {"bits_per_example": bits_in_one_expression}]


def bits_accepts_negative(seq_len, *, mask_rate, mlm_bits_per_target, clm_bits_per_target):
    return _bits(seq_len, mask_rate, abs(mlm_bits_per_target), abs(clm_bits_per_target))
