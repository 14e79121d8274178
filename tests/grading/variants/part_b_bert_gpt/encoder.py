"""Stand-in students for the assembled-BERT section of part_b_bert_gpt.ipynb: multi-head
self-attention, the post-LN encoder layer, the whole encoder.

Each mutant is the reference wrong in one clause; the pieces it does not break are the
reference's (a mutant of ``encoder_layer`` attends with the reference's
``multi_head_self_attention``), so a mutant loses points on its own item only."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from autograder.reference import attention, encoder

from ._common import _on_cpu


def _part(weights, prefix):
    return {name[len(prefix):]: value for name, value in weights.items() if name.startswith(prefix)}


def _ln(x, weights, name, eps):
    return F.layer_norm(x, x.shape[-1:], weights[f"{name}.weight"], weights[f"{name}.bias"], eps)


def _exact_gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


# ---------------------------------------------------------------- multi_head_self_attention, wrong
def _mhsa(x, attention_mask, weights, n_heads, *, transpose=True, interleave=False, scale_by_hidden=False,
          padding=True, output=True, check=True):
    batch, length, hidden = x.shape
    if check and hidden % n_heads:
        raise ValueError("n_heads must divide the hidden size")
    head_size = hidden // n_heads

    def project(name):
        weight = weights[f"{name}.weight"]
        return x @ (weight.T if transpose else weight) + weights[f"{name}.bias"]

    def split(t):
        if interleave:  # feature f goes to head f % n_heads
            return t.view(batch, length, head_size, n_heads).permute(0, 3, 1, 2)
        return t.view(batch, length, n_heads, head_size).transpose(1, 2)

    q, k, v = (split(project(f"self.{name}")) for name in ("query", "key", "value"))
    if scale_by_hidden:
        q = q * math.sqrt(head_size) / math.sqrt(hidden)
    mask = attention_mask.bool() if padding else None
    context, _ = attention.scaled_dot_product_attention(q, k, v, padding_mask=mask)
    if interleave:
        merged = context.permute(0, 2, 3, 1).reshape(batch, length, hidden)
    else:
        merged = context.transpose(1, 2).reshape(batch, length, hidden)
    if not output:
        return merged
    return merged @ weights["output.dense.weight"].T + weights["output.dense.bias"]


def mhsa_weights_not_transposed(x, attention_mask, weights, n_heads):
    """x @ W instead of nn.Linear's x @ W^T."""
    return _mhsa(x, attention_mask, weights, n_heads, transpose=False)


def mhsa_heads_interleaved(x, attention_mask, weights, n_heads):
    """Head h takes every n_heads-th feature instead of a block of consecutive ones."""
    return _mhsa(x, attention_mask, weights, n_heads, interleave=True)


def mhsa_scaled_by_hidden_size(x, attention_mask, weights, n_heads):
    """Scores divided by sqrt(H) instead of sqrt(H / n_heads)."""
    return _mhsa(x, attention_mask, weights, n_heads, scale_by_hidden=True)


def mhsa_ignores_padding(x, attention_mask, weights, n_heads):
    return _mhsa(x, attention_mask, weights, n_heads, padding=False)


def mhsa_zeroes_padding_rows(x, attention_mask, weights, n_heads):
    """Right at real positions, zeros at padding positions."""
    out = encoder.multi_head_self_attention(x, attention_mask, weights, n_heads)
    return out * attention_mask.to(out.dtype)[..., None]


def mhsa_no_output_projection(x, attention_mask, weights, n_heads):
    return _mhsa(x, attention_mask, weights, n_heads, output=False)


def mhsa_no_divisibility_check(x, attention_mask, weights, n_heads):
    """No check: a head count that does not divide H fails in view() with a RuntimeError."""
    return _mhsa(x, attention_mask, weights, n_heads, check=False)


mhsa_on_cpu = _on_cpu(encoder.multi_head_self_attention)


