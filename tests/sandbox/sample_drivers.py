"""Drivers of the sandbox tests (imported by the test workers and by the tests, not collected).

Small stand-ins for the course's drivers (``autograder.drivers``): two model
fixtures, a probe that drives a class, and one that lists the namespace, to
exercise ``preload``, fixture references and probes without the hidden suites.
"""
from __future__ import annotations

from typing import Any

from torch import nn

from autograder.sandbox.fixtures import register_fixture, seeded
from autograder.sandbox.probes import register_probe, student_definition


@register_probe("namespace_names")
def namespace_names(namespace, params):
    """The student's public top-level names."""
    return sorted(name for name in namespace if not name.startswith("_"))


@register_fixture("tiny_llama")
def tiny_llama(seed: int = 0, vocab_size: int = 128, hidden: int = 32, layers: int = 2,
               heads: int = 4, intermediate: int | None = None, max_positions: int = 128):
    """A randomly initialised ``LlamaForCausalLM`` small enough to run in milliseconds,
    in eval mode: the shape of SmolLM2 (the week's decoder) without its weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=heads,
                         intermediate_size=intermediate or 2 * hidden,
                         max_position_embeddings=max_positions, attn_implementation="eager",
                         bos_token_id=1, eos_token_id=2, pad_token_id=0)
    with seeded(seed):
        model = LlamaForCausalLM(config)
    return model.eval()


@register_fixture("tiny_bert_classifier")
def tiny_bert_classifier(seed: int = 0, vocab_size: int = 128, hidden: int = 32, layers: int = 2,
                         heads: int = 4, intermediate: int | None = None, num_labels: int = 2,
                         max_positions: int = 128):
    """A randomly initialised ``BertForSequenceClassification``, in eval mode (no dropout)."""
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=intermediate or 2 * hidden,
                        max_position_embeddings=max_positions, num_labels=num_labels,
                        attn_implementation="eager", pad_token_id=0)
    with seeded(seed):
        model = BertForSequenceClassification(config)
    return model.eval()


@register_probe("lora_linear")
def lora_linear(namespace: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Wrap a seeded ``nn.Linear`` in the student's ``LoRALinear(base, r, alpha)``.

    params: ``in_features``, ``out_features``, ``r``, ``alpha``, ``x`` (input tensor),
    optional ``seed`` (for the base layer, default 0), ``init_seed`` (seeds the
    student's own initialisation, default 1), ``class_name`` (default "LoRALinear").

    Returns, all detached copies:
      ``output``: layer(x);
      ``base_weight``/``base_bias``: the layer's base before wrapping (to check the
      student neither copied nor re-initialised it);
      ``parameters``: {name: tensor} for every ``named_parameters()`` entry;
      ``requires_grad``: {name: bool};
      ``has_grad``: {name: bool} after ``layer(x).sum().backward()``;
      ``trainable``: the number of trainable scalars.
    """
    cls = student_definition(namespace, params.get("class_name", "LoRALinear"))
    x = params["x"]
    with seeded(params.get("seed", 0)):
        base = nn.Linear(params["in_features"], params["out_features"])
    base_weight, base_bias = base.weight.detach().clone(), base.bias.detach().clone()
    with seeded(params.get("init_seed", 1)):
        layer = cls(base, params["r"], params["alpha"])
    output = layer(x)
    if output.requires_grad:  # with nothing trainable there is nothing to back-propagate
        output.sum().backward()
    named = dict(layer.named_parameters())
    return {
        "output": output.detach(),
        "base_weight": base_weight,
        "base_bias": base_bias,
        "parameters": {name: p.detach() for name, p in named.items()},
        "requires_grad": {name: bool(p.requires_grad) for name, p in named.items()},
        "has_grad": {name: p.grad is not None for name, p in named.items()},
        "trainable": int(sum(p.numel() for p in named.values() if p.requires_grad)),
    }
