"""Stand-in students for the hidden suite of exercise 4 (model size)."""
from __future__ import annotations

import copy

import torch
from torch import nn

from autograder.reference import exercises


# ---------------------------------------------------------------- wrong
def truncate_keeps_top_layers(model, num_layers):
    layers = model.base_model.encoder.layer
    if not 1 <= num_layers <= len(layers):
        raise ValueError("num_layers out of range")
    new = copy.deepcopy(model)
    new.base_model.encoder.layer = nn.ModuleList(list(new.base_model.encoder.layer)[len(layers) - num_layers:])
    new.config.num_hidden_layers = num_layers
    return new


def truncate_in_place(model, num_layers):
    layers = model.base_model.encoder.layer
    if not 1 <= num_layers <= len(layers):
        raise ValueError("num_layers out of range")
    model.base_model.encoder.layer = nn.ModuleList(list(layers)[:num_layers])
    model.config.num_hidden_layers = num_layers
    return model


def truncate_keeps_config(model, num_layers):
    new = exercises.truncate_encoder(model, num_layers)
    new.config.num_hidden_layers = model.config.num_hidden_layers
    return new


def truncate_without_range_check(model, num_layers):
    new = copy.deepcopy(model)
    new.base_model.encoder.layer = nn.ModuleList(list(new.base_model.encoder.layer)[:max(num_layers, 1)])
    new.config.num_hidden_layers = len(new.base_model.encoder.layer)
    return new


def training_flops_forward_only(n_params, n_tokens):
    return float(2 * n_params * n_tokens)


def count_from_state_dict(model):
    """Counts every entry of the state dict: a tied matrix twice."""
    sizes = {name: t.numel() for name, t in model.state_dict().items()}
    embeddings = sum(v for k, v in sizes.items() if ".embeddings." in f".{k}")
    encoder = sum(v for k, v in sizes.items() if ".encoder." in f".{k}")
    total = sum(sizes.values())
    return {"embeddings": embeddings, "encoder": encoder, "head": total - embeddings - encoder, "total": total}


def count_head_is_classifier_only(model):
    counts = exercises.count_encoder_parameters(model)
    head = sum(p.numel() for p in getattr(model, "classifier", nn.Identity()).parameters())
    return {**counts, "head": head, "total": counts["embeddings"] + counts["encoder"] + head}


# ---------------------------------------------------------------- correct, written differently
def truncate_from_config(model, num_layers):
    """A fresh model built from an edited copy of the config, loaded with the kept weights."""
    layers = len(model.base_model.encoder.layer)
    if num_layers < 1 or num_layers > layers:
        raise ValueError(f"num_layers must be between 1 and {layers}")
    config = copy.deepcopy(model.config)
    config.num_hidden_layers = num_layers
    new = type(model)(config).to(next(model.parameters()).device)
    prefix = "encoder.layer." if model.base_model is model else f"{model.base_model_prefix}.encoder.layer."
    state = {k: v for k, v in model.state_dict().items()
             if not k.startswith(prefix) or int(k[len(prefix):].split(".")[0]) < num_layers}
    new.load_state_dict(state)
    return new.train(model.training)


def count_by_pointer(model):
    seen = set()

    def part(module):
        total = 0
        for p in module.parameters():
            if p.data_ptr() not in seen:
                seen.add(p.data_ptr())
                total += p.numel()
        return total

    embeddings = part(model.base_model.embeddings)
    encoder = part(model.base_model.encoder)
    head = part(model)
    return {"total": embeddings + encoder + head, "head": head, "encoder": encoder, "embeddings": embeddings}


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"truncate_encoder": truncate_keeps_top_layers, "training_flops": training_flops_forward_only,
     "count_encoder_parameters": count_from_state_dict},
    {"truncate_encoder": truncate_in_place, "count_encoder_parameters": count_head_is_classifier_only},
    {"truncate_encoder": truncate_keeps_config},
    {"truncate_encoder": truncate_without_range_check},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"truncate_encoder": truncate_from_config, "count_encoder_parameters": count_by_pointer},
]


# ---------------------------------------------------------------- wrong in one clause each
# Named by the clause tables (autograder/reference/clauses/exercise4_model_size/).
def truncate_returns_the_encoder(model, num_layers):
    return exercises.truncate_encoder(model, num_layers).base_model


def truncate_shares_parameters(model, num_layers):
    """A new model, but holding the very parameter tensors of the original."""
    new = exercises.truncate_encoder(model, num_layers)
    new.load_state_dict({k: v for k, v in model.state_dict().items() if k in new.state_dict()}, assign=True)
    return new


def training_flops_int(n_params, n_tokens):
    return 6 * n_params * n_tokens


def count_as_tensors(model):
    return {key: torch.tensor(value) for key, value in exercises.count_encoder_parameters(model).items()}


def count_through_bert_attribute(model):
    """Reaches the encoder as ``model.bert``, which a bare BertModel does not have."""
    seen, counts = set(), {}
    for part, module in (("embeddings", model.bert.embeddings), ("encoder", model.bert.encoder), ("head", model)):
        counts[part] = sum(p.numel() for p in module.parameters() if id(p) not in seen and not seen.add(id(p)))
    return {**counts, "total": sum(counts.values())}


# ---------------------------------------------------------------- more correct ones, written differently
def truncate_by_deleting_layers(model, num_layers):
    depth = len(model.base_model.encoder.layer)
    if num_layers < 1 or num_layers > depth:
        raise ValueError(f"num_layers must be in [1, {depth}]")
    new = copy.deepcopy(model)
    del new.base_model.encoder.layer[num_layers:]
    new.config.num_hidden_layers = num_layers
    return new


def training_flops_forward_and_backward(n_params, n_tokens):
    forward, backward = 2.0 * n_params * n_tokens, 4.0 * n_params * n_tokens
    return forward + backward


def training_flops_in_floats(n_params, n_tokens):
    return 6.0 * float(n_params) * float(n_tokens)


def count_by_parameter_names(model):
    """Prefixes of the (deduplicated) parameter names: a tied tensor is named once, where first met."""
    prefix = "" if model.base_model is model else f"{model.base_model_prefix}."
    counts = {"embeddings": 0, "encoder": 0, "head": 0}
    for name, p in model.named_parameters():
        part = next((part for part in ("embeddings", "encoder") if name.startswith(f"{prefix}{part}.")), "head")
        counts[part] += p.numel()
    return {**counts, "total": sum(counts.values())}


ALTERNATIVES += [
    {"truncate_encoder": truncate_by_deleting_layers, "training_flops": training_flops_forward_and_backward,
     "count_encoder_parameters": count_by_parameter_names},
    {"training_flops": training_flops_in_floats},
]
