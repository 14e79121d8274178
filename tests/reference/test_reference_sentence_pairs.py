"""sentence_pairs.py: BERT's pair input against transformers' own tokenizer, and the NSP examples'
properties over many draws."""

import random

import pytest
import torch
from transformers import BertTokenizer

from autograder.reference.sentence_pairs import IS_NEXT, NOT_NEXT, bert_pair_input, make_nsp_pairs

WORDS = [f"w{i}" for i in range(40)]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """transformers' BertTokenizer on a small vocabulary (each word one token): the oracle of the
    pair layout and of "longest first" truncation."""
    vocab = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    return BertTokenizer(str(vocab))


def test_the_layout_of_the_handout():
    out = bert_pair_input([7, 8, 9], [10, 11], cls_id=101, sep_id=102, max_length=512)
    assert out["input_ids"].tolist() == [101, 7, 8, 9, 102, 10, 11, 102]
    assert out["token_type_ids"].tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
    assert out["attention_mask"].tolist() == [1] * 8
    assert all(t.dtype == torch.long and t.device.type == "cpu" for t in out.values())


def test_pairs_and_truncation_match_the_slow_tokenizer(tokenizer):
    rng = random.Random(0)
    for _ in range(300):
        a = [rng.randrange(5, 45) for _ in range(rng.randint(1, 30))]
        b = [rng.randrange(5, 45) for _ in range(rng.randint(1, 30))]
        max_length = rng.randint(5, len(a) + len(b) + 6)
        expected = tokenizer(" ".join(WORDS[i - 5] for i in a), " ".join(WORDS[i - 5] for i in b),
                             truncation="longest_first", max_length=max_length)
        out = bert_pair_input(a, b, cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id,
                              max_length=max_length)
        assert out["input_ids"].tolist() == expected["input_ids"], (a, b, max_length)
        assert out["token_type_ids"].tolist() == expected["token_type_ids"], (a, b, max_length)
        assert out["attention_mask"].tolist() == expected["attention_mask"]


def test_bad_pairs_are_refused_and_inputs_kept():
    a, b = [1, 2, 3], [4, 5, 6, 7]
    bert_pair_input(a, b, cls_id=0, sep_id=9, max_length=5)
    assert (a, b) == ([1, 2, 3], [4, 5, 6, 7])
    for args, max_length in [(([], [1]), 10), (([1], []), 10), (([1], [2]), 4)]:
        with pytest.raises(ValueError):
            bert_pair_input(*args, cls_id=0, sep_id=9, max_length=max_length)


def test_nsp_pairs_follow_the_corpus_and_are_seeded():
    documents = [[f"d{d}s{i}" for i in range(n)] for d, n in enumerate([5, 1, 3, 2])]
    pairs = make_nsp_pairs(documents, torch.Generator().manual_seed(0))
    assert [a for a, _, _ in pairs] == ["d0s0", "d0s1", "d0s2", "d0s3", "d2s0", "d2s1", "d3s0"]
    for a, b, label in pairs:
        if label == IS_NEXT:
            assert b == a[:3] + str(int(a[3:]) + 1)
        else:
            assert label == NOT_NEXT and b[:2] != a[:2]
    assert make_nsp_pairs(documents, torch.Generator().manual_seed(0)) == pairs
    with pytest.raises(ValueError):
        make_nsp_pairs([["only"]], torch.Generator())
    with pytest.raises(ValueError):
        make_nsp_pairs([["a"], []], torch.Generator())


def test_nsp_rates_half_is_next_and_uniform_sentences():
    documents = [[f"d{d}s{i}" for i in range(n)] for d, n in enumerate([4, 1, 6])]
    generator = torch.Generator().manual_seed(1)
    counts: dict[str, int] = {}
    labels = []
    for _ in range(3000):
        for a, b, label in make_nsp_pairs(documents, generator):
            labels.append(label)
            if label == NOT_NEXT and a.startswith("d0"):
                counts[b] = counts.get(b, 0) + 1
    assert abs(labels.count(IS_NEXT) / len(labels) - 0.5) < 0.01  # 24,000 coins: sd 0.003
    assert set(counts) == {"d1s0", *(f"d2s{i}" for i in range(6))}
    total = sum(counts.values())
    assert all(abs(n / total - 1 / 7) < 0.015 for n in counts.values()), counts  # ~4,500 draws: sd 0.005
