"""Shared fixtures of the repository's own test suite."""
from __future__ import annotations

import os
from pathlib import Path

# Before anything imports transformers or datasets: they read these once.
for variable in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(variable, "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from autograder.paths import REPO  # noqa: E402


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def encoder():
    """(tokenizer, BertModel) of the bundled all-MiniLM-L6-v2."""
    from week6_helpers import load_encoder

    return load_encoder()


@pytest.fixture(scope="session")
def decoder():
    """(tokenizer, LlamaForCausalLM) of the bundled SmolLM2-135M-Instruct."""
    from week6_helpers import load_decoder

    return load_decoder()


def pytest_collection_modifyitems(config, items):
    """Skip CUDA tests cleanly where no GPU is visible."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible to torch")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
