"""Trusted builders for objects that cannot cross the sandbox boundary.

A hidden test often needs to hand the student's function a model. A model cannot be
sent (only plain data crosses), so the test sends a *fixture reference* instead::

    worker.call("greedy_decode", fixture("tiny_llama", seed=0), prompt_ids)

and the worker replaces ``{"__fixture__": "tiny_llama", "seed": 0}`` by the result of
the builder registered under that name. The grader imports this same module and
calls ``build_fixture`` on the same reference to compute the expected answer from an
identical object: builders must be deterministic functions of their parameters
(seed everything, pick the eager attention kernel, leave global RNG state alone).

Register more builders with ``@register_fixture``; parameters must be vocabulary
values (see ``protocol``) because the reference travels as plain data.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from .errors import RequestError

FIXTURE_KEY = "__fixture__"
_BUILDERS: dict[str, Callable[..., Any]] = {}


def register_fixture(name: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: make ``builder(**params)`` available as fixture ``name`` (default: its name)."""
    def register(builder: Callable[..., Any]) -> Callable[..., Any]:
        key = name or builder.__name__
        if key in _BUILDERS and _BUILDERS[key] is not builder:
            raise ValueError(f"fixture {key!r} is already registered")
        _BUILDERS[key] = builder
        return builder
    return register


def fixture(name: str, **params: Any) -> dict[str, Any]:
    """A reference to fixture ``name``, to pass among the arguments of a call or probe."""
    if name not in _BUILDERS:
        raise RequestError(f"unknown fixture {name!r}; registered: {', '.join(available_fixtures())}")
    return {FIXTURE_KEY: name, **params}


def available_fixtures() -> list[str]:
    return sorted(_BUILDERS)


def build_fixture(reference: dict[str, Any]) -> Any:
    """Build the object a reference names (in the worker, and in the grader for expectations)."""
    params = dict(reference)
    name = params.pop(FIXTURE_KEY)
    builder = _BUILDERS.get(name)
    if builder is None:
        raise RequestError(f"unknown fixture {name!r}; registered: {', '.join(available_fixtures())}")
    return builder(**params)


def resolve_fixtures(value: Any) -> Any:
    """``value`` with every fixture reference, at any depth, replaced by its object."""
    kind = type(value)
    if kind is dict:
        if FIXTURE_KEY in value:
            return build_fixture(value)
        return {key: resolve_fixtures(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return kind(resolve_fixtures(item) for item in value)
    return value


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed torch's CPU generator for a block and restore the caller's RNG state after,
    so building a fixture does not shift the random numbers a student's code draws."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


# --------------------------------------------------------------------- builders

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
