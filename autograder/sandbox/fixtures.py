"""Trusted builders for objects that cannot cross the sandbox boundary.

A hidden test often needs to hand the student's function a model. A model cannot be
sent (only plain data crosses), so the test sends a *fixture reference* instead::

    worker.call("greedy_decode", fixture("decoder_lm", seed=0), prompt_ids)

and the worker replaces ``{"__fixture__": "decoder_lm", "seed": 0}`` by the result of
the builder registered under that name. The grader imports this same module and
calls ``build_fixture`` on the same reference to compute the expected answer from an
identical object: builders must be deterministic functions of their parameters
(seed everything, pick the eager attention kernel, leave global RNG state alone).

Register builders with ``@register_fixture`` (the course's are in
``autograder.drivers.models``); parameters must be vocabulary values (see
``protocol``) because the reference travels as plain data. A builder names the
slow-to-import modules it needs (``imports=``), so that they can be imported
before the first call that builds it (:func:`fixture_imports`) instead of inside
that call's time limit.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from .errors import RequestError

FIXTURE_KEY = "__fixture__"
_BUILDERS: dict[str, Callable[..., Any]] = {}
_IMPORTS: dict[str, tuple[str, ...]] = {}


def register_fixture(name: str | None = None, *,
                     imports: tuple[str, ...] = ()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: make ``builder(**params)`` available as fixture ``name`` (default: its
    name); ``imports`` are the slow-to-import modules the builder needs."""
    def register(builder: Callable[..., Any]) -> Callable[..., Any]:
        key = name or builder.__name__
        if key in _BUILDERS and _BUILDERS[key] is not builder:
            raise ValueError(f"fixture {key!r} is already registered")
        _BUILDERS[key] = builder
        _IMPORTS[key] = tuple(imports)
        return builder
    return register


def fixture_imports(names: Iterable[str] | None = None) -> list[str]:
    """The modules the fixtures ``names`` (default: every registered one) declared."""
    chosen = _IMPORTS if names is None else {name: _IMPORTS.get(name, ()) for name in names}
    return sorted({module for modules in chosen.values() for module in modules})


def fixture_names(value: Any) -> set[str]:
    """The names of the fixtures referenced anywhere in ``value`` (a request's arguments)."""
    kind = type(value)
    if kind is dict:
        if FIXTURE_KEY in value:
            return {value[FIXTURE_KEY]} | fixture_names([v for k, v in value.items() if k != FIXTURE_KEY])
        return set().union(*(fixture_names(item) for item in value.values()))
    if kind is list or kind is tuple:
        return set().union(*(fixture_names(item) for item in value))
    return set()


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
        seed_cpu(seed)
        yield


def seed_cpu(seed: int) -> None:
    """Seed torch's CPU generator, and only it. ``torch.manual_seed`` also queues a seeding
    of every backend not yet initialised (CUDA, XPU, MTIA), each recording a stack trace:
    about a millisecond a call in a hidden test's deep stack, where a whole test costs
    twenty. Fixtures are built on the CPU; a probe on a CUDA device seeds it itself."""
    torch.default_generator.manual_seed(seed)
