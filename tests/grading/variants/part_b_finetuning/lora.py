"""Stand-in students for the lora section of part_b_finetuning.ipynb (B6.1-B6.3): the LoRA layer,
its parameter count, LoRA applied to an encoder."""
from __future__ import annotations

import copy
import math

import torch
from torch import nn

from autograder.reference import lora


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


class LoRALinearCopiesBase(lora.LoRALinear):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(copy.deepcopy(base), r, alpha, dropout)


class LoRALinearTrainableBase(lora.LoRALinear):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, r, alpha, dropout)
        self.base.requires_grad_(True)


class LoRALinearTransposedB(lora.LoRALinear):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, r, alpha, dropout)
        self.lora_B = nn.Parameter(torch.zeros(r, base.out_features))

    def forward(self, x):
        return self.base(x) + (self.dropout(x) @ self.lora_A.T @ self.lora_B) * self.scaling


class LoRALinearNormalA(lora.LoRALinear):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, r, alpha, dropout)
        nn.init.normal_(self.lora_A)


class LoRALinearDetachedA(lora.LoRALinear):
    def forward(self, x):
        return self.base(x) + (self.dropout(x) @ self.lora_A.detach().T @ self.lora_B.T) * self.scaling


class LoRALinearWithoutRankCheck(lora.LoRALinear):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, max(r, 1), alpha, dropout)
        self.r, self.scaling = r, alpha / r


class LoRALinearOnCpu(lora.LoRALinear):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, r, alpha, dropout)
        self.lora_A = nn.Parameter(self.lora_A.detach().cpu())
        self.lora_B = nn.Parameter(self.lora_B.detach().cpu())


def apply_lora_query_only(model, target_names=("query",), r=8, alpha=16, dropout=0.0, trainable_names=("classifier",)):
    return lora.apply_lora(model, target_names, r, alpha, dropout, trainable_names)


def apply_lora_leaves_the_rest_trainable(model, target_names=("query", "value"), r=8, alpha=16, dropout=0.0,
                                         trainable_names=("classifier",)):
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    lora.apply_lora(model, target_names, r, alpha, dropout, trainable_names)
    for name, p in model.named_parameters():
        if name in trainable:
            p.requires_grad_(True)
    return model


def apply_lora_default_rank(model, target_names=("query", "value"), r=8, alpha=16, dropout=0.0,
                            trainable_names=("classifier",)):
    return lora.apply_lora(model, target_names, 8, alpha, dropout, trainable_names)


def apply_lora_silent_without_match(model, target_names=("query", "value"), r=8, alpha=16, dropout=0.0,
                                    trainable_names=("classifier",)):
    try:
        return lora.apply_lora(model, target_names, r, alpha, dropout, trainable_names)
    except ValueError:
        return model


def apply_lora_returns_nothing(model, *args, **kwargs):
    lora.apply_lora(model, *args, **kwargs)


class Adapter(lora.LoRALinear):
    """A LoRA layer of another name than the notebook's LoRALinear."""


def apply_lora_with_its_own_class(model, target_names=("query", "value"), r=8, alpha=16, dropout=0.0,
                                  trainable_names=("classifier",)):
    model.requires_grad_(False)
    targets = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
               if name in set(target_names) and isinstance(child, nn.Linear)]
    if not targets:
        raise ValueError("no layer matches")
    for parent, name, child in targets:
        setattr(parent, name, Adapter(child, r=r, alpha=alpha, dropout=dropout))
    for name, p in model.named_parameters():
        if set(trainable_names).intersection(name.split(".")):
            p.requires_grad_(True)
    return model


class LoRALinearByFunctional(nn.Module):
    """F.linear twice for the low-rank path; A drawn by nn.init.uniform_ on the same bounds."""

    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__()
        if r < 1:
            raise ValueError("r must be >= 1")
        self.base, self.r, self.alpha, self.scaling = base, r, alpha, alpha / r
        for p in base.parameters():
            p.requires_grad_(False)
        bound = 1 / math.sqrt(base.in_features)
        like = dict(device=base.weight.device, dtype=base.weight.dtype)
        self.lora_A = nn.Parameter(nn.init.uniform_(torch.empty(r, base.in_features, **like), -bound, bound))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r, **like))
        self.dropout = nn.Dropout(dropout) if dropout else nn.Identity()

    def forward(self, x):
        low_rank = nn.functional.linear(nn.functional.linear(self.dropout(x), self.lora_A), self.lora_B)
        return self.base(x) + low_rank * self.scaling


class LoRALinearMergedForward(lora.LoRALinear):
    """Without dropout, one product with W + scaling * B A (gradients still reach A and B)."""

    def forward(self, x):
        if not isinstance(self.dropout, nn.Identity):
            return super().forward(x)
        weight = self.base.weight + self.scaling * (self.lora_B @ self.lora_A)
        return nn.functional.linear(x, weight, self.base.bias)


def lora_parameter_count_by_parts(d_in, d_out, r):
    return r * d_in + d_out * r


def lora_parameter_count_from_shapes(d_in, d_out, r):
    return torch.empty(r, d_in).numel() + torch.empty(d_out, r).numel()


def apply_lora_by_module_names(model, target_names=("query", "value"), r=8, alpha=16, dropout=0.0,
                               trainable_names=("classifier",)):
    for p in model.parameters():
        p.requires_grad = False
    names = [name for name, module in model.named_modules()
             if isinstance(module, nn.Linear) and name.rsplit(".", 1)[-1] in set(target_names)]
    if not names:
        raise ValueError("no nn.Linear matches target_names")
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        setattr(parent, child, lora.LoRALinear(getattr(parent, child), r, alpha, dropout))
    for name, p in model.named_parameters():
        if any(part in set(trainable_names) for part in name.split(".")):
            p.requires_grad = True
    return model


def apply_lora_recursively(model, target_names=("query", "value"), r=8, alpha=16, dropout=0.0,
                           trainable_names=("classifier",)):
    model.requires_grad_(False)
    targets, trainable = set(target_names), set(trainable_names)

    def adapt(module):
        count = 0
        for name, child in list(module.named_children()):
            if name in targets and isinstance(child, nn.Linear):
                setattr(module, name, lora.LoRALinear(child, r, alpha, dropout))
                count += 1
            else:
                count += adapt(child)
        return count

    if not adapt(model):
        raise ValueError("no nn.Linear matches target_names")
    for name, p in model.named_parameters():
        if not trainable.isdisjoint(name.split(".")):
            p.requires_grad_(True)
    return model


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"LoRALinear": LoRALinearRandomB, "lora_parameter_count": lora_parameter_count_full,
         "apply_lora": apply_lora_frozen_head},
    {"LoRALinear": LoRALinearScaledByAlpha},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"LoRALinear": LoRALinearByFunctional, "lora_parameter_count": lora_parameter_count_by_parts,
         "apply_lora": apply_lora_by_module_names},
    {"LoRALinear": LoRALinearMergedForward, "lora_parameter_count": lora_parameter_count_from_shapes,
         "apply_lora": apply_lora_recursively},
]
