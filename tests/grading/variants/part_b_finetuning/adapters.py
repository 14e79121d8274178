"""Stand-in students for the adapters section of part_b_finetuning.ipynb (B6.4): bottleneck adapters
and the trainable-parameter counts."""
from __future__ import annotations

import copy
import math

import torch
from torch import nn

from autograder.reference import adapters, lora


# ---------------------------------------------------------------- beyond LoRA: wrong in one clause each
class AdapterWithoutBottleneckCheck(adapters.BottleneckAdapter):
    def __init__(self, hidden_size, bottleneck):
        super().__init__(hidden_size, max(bottleneck, 1))


class AdapterWithoutDownBias(adapters.BottleneckAdapter):
    def __init__(self, hidden_size, bottleneck):
        super().__init__(hidden_size, bottleneck)
        self.down = nn.Linear(hidden_size, bottleneck, bias=False)


class AdapterWithScale(adapters.BottleneckAdapter):
    """A learned output scale, starting at 1: the same function, one parameter too many."""

    def __init__(self, hidden_size, bottleneck):
        super().__init__(hidden_size, bottleneck)
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, x):
        return x + self.scale * self.up(self.act(self.down(x)))


class AdapterFrozenDown(adapters.BottleneckAdapter):
    def __init__(self, hidden_size, bottleneck):
        super().__init__(hidden_size, bottleneck)
        self.down.requires_grad_(False)


class AdapterZeroDown(adapters.BottleneckAdapter):
    """Both projections zero: the adapter starts as the identity, and no gradient ever reaches it."""

    def __init__(self, hidden_size, bottleneck):
        super().__init__(hidden_size, bottleneck)
        nn.init.zeros_(self.down.weight)
        nn.init.zeros_(self.down.bias)


class AdapterRandomUp(adapters.BottleneckAdapter):
    def __init__(self, hidden_size, bottleneck):
        super().__init__(hidden_size, bottleneck)
        self.up.reset_parameters()  # nn.Linear's random initialisation instead of zero


class AdapterWithoutResidual(adapters.BottleneckAdapter):
    def forward(self, x):
        return self.up(self.act(self.down(x)))


class AdapterReLU(adapters.BottleneckAdapter):
    def forward(self, x):
        return x + self.up(torch.relu(self.down(x)))


class AdapterFlattens(adapters.BottleneckAdapter):
    """Works on a matrix of rows and forgets to put the leading dimensions back."""

    def forward(self, x):
        rows = x.reshape(-1, x.shape[-1])
        return rows + self.up(self.act(self.down(rows)))


class AdapterFloat32Output(adapters.BottleneckAdapter):
    def forward(self, x):
        return super().forward(x).float()


class AdapterOutputOnCpu(adapters.BottleneckAdapter):
    def forward(self, x):
        return super().forward(x).cpu()


class AdapterAddsInPlace(adapters.BottleneckAdapter):
    def forward(self, x):
        return x.add_(self.up(self.act(self.down(x))))


class AdapterDetachedDown(adapters.BottleneckAdapter):
    def forward(self, x):
        return x + self.up(self.act(self.down(x).detach()))


def _head(model) -> int:
    return sum(p.numel() for p in model.classifier.parameters())


def peft_counts_extra_key(model, **kwargs):
    return {**adapters.peft_parameter_counts(model, **kwargs), "head": _head(model)}


def peft_counts_as_floats(model, **kwargs):
    return {key: float(value) for key, value in adapters.peft_parameter_counts(model, **kwargs).items()}


def peft_counts_full_trainable_only(model, **kwargs):
    counts = adapters.peft_parameter_counts(model, **kwargs)
    return {**counts, "full": sum(p.numel() for p in model.parameters() if p.requires_grad)}


def peft_counts_pooler_in_head(model, **kwargs):
    """Counts the pooler as part of the head (its bias was already in BitFit's count)."""
    counts = adapters.peft_parameter_counts(model, **kwargs)
    pooler = model.base_model.pooler.dense
    return {**counts, **{key: counts[key] + pooler.weight.numel() + pooler.bias.numel()
                         for key in ("lora", "adapters", "prompt_tuning")},
            "bitfit": counts["bitfit"] + pooler.weight.numel()}


