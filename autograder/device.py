"""Which device grading runs on: decided once per run and recorded in every report."""
from __future__ import annotations

DEVICES = ("auto", "cpu", "cuda")


class DeviceUnavailable(ValueError):
    """CUDA was asked for on a machine where torch sees no GPU."""


def resolve_device(device: str) -> str:
    """"cpu" or "cuda" for a requested ``auto``, ``cpu`` or ``cuda``."""
    import torch

    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailable("--device cuda was requested, but torch sees no CUDA GPU on this machine")
    return device
