"""The corpus as one long stream of token ids, served as fixed-length windows.

Both models read exactly the same rows: ``[CLS]`` followed by consecutive tokens
of the stream (127 of them once training is past its short-row warm-up, see
``train.py``), where every paragraph ends in ``[SEP]``. For BERT the
``[CLS] ... [SEP]`` frame matches what the tokenizer produces for a sentence;
for GPT, ``[CLS]`` plays the beginning-of-text token and ``[SEP]`` the
end-of-paragraph token it learns to predict. Packing paragraphs back to back
wastes no compute on padding, which is what both BERT (RoBERTa-style) and GPT
pre-training do in practice.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from week6_helpers.assets import data_dir

# The course's files: data/ in the repository, or the copy installed with the
# course package students receive (one rule, in week6_helpers.assets).
DATA = data_dir()
CORPUS = DATA / "corpus"
TOKENIZER_DIR = DATA / "tokenizer" / "austen-wordpiece"
CONTEXT = 128  # tokens per row, [CLS] included


def load_tokenizer(folder: Path = TOKENIZER_DIR):
    from transformers import AutoTokenizer

    if not (folder / "tokenizer.json").is_file():
        raise FileNotFoundError(f"{folder} has no tokenizer.json: run `python -m week6_pretraining.tokenizer`")
    return AutoTokenizer.from_pretrained(folder)


SENTINELS = 100  # T5's <extra_id_0> ... <extra_id_99>


def with_sentinels(tokenizer, count: int = SENTINELS):
    """A copy of ``tokenizer`` with T5's sentinel tokens ``<extra_id_0>`` ... added at the end of
    its vocabulary (the ids of every other token stay what they were), for span corruption."""
    import copy

    names = [f"<extra_id_{i}>" for i in range(count)]
    if all(name in tokenizer.get_vocab() for name in names):
        return tokenizer
    extended = copy.deepcopy(tokenizer)
    extended.add_special_tokens({"additional_special_tokens": names})
    return extended


def sentinel_ids(tokenizer, count: int = SENTINELS) -> list[int]:
    """The ids of ``<extra_id_0>``, ``<extra_id_1>``, ... in the order span corruption uses them."""
    ids = tokenizer.convert_tokens_to_ids([f"<extra_id_{i}>" for i in range(count)])
    if tokenizer.unk_token_id in ids:
        raise ValueError("the tokenizer has no sentinel tokens: pass it through with_sentinels() first")
    return ids


@dataclass(frozen=True)
class Source:
    """One training text: its file in data/corpus and what it is (for model cards)."""

    file: str
    about: str  # a line of the card's data section
    short: str  # how a card's title names it


# The training text, by source (see data/corpus/README.md). Every model is evaluated on
# Austen's held-out part whatever it trained on, so held-out losses stay comparable.
SOURCES = {
    "austen": Source("austen_train.txt", "Jane Austen's six novels minus the last 5 % of each (public domain)",
                     "Jane Austen"),
    "wordnet": Source("wordnet_examples.txt", "WordNet 3.0's usage examples, one synset with its words and "
                      "definition per paragraph (WordNet 3.0 licence)", "WordNet's examples"),
    "novels": Source("novels_train.txt", "Great Expectations, The War of the Worlds and Twenty Thousand Leagues "
                     "under the Sea (public domain)", "three more novels"),
}
HELDOUT = "austen_heldout.txt"


def source_files(sources: tuple[str, ...] = ("austen",), corpus: Path = CORPUS) -> list[Path]:
    """The training files of the ``sources`` (``SOURCES``), in that order."""
    unknown = [s for s in sources if s not in SOURCES]
    if unknown or not sources:
        raise ValueError(f"unknown text source(s) {unknown or sources}; choose from {', '.join(SOURCES)}")
    return [corpus / SOURCES[s].file for s in sources]


def token_stream(tokenizer, part: str = "train", corpus: Path = CORPUS, sources: tuple[str, ...] = ("austen",)) -> torch.Tensor:
    """All paragraphs of the training text (``part="train"``: the ``sources``' files, in that
    order) or of Austen's held-out part (``"heldout"``), each followed by [SEP], as one int64
    tensor."""
    if part == "heldout":
        files = [corpus / HELDOUT]
    elif part == "train":
        files = source_files(sources, corpus)
    else:
        raise ValueError(f"part must be 'train' or 'heldout', got {part!r}")
    lines = [line for path in files for line in path.read_text(encoding="utf-8").splitlines()]
    # The Rust tokenizer directly: the transformers wrapper would warn that paragraphs
    # are longer than the models' context, which is fine here, they get cut later.
    encoded = [e.ids for e in tokenizer.backend_tokenizer.encode_batch(lines, add_special_tokens=False)]
    sep = tokenizer.sep_token_id
    return torch.tensor([i for ids in encoded for i in (*ids, sep)], dtype=torch.long)


def windows(stream: torch.Tensor, cls_id: int, offset: int = 0, context: int = CONTEXT) -> torch.Tensor:
    """Cut ``stream[offset:]`` into non-overlapping rows of ``context - 1`` tokens, [CLS] in front.

    The ragged tail is dropped. Returns LongTensor [n_rows, context].
    """
    body = context - 1
    usable = (len(stream) - offset) // body * body
    rows = stream[offset : offset + usable].view(-1, body)
    return torch.cat([torch.full((len(rows), 1), cls_id, dtype=stream.dtype), rows], dim=1)


class Batches:
    """An endless, seeded supply of training batches.

    Each pass over the data starts the windows at a fresh random offset and
    visits them in a fresh random order, so after a few epochs the model has
    seen every token in many different positions, not the same 127-token rows.
    """

    def __init__(self, stream: torch.Tensor, cls_id: int, batch_size: int, seed: int, context: int = CONTEXT):
        self.stream, self.cls_id, self.batch_size, self.context = stream, cls_id, batch_size, context
        self.generator = torch.Generator().manual_seed(seed)
        self.epoch, self.rows, self.order, self.cursor = 0, None, None, 0
        self._new_epoch(offset=0)  # the first pass uses the plain, unshifted windows

    def _new_epoch(self, offset: int):
        self.rows = windows(self.stream, self.cls_id, offset, self.context)
        self.order = torch.randperm(len(self.rows), generator=self.generator)
        self.cursor = 0

    def __iter__(self):
        return self

    def __next__(self) -> torch.Tensor:
        if self.cursor + self.batch_size > len(self.order):  # drop the ragged last batch
            self.epoch += 1
            offset = int(torch.randint(self.context - 1, (1,), generator=self.generator))
            self._new_epoch(offset)
        picked = self.order[self.cursor : self.cursor + self.batch_size]
        self.cursor += self.batch_size
        return self.rows[picked]