# ---------------------------------------------------------------- encoder_layer, wrong
def _layer(x, attention_mask, weights, *, n_heads, eps, pre_ln=False, attention_residual=True,
           feed_forward_residual=True, gelu=_exact_gelu, swap_norms=False):
    first, second = "attention.output.LayerNorm", "output.LayerNorm"
    if swap_norms:
        first, second = second, first

    def feed_forward(h):
        inner = F.linear(h, weights["intermediate.dense.weight"], weights["intermediate.dense.bias"])
        return F.linear(gelu(inner), weights["output.dense.weight"], weights["output.dense.bias"])

    def attend(h):
        return encoder.multi_head_self_attention(h, attention_mask, _part(weights, "attention."), n_heads)

    if pre_ln:
        h = x + attend(_ln(x, weights, first, eps))
        return h + feed_forward(_ln(h, weights, second, eps))
    h = _ln((x if attention_residual else 0) + attend(x), weights, first, eps)
    return _ln((h if feed_forward_residual else 0) + feed_forward(h), weights, second, eps)


def layer_pre_ln(x, attention_mask, weights, *, n_heads, eps):
    """Pre-LN (GPT-2 style): LayerNorm on each sub-layer's input, the residual stream left unnormalised."""
    return _layer(x, attention_mask, weights, n_heads=n_heads, eps=eps, pre_ln=True)


def layer_no_attention_residual(x, attention_mask, weights, *, n_heads, eps):
    return _layer(x, attention_mask, weights, n_heads=n_heads, eps=eps, attention_residual=False)


def layer_no_feed_forward_residual(x, attention_mask, weights, *, n_heads, eps):
    return _layer(x, attention_mask, weights, n_heads=n_heads, eps=eps, feed_forward_residual=False)


def layer_tanh_gelu(x, attention_mask, weights, *, n_heads, eps):
    """GELU's tanh approximation instead of the exact erf form."""
    return _layer(x, attention_mask, weights, n_heads=n_heads, eps=eps,
                  gelu=lambda t: F.gelu(t, approximate="tanh"))


def layer_fixed_eps(x, attention_mask, weights, *, n_heads, eps):
    """BERT-base's eps written into the code instead of the argument."""
    return _layer(x, attention_mask, weights, n_heads=n_heads, eps=1e-12)


def layer_norms_swapped(x, attention_mask, weights, *, n_heads, eps):
    """The feed-forward's LayerNorm after the attention and the reverse."""
    return _layer(x, attention_mask, weights, n_heads=n_heads, eps=eps, swap_norms=True)


def layer_residual_in_place(x, attention_mask, weights, *, n_heads, eps):
    """Right values, but the residual is added into the caller's x."""
    x += encoder.multi_head_self_attention(x, attention_mask, _part(weights, "attention."), n_heads)
    h = _ln(x, weights, "attention.output.LayerNorm", eps)
    inner = F.linear(h, weights["intermediate.dense.weight"], weights["intermediate.dense.bias"])
    out = F.linear(_exact_gelu(inner), weights["output.dense.weight"], weights["output.dense.bias"])
    return _ln(h + out, weights, "output.LayerNorm", eps)


layer_on_cpu = _on_cpu(encoder.encoder_layer)


# ---------------------------------------------------------------- bert_encoder, wrong
def _encoder(input_ids, attention_mask, state_dict, config, token_type_ids=None, *, first_position=0,
             embedding_norm=True, use_token_types=True, types_when_none=True, reverse=False, heads=None,
             eps=None, layers=None):
    eps = config["layer_norm_eps"] if eps is None else eps
    heads = config["num_attention_heads"] if heads is None else heads
    layers = config["num_hidden_layers"] if layers is None else layers
    length = input_ids.size(1)
    x = (state_dict["embeddings.word_embeddings.weight"][input_ids]
         + state_dict["embeddings.position_embeddings.weight"][torch.arange(first_position, first_position + length)])
    if token_type_ids is not None and use_token_types:
        x = x + state_dict["embeddings.token_type_embeddings.weight"][token_type_ids]
    elif token_type_ids is not None or types_when_none:
        x = x + state_dict["embeddings.token_type_embeddings.weight"][0]
    if embedding_norm:
        x = _ln(x, state_dict, "embeddings.LayerNorm", eps)
    order = range(layers - 1, -1, -1) if reverse else range(layers)
    for i in order:
        x = encoder.encoder_layer(x, attention_mask, _part(state_dict, f"encoder.layer.{i}."), n_heads=heads, eps=eps)
    return x


