"""Stand-in students for the finetuning section of part_b_finetuning.ipynb (B3): the schedule,
freezing, and the training and evaluation loops."""
from __future__ import annotations

from unittest import mock

import torch

from autograder.reference import finetuning


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
    # the reference's optimizer.zero_grad() now does nothing: every batch's gradients add to the earlier ones'
    with mock.patch.object(optimizer, "zero_grad", lambda set_to_none=True: None):
        return finetuning.train_epoch(model, loader, optimizer, scheduler, max_grad_norm=max_grad_norm)


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
    with mock.patch.object(model, "eval", lambda: model):  # the reference's model.eval() now does nothing
        return finetuning.evaluate(model, loader)


# ---------------------------------------------------------------- correct, written differently
def train_epoch_clipping_by_hand(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    model.train()
    device = next(model.parameters()).device
    total, batches = 0.0, 0
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
        total += loss.item()
        batches += 1
    if not batches:
        raise ValueError("the loader yielded no batch")
    return total / batches


# ---------------------------------------------------------------- wrong in one clause each
# Named by the clause tables (autograder/reference/clauses/part_b_finetuning/).
def schedule_decays_over_all_steps(step, *, warmup_steps, total_steps):
    if step < warmup_steps:
        return step / warmup_steps
    return max(0.0, (total_steps - step) / max(1, total_steps))


def schedule_negative_after_the_end(step, *, warmup_steps, total_steps):
    if step < warmup_steps:
        return step / warmup_steps
    return (total_steps - step) / max(1, total_steps - warmup_steps)


def schedule_without_floor_on_denominators(step, *, warmup_steps, total_steps):
    if step < warmup_steps:
        return step / warmup_steps
    return max(0.0, (total_steps - step) / (total_steps - warmup_steps))


def schedule_as_tensor(step, *, warmup_steps, total_steps):
    return torch.tensor(finetuning.linear_warmup_decay(step, warmup_steps=warmup_steps, total_steps=total_steps),
                        dtype=torch.float64)


def freeze_top_layers(model, num_layers, *, freeze_embeddings=True):
    layers = model.base_model.encoder.layer
    if not 0 <= num_layers <= len(layers):
        raise ValueError("num_layers out of range")
    model.requires_grad_(True)
    if freeze_embeddings:
        model.base_model.embeddings.requires_grad_(False)
    for layer in layers[len(layers) - num_layers:]:
        layer.requires_grad_(False)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def freeze_ignores_embeddings_flag(model, num_layers, *, freeze_embeddings=True):
    return finetuning.freeze_layers(model, num_layers)


def freeze_counts_tensors(model, num_layers, *, freeze_embeddings=True):
    finetuning.freeze_layers(model, num_layers, freeze_embeddings=freeze_embeddings)
    return sum(1 for p in model.parameters() if p.requires_grad)


def freeze_through_bert_attribute(model, num_layers, *, freeze_embeddings=True):
    """Reaches the encoder as ``model.bert``, which a bare BertModel does not have."""
    encoder = model.bert
    if not 0 <= num_layers <= len(encoder.encoder.layer):
        raise ValueError("num_layers out of range")
    model.requires_grad_(True)
    if freeze_embeddings:
        encoder.embeddings.requires_grad_(False)
    for layer in encoder.encoder.layer[:num_layers]:
        layer.requires_grad_(False)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def freeze_without_range_check(model, num_layers, *, freeze_embeddings=True):
    return finetuning.freeze_layers(model, min(max(num_layers, 0), len(model.base_model.encoder.layer)),
                                    freeze_embeddings=freeze_embeddings)


def freeze_scales_embeddings(model, num_layers, *, freeze_embeddings=True):
    with torch.no_grad():
        model.base_model.embeddings.word_embeddings.weight.mul_(1.5)
    return finetuning.freeze_layers(model, num_layers, freeze_embeddings=freeze_embeddings)


def freeze_sets_train_mode(model, num_layers, *, freeze_embeddings=True):
    model.train()
    return finetuning.freeze_layers(model, num_layers, freeze_embeddings=freeze_embeddings)


def train_epoch_default_no_clipping(model, loader, optimizer, scheduler=None, *, max_grad_norm=None):
    return finetuning.train_epoch(model, loader, optimizer, scheduler, max_grad_norm=max_grad_norm)


def train_epoch_without_train_mode(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    with mock.patch.object(model, "train", lambda mode=True: model):  # the reference's model.train() now does nothing
        return finetuning.train_epoch(model, loader, optimizer, scheduler, max_grad_norm=max_grad_norm)


def train_epoch_weighted_by_examples(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    total, examples = 0.0, 0
    for batch in loader:
        # the reference on a loader of one batch takes exactly its step on that batch and returns that batch's loss
        loss = finetuning.train_epoch(model, [batch], optimizer, scheduler, max_grad_norm=max_grad_norm)
        total += loss * len(batch["labels"])
        examples += len(batch["labels"])
    if not examples:
        raise ValueError("the loader yielded no batch")
    return total / examples


def train_epoch_returns_tensor(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    return torch.tensor(finetuning.train_epoch(model, loader, optimizer, scheduler, max_grad_norm=max_grad_norm))


def train_epoch_empty_is_zero(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    loader = list(loader)
    return finetuning.train_epoch(model, loader, optimizer, scheduler, max_grad_norm=max_grad_norm) if loader else 0.0


def _batches_left_in_place():
    """Inside the block, the reference's train_epoch and evaluate leave each batch where it is: both move
    batches to the model's device with their helper _to_device, which this replaces by a copy (should the
    reference lose that helper, the patch raises AttributeError instead of leaving the batches moved)."""
    return mock.patch.object(finetuning, "_to_device", lambda batch, device: dict(batch))


def train_epoch_batches_left_in_place(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    """Never moves the batches to the model's device."""
    with _batches_left_in_place():
        return finetuning.train_epoch(model, loader, optimizer, scheduler, max_grad_norm=max_grad_norm)


def evaluate_returns_tensor(model, loader):
    return torch.tensor(finetuning.evaluate(model, loader))


def evaluate_empty_is_zero(model, loader):
    loader = list(loader)
    return finetuning.evaluate(model, loader) if loader else 0.0


def evaluate_batches_left_in_place(model, loader):
    with _batches_left_in_place():
        return finetuning.evaluate(model, loader)


@torch.no_grad()
def evaluate_passes_labels(model, loader):
    """The evaluation loop of transformers' run_glue_no_trainer example: the whole batch, labels
    included, goes to the model (which then computes a loss nobody reads)."""
    model.eval()
    device = next(model.parameters()).device
    correct, total = 0, 0
    for batch in loader:
        batch = {name: tensor.to(device) for name, tensor in batch.items()}
        outputs = model(**batch)
        correct += int((outputs.logits.argmax(dim=-1) == batch["labels"]).sum())
        total += batch["labels"].numel()
    if not total:
        raise ValueError("the loader yielded no example")
    return correct / total


# ---------------------------------------------------------------- more correct ones, written differently
def schedule_by_cases(step, *, warmup_steps, total_steps):
    if step >= total_steps:
        return 0.0
    if step < warmup_steps:
        return step / warmup_steps
    return (total_steps - step) / (total_steps - warmup_steps)


def schedule_by_fractions(step, *, warmup_steps, total_steps):
    """Exact rational arithmetic, rounded to a float once."""
    from fractions import Fraction

    if step < warmup_steps:
        return float(Fraction(step, max(1, warmup_steps)))
    return float(max(Fraction(0), Fraction(total_steps - step, max(1, total_steps - warmup_steps))))


def freeze_by_parameter_names(model, num_layers, *, freeze_embeddings=True):
    base = model.base_model
    depth = len(base.encoder.layer)
    if num_layers < 0 or num_layers > depth:
        raise ValueError(f"num_layers must be in [0, {depth}]")
    frozen = tuple(f"encoder.layer.{i}." for i in range(num_layers)) + (("embeddings.",) if freeze_embeddings else ())
    for p in model.parameters():
        p.requires_grad = True
    for name, p in base.named_parameters():
        if name.startswith(frozen):
            p.requires_grad = False
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def freeze_module_by_module(model, num_layers, *, freeze_embeddings=True):
    layers = list(model.base_model.encoder.layer)
    if not 0 <= num_layers <= len(layers):
        raise ValueError("num_layers out of range")
    frozen_modules = layers[:num_layers] + ([model.base_model.embeddings] if freeze_embeddings else [])
    frozen = {id(p) for module in frozen_modules for p in module.parameters()}
    for p in model.parameters():
        p.requires_grad_(id(p) not in frozen)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def train_epoch_losses_as_tensors(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    model.train()
    device = next(model.parameters()).device
    losses_ = []
    for batch in loader:
        inputs = {name: tensor.to(device) for name, tensor in batch.items()}
        optimizer.zero_grad(set_to_none=False)
        loss = model(**inputs).loss
        loss.backward()
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None], max_grad_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses_.append(loss.detach().double())
    if not losses_:
        raise ValueError("the loader yielded no batch")
    return float(torch.stack(losses_).mean())


@torch.no_grad()
def evaluate_by_concatenation(model, loader):
    model.eval()
    device = next(model.parameters()).device
    predictions, labels = [], []
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        labels.append(batch.pop("labels"))
        predictions.append(model(**batch).logits.argmax(-1))
    if not labels:
        raise ValueError("the loader yielded no example")
    labels = torch.cat(labels)
    if not labels.numel():
        raise ValueError("the loader yielded no example")
    return int((torch.cat(predictions) == labels).sum()) / labels.numel()


def evaluate_example_by_example(model, loader):
    model.eval()
    device = next(model.parameters()).device
    right = seen = 0
    with torch.inference_mode():
        for batch in loader:
            inputs = {k: v.to(device) for k, v in batch.items() if k != "labels"}
            for predicted, label in zip(model(**inputs).logits.argmax(-1).tolist(), batch["labels"].tolist()):
                right += predicted == label
                seen += 1
    if not seen:
        raise ValueError("the loader yielded no example")
    return right / seen


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"linear_warmup_decay": schedule_without_warmup, "freeze_layers": freeze_keeps_embeddings_trainable,
         "train_epoch": train_epoch_without_zero_grad, "evaluate": evaluate_mean_of_batches},
    {"freeze_layers": freeze_without_reset, "train_epoch": train_epoch_without_clipping,
         "evaluate": evaluate_without_eval_mode},
    {"train_epoch": train_epoch_scheduler_per_epoch},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"train_epoch": train_epoch_clipping_by_hand},
    {"linear_warmup_decay": schedule_by_cases, "freeze_layers": freeze_by_parameter_names,
         "train_epoch": train_epoch_losses_as_tensors, "evaluate": evaluate_by_concatenation},
    {"linear_warmup_decay": schedule_by_fractions, "freeze_layers": freeze_module_by_module,
         "evaluate": evaluate_example_by_example},
]
