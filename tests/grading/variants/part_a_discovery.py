"""Stand-in students for the hidden suite of Part A (discovery)."""
from __future__ import annotations

import torch

from autograder.reference import answers, arithmetic, attention


# ---------------------------------------------------------------- wrong
def sequence_logprob_unshifted(logits, token_ids):
    log_probs = logits.float().log_softmax(-1)
    return log_probs[torch.arange(1, len(token_ids), device=logits.device), token_ids[1:]].sum()


def top_k_returns_logits(logits, k):
    top = logits.float().topk(k)
    return top.values, top.indices


def pretraining_costs_fraction_of_shared(n_companies, scratch_cost, pretrain_cost, adapt_cost):
    result = arithmetic.pretraining_costs(n_companies, scratch_cost, pretrain_cost, adapt_cost)
    return {**result, "saved_fraction": result["saved"] / result["shared_total"]}


SPANISH_REUSE_ALL_REUSE = {item: "reuse" for item in answers.SPANISH_REUSE}
TASK_CATEGORIES_ALL_GENERAL = {task: "general" for task in answers.TASK_CATEGORIES}


# ---------------------------------------------------------------- correct, written differently
def sequence_logprob_by_gather(logits, token_ids):
    logits = logits.float()
    picked = logits[:-1].gather(-1, token_ids[1:, None].long()).squeeze(-1)
    return (picked - logits[:-1].logsumexp(-1)).sum()


def top_k_by_sorting(logits, k):
    probs = attention.softmax(logits.float())
    values, ids = probs.sort(descending=True)
    return values[:k].contiguous(), ids[:k].contiguous()


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"sequence_logprob": sequence_logprob_unshifted, "top_k_next_tokens": top_k_returns_logits,
     "pretraining_costs": pretraining_costs_fraction_of_shared,
     "SPANISH_REUSE": SPANISH_REUSE_ALL_REUSE, "TASK_CATEGORIES": TASK_CATEGORIES_ALL_GENERAL},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"sequence_logprob": sequence_logprob_by_gather, "top_k_next_tokens": top_k_by_sorting},
]
