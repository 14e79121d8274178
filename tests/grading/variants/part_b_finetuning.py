"""Stand-in students for the hidden suite of Part B (fine-tuning and LoRA)."""
from __future__ import annotations

import math

import torch
from torch import nn

from autograder.reference import answers, arithmetic, finetuning, lora


# ---------------------------------------------------------------- wrong
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


def _edited(constant: dict, **changes) -> dict:
    return {**constant, **changes}


ARCHITECTURE_TABLE_T5_AS_DECODER = _edited(
    answers.ARCHITECTURE_TABLE, T5={**answers.ARCHITECTURE_TABLE["T5"], "architecture": "decoder"})
MODEL_FOR_TASK_ALL_BERT = {task: "BERT" for task in answers.MODEL_FOR_TASK}
FINETUNE_CONFIG_FROM_SCRATCH_LR = _edited(answers.FINETUNE_CONFIG, learning_rate=1e-2)
GENERATION_SETTINGS_ONE_BEAM = _edited(answers.GENERATION_SETTINGS, beam={"do_sample": False, "num_beams": 1})


# ---------------------------------------------------------------- correct, written differently
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


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"linear_warmup_decay": schedule_without_warmup, "freeze_layers": freeze_keeps_embeddings_trainable,
     "train_epoch": train_epoch_without_zero_grad, "evaluate": evaluate_mean_of_batches,
     "LoRALinear": LoRALinearRandomB, "lora_parameter_count": lora_parameter_count_full,
     "apply_lora": apply_lora_frozen_head, "fine_tuning_footprint": footprint_inverted_savings,
     "ARCHITECTURE_TABLE": ARCHITECTURE_TABLE_T5_AS_DECODER, "MODEL_FOR_TASK": MODEL_FOR_TASK_ALL_BERT,
     "FINETUNE_CONFIG": FINETUNE_CONFIG_FROM_SCRATCH_LR, "GENERATION_SETTINGS": GENERATION_SETTINGS_ONE_BEAM},
    {"freeze_layers": freeze_without_reset, "train_epoch": train_epoch_without_clipping,
     "evaluate": evaluate_without_eval_mode, "LoRALinear": LoRALinearScaledByAlpha},
    {"train_epoch": train_epoch_scheduler_per_epoch},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"train_epoch": train_epoch_clipping_by_hand},
]
