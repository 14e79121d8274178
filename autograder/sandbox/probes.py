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

Register probes with ``@register_probe`` (the course's are in
``autograder.drivers.probes``); the signature is ``probe(namespace, params)``
where ``namespace`` is the student's module dict and ``params`` a dict of vocabulary
values whose fixture references have already been built.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from .errors import RequestError
from .fixtures import fixture_imports

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

@register_probe("constant")
def constant(namespace: dict[str, Any], params: dict[str, Any]) -> Any:
    """The student's top-level ``params["name"]`` (an answer constant), as is; the
    worker refuses it if it is not plain data."""
    return student_definition(namespace, params["name"])


@register_probe("import_fixture_modules")
def import_fixture_modules(namespace: dict[str, Any], params: dict[str, Any]) -> list[str]:
    """Import the modules that the fixtures ``params["fixtures"]`` declared (a second
    of ``transformers`` each, the first time), ahead of the call that builds them.
    Returns the modules imported."""
    modules = fixture_imports(params["fixtures"])
    for module in modules:
        importlib.import_module(module)
    return modules
