"""Shared fixtures of the pre-training tests: the package lives at the repository root."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# week6_pretraining is a plain folder in the repository root, not an installed
# package; make it importable however pytest was started.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