def peft_counts_lora_on_key_too(model, *, lora_r, adapter_bottleneck, prompt_length):
    counts = adapters.peft_parameter_counts(model, lora_r=lora_r, adapter_bottleneck=adapter_bottleneck,
                                        prompt_length=prompt_length)
    keys = sum(lora_r * (m.in_features + m.out_features) for name, m in model.named_modules()
               if isinstance(m, nn.Linear) and name.endswith(".key"))
    return {**counts, "lora": counts["lora"] + keys}


def peft_counts_one_adapter_per_layer(model, **kwargs):
    counts = adapters.peft_parameter_counts(model, **kwargs)
    return {**counts, "adapters": (counts["adapters"] - _head(model)) // 2 + _head(model)}


def peft_counts_adapters_without_biases(model, *, lora_r, adapter_bottleneck, prompt_length):
    counts = adapters.peft_parameter_counts(model, lora_r=lora_r, adapter_bottleneck=adapter_bottleneck,
                                        prompt_length=prompt_length)
    d, layers = model.config.hidden_size, len(model.base_model.encoder.layer)
    return {**counts, "adapters": 2 * layers * 2 * d * adapter_bottleneck + _head(model)}


def peft_counts_prompt_in_every_layer(model, *, lora_r, adapter_bottleneck, prompt_length):
    """Prefix tuning's count (vectors in every layer), not prompt tuning's."""
    counts = adapters.peft_parameter_counts(model, lora_r=lora_r, adapter_bottleneck=adapter_bottleneck,
                                        prompt_length=prompt_length)
    d, layers = model.config.hidden_size, len(model.base_model.encoder.layer)
    return {**counts, "prompt_tuning": layers * prompt_length * d + _head(model)}


def peft_counts_bitfit_without_layernorms(model, **kwargs):
    counts = adapters.peft_parameter_counts(model, **kwargs)
    norms = sum(m.bias.numel() for m in model.base_model.modules() if isinstance(m, nn.LayerNorm))
    return {**counts, "bitfit": counts["bitfit"] - norms}


def peft_counts_bitfit_without_pooler(model, **kwargs):
    counts = adapters.peft_parameter_counts(model, **kwargs)
    return {**counts, "bitfit": counts["bitfit"] - model.base_model.pooler.dense.bias.numel()}


def peft_counts_assumes_four_times_wider_ffn(model, *, lora_r, adapter_bottleneck, prompt_length):
    """BitFit from BERT-base's proportions: a feed-forward block 4 times the hidden size."""
    counts = adapters.peft_parameter_counts(model, lora_r=lora_r, adapter_bottleneck=adapter_bottleneck,
                                        prompt_length=prompt_length)
    d, layers = model.config.hidden_size, len(model.base_model.encoder.layer)
    per_layer = 4 * d + d + 4 * d + d + d  # q, k, v, o; LayerNorm; intermediate; output; LayerNorm
    return {**counts, "bitfit": d + layers * per_layer + d + _head(model)}


def peft_counts_without_argument_check(model, *, lora_r, adapter_bottleneck, prompt_length):
    return adapters.peft_parameter_counts(model, lora_r=max(lora_r, 1), adapter_bottleneck=max(adapter_bottleneck, 1),
                                      prompt_length=max(prompt_length, 1))


def peft_counts_builds_lora_in_place(model, *, lora_r, adapter_bottleneck, prompt_length):
    """Counts LoRA's trainable parameters by applying LoRA to the model itself."""
    counts = adapters.peft_parameter_counts(model, lora_r=lora_r, adapter_bottleneck=adapter_bottleneck,
                                        prompt_length=prompt_length)
    lora.apply_lora(model, r=lora_r)
    return {**counts, "lora": sum(p.numel() for p in model.parameters() if p.requires_grad)}


# ---------------------------------------------------------------- beyond LoRA: correct, written differently
class BottleneckAdapterByHand(nn.Module):
    """up is built first (so down draws other random numbers), forward by explicit products and the
    erf form of the GELU."""

    def __init__(self, hidden_size, bottleneck):
        super().__init__()
        if bottleneck <= 0:
            raise ValueError("bottleneck must be positive")
        self.up = nn.Linear(bottleneck, hidden_size)
        self.down = nn.Linear(hidden_size, bottleneck)
        with torch.no_grad():
            self.up.weight.fill_(0.0)
            self.up.bias.fill_(0.0)

    def forward(self, x):
        h = torch.matmul(x, self.down.weight.t()) + self.down.bias
        h = 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))
        return x + torch.matmul(h, self.up.weight.t()) + self.up.bias


