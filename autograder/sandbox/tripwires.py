"""The ``guarded_call`` probe: call a student function with library shortcuts wired.

This is the dynamic half of the forbidden-shortcut check (the static half reads
the cell's syntax tree, see ``autograder.forbidden``). For the duration of one
call, each named library callable (``torch.softmax``, ``GenerationMixin.generate``,
...) is replaced by a wrapper that records the hit and then does its job as
usual, so the student's result is still computed. Afterwards the originals are
put back, whatever happened.

It runs in the student's process, so a determined student could unwire it; that
takes deliberate tampering with the grader, which the static check and a human
reading the code will see. What it reliably catches is the shortcut reached by a
name built at run time (``getattr(torch, "soft" + "max")``).
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import sys
from collections.abc import Iterator
from typing import Any

from .probes import get_probe, register_probe, student_definition


def _resolve(dotted: str):
    """(owner, attribute, current value) for ``package.module.Owner.attr``, or None.

    Only packages the process has already imported are wired: a package that was
    never imported cannot have been used, and importing one here would cost seconds.
    """
    parts = dotted.split(".")
    if parts[0] not in sys.modules:
        return None
    for split in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:split])
        try:
            owner = importlib.import_module(module_name)
        except ImportError:
            continue
        for name in parts[split:-1]:
            owner = getattr(owner, name, None)
            if owner is None:
                return None
        if hasattr(owner, parts[-1]):
            return owner, parts[-1], getattr(owner, parts[-1])
        return None
    return None


@contextlib.contextmanager
def wired(tripwires: list[str]) -> Iterator[list[str]]:
    """Wire ``tripwires`` for the duration of the block; yields the list of hits."""
    tripped: list[str] = []
    installed = []
    for dotted in tripwires:
        found = _resolve(dotted)
        if found is None:
            continue
        owner, attribute, original = found

        def make_wire(original=original, dotted=dotted):
            @functools.wraps(original)
            def wire(*args, **kwargs):
                if dotted not in tripped:
                    tripped.append(dotted)
                return original(*args, **kwargs)
            return wire

        # Methods found on a class are kept raw, so staticmethod/classmethod survive;
        # an inherited one (None here) is restored by deleting the override.
        raw = owner.__dict__.get(attribute) if isinstance(owner, type) else original
        try:
            setattr(owner, attribute, make_wire())
        except (AttributeError, TypeError):
            continue  # a C type that refuses new attributes: the static check still applies
        installed.append((owner, attribute, raw))
    try:
        yield tripped
    finally:
        for owner, attribute, raw in reversed(installed):
            if raw is None:
                delattr(owner, attribute)
            else:
                setattr(owner, attribute, raw)


@register_probe("guarded_call")
def guarded_call(namespace: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Call ``params["name"](*args, **kwargs)`` with ``params["tripwires"]`` wired.

    Returns ``{"value": <the function's return value>, "tripped": [dotted names hit]}``.
    """
    function = student_definition(namespace, params["name"])
    with wired(params.get("tripwires", [])) as tripped:
        value = function(*params.get("args", []), **params.get("kwargs", {}))
    return {"value": value, "tripped": tripped}


@register_probe("guarded_probe")
def guarded_probe(namespace: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Run the probe ``params["probe"]`` with ``params["params"]``, tripwires wired.

    Returns ``{"value": <the probe's result>, "tripped": [dotted names hit]}``.
    """
    probe = get_probe(params["probe"])
    with wired(params.get("tripwires", [])) as tripped:
        value = probe(namespace, params.get("params", {}))
    return {"value": value, "tripped": tripped}