def encoder_positions_from_one(input_ids, attention_mask, state_dict, config, token_type_ids=None):
    """Positions 1 .. T instead of 0 .. T-1."""
    return _encoder(input_ids, attention_mask, state_dict, config, token_type_ids, first_position=1)


def encoder_no_embedding_layer_norm(input_ids, attention_mask, state_dict, config, token_type_ids=None):
    return _encoder(input_ids, attention_mask, state_dict, config, token_type_ids, embedding_norm=False)


def encoder_ignores_token_types(input_ids, attention_mask, state_dict, config, token_type_ids=None):
    """Every token gets type 0, whatever token_type_ids says."""
    return _encoder(input_ids, attention_mask, state_dict, config, token_type_ids, use_token_types=False)


def encoder_no_token_types_when_none(input_ids, attention_mask, state_dict, config, token_type_ids=None):
    """token_type_ids=None adds no token type embedding at all (instead of type 0's)."""
    return _encoder(input_ids, attention_mask, state_dict, config, token_type_ids, types_when_none=False)


def encoder_layers_reversed(input_ids, attention_mask, state_dict, config, token_type_ids=None):
    return _encoder(input_ids, attention_mask, state_dict, config, token_type_ids, reverse=True)


def encoder_fixed_heads_and_eps(input_ids, attention_mask, state_dict, config, token_type_ids=None):
    """The tiny model's 4 heads and BERT's eps written into the code."""
    return _encoder(input_ids, attention_mask, state_dict, config, token_type_ids, heads=4, eps=1e-12)


def encoder_fixed_depth(input_ids, attention_mask, state_dict, config, token_type_ids=None):
    """Two layers, whatever the config says."""
    return _encoder(input_ids, attention_mask, state_dict, config, token_type_ids, layers=2)


encoder_on_cpu = _on_cpu(encoder.bert_encoder)


# ---------------------------------------------------------------- correct, written differently
def mhsa_head_by_head(x, attention_mask, weights, n_heads):
    """One attention call per head on [B, T, d] slices, projections by einsum, heads concatenated."""
    hidden = x.size(-1)
    if hidden % n_heads != 0:
        raise ValueError(f"{n_heads} heads do not divide {hidden}")
    d = hidden // n_heads
    q, k, v = (torch.einsum("bth,oh->bto", x, weights[f"self.{n}.weight"]) + weights[f"self.{n}.bias"]
               for n in ("query", "key", "value"))
    real = attention_mask != 0
    heads = [attention.scaled_dot_product_attention(q[..., h * d:(h + 1) * d], k[..., h * d:(h + 1) * d],
                                                    v[..., h * d:(h + 1) * d], padding_mask=real)[0]
             for h in range(n_heads)]
    return F.linear(torch.cat(heads, dim=-1), weights["output.dense.weight"], weights["output.dense.bias"])


def mhsa_by_unflatten(x, attention_mask, weights, n_heads):
    """One [3H, H] projection for q, k and v together, heads by unflatten/permute."""
    batch, length, hidden = x.shape
    if n_heads <= 0 or hidden % n_heads:
        raise ValueError("hidden size not divisible by n_heads")
    w = torch.cat([weights[f"self.{n}.weight"] for n in ("query", "key", "value")])
    b = torch.cat([weights[f"self.{n}.bias"] for n in ("query", "key", "value")])
    qkv = F.linear(x, w, b).unflatten(-1, (3, n_heads, hidden // n_heads)).permute(2, 0, 3, 1, 4)
    context, _ = attention.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2],
                                                        padding_mask=attention_mask.to(torch.bool))
    merged = context.permute(0, 2, 1, 3).flatten(2)
    return torch.addmm(weights["output.dense.bias"], merged.reshape(-1, hidden),
                       weights["output.dense.weight"].t()).view(batch, length, hidden)


def layer_by_hand(x, attention_mask, weights, *, n_heads, eps):
    """LayerNorm from its mean and (biased) variance, GELU from torch's exact gelu."""
    def norm(t, name):
        mean = t.mean(-1, keepdim=True)
        var = ((t - mean) ** 2).mean(-1, keepdim=True)
        return (t - mean) / torch.sqrt(var + eps) * weights[f"{name}.weight"] + weights[f"{name}.bias"]

    inner = {key.removeprefix("attention."): w for key, w in weights.items() if key.startswith("attention.")}
    h = norm(x + mhsa_head_by_head(x, attention_mask, inner, n_heads), "attention.output.LayerNorm")
    ff = F.gelu(h @ weights["intermediate.dense.weight"].T + weights["intermediate.dense.bias"])
    return norm(h + ff @ weights["output.dense.weight"].T + weights["output.dense.bias"], "output.LayerNorm")


