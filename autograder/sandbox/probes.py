"""Trusted probes: small instructor-written drivers that run *inside* the worker.

``call`` covers pure functions. Classes and stateful code need a few steps that
cannot be expressed as one call with plain arguments: build a student ``nn.Module``
around a seeded layer, run it, back-propagate, then look at which parameters exist
and which received gradients. A probe does those steps next to the student's code
and returns only plain data (the protocol's vocabulary), which the hidden test
compares with a reference computed in the grader.

A probe runs in the same process as student code, so the student can tamper with
what it sees (monkeypatching torch, say); that can only make the student's own
answers wrong. The grader never trusts anything but the returned data.

Register probes with ``@register_probe``; the signature is ``probe(namespace, params)``
where ``namespace`` is the student's module dict and ``params`` a dict of vocabulary
values whose fixture references have already been built.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from .errors import RequestError
from .fixtures import seeded

Probe = Callable[[dict[str, Any], dict[str, Any]], Any]
_PROBES: dict[str, Probe] = {}


def register_probe(name: str | None = None) -> Callable[[Probe], Probe]:
    """Decorator: make ``probe(namespace, params)`` available under ``name`` (default: its name)."""
    def register(probe: Probe) -> Probe:
        key = name or probe.__name__
        if key in _PROBES and _PROBES[key] is not probe:
            raise ValueError(f"probe {key!r} is already registered")
        _PROBES[key] = probe
        return probe
    return register


def available_probes() -> list[str]:
    return sorted(_PROBES)


def get_probe(name: str) -> Probe:
    probe = _PROBES.get(name)
    if probe is None:
        raise RequestError(f"unknown probe {name!r}; registered: {', '.join(available_probes())}")
    return probe


def student_definition(namespace: dict[str, Any], name: str) -> Any:
    """The student's top-level ``name``, or a ``NameError`` that says what is missing."""
    if name not in namespace:
        raise NameError(f"the notebook does not define {name!r} (did its cell fail or not run?)")
    return namespace[name]


# ----------------------------------------------------------------------- probes

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



@register_probe("constant")
def constant(namespace: dict[str, Any], params: dict[str, Any]) -> Any:
    """The student's top-level ``params["name"]`` (an answer constant), as is; the
    worker refuses it if it is not plain data."""
    return student_definition(namespace, params["name"])
