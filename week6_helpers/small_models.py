"""Loaders for the course's own toy pre-trained models (trained on Jane Austen).

No checkpoint with a working masked-LM head can be installed offline, so the
course pre-trains two small models itself and ships them under
``data/checkpoints/`` (see each folder's README.md for the numbers):

* ``austen-bert-mlm``: a 4-layer ``BertForMaskedLM`` trained to fill in [MASK];
* ``austen-gpt-clm``:  a 4-layer ``GPT2LMHeadModel`` of the same size, trained
  to predict the next token, on the same text for the same number of tokens.

Both use the same 8,000-piece WordPiece tokenizer, trained on the same text.
``name`` loads a hub model instead (for example ``"bert-base-uncased"`` or
``"gpt2"`` on a machine that is online, with ``HF_HUB_OFFLINE=0``) or any local
folder; the return types are the same.
"""
from __future__ import annotations

from pathlib import Path

from .assets import MissingAssetError, data_dir
from .models import _from_pretrained

MLM_CHECKPOINT = "austen-bert-mlm"
CLM_CHECKPOINT = "austen-gpt-clm"
# What restores a deleted or damaged checkpoint: git, or retraining (on a 2-core CPU
# about 22 min for BERT and 36 min for GPT; run in the repository root).
REBUILD = {
    MLM_CHECKPOINT: "git checkout -- data/checkpoints/austen-bert-mlm, or retrain it with "
    "`python -m week6_pretraining.train --objective mlm`",
    CLM_CHECKPOINT: "git checkout -- data/checkpoints/austen-gpt-clm, or retrain it with "
    "`python -m week6_pretraining.train --objective clm`",
}
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def checkpoint_dir(checkpoint: str) -> Path:
    """Folder of a shipped checkpoint, checked for the files ``from_pretrained`` needs."""
    folder = data_dir() / "checkpoints" / checkpoint
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise MissingAssetError(
            f"The course checkpoint {folder} is missing {', '.join(missing)}.",
            REBUILD[checkpoint],
        )
    return folder


def load_mlm(name: str | None = None):
    """Return ``(tokenizer, BertForMaskedLM)`` in eval mode on the CPU.

    Without ``name``: the course's Austen BERT. ``tokenizer.mask_token`` is
    ``"[MASK]"``, so ``tokenizer("The [MASK] sat on the mat.")`` marks the blank.
    """
    from transformers import AutoTokenizer, BertForMaskedLM

    source = name or checkpoint_dir(MLM_CHECKPOINT)
    tokenizer = _from_pretrained(AutoTokenizer, source)
    model = _from_pretrained(BertForMaskedLM, source)
    return tokenizer, model.eval()


def load_small_gpt(name: str | None = None):
    """Return ``(tokenizer, GPT2LMHeadModel)`` in eval mode on the CPU.

    Without ``name``: the course's Austen GPT. Its texts start with ``[CLS]``
    (which it reads as beginning-of-text) and it ends a paragraph with ``[SEP]``;
    ``tokenizer(text)`` adds both, so drop the final ``[SEP]`` before asking it
    for a next token.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = name or checkpoint_dir(CLM_CHECKPOINT)
    tokenizer = _from_pretrained(AutoTokenizer, source)
    model = _from_pretrained(AutoModelForCausalLM, source)
    if tokenizer.pad_token is None:  # hub GPT-2 has none; batching needs one
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer, model.eval()
