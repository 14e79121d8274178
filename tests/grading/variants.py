"""Stand-in student solutions for testing the hidden suites.

* ``MUTANTS``: deliberately wrong versions, one typical bug each. A suite must
  take points off the cell the bug belongs to, and off no other cell.
* ``ALTERNATIVES``: correct versions written differently from the reference
  (other random draws, a KV cache, log-sum-exp, ...). A suite must give them full
  marks: tests may check the contract, not the reference's particular choices.

Each entry maps a student name (function, class or constant) to its replacement.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from autograder.reference import (
    answers,
    arithmetic,
    attention,
    decoding,
    finetuning,
    lora,
    losses,
    masking,
    span_corruption,
)


# ================================================================ part_b_bert_gpt: wrong
def mask_tokens_selects_specials(input_ids, *, special_token_ids, **kwargs):
    return masking.mask_tokens(input_ids, special_token_ids=[], **kwargs)


def mask_tokens_never_keeps(input_ids, *, mask_token_id, vocab_size, special_token_ids, mlm_probability=0.15,
                            generator=None):
    """80 % [MASK], 20 % random, never left unchanged."""
    device = input_ids.device
    special = torch.isin(input_ids, torch.as_tensor(list(special_token_ids), device=device))
    p = torch.full(input_ids.shape, mlm_probability, device=device).masked_fill(special, 0.0)
    selected = torch.bernoulli(p, generator=generator).bool()
    to_mask = torch.bernoulli(torch.full(input_ids.shape, 0.8, device=device), generator=generator).bool() & selected
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=device)
    masked = torch.where(selected & ~to_mask, random_ids, input_ids.masked_fill(to_mask, mask_token_id))
    return masked, input_ids.masked_fill(~selected, -100)


def mask_tokens_global_rng(input_ids, *, generator=None, **kwargs):
    return masking.mask_tokens(input_ids, generator=None, **kwargs)


def mlm_signal_inverted(n_tokens, mask_rate=0.15):
    result = arithmetic.mlm_signal(n_tokens, mask_rate)
    return {**result, "passes_for_equal_signal": mask_rate}


def softmax_unstable(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def softmax_upcasts_for_good(x, dim=-1):
    """Right values, but float16/bfloat16 inputs come back as float32."""
    return attention.softmax(x.float(), dim=dim)


def causal_mask_transposed(n, device=None):
    return torch.ones(n, n, dtype=torch.bool, device=device).triu()


def attention_unscaled(q, k, v, **kwargs):
    return attention.scaled_dot_product_attention(q * math.sqrt(q.size(-1)), k, v, **kwargs)


def attention_nan_rows(q, k, v, *, causal=False, padding_mask=None):
    """Masks with -inf but does not handle queries that see no key (0/0 = NaN)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal:
        scores = scores.masked_fill(~attention.causal_mask(q.size(-2), device=q.device), float("-inf"))
    if padding_mask is not None:
        keys = padding_mask.view(padding_mask.size(0), *([1] * (q.dim() - 2)), -1)
        scores = scores.masked_fill(~keys, float("-inf"))
    weights = attention.softmax(scores)
    return weights @ v, weights


def attention_connections_off_by_one(n, causal):
    return n * (n - 1) // 2 if causal else n * n


CAT_NEXT_WORD_PROBS_WITHOUT_EXP = {w: x / 5.5 for w, x in zip(["sat", "ran", "jumped", "slept"], [2.5, 1.0, 0.5, 1.5])}


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


