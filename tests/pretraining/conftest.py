"""Shared fixtures of the pre-training tests: the package lives at the repository root."""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
