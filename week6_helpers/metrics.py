"""Offline ``evaluate`` metrics.

``evaluate.load("accuracy")`` fetches the metric's script from the model hub and
fails offline. The same metrics are shipped here as local modules, which
``evaluate.load`` accepts by path: ``evaluate.load(metric_path("accuracy"))``, or
simply ``load_metric("accuracy")``.
"""
from __future__ import annotations

from pathlib import Path

METRICS_DIR = Path(__file__).resolve().parent / "metric_modules"
AVAILABLE = ("accuracy", "f1", "rouge")


def metric_path(name: str) -> str:
    """Folder of a local metric module, in the form ``evaluate.load`` expects."""
    if name not in AVAILABLE:
        raise ValueError(f"Unknown metric {name!r}; the offline metrics are {AVAILABLE}.")
    return str(METRICS_DIR / name)


def load_metric(name: str):
    """``evaluate.load`` of a local metric module (no hub access)."""
    import evaluate

    return evaluate.load(metric_path(name))