def sample_top_p_exclusive(logits, *, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Top-p that keeps only tokens whose cumulative probability stays <= p (drops the one that crosses)."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = decoding.next_token_distribution(logits, temperature=temperature, top_k=top_k)
    if top_p is not None:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        keep_sorted = sorted_probs.cumsum(-1) <= top_p
        keep_sorted[..., 0] = True
        keep = keep_sorted.scatter(-1, order, keep_sorted)
        probs = probs * keep
        probs = probs / probs.sum(-1, keepdim=True)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def sample_ignores_temperature(logits, *, temperature=1.0, **kwargs):
    return decoding.sample_next_token(logits, temperature=0.0 if temperature == 0 else 1.0, **kwargs)


@torch.no_grad()
def greedy_without_eos_padding(model, input_ids, max_new_tokens, eos_token_id=None):
    """Stops when every row has produced eos, but finished rows keep generating freely."""
    sequences = input_ids
    finished = torch.zeros(input_ids.size(0), dtype=torch.bool, device=input_ids.device)
    for _ in range(max_new_tokens):
        next_token = model(input_ids=sequences).logits[:, -1].argmax(-1)
        if eos_token_id is not None:
            finished |= next_token == eos_token_id
        sequences = torch.cat([sequences, next_token[:, None]], dim=1)
        if finished.all():
            break
    return sequences


@torch.no_grad()
def greedy_never_stops_early(model, input_ids, max_new_tokens, eos_token_id=None):
    """Pads finished rows with eos, but always runs max_new_tokens steps."""
    sequences = input_ids
    finished = torch.zeros(input_ids.size(0), dtype=torch.bool, device=input_ids.device)
    for _ in range(max_new_tokens):
        next_token = model(input_ids=sequences).logits[:, -1].argmax(-1)
        if eos_token_id is not None:
            next_token = next_token.masked_fill(finished, eos_token_id)
            finished |= next_token == eos_token_id
        sequences = torch.cat([sequences, next_token[:, None]], dim=1)
    return sequences


def beam_search_greedy_path(model, input_ids, *, num_beams, max_new_tokens, length_penalty=1.0, eos_token_id=None):
    return decoding.greedy_decode(model, input_ids, max_new_tokens, eos_token_id=eos_token_id)


def beam_search_no_length_penalty(model, input_ids, *, length_penalty=1.0, **kwargs):
    return decoding.beam_search(model, input_ids, length_penalty=1.0, **kwargs)


# ================================================================ part_b_finetuning: wrong
def schedule_without_warmup(step, *, warmup_steps, total_steps):
    return min(1.0, max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps)))


def freeze_keeps_embeddings_trainable(model, num_layers, *, freeze_embeddings=True):
    return finetuning.freeze_layers(model, num_layers, freeze_embeddings=False)