class BottleneckAdapterSequential(nn.Module):
    """down re-drawn uniformly on its own bounds, the three steps in an nn.Sequential sharing the layers."""

    def __init__(self, hidden_size, bottleneck):
        super().__init__()
        if not bottleneck >= 1:
            raise ValueError("bottleneck must be >= 1")
        self.down = nn.Linear(hidden_size, bottleneck)
        bound = 1 / math.sqrt(hidden_size)
        nn.init.uniform_(self.down.weight, -bound, bound)
        nn.init.uniform_(self.down.bias, -bound, bound)
        self.up = nn.Linear(bottleneck, hidden_size)
        self.up.weight.data.zero_()
        self.up.bias.data.zero_()
        self.block = nn.Sequential(self.down, nn.GELU(), self.up)

    def forward(self, x):
        return torch.add(x, self.block(x))


def peft_counts_by_building(model, *, lora_r, adapter_bottleneck, prompt_length):
    """Builds each method on a copy of the model and counts what requires grad."""
    if min(lora_r, adapter_bottleneck, prompt_length) < 1:
        raise ValueError("every setting must be at least 1")

    def trainable(m):
        return sum(p.numel() for p in m.parameters() if p.requires_grad)

    def copy_with_head():
        clone = copy.deepcopy(model)
        clone.requires_grad_(False)
        clone.classifier.requires_grad_(True)
        return clone

    with torch.random.fork_rng(devices=[]):  # the copies draw from the global generator: leave it as it was
        adapted = lora.apply_lora(copy.deepcopy(model), r=lora_r)
        housed = copy_with_head()
        d = housed.config.hidden_size
        for layer in housed.base_model.encoder.layer:
            for block in (layer.attention.output, layer.output):
                block.dense = nn.Sequential(block.dense, adapters.BottleneckAdapter(d, adapter_bottleneck))
    biased = copy_with_head()
    for name, p in biased.base_model.named_parameters():
        p.requires_grad_(name.endswith("bias"))
    prompt = nn.Parameter(torch.zeros(prompt_length, model.base_model.embeddings.word_embeddings.weight.shape[1]))
    return {"full": sum(p.numel() for p in model.parameters()), "lora": trainable(adapted),
            "adapters": trainable(housed), "prompt_tuning": prompt.numel() + trainable(copy_with_head()),
            "bitfit": trainable(biased)}


def peft_counts_from_config(model, *, lora_r, adapter_bottleneck, prompt_length):
    """Formulas over the config's sizes, for BERT's layout."""
    for value in (lora_r, adapter_bottleneck, prompt_length):
        if value < 1:
            raise ValueError("lora_r, adapter_bottleneck and prompt_length must be >= 1")
    c = model.config
    h, i, n = c.hidden_size, c.intermediate_size, c.num_hidden_layers
    head = h * c.num_labels + c.num_labels
    embeddings = (c.vocab_size + c.max_position_embeddings + c.type_vocab_size) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    pooler = h * h + h
    return {"full": embeddings + n * layer + pooler + head,
            "lora": n * 2 * lora_r * (h + h) + head,
            "adapters": n * 2 * (2 * h * adapter_bottleneck + h + adapter_bottleneck) + head,
            "prompt_tuning": prompt_length * h + head,
            "bitfit": h + n * (4 * h + h + i + h + h) + h + head}


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"BottleneckAdapter": AdapterWithoutResidual, "peft_parameter_counts": peft_counts_one_adapter_per_layer},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"BottleneckAdapter": BottleneckAdapterByHand, "peft_parameter_counts": peft_counts_by_building},
    {"BottleneckAdapter": BottleneckAdapterSequential, "peft_parameter_counts": peft_counts_from_config},
]
