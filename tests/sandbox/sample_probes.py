"""A probe module for the preload test (imported by the worker, not collected by pytest)."""
from __future__ import annotations

from autograder.sandbox.probes import register_probe


@register_probe("namespace_names")
def namespace_names(namespace, params):
    """The student's public top-level names."""
    return sorted(name for name in namespace if not name.startswith("_"))