def freeze_without_reset(model, num_layers, *, freeze_embeddings=True):
    """Freezes, but never makes the other parameters trainable again."""
    encoder = model.base_model
    if not 0 <= num_layers <= len(encoder.encoder.layer):
        raise ValueError("num_layers out of range")
    if freeze_embeddings:
        encoder.embeddings.requires_grad_(False)
    for layer in encoder.encoder.layer[:num_layers]:
        layer.requires_grad_(False)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def train_epoch_without_zero_grad(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    model.train()
    device = next(model.parameters()).device
    batch_losses = []
    for batch in loader:
        loss = model(**{k: v.to(device) for k, v in batch.items()}).loss
        loss.backward()
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        batch_losses.append(loss.item())
    if not batch_losses:
        raise ValueError("empty loader")
    return sum(batch_losses) / len(batch_losses)


def train_epoch_without_clipping(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    return finetuning.train_epoch(model, loader, optimizer, scheduler, max_grad_norm=None)


def train_epoch_scheduler_per_epoch(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    loss = finetuning.train_epoch(model, loader, optimizer, None, max_grad_norm=max_grad_norm)
    if scheduler is not None:
        scheduler.step()
    return loss


@torch.no_grad()
def evaluate_mean_of_batches(model, loader):
    model.eval()
    device = next(model.parameters()).device
    accuracies = []
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        labels = batch.pop("labels")
        accuracies.append((model(**batch).logits.argmax(-1) == labels).float().mean().item())
    if not accuracies:
        raise ValueError("empty loader")
    return sum(accuracies) / len(accuracies)


def evaluate_without_eval_mode(model, loader):
    model.eval = lambda: model  # the reference's model.eval() now does nothing
    try:
        return finetuning.evaluate(model, loader)
    finally:
        del model.eval


class LoRALinearRandomB(lora.LoRALinear):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, r, alpha, dropout)
        nn.init.kaiming_uniform_(self.lora_B, a=math.sqrt(5))


class LoRALinearScaledByAlpha(lora.LoRALinear):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, r, alpha, dropout)
        self.scaling = alpha


def lora_parameter_count_full(d_in, d_out, r):
    return d_in * d_out


def apply_lora_frozen_head(model, target_names=("query", "value"), r=8, alpha=16, dropout=0.0,
                           trainable_names=("classifier",)):
    return lora.apply_lora(model, target_names, r, alpha, dropout, trainable_names=())


def footprint_inverted_savings(energy_mwh, **kwargs):
    result = arithmetic.fine_tuning_footprint(energy_mwh, **kwargs)
    return {**result, "savings_fraction": 1.0 - result["savings_fraction"]}


# ================================================================ exercise5: wrong
def noise_mask_evenly_spaced(length, *, noise_density=0.15, mean_span_length=3.0, generator=None):
    """The right counts, but the spans always sit at the same evenly spaced places."""
    num_noise = min(max(round(length * noise_density), 1), length - 1)
    num_kept = length - num_noise
    num_spans = min(max(round(num_noise / mean_span_length), 1), num_noise, num_kept)
    device = generator.device if generator is not None else torch.device("cpu")

    def even(n, k):
        return torch.tensor([n // k + (i < n % k) for i in range(k)], device=device)

    runs = torch.stack([even(num_kept, num_spans), even(num_noise, num_spans)], dim=1).flatten()
    return (torch.arange(2 * num_spans, device=device) % 2 == 1).repeat_interleave(runs)


def span_corrupt_one_sentinel(token_ids, noise_mask, *, sentinel_ids, eos_id=None):
    first = list(torch.as_tensor(sentinel_ids).flatten().tolist())[0]
    return span_corruption.span_corrupt(token_ids, noise_mask, sentinel_ids=[first] * len(sentinel_ids), eos_id=eos_id)


def span_corrupt_t5_final_sentinel(token_ids, noise_mask, *, sentinel_ids, eos_id=None):
    """The t5 code base's targets: no final sentinel when the sequence ends with noise."""
    inputs, targets = span_corruption.span_corrupt(token_ids, noise_mask, sentinel_ids=sentinel_ids)
    if bool(noise_mask[-1]):
        targets = targets[:-1]
    if eos_id is not None:
        eos = token_ids.new_full((1,), eos_id)
        inputs, targets = torch.cat([inputs, eos]), torch.cat([targets, eos])
    return inputs, targets


# ================================================================ part_a_discovery: wrong
def sequence_logprob_unshifted(logits, token_ids):
    log_probs = logits.float().log_softmax(-1)
    return log_probs[torch.arange(1, len(token_ids), device=logits.device), token_ids[1:]].sum()


def top_k_returns_logits(logits, k):
    top = logits.float().topk(k)
    return top.values, top.indices


def pretraining_costs_fraction_of_shared(n_companies, scratch_cost, pretrain_cost, adapt_cost):
    result = arithmetic.pretraining_costs(n_companies, scratch_cost, pretrain_cost, adapt_cost)
    return {**result, "saved_fraction": result["saved"] / result["shared_total"]}


# ================================================================ correct, but not the reference's way
def softmax_via_logsumexp(x, dim=-1):
    z = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    return (z - z.logsumexp(dim=dim, keepdim=True)).exp().to(x.dtype)


def mask_tokens_with_uniforms(input_ids, *, mask_token_id, vocab_size, special_token_ids, mlm_probability=0.15,
                              generator=None):
    """Two uniforms per position instead of three Bernoulli grids."""
    device = input_ids.device
    special = torch.isin(input_ids, torch.as_tensor(list(special_token_ids), device=device))
    u = torch.rand(input_ids.shape, generator=generator, device=device)
    v = torch.rand(input_ids.shape, generator=generator, device=device)
    selected = (u < mlm_probability) & ~special
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=device, dtype=input_ids.dtype)
    masked = input_ids.clone()
    masked[selected & (v < 0.8)] = mask_token_id
    swap = selected & (v >= 0.8) & (v < 0.9)
    masked[swap] = random_ids[swap]
    return masked, torch.where(selected, input_ids, torch.full_like(input_ids, -100))


def attention_in_float32(q, k, v, **kwargs):
    output, weights = attention.scaled_dot_product_attention(q.float(), k.float(), v.float(), **kwargs)
    return output.to(q.dtype), weights.to(q.dtype)


def clm_loss_by_hand(logits, input_ids, attention_mask=None):
    log_probs = logits.float().log_softmax(-1)[:, :-1]
    picked = log_probs.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    weight = torch.ones_like(picked) if attention_mask is None else attention_mask[:, 1:].float()
    return -(picked * weight).sum() / weight.sum().clamp(min=1)


def sample_by_inverse_cdf(logits, *, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = decoding.next_token_distribution(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    cdf = probs.double().cumsum(-1)
    u = torch.rand(probs.size(0), 1, generator=generator, device=probs.device, dtype=torch.float64) * cdf[:, -1:]
    index = torch.searchsorted(cdf, u, right=True).squeeze(-1)
    last_possible = (probs > 0).long().cumsum(-1).argmax(-1)
    return torch.minimum(index, last_possible)


@torch.no_grad()
def greedy_with_kv_cache(model, input_ids, max_new_tokens, eos_token_id=None):
    sequences, past, step_input = input_ids, None, input_ids
    finished = torch.zeros(input_ids.size(0), dtype=torch.bool, device=input_ids.device)
    for _ in range(max_new_tokens):
        out = model(input_ids=step_input, past_key_values=past, use_cache=True)
        past = out.past_key_values
        next_token = out.logits[:, -1].argmax(-1)
        if eos_token_id is not None:
            next_token = torch.where(finished, torch.full_like(next_token, eos_token_id), next_token)
            finished = finished | (next_token == eos_token_id)
        sequences = torch.cat([sequences, next_token[:, None]], dim=1)
        step_input = next_token[:, None]
        if bool(finished.all()):
            break
    return sequences


def noise_mask_by_cut_points(length, *, noise_density=0.15, mean_span_length=3.0, generator=None):
    """Uniform splits from sorted random cut points (other draws than the reference)."""
    device = generator.device if generator is not None else torch.device("cpu")
    if length < 2:
        raise ValueError("length must be >= 2")
    num_noise = min(max(round(length * noise_density), 1), length - 1)
    num_kept = length - num_noise
    num_spans = min(max(round(num_noise / mean_span_length), 1), num_noise, num_kept)

    def split(n, k):
        cuts = torch.randperm(n - 1, generator=generator, device=device)[: k - 1].sort().values + 1
        edges = torch.cat([torch.zeros(1, dtype=torch.long, device=device), cuts, torch.tensor([n], device=device)])
        return edges.diff()

    noise = split(num_noise, num_spans)
    kept = split(num_kept, num_spans)
    pattern = torch.tensor([False, True], device=device).repeat(num_spans)
    return pattern.repeat_interleave(torch.stack([kept, noise], dim=1).flatten())


def train_epoch_clipping_by_hand(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    model.train()
    device = next(model.parameters()).device
    losses_ = []
    for batch in loader:
        optimizer.zero_grad(set_to_none=True)
        loss = model(**{k: v.to(device) for k, v in batch.items()}).loss
        loss.backward()
        if max_grad_norm is not None:
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            norm = torch.sqrt(sum((g.float() ** 2).sum() for g in grads))
            if norm > max_grad_norm:
                for g in grads:
                    g.mul_(max_grad_norm / (norm + 1e-6))
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses_.append(loss.item())
    if not losses_:
        raise ValueError("the loader yielded no batch")
    return sum(losses_) / len(losses_)


def sequence_logprob_by_gather(logits, token_ids):
    logits = logits.float()
    picked = logits[:-1].gather(-1, token_ids[1:, None].long()).squeeze(-1)
    return (picked - logits[:-1].logsumexp(-1)).sum()


def top_k_by_sorting(logits, k):
    probs = attention.softmax(logits.float())
    values, ids = probs.sort(descending=True)
    return values[:k].contiguous(), ids[:k].contiguous()


# ================================================================ the tables
# ------------------------------------------------------------------ wrong answer constants
def _edited(constant: dict, **changes) -> dict:
    return {**constant, **changes}


SPANISH_REUSE_ALL_REUSE = {item: "reuse" for item in answers.SPANISH_REUSE}
TASK_CATEGORIES_ALL_GENERAL = {task: "general" for task in answers.TASK_CATEGORIES}
ARCHITECTURE_TABLE_T5_AS_DECODER = _edited(
    answers.ARCHITECTURE_TABLE, T5={**answers.ARCHITECTURE_TABLE["T5"], "architecture": "decoder"})
MODEL_FOR_TASK_ALL_BERT = {task: "BERT" for task in answers.MODEL_FOR_TASK}
FINETUNE_CONFIG_FROM_SCRATCH_LR = _edited(answers.FINETUNE_CONFIG, learning_rate=1e-2)
GENERATION_SETTINGS_ONE_BEAM = _edited(answers.GENERATION_SETTINGS, beam={"do_sample": False, "num_beams": 1})


MUTANTS: dict[str, list[dict[str, object]]] = {
    # Rounds per notebook: in one round every mutated name belongs to a different cell.
    "part_b_bert_gpt": [
        {"mask_tokens": mask_tokens_selects_specials, "mlm_signal": mlm_signal_inverted,
         "softmax": softmax_unstable, "causal_mask": causal_mask_transposed,
         "scaled_dot_product_attention": attention_unscaled,
         "attention_connections": attention_connections_off_by_one,
         "CAT_NEXT_WORD_PROBS": CAT_NEXT_WORD_PROBS_WITHOUT_EXP, "clm_loss": clm_loss_unshifted,
         "mlm_loss": mlm_loss_over_all_positions, "sample_next_token": sample_top_p_exclusive,
         "greedy_decode": greedy_without_eos_padding, "beam_search": beam_search_greedy_path},
        {"mask_tokens": mask_tokens_never_keeps, "softmax": softmax_upcasts_for_good,
         "scaled_dot_product_attention": attention_nan_rows, "clm_loss": clm_loss_nan_when_empty,
         "sample_next_token": sample_ignores_temperature, "greedy_decode": greedy_never_stops_early,
         "beam_search": beam_search_no_length_penalty},
        {"mask_tokens": mask_tokens_global_rng},
    ],
    "part_b_finetuning": [
        {"linear_warmup_decay": schedule_without_warmup, "freeze_layers": freeze_keeps_embeddings_trainable,
         "train_epoch": train_epoch_without_zero_grad, "evaluate": evaluate_mean_of_batches,
         "LoRALinear": LoRALinearRandomB, "lora_parameter_count": lora_parameter_count_full,
         "apply_lora": apply_lora_frozen_head, "fine_tuning_footprint": footprint_inverted_savings,
         "ARCHITECTURE_TABLE": ARCHITECTURE_TABLE_T5_AS_DECODER, "MODEL_FOR_TASK": MODEL_FOR_TASK_ALL_BERT,
         "FINETUNE_CONFIG": FINETUNE_CONFIG_FROM_SCRATCH_LR, "GENERATION_SETTINGS": GENERATION_SETTINGS_ONE_BEAM},
        {"freeze_layers": freeze_without_reset, "train_epoch": train_epoch_without_clipping,
         "evaluate": evaluate_without_eval_mode, "LoRALinear": LoRALinearScaledByAlpha},
        {"train_epoch": train_epoch_scheduler_per_epoch},
    ],
    "exercise5_span_corruption": [
        {"random_spans_noise_mask": noise_mask_evenly_spaced, "span_corrupt": span_corrupt_one_sentinel},
        {"span_corrupt": span_corrupt_t5_final_sentinel},
    ],
    "part_a_discovery": [
        {"sequence_logprob": sequence_logprob_unshifted, "top_k_next_tokens": top_k_returns_logits,
         "pretraining_costs": pretraining_costs_fraction_of_shared,
         "SPANISH_REUSE": SPANISH_REUSE_ALL_REUSE, "TASK_CATEGORIES": TASK_CATEGORIES_ALL_GENERAL},
    ],
}

ALTERNATIVES: dict[str, dict[str, object]] = {
    "part_b_bert_gpt": {"softmax": softmax_via_logsumexp, "mask_tokens": mask_tokens_with_uniforms,
                        "scaled_dot_product_attention": attention_in_float32, "clm_loss": clm_loss_by_hand,
                        "sample_next_token": sample_by_inverse_cdf, "greedy_decode": greedy_with_kv_cache},
    "part_b_finetuning": {"train_epoch": train_epoch_clipping_by_hand},
    "exercise5_span_corruption": {"random_spans_noise_mask": noise_mask_by_cut_points},
    "part_a_discovery": {"sequence_logprob": sequence_logprob_by_gather, "top_k_next_tokens": top_k_by_sorting},
}

# The cell that grades each student name (grade cell = "test_" + solution cell name).
CELL_OF = {"CAT_NEXT_WORD_PROBS": "test_cat_next_word_probs", "LoRALinear": "test_lora_linear",
           "SPANISH_REUSE": "test_spanish_reuse", "TASK_CATEGORIES": "test_task_categories",
           "ARCHITECTURE_TABLE": "test_architecture_table", "MODEL_FOR_TASK": "test_model_for_task",
           "FINETUNE_CONFIG": "test_finetune_config", "GENERATION_SETTINGS": "test_generation_settings"}


def cell_of(name: str) -> str:
    return CELL_OF.get(name, f"test_{name}")
