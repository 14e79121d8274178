"""Train a WordPiece tokenizer on the Austen training text and save it for transformers.

    python -m week6_pretraining.tokenizer            # writes data/tokenizer/austen-wordpiece/
    python -m week6_pretraining.tokenizer --check    # rebuilds in a temporary folder; exit 1 if it differs
    python -m week6_pretraining.tokenizer --text austen wordnet novels --out DIR   # a vocabulary of the wider text

BERT's recipe at toy scale: lower-case, BERT's normaliser (strip accents, clean
control characters, space out Chinese characters) and pre-tokeniser (split on
whitespace and punctuation), then WordPiece with "##" continuation pieces. The
shipped tokenizer read austen_train.txt only; ``--text`` names other training files
(``data.SOURCES``), for ``python -m week6_pretraining.train --tokenizer DIR``. No
source holds the held-out text, so it cannot leak into the vocabulary.

The result is saved as a ``BertTokenizerFast`` folder, so both the BERT and the
GPT model of the course load it with ``AutoTokenizer.from_pretrained(folder)``.
"""
from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

from .data import SOURCES, TOKENIZER_DIR as DEFAULT_OUT, source_files
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # ids 0..4, in this order
VOCAB_SIZE = 8000


def continuation_alphabet(train_files: list[Path], normalizer, pre_tokenizer) -> list[str]:
    """Every "##c" piece the trainer will need: characters seen inside a word, sorted."""
    chars = set()
    for train_file in train_files:
        with train_file.open(encoding="utf-8") as handle:
            for line in handle:
                for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(line)):
                    chars.update(word[1:])
    return ["##" + c for c in sorted(chars)]


def train_tokenizer(train_file: Path | list[Path] | None = None, vocab_size: int = VOCAB_SIZE):
    """A ``tokenizers.Tokenizer`` with BERT's pipeline, trained on ``train_file`` (or a list of
    files; None: Austen's training file, the shipped tokenizer's)."""
    if train_file is None:
        train_files = source_files()
    elif isinstance(train_file, Path):
        train_files = [train_file]
    else:
        train_files = list(train_file)
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    normalizer = normalizers.BertNormalizer(lowercase=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()

    # Why the detour: the WordPiece trainer gives each "##c" piece its id in the
    # order it meets words in a hash map, which changes from run to run, and it
    # breaks ties between equally frequent merges by those ids. Handing it the
    # "##c" pieces up front, sorted, as extra special tokens fixes every id, so
    # the same text always gives the same vocabulary. The extra specials are
    # dropped again below: they are ordinary vocabulary, not special tokens.
    seeded = SPECIAL_TOKENS + continuation_alphabet(train_files, normalizer, pre_tokenizer)
    scratch = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    scratch.normalizer, scratch.pre_tokenizer = normalizer, pre_tokenizer
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        special_tokens=seeded,
        min_frequency=2,  # a piece seen once is noise, not vocabulary
        continuing_subword_prefix="##",
        show_progress=False,
    )
    scratch.train([str(f) for f in train_files], trainer)
    vocab = scratch.get_vocab(with_added_tokens=False)

    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", continuing_subword_prefix="##"))
    tok.normalizer, tok.pre_tokenizer = normalizer, pre_tokenizer
    tok.add_special_tokens(SPECIAL_TOKENS)
    # Single sentences become [CLS] A [SEP], pairs [CLS] A [SEP] B [SEP], as in BERT.
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def save_tokenizer(tok, out: Path = DEFAULT_OUT):
    """Wrap in ``BertTokenizerFast`` and write the folder; returns the wrapper."""
    from transformers import BertTokenizerFast

    fast = BertTokenizerFast(
        tokenizer_object=tok,
        do_lower_case=True,
        unk_token="[UNK]", sep_token="[SEP]", pad_token="[PAD]",
        cls_token="[CLS]", mask_token="[MASK]",
        model_max_length=128,  # the context length of the course's models
    )
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out)
    return fast


def folder_digest(folder: Path) -> str:
    """One sha256 over every file of the folder (names and bytes), to check determinism."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--vocab-size", type=int, default=VOCAB_SIZE)
    parser.add_argument("--text", nargs="+", choices=list(SOURCES), default=["austen"],
                        help="training text's sources (default: austen, the shipped tokenizer's)")
    parser.add_argument("--check", action="store_true", help="rebuild elsewhere and compare with --out")
    args = parser.parse_args(argv)

    if args.check:
        import tempfile

        with tempfile.TemporaryDirectory() as scratch:
            save_tokenizer(train_tokenizer(source_files(tuple(args.text)), vocab_size=args.vocab_size), Path(scratch))
            same = folder_digest(Path(scratch)) == folder_digest(args.out)
        print(f"{args.out}: {'identical to a fresh build' if same else 'DIFFERS from a fresh build'}")
        raise SystemExit(0 if same else 1)

    tok = train_tokenizer(source_files(tuple(args.text)), vocab_size=args.vocab_size)
    fast = save_tokenizer(tok, args.out)
    example = "It is a truth universally acknowledged."
    print(f"vocabulary: {len(fast)} pieces -> {args.out}")
    print(f"example: {fast.tokenize(example)}")
    print(f"folder sha256: {folder_digest(args.out)}")


if __name__ == "__main__":
    main()