def layer_with_modules(x, attention_mask, weights, *, n_heads, eps):
    """nn.Linear and nn.LayerNorm modules loaded with the given weights (copies: the caller's stay as they are)."""
    hidden, inner_size = x.size(-1), weights["intermediate.dense.weight"].size(0)
    up, down = torch.nn.Linear(hidden, inner_size), torch.nn.Linear(inner_size, hidden)
    norm1, norm2 = torch.nn.LayerNorm(hidden, eps=eps), torch.nn.LayerNorm(hidden, eps=eps)
    modules = {"intermediate.dense": up, "output.dense": down, "attention.output.LayerNorm": norm1,
               "output.LayerNorm": norm2}
    with torch.no_grad():
        for name, module in modules.items():
            module.to(x.device)
            module.weight.copy_(weights[f"{name}.weight"])
            module.bias.copy_(weights[f"{name}.bias"])
        attended = mhsa_by_unflatten(x, attention_mask, _part(weights, "attention."), n_heads)
        h = norm1(attended + x)
        return norm2(down(F.gelu(up(h), approximate="none")) + h)


def encoder_by_embedding_lookups(input_ids, attention_mask, state_dict, config, token_type_ids=None):
    """F.embedding, explicit position ids [B, T], layers from the alternative layer above."""
    batch, length = input_ids.shape
    position_ids = torch.arange(length, device=input_ids.device).expand(batch, length)
    types = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
    x = (F.embedding(input_ids, state_dict["embeddings.word_embeddings.weight"])
         + F.embedding(position_ids, state_dict["embeddings.position_embeddings.weight"])
         + F.embedding(types, state_dict["embeddings.token_type_embeddings.weight"]))
    eps = float(config["layer_norm_eps"])
    x = _ln(x, state_dict, "embeddings.LayerNorm", eps)
    for i in range(int(config["num_hidden_layers"])):
        x = layer_by_hand(x, attention_mask, _part(state_dict, f"encoder.layer.{i}."),
                          n_heads=int(config["num_attention_heads"]), eps=eps)
    return x


def encoder_by_one_hot(input_ids, attention_mask, state_dict, config, token_type_ids=None):
    """Embeddings as one-hot matrix products, the layers grouped first by their index."""
    word = state_dict["embeddings.word_embeddings.weight"]
    x = F.one_hot(input_ids, word.size(0)).to(word.dtype) @ word
    x = x + state_dict["embeddings.position_embeddings.weight"][: input_ids.size(1)]
    types = state_dict["embeddings.token_type_embeddings.weight"]
    x = x + (types[0] if token_type_ids is None else F.one_hot(token_type_ids, types.size(0)).to(types.dtype) @ types)
    x = _ln(x, state_dict, "embeddings.LayerNorm", config["layer_norm_eps"])
    grouped: dict[int, dict] = {}
    for name, value in state_dict.items():
        if name.startswith("encoder.layer."):
            index, _, rest = name[len("encoder.layer."):].partition(".")
            grouped.setdefault(int(index), {})[rest] = value
    for i in range(config["num_hidden_layers"]):
        x = layer_with_modules(x, attention_mask, grouped[i], n_heads=config["num_attention_heads"],
                               eps=config["layer_norm_eps"])
    return x


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"multi_head_self_attention": mhsa_heads_interleaved, "encoder_layer": layer_pre_ln,
     "bert_encoder": encoder_positions_from_one},
    {"multi_head_self_attention": mhsa_ignores_padding, "encoder_layer": layer_tanh_gelu,
     "bert_encoder": encoder_ignores_token_types},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"multi_head_self_attention": mhsa_head_by_head, "encoder_layer": layer_by_hand,
     "bert_encoder": encoder_by_embedding_lookups},
    {"multi_head_self_attention": mhsa_by_unflatten, "encoder_layer": layer_with_modules,
     "bert_encoder": encoder_by_one_hot},
]
