"""BERT's encoder assembled from the attention section's pieces: multi-head self-attention,
the post-LN encoder layer, and the whole encoder (embeddings, then the layers), with every
weight read from a ``transformers`` ``BertModel`` state dict by its parameter names.

Eval mode throughout: no dropout. The attention itself is
``attention.scaled_dot_product_attention``, as the students' is their own.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .attention import scaled_dot_product_attention


def _linear(x: torch.Tensor, weights: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    """``nn.Linear``'s x W^T + b with the weight and bias stored under ``name``."""
    return F.linear(x, weights[f"{name}.weight"], weights[f"{name}.bias"])


def _layer_norm(x: torch.Tensor, weights: dict[str, torch.Tensor], name: str, eps: float) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], weights[f"{name}.weight"], weights[f"{name}.bias"], eps)


def _part(weights: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """The entries of ``weights`` under ``prefix``, with the prefix taken off their names."""
    return {name.removeprefix(prefix): value for name, value in weights.items() if name.startswith(prefix)}


def multi_head_self_attention(x: torch.Tensor, attention_mask: torch.Tensor, weights: dict[str, torch.Tensor],
                              n_heads: int) -> torch.Tensor:
    """BERT's self-attention sub-layer without its residual and LayerNorm: project ``x`` [B, T, H]
    to queries, keys and values (``self.query``, ``self.key``, ``self.value``), split H into
    ``n_heads`` heads of H / n_heads consecutive features, attend with padding keys hidden,
    concatenate the heads and apply ``output.dense``. ValueError when n_heads does not divide H."""
    batch, length, hidden = x.shape
    if n_heads < 1 or hidden % n_heads:
        raise ValueError(f"n_heads={n_heads} does not divide the hidden size {hidden}")
    head_size = hidden // n_heads

    def split(t: torch.Tensor) -> torch.Tensor:  # [B, T, H] -> [B, heads, T, H / heads]
        return t.view(batch, length, n_heads, head_size).transpose(1, 2)

    q, k, v = (split(_linear(x, weights, f"self.{name}")) for name in ("query", "key", "value"))
    context, _ = scaled_dot_product_attention(q, k, v, padding_mask=attention_mask.to(torch.bool))
    merged = context.transpose(1, 2).reshape(batch, length, hidden)
    return _linear(merged, weights, "output.dense")


def _gelu(x: torch.Tensor) -> torch.Tensor:
    """The exact GELU, x Phi(x) with Phi the standard normal CDF (BERT's ``hidden_act="gelu"``)."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def encoder_layer(x: torch.Tensor, attention_mask: torch.Tensor, weights: dict[str, torch.Tensor], *,
                  n_heads: int, eps: float) -> torch.Tensor:
    """One post-LN BERT layer (``BertLayer`` in eval mode): h = LN(x + attention(x)), then
    LN(h + W2 gelu(W1 h)), both LayerNorms with ``eps``; ``weights`` by BertLayer's names."""
    attended = multi_head_self_attention(x, attention_mask, _part(weights, "attention."), n_heads)
    h = _layer_norm(x + attended, weights, "attention.output.LayerNorm", eps)
    feed_forward = _linear(_gelu(_linear(h, weights, "intermediate.dense")), weights, "output.dense")
    return _layer_norm(h + feed_forward, weights, "output.LayerNorm", eps)


def bert_encoder(input_ids: torch.Tensor, attention_mask: torch.Tensor, state_dict: dict[str, torch.Tensor],
                 config: dict, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
    """``BertModel(...).last_hidden_state`` [B, T, H]: word + position (0 .. T-1) + token type
    embeddings (type 0 when ``token_type_ids`` is None), LayerNorm, then the
    ``config["num_hidden_layers"]`` layers in order."""
    eps = config["layer_norm_eps"]
    positions = torch.arange(input_ids.size(1), device=input_ids.device)
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)
    x = (state_dict["embeddings.word_embeddings.weight"][input_ids]
         + state_dict["embeddings.position_embeddings.weight"][positions]
         + state_dict["embeddings.token_type_embeddings.weight"][token_type_ids])
    x = _layer_norm(x, state_dict, "embeddings.LayerNorm", eps)
    for index in range(config["num_hidden_layers"]):
        x = encoder_layer(x, attention_mask, _part(state_dict, f"encoder.layer.{index}."),
                          n_heads=config["num_attention_heads"], eps=eps)
    return x
