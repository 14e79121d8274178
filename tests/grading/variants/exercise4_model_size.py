"""Stand-in students for the hidden suite of exercise 4 (model size)."""
from __future__ import annotations

import copy

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
