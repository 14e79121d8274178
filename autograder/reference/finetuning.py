"""Fine-tuning a pre-trained encoder on a labelled task (Devlin et al., 2019, section 4).

The recipe: start from pre-trained weights, add a small task head, and train
everything (or everything above some frozen layers) for a few epochs with a
small learning rate that warms up linearly and then decays linearly to zero.
"""

from collections.abc import Iterable, Mapping

import torch
from torch import nn


def linear_warmup_decay(step: int, *, warmup_steps: int, total_steps: int) -> float:
    """Learning-rate multiplier: linear warm-up, then linear decay to zero.

    lr(step) = base_lr * multiplier(step), with

        multiplier = step / warmup_steps                                   if step < warmup_steps
                   = (total_steps - step) / (total_steps - warmup_steps)   if warmup_steps <= step <= total_steps
                   = 0                                                     if step > total_steps

    so it climbs from 0 to 1 over the warm-up (large early updates from a random
    head would wreck the pre-trained weights) and reaches 0 at ``total_steps``.
    With ``warmup_steps == 0`` there is no warm-up: the multiplier starts at 1.
    Denominators are taken as at least 1, so with ``total_steps == warmup_steps``
    the multiplier climbs to (warmup_steps - 1) / warmup_steps and is 0 from
    ``total_steps`` on, exactly as in transformers.

    Usable as ``torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s:
    linear_warmup_decay(s, warmup_steps=..., total_steps=...))``, where ``step``
    counts the ``scheduler.step()`` calls made so far (0 for the first update),
    and identical to ``transformers.get_linear_schedule_with_warmup``.

    Returns:
        A Python float in [0, 1].
    """
    if step < warmup_steps:
        return step / max(1, warmup_steps)
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


def freeze_layers(model: nn.Module, num_layers: int, *, freeze_embeddings: bool = True) -> int:
    """Freeze the embeddings and the lowest ``num_layers`` layers of a BERT model.

    Lower layers hold general-purpose features and change little during
    fine-tuning; freezing them saves memory and compute and can curb
    over-fitting on small data sets.

    Args:
        model: a ``transformers`` ``BertModel`` or a BERT model with a head
            (``BertForSequenceClassification``, ...); the encoder is reached as
            ``model.base_model`` (the model itself for a ``BertModel``), with
            ``.embeddings`` and ``.encoder.layer`` (a list of L layers).
        num_layers: how many layers to freeze, counted from the bottom: layers
            0 .. num_layers - 1. Must lie in [0, L], else ValueError.
        freeze_embeddings: freeze the embedding block too (word, position and
            token-type embeddings and their LayerNorm).

    Every other parameter (higher layers, pooler, task head) is made trainable,
    so the result does not depend on earlier calls. Modifies ``model`` in place
    (``requires_grad`` only; weights, device and train/eval mode unchanged).

    Returns:
        The number of trainable parameters (elements, not tensors) afterwards.
    """
    encoder = model.base_model
    layers = encoder.encoder.layer
    if not 0 <= num_layers <= len(layers):
        raise ValueError(f"num_layers must be in [0, {len(layers)}], got {num_layers}")

    model.requires_grad_(True)
    if freeze_embeddings:
        encoder.embeddings.requires_grad_(False)
    for layer in layers[:num_layers]:
        layer.requires_grad_(False)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _to_device(batch: Mapping[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {name: tensor.to(device) for name, tensor in batch.items()}


def train_epoch(
    model: nn.Module,
    loader: Iterable[Mapping[str, torch.Tensor]],
    optimizer: torch.optim.Optimizer,
    scheduler=None,
    *,
    max_grad_norm: float | None = 1.0,
) -> float:
    """One pass over ``loader``: the standard fine-tuning step for every batch.

    Puts the model in training mode (dropout on), then for each batch, in order:

    1. move every tensor of the batch (a dict with the model's inputs and
       ``"labels"``) to the device of the model's parameters;
    2. ``optimizer.zero_grad()``;
    3. ``outputs = model(**batch)``; the loss is ``outputs.loss`` (the model
       computes it from ``labels``);
    4. ``loss.backward()``;
    5. if ``max_grad_norm`` is not None, rescale the gradients so that their
       global L2 norm (all parameters together) is at most ``max_grad_norm``
       (``torch.nn.utils.clip_grad_norm_``), a guard against rare huge steps;
    6. ``optimizer.step()``, then ``scheduler.step()`` if a scheduler is given
       (so the schedule advances once per batch, not per epoch).

    Randomness (dropout, the loader's shuffling) comes from the global
    generators, so a fixed seed reproduces the run exactly.

    Returns:
        The mean of the batch losses, as a Python float (each batch weighs the
        same, whatever its size). ValueError if the loader yields no batch.
    """
    model.train()
    device = next(model.parameters()).device
    batch_losses = []
    for batch in loader:
        batch = _to_device(batch, device)
        optimizer.zero_grad()
        loss = model(**batch).loss
        loss.backward()
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        batch_losses.append(loss.item())
    if not batch_losses:
        raise ValueError("the loader yielded no batch")
    return sum(batch_losses) / len(batch_losses)


@torch.no_grad()
def evaluate(model: nn.Module, loader: Iterable[Mapping[str, torch.Tensor]]) -> float:
    """Classification accuracy of ``model`` over every example of ``loader``.

    Puts the model in eval mode (dropout off) and leaves it there; no gradients
    are computed. Each batch is a dict with the model's inputs and ``"labels"``
    (LongTensor [B]); it is moved to the model's device and the model is called
    on the inputs without the labels. The prediction is ``argmax`` of
    ``outputs.logits`` ([B, num_classes]) over the last dimension.

    Returns:
        (number of correct predictions) / (number of examples), a Python float
        in [0, 1]: every example weighs the same, whatever the batch sizes.
        ValueError if the loader yields no example.

    Not graded: whether gradients are computed.
    """
    model.eval()
    device = next(model.parameters()).device
    correct, total = 0, 0
    for batch in loader:
        batch = _to_device(batch, device)
        labels = batch.pop("labels")
        predictions = model(**batch).logits.argmax(dim=-1)
        correct += int((predictions == labels).sum())
        total += labels.numel()
    if total == 0:
        raise ValueError("the loader yielded no example")
    return correct / total
