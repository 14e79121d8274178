"""Stand-in students for the hidden suite of Part A (discovery)."""
from __future__ import annotations

import torch

from autograder.reference import answers, arithmetic, attention, scoring


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


# ---------------------------------------------------------------- wrong in one clause each
# Named by the clause tables (autograder/reference/clauses/part_a_discovery/).
def _on_cpu(function):
    """``function`` with its tensors moved to the CPU: wrong only where the result must stay on a GPU."""
    def moved(*args, **kwargs):
        result = function(*args, **kwargs)
        return tuple(r.cpu() for r in result) if isinstance(result, tuple) else result.cpu()
    return moved


def _naive_softmax(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def sequence_logprob_mean(logits, token_ids):
    return scoring.sequence_logprob(logits, token_ids) / max(1, len(token_ids) - 1)


def sequence_logprob_nan_for_one_token(logits, token_ids):
    """The mean of the empty set times (T - 1): NaN when there is nothing to score."""
    picked = logits.float().log_softmax(-1)[:-1].gather(-1, token_ids[1:, None].long()).squeeze(-1)
    return picked.mean() * (len(token_ids) - 1)


def sequence_logprob_naive_softmax(logits, token_ids):
    log_probs = torch.log(_naive_softmax(logits.float()))[:-1]
    return log_probs.gather(-1, token_ids[1:, None].long()).sum()


def sequence_logprob_in_input_dtype(logits, token_ids):
    log_probs = logits.log_softmax(-1)[:-1]
    return log_probs.gather(-1, token_ids[1:, None].long()).sum().float()


def sequence_logprob_as_float(logits, token_ids):
    return float(scoring.sequence_logprob(logits, token_ids))


sequence_logprob_on_cpu = _on_cpu(scoring.sequence_logprob)


def top_k_ascending(logits, k):
    probs, ids = scoring.top_k_next_tokens(logits, k)
    return probs.flip(0), ids.flip(0)


def top_k_softmax_in_input_dtype(logits, k):
    top = logits.softmax(-1).topk(k)
    return top.values.float(), top.indices


def top_k_naive_softmax(logits, k):
    top = _naive_softmax(logits.float()).topk(k)
    return top.values, top.indices


def top_k_ids_int32(logits, k):
    probs, ids = scoring.top_k_next_tokens(logits, k)
    return probs, ids.int()


top_k_next_tokens_on_cpu = _on_cpu(scoring.top_k_next_tokens)


def pretraining_costs_without_pretraining(n_companies, scratch_cost, pretrain_cost, adapt_cost):
    return arithmetic.pretraining_costs(n_companies, scratch_cost, 0.0, adapt_cost)


def pretraining_costs_saving_at_least_zero(n_companies, scratch_cost, pretrain_cost, adapt_cost):
    result = arithmetic.pretraining_costs(n_companies, scratch_cost, pretrain_cost, adapt_cost)
    saved = max(0.0, result["saved"])
    return {**result, "saved": saved, "saved_fraction": saved / result["scratch_total"]}


def pretraining_costs_extra_key(n_companies, scratch_cost, pretrain_cost, adapt_cost):
    result = arithmetic.pretraining_costs(n_companies, scratch_cost, pretrain_cost, adapt_cost)
    return {**result, "cheaper": "shared" if result["saved"] > 0 else "scratch"}


SPANISH_REUSE_ALL_LEARN = {item: "learn" for item in answers.SPANISH_REUSE}
SPANISH_REUSE_MISSING_ITEM = dict(list(answers.SPANISH_REUSE.items())[1:])
TASK_CATEGORIES_ALL_SPECIFIC = {task: "specific" for task in answers.TASK_CATEGORIES}
TASK_CATEGORIES_AS_PAIRS = sorted(answers.TASK_CATEGORIES.items())


# ---------------------------------------------------------------- more correct ones, written differently
def sequence_logprob_token_by_token(logits, token_ids):
    """A loop over the scored tokens, each in float64."""
    total = 0.0
    for t in range(1, len(token_ids)):
        total += float(logits[t - 1].double().log_softmax(-1)[int(token_ids[t])])
    return torch.tensor(total, dtype=torch.float32, device=logits.device)


def top_k_in_float64(logits, k):
    values, ids = logits.double().log_softmax(-1).topk(k)
    return values.exp().float(), ids


def pretraining_costs_from_shares(n_companies, scratch_cost, pretrain_cost, adapt_cost):
    scratch_total = float(n_companies) * scratch_cost
    shared_total = pretrain_cost + float(n_companies) * adapt_cost
    return {"saved_fraction": 1.0 - shared_total / scratch_total, "saved": scratch_total - shared_total,
            "shared_total": shared_total, "scratch_total": scratch_total}


def pretraining_costs_per_company(n_companies, scratch_cost, pretrain_cost, adapt_cost):
    """Saving per company first, then times the number of companies."""
    per_company = scratch_cost - (pretrain_cost / n_companies + adapt_cost)
    saved = per_company * n_companies
    return {"scratch_total": n_companies * scratch_cost, "shared_total": n_companies * scratch_cost - saved,
            "saved": saved, "saved_fraction": per_company / scratch_cost}


ALTERNATIVES += [
    {"sequence_logprob": sequence_logprob_token_by_token, "top_k_next_tokens": top_k_in_float64,
     "pretraining_costs": pretraining_costs_from_shares},
    {"pretraining_costs": pretraining_costs_per_company},
]
