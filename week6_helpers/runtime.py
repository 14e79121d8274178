"""Small runtime switches shared by the notebooks."""
from __future__ import annotations

import os

import torch


def fast_mode() -> bool:
    """True when ``WEEK6_FAST=1``: experiments shrink so CI runs them in minutes.

    Fast mode changes only how much data and how many steps the experiments use,
    never what a graded function must compute.
    """
    return os.environ.get("WEEK6_FAST", "0").lower() in ("1", "true", "yes")


def pick_device(preference: str = "auto") -> torch.device:
    """``cuda`` when asked for or available (with ``"auto"``), else ``cpu``."""
    if preference == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if preference == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was requested but no CUDA GPU is visible to torch")
    return torch.device(preference)
