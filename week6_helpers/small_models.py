"""Loaders for the course's own toy pre-trained models.

No checkpoint with a working masked-LM head, and no T5, can be installed offline, so
the course pre-trains three small models itself, on Jane Austen's novels, WordNet's usage
examples and three more public-domain novels, and ships them under ``data/checkpoints/``
(see each folder's README.md for the numbers; the folder names keep the prefix of the first,
Austen-only release):

* ``austen-bert-mlm``: a 4-layer ``BertForMaskedLM`` trained to fill in [MASK];
* ``austen-gpt-clm``:  a 4-layer ``GPT2LMHeadModel`` of the same size, trained
  to predict the next token, on the same text for the same number of tokens;
* ``austen-t5-span``:  a ``T5ForConditionalGeneration`` with a 4-layer encoder and a
  4-layer decoder of that width, trained with span corruption on the same rows;
* ``austen-t5-span-tiny``: the same T5 recipe with 2 + 2 layers of half the width,
  the course's counterpart of comparing T5-small with T5-base.

All use the same 8,000-piece WordPiece tokenizer, trained on Austen's text (the T5's
copy adds the 100 sentinels ``<extra_id_0>`` ... ``<extra_id_99>`` at its end).
``name`` loads a hub model instead (for example ``"bert-base-uncased"`` or
``"gpt2"`` on a machine that is online, with ``HF_HUB_OFFLINE=0``) or any local
folder; the return types are the same.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .assets import MissingAssetError, data_dir
from .models import _from_pretrained



@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint the course ships under ``data/checkpoints/``: the one place that names it."""

    folder: str
    objective: str  # mlm, clm or span (week6_pretraining.train)
    loader: str  # the call of this module that loads it
    train_flags: str = ""  # what `python -m week6_pretraining.train --objective ...` needs besides

    @property
    def rebuild(self) -> str:
        """What restores the folder when it is deleted or damaged (run in the repository root)."""
        command = f"python -m week6_pretraining.train --objective {self.objective} {self.train_flags}".strip()
        return f"git checkout -- data/checkpoints/{self.folder}, or retrain it with `{command}`"


# The shipped recipe: the same rows of the same text, for the same number of steps, for every
# model; bf16 autocast where it pays on a CPU (the GPT's and the T5's steps, not the BERT's:
# benchmarks/pretraining_speed.py). The cards give each run's time and hardware.
RECIPE = "--max-steps 10000 --text austen wordnet novels --threads 1"
# The first checkpoint of each objective is the one `week6_pretraining.train` writes by default.
CHECKPOINTS = (
    Checkpoint("austen-bert-mlm", "mlm", "load_mlm()", RECIPE),
    Checkpoint("austen-gpt-clm", "clm", "load_small_gpt()", f"{RECIPE} --bf16"),
    Checkpoint("austen-t5-span", "span", "load_small_t5()", f"{RECIPE} --bf16"),
    # The same recipe at half the width and depth.
    Checkpoint("austen-t5-span-tiny", "span", "load_small_t5(tiny=True)",
               f"{RECIPE} --size tiny --out data/checkpoints/austen-t5-span-tiny"),
)
BY_FOLDER = {c.folder: c for c in CHECKPOINTS}
DEFAULT_FOLDER = {}  # objective -> its default checkpoint's folder
for _checkpoint in CHECKPOINTS:
    DEFAULT_FOLDER.setdefault(_checkpoint.objective, _checkpoint.folder)
MLM_CHECKPOINT, CLM_CHECKPOINT, SPAN_CHECKPOINT, SPAN_TINY_CHECKPOINT = (c.folder for c in CHECKPOINTS)
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def checkpoint_dir(checkpoint: str) -> Path:
    """Folder of a shipped checkpoint, checked for the files ``from_pretrained`` needs."""
    folder = data_dir() / "checkpoints" / checkpoint
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise MissingAssetError(
            f"The course checkpoint {folder} is missing {', '.join(missing)}.",
            BY_FOLDER[checkpoint].rebuild,
        )
    return folder


def load_mlm(name: str | None = None):
    """Return ``(tokenizer, BertForMaskedLM)`` in eval mode on the CPU.

    Without ``name``: the course's own BERT. ``tokenizer.mask_token`` is
    ``"[MASK]"``, so ``tokenizer("The [MASK] sat on the mat.")`` marks the blank.
    """
    from transformers import AutoTokenizer, BertForMaskedLM

    source = name or checkpoint_dir(MLM_CHECKPOINT)
    tokenizer = _from_pretrained(AutoTokenizer, source)
    model = _from_pretrained(BertForMaskedLM, source)
    return tokenizer, model.eval()


def load_small_gpt(name: str | None = None):
    """Return ``(tokenizer, GPT2LMHeadModel)`` in eval mode on the CPU.

    Without ``name``: the course's own GPT. Its texts start with ``[CLS]``
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


def load_small_t5(name: str | None = None, *, tiny: bool = False):
    """Return ``(tokenizer, T5ForConditionalGeneration)`` in eval mode on the CPU.

    Without ``name``: the course's own T5 (``tiny=True``: its smaller sibling). Its
    tokenizer knows T5's sentinels ``<extra_id_0>`` ... ``<extra_id_99>``; the model reads
    a text with spans replaced by sentinels (no [CLS] or [SEP]: encode with
    ``add_special_tokens=False``) and writes each dropped span after its sentinel. The decoder starts from the padding
    id (``model.config.decoder_start_token_id``), as in T5.
    """
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    source = name or checkpoint_dir(SPAN_TINY_CHECKPOINT if tiny else SPAN_CHECKPOINT)
    tokenizer = _from_pretrained(AutoTokenizer, source)
    model = _from_pretrained(T5ForConditionalGeneration, source)
    return tokenizer, model.eval()
