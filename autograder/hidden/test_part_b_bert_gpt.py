"""Hidden tests of part_b_bert_gpt.ipynb: MLM corruption, attention, the two
pre-training losses, and decoding.

Every test builds its inputs from fixed seeds, calls the student's code through
``student`` (the sandbox), computes the expected answer with
``autograder.reference`` in this process, and compares with the tolerance written
next to the comparison. Random functions get a ``torch.Generator`` built in the
sandbox by the ``seeded_call`` probe and are judged by frequencies, with the bounds
stated next to the checks (5 standard deviations for sampling, Bernstein's
inequality for masking): a correct solution fails one of these checks with a
probability far below one in a million. The reference decodings are deterministic
and only read their model, so each model, each decoding and each forward pass is computed
once per grading process.
"""
from __future__ import annotations

import functools
import math
import types

import torch

from autograder.reference import arithmetic, attention, decoding, losses, masking, sentence_pairs
from autograder.drivers import models, probes  # noqa: F401  (registers the fixtures and probes used below)
from autograder.sandbox.fixtures import build_fixture, fixture
from autograder.suite import (
    drawn_ints,
    expect,
    expect_close,
    expect_equal,
    expect_number,
    expect_pair,
    expect_tensor,
    generator,
    graded,
    on_devices,
    seed_for,
    within_sigma,
)


def _gen(seed: int) -> torch.Generator:
    return generator(seed)


def _randn(*shape: int, seed: int, scale: float = 1.0, device: str = "cpu",
           dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return (torch.randn(*shape, generator=_gen(seed)) * scale).to(device=device, dtype=dtype)


def _expect_dict_close(actual, expected: dict, *, rel: float, abs_tol: float = 0.0, what: str) -> None:
    expect(type(actual) is dict, f"{what} must return a dict, got {type(actual).__name__}")
    expect(set(actual) == set(expected),
           f"{what} must have exactly the keys {sorted(expected)}, got {sorted(actual)}")
    for key, value in expected.items():
        expect_number(actual[key], value, rel=rel, abs_tol=abs_tol, what=f"{what}[{key!r}]")


# =============================================================== mask_tokens
# The contract fixes the distribution of the output, not the order of the random draws, so the
# tests check invariants exactly, randomness through equal and different generator states, and
# rates with the binomial band of _rate_ok.
MASK_ID, VOCAB = 4, 1000
PAD, CLS, SEP, UNK = 0, 1, 2, 3
SPECIALS = [PAD, CLS, SEP, UNK]
# Every rate check of the mask_tokens tests is a binomial count checked against a band that a correct
# implementation leaves with probability <= RATE_CHECK_FAILURE; there are fewer than 40 such checks
# (counted in test_mask_tokens_* below), so a correct solution loses a point with probability < 1e-6.
RATE_CHECK_FAILURE = 2e-8


def _rate_band(trials: int, p: float) -> float:
    """Half-width t of the band |count - trials * p| <= t for a sum of ``trials`` independent
    Bernoulli(p) draws. Bernstein's inequality, P(|count - n p| >= t) <= 2 exp(-t^2 / (2 (n p (1 - p) + t / 3))),
    solved for t at RATE_CHECK_FAILURE; about 6.2 standard deviations for large counts, and valid for
    small ones too, where the normal approximation is not."""
    log_term = math.log(2 / RATE_CHECK_FAILURE)
    variance = trials * p * (1 - p)
    return log_term / 3 + math.sqrt(log_term**2 / 9 + 2 * log_term * variance)


def _expect_rate(count: int, trials: int, p: float, what: str) -> None:
    band = _rate_band(trials, p)
    expect(abs(count - trials * p) <= band,
           f"{what}: {count} of {trials} ({count / max(trials, 1):.4f}); a correct mask_tokens gives "
           f"{p * trials:.0f} ± {band:.0f} (rate {p:.4f})")


def _mlm_batch(batch: int, length: int, seed: int) -> torch.Tensor:
    """Rows "[CLS] w ... w [SEP] [PAD] ...": words in [5, VOCAB), random real
    lengths >= 2, the first row without padding."""
    g = _gen(seed)
    ids = torch.randint(5, VOCAB, (batch, length), generator=g)
    real = torch.randint(2, length + 1, (batch,), generator=g)
    real[0] = length
    ids[:, 0] = CLS
    ids[torch.arange(batch), real - 1] = SEP
    ids[torch.arange(length)[None, :] >= real[:, None]] = PAD
    return ids


def _scattered_specials(batch: int, length: int, seed: int) -> torch.Tensor:
    """Words in [5, VOCAB) with a special id at about a third of the positions, anywhere in a row."""
    g = _gen(seed)
    ids = torch.randint(5, VOCAB, (batch, length), generator=g)
    where = torch.rand(batch, length, generator=g) < 1 / 3
    return torch.where(where, torch.tensor(SPECIALS)[torch.randint(len(SPECIALS), (batch, length), generator=g)], ids)


def _mask_tokens(student, ids: torch.Tensor, device: str, *, seed: int, repeat: int = 1,
                 input_after: bool = False, global_generator: bool = False, **kwargs):
    """The student's (masked_ids, labels) for each of ``repeat`` calls, and the input after them
    (only when ``input_after``: sending it back costs as much as sending it). With
    ``global_generator``, generator=None and PyTorch's global generator seeded with ``seed``."""
    kwargs = {"mask_token_id": MASK_ID, "vocab_size": VOCAB, "special_token_ids": SPECIALS, **kwargs}
    reply = student.probe("seeded_call", name="mask_tokens", args=[ids.to(device)], kwargs=kwargs,
                          seed=seed, device=device, repeat=repeat, return_args=input_after,
                          global_generator=global_generator)
    pairs = []
    for value in reply["values"]:
        masked, labels = expect_pair(value, what="mask_tokens", names="input_ids, labels")
        masked = expect_tensor(masked, dtype=ids.dtype, shape=ids.shape, device=device, what="masked_ids")
        labels = expect_tensor(labels, dtype=ids.dtype, shape=ids.shape, device=device, what="labels")
        pairs.append((masked.cpu(), labels.cpu()))
    return pairs, reply["args_after"][0] if input_after else None


@graded("test_mask_tokens")
@on_devices
def test_mask_tokens_shape_dtype_device(student, device):
    for seed, (batch, length) in enumerate([(3, 7), (2, 33), (1, 12)]):
        _mask_tokens(student, _mlm_batch(batch, length, seed), device, seed=seed)
    # int32 ids come back as int32
    _mask_tokens(student, _mlm_batch(2, 9, 3).int(), device, seed=3)
    # a single token that is not special, selected for sure with probability 1
    [(masked, labels)], _ = _mask_tokens(student, torch.tensor([[9]]), device, seed=0, mlm_probability=1.0)
    expect(labels.tolist() == [[9]],
           f"with mlm_probability=1.0 the single token 9 must be selected (labels [[9]]), got labels {labels.tolist()}")


@graded("test_mask_tokens")
@on_devices
def test_mask_tokens_never_selects_special_tokens(student, device):
    for seed, ids in [(2, _mlm_batch(32, 64, seed=1)), (3, _scattered_specials(16, 64, seed=1))]:
        special = torch.isin(ids, torch.tensor(SPECIALS))
        [(masked, labels)], _ = _mask_tokens(student, ids, device, seed=seed, mlm_probability=0.9)
        selected_special = int((labels[special] != masking.IGNORE_INDEX).sum())
        expect(selected_special == 0,
               f"{selected_special} special tokens ([CLS], [SEP], [PAD], ...) were selected (label != -100); "
               "positions holding an id of special_token_ids must never be selected")
        changed_special = int((masked[special] != ids[special]).sum())
        expect(changed_special == 0,
               f"{changed_special} special tokens were replaced in masked_ids; they must stay as they are")


@graded("test_mask_tokens")
@on_devices
def test_mask_tokens_labels_and_untouched_positions(student, device):
    ids = _mlm_batch(16, 40, seed=3)
    special = torch.isin(ids, torch.tensor(SPECIALS))
    [(masked, labels)], after = _mask_tokens(student, ids, device, seed=4, input_after=True, mlm_probability=0.3)
    expect(torch.equal(after.cpu(), ids), "mask_tokens modified input_ids in place; work on a copy (clone())")
    selected = labels != masking.IGNORE_INDEX
    expect(torch.equal(labels[selected], ids[selected]),
           "labels must hold the original token id at every selected position and -100 everywhere else")
    expect(torch.equal(masked[~selected], ids[~selected]),
           "masked_ids differs from input_ids at positions that were not selected (label -100); "
           "only selected positions may change")
    # probability 1 selects exactly the non-special tokens, probability 0 none
    [(masked, labels)], _ = _mask_tokens(student, ids, device, seed=5, mlm_probability=1.0)
    expected = ids.masked_fill(special, masking.IGNORE_INDEX)
    expect(torch.equal(labels, expected),
           "with mlm_probability=1.0 every non-special token must be selected: labels must equal input_ids "
           "with -100 at the special tokens")
    [(masked, labels)], _ = _mask_tokens(student, ids, device, seed=6, mlm_probability=0.0)
    expect(bool((labels == masking.IGNORE_INDEX).all()) and torch.equal(masked, ids),
           "with mlm_probability=0.0 nothing may be selected: all labels -100 and masked_ids equal to input_ids")


@graded("test_mask_tokens")
@on_devices
def test_mask_tokens_selection_rate(student, device):
    """Rate checks: 2 (overall) + 2 x 4 (groups) = 10."""
    ids = _mlm_batch(64, 256, seed=7)
    eligible = ~torch.isin(ids, torch.tensor(SPECIALS))
    for seed, p in [(8, 0.15), (9, 0.4)]:
        [(_, labels)], _ = _mask_tokens(student, ids, device, seed=seed, mlm_probability=p)
        count = int((labels[eligible] != masking.IGNORE_INDEX).sum())
        _expect_rate(count, int(eligible.sum()), p,
                     f"with mlm_probability={p}, the non-special positions selected")
    # Selection does not depend on where the special tokens are: the same rate next to a special
    # token as elsewhere, in rows with many special tokens as in rows with few.
    ids = _scattered_specials(128, 64, seed=20)
    special = torch.isin(ids, torch.tensor(SPECIALS))
    after_special, before_special = torch.zeros_like(special), torch.zeros_like(special)
    after_special[:, 1:], before_special[:, :-1] = special[:, :-1], special[:, 1:]
    many = (special.float().mean(1, keepdim=True) > special.float().mean()).expand_as(special)
    groups = {"right after a special token": after_special, "right before a special token": before_special,
              "in rows with more special tokens than average": many,
              "in rows with fewer special tokens than average": ~many}
    for seed, p in [(21, 0.15), (22, 0.5)]:
        [(_, labels)], _ = _mask_tokens(student, ids, device, seed=seed, mlm_probability=p)
        selected = labels != masking.IGNORE_INDEX
        for name, group in groups.items():
            group = group & ~special
            _expect_rate(int(selected[group].sum()), int(group.sum()), p,
                         f"with mlm_probability={p}, the non-special positions {name} selected "
                         "(each non-special position is selected with probability p, wherever the special tokens are)")


@graded("test_mask_tokens")
@on_devices
def test_mask_tokens_80_10_10_replacement(student, device):
    """Rate checks: 2 x (3 outcomes + 8 bins of random ids) = 22."""
    for batch_seed, seed, p in [(10, 11, None), (12, 13, 0.5)]:
        ids = _mlm_batch(96, 512, seed=batch_seed)
        kwargs = {} if p is None else {"mlm_probability": p}  # None: the default, 0.15
        [(masked, labels)], _ = _mask_tokens(student, ids, device, seed=seed, **kwargs)
        selected = labels != masking.IGNORE_INDEX
        n = int(selected.sum())
        expect(n > 0, f"no position was selected with mlm_probability={p or 0.15}")
        original, replaced = ids[selected], masked[selected]
        is_mask = replaced == MASK_ID
        kept = (replaced == original) & ~is_mask
        random = ~is_mask & ~kept
        # A random id is uniform over the vocabulary, so it can land on [MASK] or on the original
        # token itself (the words are never MASK_ID): exact rates given a selected position.
        rates = {"[MASK]": (is_mask, 0.8 + 0.1 / VOCAB), "unchanged": (kept, 0.1 + 0.1 / VOCAB),
                 "a random other id": (random, 0.1 * (VOCAB - 2) / VOCAB)}
        for name, (hits, rate) in rates.items():
            _expect_rate(int(hits.sum()), n, rate,
                         f"selected positions that became {name} (BERT's 80 % [MASK] / 10 % random / 10 % unchanged)")
        draws = replaced[random]
        expect(bool(((draws >= 0) & (draws < VOCAB)).all()),
               f"random replacement ids must lie in [0, vocab_size={VOCAB}), got values from {int(draws.min())} "
               f"to {int(draws.max())}")
        # Uniform over [0, VOCAB) given that the draw is neither [MASK] nor the original: a draw lands
        # in a bin of VOCAB/8 ids with probability (ids of the bin other than MASK_ID and the original) / (VOCAB - 2).
        bins = 8
        width = VOCAB // bins
        for b in range(bins):
            low, high = b * width, (b + 1) * width
            others = ((original[random] >= low) & (original[random] < high)).double()
            rate = float(((width - (low <= MASK_ID < high) - others) / (VOCAB - 2)).mean())
            _expect_rate(int(((draws >= low) & (draws < high)).sum()), len(draws), rate,
                         f"random replacement ids in [{low}, {high}) (they must be uniform over "
                         f"[0, vocab_size={VOCAB}))")


@graded("test_mask_tokens")
@on_devices
def test_mask_tokens_randomness_comes_from_generator(student, device):
    ids = _mlm_batch(8, 64, seed=12)
    first, _ = _mask_tokens(student, ids, device, seed=13, repeat=2)
    again, _ = _mask_tokens(student, ids, device, seed=13)
    other, _ = _mask_tokens(student, ids, device, seed=14)
    expect(torch.equal(first[0][0], again[0][0]) and torch.equal(first[0][1], again[0][1]),
           "two calls with generators seeded alike gave different results: draw every random number "
           "from generator (generator=generator in every torch.rand / bernoulli / randint / multinomial call)")
    expect(not torch.equal(first[0][1], other[0][1]),
           "generators with different seeds gave the same selection: the randomness must come from the generator")
    expect(not torch.equal(first[0][1], first[1][1]),
           "two consecutive calls with the same generator gave the same selection: do not re-seed, draw from "
           "the generator you are given")
    # the [MASK] / random / unchanged choice and the random ids come from the generator too: with p = 1
    # every non-special position is selected, so only they can differ between the seeds
    ids = _mlm_batch(8, 64, seed=15)
    one, _ = _mask_tokens(student, ids, device, seed=16, mlm_probability=1.0)
    two, _ = _mask_tokens(student, ids, device, seed=16, mlm_probability=1.0)
    three, _ = _mask_tokens(student, ids, device, seed=17, mlm_probability=1.0)
    expect(torch.equal(one[0][0], two[0][0]),
           "with mlm_probability=1.0, generators seeded alike gave different masked_ids: draw the "
           "80/10/10 choice and the random ids from generator too")
    expect(not torch.equal(one[0][0], three[0][0]),
           "with mlm_probability=1.0, generators with different seeds gave the same masked_ids: the 80/10/10 "
           "choice must come from the generator")
    # generator=None: PyTorch's global generator, so its seed decides
    seeded, alike, unlike = (_mask_tokens(student, ids, device, seed=seed, global_generator=True)[0][0]
                             for seed in (18, 18, 19))
    expect(torch.equal(seeded[0], alike[0]) and torch.equal(seeded[1], alike[1]),
           "with generator=None, two calls after seeding PyTorch's global generator alike gave different "
           "results: None means the global generator")
    expect(not (torch.equal(seeded[0], unlike[0]) and torch.equal(seeded[1], unlike[1])),
           "with generator=None, the seed of PyTorch's global generator made no difference: None means the "
           "global generator, not a generator of your own")


# =============================================================== mlm_signal
@graded("test_mlm_signal")
def test_mlm_signal_default_rate(student):
    for n_tokens in (1_000, 3_300_000_000, 7):
        _expect_dict_close(student.call(n_tokens), arithmetic.mlm_signal(n_tokens), rel=1e-9,
                           what=f"mlm_signal({n_tokens})")


@graded("test_mlm_signal")
def test_mlm_signal_other_mask_rates(student):
    n_tokens, percent = drawn_ints(61, 1, 10 ** 9), drawn_ints(62, 1, 101)[0]  # a drawn case
    for n_tokens, rate in [(1_000, 0.4), (512, 0.05), (10_000, 1.0), (n_tokens[0], percent / 100)]:
        _expect_dict_close(student.call(n_tokens, mask_rate=rate), arithmetic.mlm_signal(n_tokens, rate),
                           rel=1e-9, what=f"mlm_signal({n_tokens}, mask_rate={rate})")


# =============================================================== bert_pair_input
CLS, SEP = 101, 102


def _segment(number: int, length: int) -> list[int]:
    """``length`` drawn token ids of a segment, none of them special."""
    return drawn_ints(number, 1000, 30000, count=length)


def _expect_pair_input(student, a: list[int], b: list[int], max_length: int, what: str) -> None:
    expected = sentence_pairs.bert_pair_input(a, b, cls_id=CLS, sep_id=SEP, max_length=max_length)
    reply = student.probe("call_keeping_inputs", name="bert_pair_input", args=[a, b],
                          kwargs=dict(cls_id=CLS, sep_id=SEP, max_length=max_length))
    actual = reply["value"]
    expect(type(actual) is dict, f"{what} must return a dict, got {type(actual).__name__}")
    expect(set(actual) == set(expected), f"{what} must have exactly the keys {sorted(expected)}, got {sorted(actual)}")
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        expect_equal(actual[key], expected[key], what=f"{what}[{key!r}] (a LongTensor [L] on the CPU)")
    expect(reply["args_after"] == [a, b], f"{what} modified its input lists; build new ones")


@graded("test_bert_pair_input")
def test_bert_pair_input_layout(student):
    for number, (len_a, len_b) in enumerate([(1, 1), (4, 7), (9, 2)]):
        a, b = _segment(200 + number, len_a), _segment(300 + number, len_b)
        _expect_pair_input(student, a, b, 64, f"bert_pair_input(A of {len_a}, B of {len_b} tokens, max_length=64) "
                                              "([CLS] A [SEP] B [SEP]; token types 0 up to the first [SEP], then 1)")


@graded("test_bert_pair_input")
def test_bert_pair_input_truncation(student):
    # (len A, len B, max_length): A longer, B longer, equally long, both cut, an exact fit, one token over
    for number, (len_a, len_b, max_length) in enumerate([(10, 3, 12), (2, 11, 9), (6, 6, 12), (20, 15, 16),
                                                         (5, 4, 12), (5, 5, 12), (7, 8, 12), (9, 30, 10)]):
        a, b = _segment(400 + number, len_a), _segment(500 + number, len_b)
        _expect_pair_input(student, a, b, max_length,
                           f"bert_pair_input(A of {len_a}, B of {len_b} tokens, max_length={max_length}) (longest "
                           "first: keep a shorter segment that fits in half the room, else cut both to half, the "
                           "odd token to the one that was longer; keep each segment's first tokens)")
    len_a, len_b = drawn_ints(80, 1, 40, count=2)
    max_length = drawn_ints(81, 5, len_a + len_b + 6)[0]
    _expect_pair_input(student, _segment(600, len_a), _segment(601, len_b), max_length,
                       f"bert_pair_input(A of {len_a}, B of {len_b} tokens, max_length={max_length})")


@graded("test_bert_pair_input")
def test_bert_pair_input_edge_cases(student):
    _expect_pair_input(student, _segment(700, 30), _segment(701, 9), 5,
                       "bert_pair_input(A of 30, B of 9 tokens, max_length=5) (one token of each is left)")
    for args, max_length, what in [(([], [5, 6]), 10, "an empty A"), (([5, 6], []), 10, "an empty B"),
                                   (([5, 6], [7]), 4, "max_length=4")]:
        reply = student.probe("raises", name="bert_pair_input", args=list(args),
                              kwargs=dict(cls_id=CLS, sep_id=SEP, max_length=max_length))
        expect(reply["raised"] == "ValueError", f"bert_pair_input with {what} must raise ValueError, "
               + ("it returned normally" if reply["raised"] is None else f"it raised {reply['raised']}"))


# =============================================================== make_nsp_pairs
def _corpus(number: int, sizes: list[int]) -> list[list[str]]:
    """Documents of the given numbers of sentences; every sentence names where it comes from."""
    words = ["the", "river", "rose", "quietly", "a", "letter", "came", "for", "Anne", "at", "dawn"]
    picks = drawn_ints(number, 0, len(words), count=3 * sum(sizes))
    sentences = iter(" ".join(words[k] for k in picks[3 * n: 3 * n + 3]) for n in range(sum(sizes)))
    return [[f"d{d}s{i}: {next(sentences)}." for i in range(size)] for d, size in enumerate(sizes)]


def _nsp_runs(student, documents, seed: int, repeat: int) -> list:
    reply = student.probe("seeded_call", name="make_nsp_pairs", args=[documents], seed=seed, repeat=repeat)
    expect(reply["args_after"] == [documents], "make_nsp_pairs modified its documents; leave them as they are")
    return reply["values"]


def _expect_valid_pairs(pairs, documents, what: str) -> None:
    """The invariants every correct result has, whatever the coins."""
    expect(type(pairs) is list, f"{what} must return a list, got {type(pairs).__name__}")
    firsts = [(d, i) for d, document in enumerate(documents) for i in range(len(document) - 1)]
    expect(len(pairs) == len(firsts), f"{what} gave {len(pairs)} examples; it must give one for every sentence that "
                                      "has a next one in its document, in order",
           detail=f"{what} gave {len(pairs)} examples, expected {len(firsts)}")
    where = {sentence: (d, i) for d, document in enumerate(documents) for i, sentence in enumerate(document)}
    for n, ((d, i), example) in enumerate(zip(firsts, pairs)):
        expect(type(example) is tuple and len(example) == 3, f"{what}: each example must be a tuple (A, B, label), "
                                                             f"got {example!r}")
        a, b, label = example
        expect(a == documents[d][i], f"{what}: example {n} has A = {a!r}, not the sentence at that place "
                                     "(documents in order, then sentences)",
               detail=f"{what}: example {n} has A = {a!r}, expected {documents[d][i]!r}")
        expect(type(label) is int and label in (0, 1), f"{what}: labels must be the ints 0 or 1, got {label!r}")
        if label == sentence_pairs.IS_NEXT:
            expect(b == documents[d][i + 1], f"{what}: an IsNext example (label 0) must pair A with the sentence "
                                             f"after it in its document, got {b!r} for A = {a!r}",
                   detail=f"{what}: an IsNext example (label 0) must pair A with the sentence after it, "
                          f"{documents[d][i + 1]!r}, got {b!r}")
        else:
            expect(b in where and where[b][0] != d, f"{what}: a NotNext example (label 1) must take B from "
                                                    f"another document, got {b!r} for A = {a!r}")


@graded("test_make_nsp_pairs")
def test_make_nsp_pairs_examples(student):
    for number, sizes in enumerate([[3, 2], [6, 1, 4, 2], [2, 2, 2]]):
        documents = _corpus(90 + number, sizes)
        for pairs in _nsp_runs(student, documents, seed=number, repeat=20):
            _expect_valid_pairs(pairs, documents, f"make_nsp_pairs(documents of {sizes} sentences)")
    for documents, what in [([["only one."]], "one document"), ([["a."], []], "a document without sentences")]:
        reply = student.probe("raises", name="make_nsp_pairs", args=[documents, None])
        expect(reply["raised"] == "ValueError", f"make_nsp_pairs with {what} must raise ValueError, "
               + ("it returned normally" if reply["raised"] is None else f"it raised {reply['raised']}"))


@graded("test_make_nsp_pairs")
def test_make_nsp_pairs_rates(student):
    sizes = [7, 3, 1, 5]
    documents, repeat = _corpus(95, sizes), 150
    runs = _nsp_runs(student, documents, seed=7, repeat=repeat)
    for pairs in runs:
        _expect_valid_pairs(pairs, documents, f"make_nsp_pairs(documents of {sizes} sentences)")
    labels = [label for pairs in runs for _, _, label in pairs]
    is_next = labels.count(sentence_pairs.IS_NEXT)
    expect(within_sigma(is_next, len(labels), 0.5),
           f"{is_next} of {len(labels)} examples were IsNext: each must be IsNext with probability 1/2")
    # NotNext sentences for A in document 0: uniform over the 9 sentences of documents 1-3
    drawn = [b for pairs in runs for a, b, label in pairs if label == sentence_pairs.NOT_NEXT and a.startswith("d0s")]
    others = [sentence for document in documents[1:] for sentence in document]
    for sentence in others:
        count = drawn.count(sentence)
        expect(within_sigma(count, len(drawn), 1 / len(others)),
               f"of {len(drawn)} NotNext sentences for A in the first document, {count} were {sentence!r}; each of "
               f"the {len(others)} sentences of the other documents must be equally likely (draw a sentence, not "
               "a document)")


@graded("test_make_nsp_pairs")
def test_make_nsp_pairs_is_seeded(student):
    documents = _corpus(97, [4, 4, 3])
    first, again = (_nsp_runs(student, documents, seed=seed_for(11), repeat=1)[0] for _ in range(2))
    expect(first == again, "make_nsp_pairs gave two different results from two generators in the same state: draw "
                           "every random number from the generator")
    distinct = {repr(_nsp_runs(student, documents, seed=seed, repeat=1)[0]) for seed in range(12)}
    expect(len(distinct) >= 10, f"12 different seeds gave only {len(distinct)} different results: the coins must "
                                "come from the generator")


# =============================================================== softmax
SOFTMAX_CASES = [((7,), -1), ((3, 5), 0), ((2, 3, 4), 1), ((4, 1), -1), ((2, 1, 9), -1), ((3, 6), -2)]


@graded("test_softmax")
@on_devices
def test_softmax_matches_reference(student, device):
    for seed, (shape, dim) in enumerate(SOFTMAX_CASES):
        x = _randn(*shape, seed=seed, scale=3.0, device=device)
        # tolerance: float32 rounding of exp and of the sum
        expect_close(student.call(x, dim=dim), attention.softmax(x, dim=dim), atol=1e-6, rtol=1e-5,
                     what=f"softmax of a {list(shape)} tensor along dim={dim}")
    x = _randn(5, 8, seed=10, scale=3.0, device=device, dtype=torch.float64)
    # a float64 input must come back as float64; float32-level accuracy is accepted
    expect_close(student.call(x), attention.softmax(x), atol=1e-6, rtol=1e-5, what="softmax of a float64 tensor")


@graded("test_softmax")
@on_devices
def test_softmax_is_stable_for_large_inputs(student, device):
    x = _randn(4, 9, seed=20, scale=3.0, device=device)
    partly_masked = x.clone()
    partly_masked[:, ::3] = float("-inf")  # every row keeps finite entries
    for name, z in [("x + 100", x + 100), ("x + 1000", x + 1000), ("1000 * x", 1000 * x),
                    ("x - 1000", x - 1000), ("x with some -inf entries", partly_masked)]:
        result = student.call(z)
        expect_tensor(result, dtype=z.dtype, shape=z.shape, device=device, what=f"softmax({name})")
        expect(bool(torch.isfinite(result).all()),
               f"softmax({name}) contains NaN or inf: subtract the maximum of each slice before exp, "
               "so that exp never overflows")
        # tolerance: float32 rounding; inputs near 1000 are themselves only known to 6e-5 (one ulp),
        # which a log-sum-exp formulation turns into a relative error of that size
        expect_close(result, attention.softmax(z), atol=1e-6, rtol=2e-4, what=f"softmax({name})")


@graded("test_softmax")
@on_devices
def test_softmax_half_precision(student, device):
    # tolerance: about 4 units in the last place of the probabilities (measured error of an
    # all-float16 computation: 4.9e-4; all-bfloat16: 3.9e-3)
    for dtype, atol in [(torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)]:
        for seed, offset in [(21, 0.0), (22, 1000.0)]:
            x = _randn(6, 37, seed=seed, scale=3.0, device=device) + offset
            x = x.to(dtype)
            expect_close(student.call(x), attention.softmax(x), atol=atol,
                         what=f"softmax of a {dtype} tensor (+{offset:g})")


# =============================================================== causal_mask
@graded("test_causal_mask")
def test_causal_mask_values(student):
    for n in (1, 2, 5, 16, *drawn_ints(63, 3, 40)):
        expect_equal(student.call(n), attention.causal_mask(n),
                     what=f"causal_mask({n}) (True where query i may attend to key j, i.e. j <= i)")


@graded("test_causal_mask")
@on_devices
def test_causal_mask_device(student, device):
    expect_equal(student.call(6, device=device), attention.causal_mask(6, device=device),
                 what=f"causal_mask(6, device={device!r})")


# =============================================================== scaled_dot_product_attention
def _qkv(batch_dims: tuple[int, ...], t_q: int, t_k: int, d: int, dv: int, *, seed: int, device: str,
         dtype: torch.dtype = torch.float32):
    q = _randn(*batch_dims, t_q, d, seed=seed, scale=1.5, device=device, dtype=dtype)
    k = _randn(*batch_dims, t_k, d, seed=seed + 1000, scale=1.5, device=device, dtype=dtype)
    v = _randn(*batch_dims, t_k, dv, seed=seed + 2000, device=device, dtype=dtype)
    return q, k, v


def _attention(student, q, k, v, **kwargs):
    output, weights = expect_pair(student.call(q, k, v, **kwargs), what="scaled_dot_product_attention",
                                  names="output, weights")
    return output, weights


def _expect_attention(student, q, k, v, *, what: str, atol: float = 1e-5, rtol: float = 1e-5,
                      weights_atol: float | None = None, **kwargs):
    output, weights = _attention(student, q, k, v, **kwargs)
    expected_output, expected_weights = attention.scaled_dot_product_attention(q, k, v, **kwargs)
    expect_close(weights, expected_weights, atol=weights_atol or atol, rtol=rtol, what=f"the weights of {what}")
    expect_close(output, expected_output, atol=atol, rtol=rtol, what=f"the output of {what}")
    return output, weights


@graded("test_scaled_dot_product_attention")
@on_devices
def test_attention_matches_reference_without_masks(student, device):
    cases = [((2, 3), 5, 5, 8, 8), ((1, 1), 1, 1, 4, 4), ((3,), 4, 7, 6, 5), ((2, 2), 3, 6, 16, 7)]
    for seed, (batch_dims, t_q, t_k, d, dv) in enumerate(cases):
        q, k, v = _qkv(batch_dims, t_q, t_k, d, dv, seed=seed, device=device)
        # tolerance: float32 rounding of two matrix products and a softmax
        _expect_attention(student, q, k, v,
                          what=f"attention with q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)} "
                               "(scores are q k^T / sqrt(d))")


@graded("test_scaled_dot_product_attention")
@on_devices
def test_attention_causal(student, device):
    for seed, (batch_dims, t, d, dv) in enumerate([((2, 3), 6, 8, 8), ((1, 1), 1, 4, 4), ((1, 4), 9, 5, 3)]):
        q, k, v = _qkv(batch_dims, t, t, d, dv, seed=10 + seed, device=device)
        _, weights = _attention(student, q, k, v, causal=True)
        expect_tensor(weights, shape=(*batch_dims, t, t), device=device, what="the causal weights")
        above = weights.detach().triu(1)
        expect(bool((above == 0).all()),
               "with causal=True the weights above the diagonal must be exactly 0 "
               "(query i may only attend to keys j <= i)")
        # tolerance: float32 rounding
        _expect_attention(student, q, k, v, causal=True, what=f"causal attention with T={t}")
    q, k, v = _qkv((2,), 3, 5, 4, 4, seed=19, device=device)
    reply = student.probe("raises", name="scaled_dot_product_attention", args=[q, k, v], kwargs={"causal": True})
    expect(reply["raised"] == "ValueError",
           "scaled_dot_product_attention(q, k, v, causal=True) with Tq=3 queries and Tk=5 keys must raise "
           "ValueError (causal attention needs Tq == Tk), "
           + ("it returned normally" if reply["raised"] is None else f"it raised {reply['raised']}"))


@graded("test_scaled_dot_product_attention")
@on_devices
def test_attention_padding_mask(student, device):
    real = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1]], dtype=torch.bool)
    q, k, v = _qkv((3, 2), 6, 6, 8, 5, seed=30, device=device)
    padding_mask = real.to(device)
    _, weights = _attention(student, q, k, v, padding_mask=padding_mask)
    expect_tensor(weights, shape=(3, 2, 6, 6), device=device, what="the weights")
    on_padding = weights.detach().cpu().masked_select(~real[:, None, None, :].expand(3, 2, 6, 6))
    expect(bool((on_padding == 0).all()),
           "keys whose padding_mask entry is False must get exactly 0 weight from every query (and every head)")
    # tolerance: float32 rounding
    _expect_attention(student, q, k, v, padding_mask=padding_mask, what="attention with a padding mask [B, Tk]")
    _expect_attention(student, q, k, v, padding_mask=padding_mask, causal=True,
                      what="attention with both a causal and a padding mask (a key must pass both)")
    q3, k3, v3 = _qkv((3,), 4, 6, 8, 8, seed=31, device=device)
    _expect_attention(student, q3, k3, v3, padding_mask=padding_mask,
                      what="attention on [B, T, d] inputs (no head dimension) with a padding mask")


@graded("test_scaled_dot_product_attention")
@on_devices
def test_attention_query_that_sees_nothing_gets_zeros(student, device):
    q, k, v = _qkv((3, 2), 5, 5, 8, 4, seed=40, device=device)
    everything = slice(None)
    cases = {  # name: (keyword arguments, index of the blind queries in the [B, H, Tq, Tk] weights)
        "a batch row whose keys are all padding": (
            dict(padding_mask=torch.tensor([[1, 1, 1, 1, 1], [0, 0, 0, 0, 0], [1, 1, 1, 0, 0]], dtype=torch.bool)),
            (1,),
        ),
        "causal attention whose first key is padding (query 0 sees no key)": (
            dict(causal=True, padding_mask=torch.tensor([[0, 1, 1, 1, 1]] * 3, dtype=torch.bool)),
            (everything, everything, 0),
        ),
    }
    for name, (kwargs, blind) in cases.items():
        kwargs["padding_mask"] = kwargs["padding_mask"].to(device)
        output, weights = _attention(student, q, k, v, **kwargs)
        for tensor, part, shape in ((weights, "weights", (3, 2, 5, 5)), (output, "output", (3, 2, 5, 4))):
            expect_tensor(tensor, shape=shape, device=device, what=f"the {part}")
            expect(not bool(torch.isnan(tensor).any()),
                   f"{name}: the {part} contain NaN; a query that can see no key must get all-zero weights "
                   "and an all-zero output (softmax over only -inf is 0/0)")
        expect(bool((weights[blind] == 0).all()) and bool((output[blind] == 0).all()),
               f"{name}: a query that sees no key must get all-zero weights and an all-zero output")
        # tolerance: float32 rounding
        _expect_attention(student, q, k, v, what=name, **kwargs)


@graded("test_scaled_dot_product_attention")
@on_devices
def test_attention_half_precision(student, device):
    padding_mask = torch.tensor([[1] * 9, [1] * 5 + [0] * 4], dtype=torch.bool, device=device)
    # tolerance: about 4 units in the last place of outputs of size ~3 (measured error of an
    # all-float16 computation: 2e-3 on outputs, 4.9e-4 on weights; all-bfloat16: 1.6e-2, 3.9e-3)
    for dtype, atol, weights_atol in [(torch.float16, 1e-2, 2e-3), (torch.bfloat16, 6e-2, 1.6e-2)]:
        q, k, v = _qkv((2, 3), 9, 9, 16, 8, seed=50, device=device, dtype=dtype)
        _expect_attention(student, q, k, v, causal=True, padding_mask=padding_mask, atol=atol, rtol=0.0,
                          weights_atol=weights_atol, what=f"{dtype} attention (the result keeps the dtype of q)")


# =============================================================== attention_connections
@graded("test_attention_connections")
def test_attention_connections_bidirectional(student):
    for n in (0, 1, 2, 7, 512, *drawn_ints(64, 3, 5000)):  # n >= 0: no tokens, no pairs
        expect_equal(student.call(n, causal=False), attention.attention_connections(n, causal=False),
                     what=f"attention_connections({n}, causal=False)")


@graded("test_attention_connections")
def test_attention_connections_causal(student):
    for n in (0, 1, 2, 7, 512, *drawn_ints(65, 3, 5000)):
        expect_equal(student.call(n, causal=True), attention.attention_connections(n, causal=True),
                     what=f"attention_connections({n}, causal=True)")


# =============================================================== CAT_NEXT_WORD_PROBS
@graded("test_cat_next_word_probs")
def test_cat_next_word_probs(student):
    answer = student.value("CAT_NEXT_WORD_PROBS")
    expected = arithmetic.softmax_worked_example()
    expect(type(answer) is dict, f"CAT_NEXT_WORD_PROBS must be a dict {{word: probability}}, got {type(answer).__name__}")
    expect(set(answer) == set(expected), f"CAT_NEXT_WORD_PROBS must have the keys {sorted(expected)}, got {sorted(answer)}")
    for word, p in expected.items():
        # tolerance: answers rounded to two decimals are accepted
        expect_number(answer[word], p, rel=0.0, abs_tol=5e-3,
                      what=f"CAT_NEXT_WORD_PROBS[{word!r}] (softmax of the logits 2.5, 1.0, 0.5, 1.5)")


# =============================================================== clm_loss
def _ids(batch: int, length: int, vocab: int, *, seed: int, device: str) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=_gen(seed)).to(device)


def _expect_loss(actual, expected: torch.Tensor, *, what: str, atol: float = 1e-5, rtol: float = 1e-5) -> None:
    expect_tensor(actual, dtype=torch.float32, shape=(), device=expected.device,
                  what=f"{what} (a 0-dim float32 tensor)")
    expect(not bool(torch.isnan(actual)), f"{what} is NaN")
    expect_close(actual, expected, atol=atol, rtol=rtol, what=what)


@graded("test_clm_loss")
@on_devices
def test_clm_loss_matches_reference(student, device):
    for seed, (batch, length, vocab) in enumerate([(2, 7, 11), (1, 2, 5), (3, 16, 50)]):
        logits = _randn(batch, length, vocab, seed=seed, scale=2.0, device=device)
        ids = _ids(batch, length, vocab, seed=seed + 100, device=device)
        # tolerance: float32 rounding of a mean of log-softmax values
        _expect_loss(student.call(logits, ids), losses.clm_loss(logits, ids),
                     what=f"clm_loss on logits {list(logits.shape)} (logits[:, t] predicts input_ids[:, t + 1])")


@graded("test_clm_loss")
@on_devices
def test_clm_loss_ignores_padded_targets(student, device):
    logits = _randn(3, 8, 13, seed=5, scale=2.0, device=device)
    ids = _ids(3, 8, 13, seed=6, device=device)
    right = torch.tensor([[1] * 8, [1] * 5 + [0] * 3, [1] * 2 + [0] * 6], device=device)
    left = torch.tensor([[1] * 8, [0] * 3 + [1] * 5, [0] * 6 + [1] * 2], device=device)
    for name, mask in [("right padding", right), ("left padding", left)]:
        # tolerance: float32 rounding
        _expect_loss(student.call(logits, ids, mask), losses.clm_loss(logits, ids, mask),
                     what=f"clm_loss with an attention_mask ({name}): targets whose mask is 0 are not scored, "
                          "and every scored token weighs the same")


@graded("test_clm_loss")
@on_devices
def test_clm_loss_with_nothing_to_score_is_zero(student, device):
    logits = _randn(2, 1, 5, seed=7, device=device)
    ids = _ids(2, 1, 5, seed=8, device=device)
    _expect_loss(student.call(logits, ids), torch.tensor(0.0, device=device), atol=1e-7, rtol=0.0,
                 what="clm_loss with T == 1 (no next token to predict, so 0.0, not NaN)")
    logits = _randn(2, 4, 5, seed=9, device=device)
    ids = _ids(2, 4, 5, seed=10, device=device)
    mask = torch.tensor([[1, 0, 0, 0], [1, 0, 0, 0]], device=device)
    _expect_loss(student.call(logits, ids, mask), torch.tensor(0.0, device=device), atol=1e-7, rtol=0.0,
                 what="clm_loss when every target is padding (0.0, not NaN)")


@graded("test_clm_loss")
@on_devices
def test_clm_loss_large_and_half_precision_logits(student, device):
    base = _randn(2, 6, 17, seed=11, scale=2.0, device=device)
    ids = _ids(2, 6, 17, seed=12, device=device)
    for name, logits in [("logits + 1000", base + 1000), ("1000 * logits", 1000 * base)]:
        # tolerance: float32 rounding, relative to losses of size up to ~1e4; inputs near 1000
        # are only known to 6e-5 (one ulp), which a log-sum-exp formulation passes on
        _expect_loss(student.call(logits, ids), losses.clm_loss(logits, ids), atol=2e-4, rtol=1e-5,
                     what=f"clm_loss of {name} (use a log-softmax or log-sum-exp that subtracts the maximum)")
    for dtype in (torch.float16, torch.bfloat16):
        logits = base.to(dtype)
        # tolerance: float32 rounding; a loss computed in half precision is off by ~1e-3
        _expect_loss(student.call(logits, ids), losses.clm_loss(logits, ids), atol=2e-4, rtol=0.0,
                     what=f"clm_loss of {dtype} logits (compute in float32: logits.float())")


# =============================================================== mlm_loss
def _mlm_labels(batch: int, length: int, vocab: int, *, seed: int, rate: float, device: str) -> torch.Tensor:
    g = _gen(seed)
    labels = torch.randint(0, vocab, (batch, length), generator=g)
    chosen = torch.rand(batch, length, generator=g) < rate
    chosen.view(-1)[0] = True  # at least one labelled position
    return labels.masked_fill(~chosen, -100).to(device)


@graded("test_mlm_loss")
@on_devices
def test_mlm_loss_matches_reference(student, device):
    for seed, (batch, length, vocab) in enumerate([(2, 9, 11), (1, 1, 5), (4, 16, 40)]):
        logits = _randn(batch, length, vocab, seed=seed, scale=2.0, device=device)
        labels = _mlm_labels(batch, length, vocab, seed=seed + 50, rate=0.3, device=device)
        # tolerance: float32 rounding of a mean of log-softmax values
        _expect_loss(student.call(logits, labels), losses.mlm_loss(logits, labels),
                     what=f"mlm_loss on logits {list(logits.shape)} (mean over the positions with label != -100)")
    flat_logits = _randn(10, 7, seed=9, device=device)
    flat_labels = _mlm_labels(1, 10, 7, seed=10, rate=0.5, device=device).view(10)
    _expect_loss(student.call(flat_logits, flat_labels), losses.mlm_loss(flat_logits, flat_labels),
                 what="mlm_loss on logits [N, V] and labels [N]")


@graded("test_mlm_loss")
@on_devices
def test_mlm_loss_without_labels_is_zero(student, device):
    logits = _randn(2, 5, 9, seed=11, device=device)
    labels = torch.full((2, 5), -100, device=device)
    _expect_loss(student.call(logits, labels), torch.tensor(0.0, device=device), atol=1e-7, rtol=0.0,
                 what="mlm_loss when no position is labelled (0.0, not NaN)")


@graded("test_mlm_loss")
@on_devices
def test_mlm_loss_large_and_half_precision_logits(student, device):
    base = _randn(3, 8, 21, seed=12, scale=2.0, device=device)
    labels = _mlm_labels(3, 8, 21, seed=13, rate=0.4, device=device)
    for name, logits in [("logits + 1000", base + 1000), ("1000 * logits", 1000 * base)]:
        # tolerance: float32 rounding, relative to losses of size up to ~1e4; inputs near 1000
        # are only known to 6e-5 (one ulp), which a log-sum-exp formulation passes on
        _expect_loss(student.call(logits, labels), losses.mlm_loss(logits, labels), atol=2e-4, rtol=1e-5,
                     what=f"mlm_loss of {name} (use a log-softmax or log-sum-exp that subtracts the maximum)")
    for dtype in (torch.float16, torch.bfloat16):
        logits = base.to(dtype)
        # tolerance: float32 rounding; a loss computed in half precision is off by ~1e-3
        _expect_loss(student.call(logits, labels), losses.mlm_loss(logits, labels), atol=2e-4, rtol=0.0,
                     what=f"mlm_loss of {dtype} logits (compute in float32: logits.float())")


# =============================================================== sample_next_token
# Ten logits without ties, shuffled so that the most likely token is not id 0.
SAMPLING_LOGITS = torch.tensor([2.0, 1.2, 0.9, 0.5, 0.1, -0.3, -0.6, -1.0, -1.5, -2.2])[
    torch.randperm(10, generator=_gen(2024))]
DRAWS = 30_000


def _samples(student, logits: torch.Tensor, device: str, *, seed: int, repeat: int = 1, rows: int | None = None,
             global_generator: bool = False, **kwargs):
    """The student's tokens for ``logits`` [B, V] (or, with ``rows``, for the one row of ``logits``
    repeated ``rows`` times in the sandbox), for each of ``repeat`` calls. With ``global_generator``,
    generator=None and PyTorch's global generator seeded with ``seed``."""
    reply = student.probe("seeded_call", name="sample_next_token", args=[logits.to(device)], kwargs=kwargs,
                          seed=seed, device=device, repeat=repeat, rows=rows, return_args=False,
                          global_generator=global_generator)
    return [expect_tensor(value, dtype=torch.int64, shape=(rows or logits.size(0),), device=device,
                          what="sample_next_token's result (one token id per row)").cpu()
            for value in reply["values"]]


def _expect_frequencies(student, device: str, *, seed: int, **kwargs) -> None:
    """DRAWS rows of SAMPLING_LOGITS: one draw each; compare the counts with the reference distribution."""
    [tokens] = _samples(student, SAMPLING_LOGITS[None], device, seed=seed, rows=DRAWS, **kwargs)
    probs = decoding.next_token_distribution(SAMPLING_LOGITS[None], **kwargs)[0].double()
    counts = torch.bincount(tokens.clamp(0, 9), minlength=10)
    setting = ", ".join(f"{k}={v}" for k, v in kwargs.items())
    expect(bool(((tokens >= 0) & (tokens < 10)).all()), f"sample_next_token({setting}) returned ids outside [0, V)")
    for token in range(10):
        count, p = int(counts[token]), float(probs[token])
        # The student reads how often a token was drawn, never its probability (nor the band's
        # width, from which the probability follows).
        if p == 0.0:
            expect(count == 0, f"sample_next_token({setting}) drew {count} times a token that top-k / top-p "
                               "filtering removes with these settings: a removed token must never be drawn",
                   detail=f"sample_next_token({setting}) drew token {token} {count} times, but that token "
                          "is filtered out (top-k / top-p) and must never be drawn")
        else:
            # 5-sigma band around the reference probability
            expect(within_sigma(count, DRAWS, p),
                   f"sample_next_token({setting}) drew token {token} in {count / DRAWS:.4f} of {DRAWS} draws, "
                   "outside the 5-sigma band around its probability with these settings",
                   detail=f"sample_next_token({setting}) drew token {token} in {count / DRAWS:.4f} of {DRAWS} "
                          f"draws; its probability is {p:.4f} (5-sigma band: "
                          f"±{5 * math.sqrt(p * (1 - p) / DRAWS):.4f})")


@graded("test_sample_next_token")
@on_devices
def test_sample_next_token_frequencies_with_temperature(student, device):
    for seed, temperature in [(1, 1.0), (2, 0.7), (3, 2.0)]:
        _expect_frequencies(student, device, seed=seed, temperature=temperature)


@graded("test_sample_next_token")
@on_devices
def test_sample_next_token_frequencies_with_top_k_and_top_p(student, device):
    settings = [dict(top_k=3), dict(temperature=1.5, top_k=5), dict(top_p=0.7),
                dict(temperature=1.5, top_p=0.7), dict(temperature=0.8, top_k=6, top_p=0.9)]
    for seed, kwargs in enumerate(settings, start=10):
        _expect_frequencies(student, device, seed=seed, **kwargs)
    # k > V keeps every token: torch.topk(scores, k) alone fails there, and the k-th highest score
    # read at position V - k of an ascending sort wraps round to a middle one and drops tokens
    beyond = dict(top_k=SAMPLING_LOGITS.numel() + 7)
    reply = student.probe("raises", name="sample_next_token", args=[SAMPLING_LOGITS[None].to(device)],
                          kwargs=beyond)
    expect(reply["raised"] is None, f"sample_next_token with top_k larger than the vocabulary raised "
                                    f"{reply['raised']}; k > V must keep every token")
    [tokens] = _samples(student, SAMPLING_LOGITS[None], device, seed=15, rows=DRAWS, **beyond)
    expect(set(tokens.tolist()) == set(range(SAMPLING_LOGITS.numel())),
           "with top_k larger than the vocabulary, some tokens were never drawn (k > V keeps every token)")
    _expect_frequencies(student, device, seed=16, **beyond)
    # tokens tied with the k-th highest score are kept too: with top_k=2, token 0 and the three tied second
    tied, kept = torch.tensor([[1.5, 0.7, -0.4, 0.7, 0.0, 0.7, -1.0]]), {0, 1, 3, 5}
    drawn = set(_samples(student, tied, device, seed=17, rows=4000, top_k=2)[0].tolist())
    expect(drawn <= kept, "with top_k=2, sample_next_token drew a token below the 2nd highest score")
    expect(drawn == kept, "with top_k=2 and three tokens tied at the 2nd highest score, some of them were never "
                          "drawn: tokens tied with the k-th highest score are kept too")


@graded("test_sample_next_token")
@on_devices
def test_sample_next_token_greedy_limits(student, device):
    logits = _randn(5, 20, seed=30, scale=2.0, device=device)
    argmax = logits.argmax(dim=-1).cpu()
    for seed, kwargs in enumerate([dict(temperature=0.0), dict(top_k=1), dict(top_p=1e-6),
                                   dict(temperature=3.0, top_k=1)], start=31):
        [tokens] = _samples(student, logits, device, seed=seed, **kwargs)
        setting = ", ".join(f"{k}={v}" for k, v in kwargs.items())
        expect(torch.equal(tokens, argmax),
               f"sample_next_token({setting}) must return the argmax of every row, got {tokens.tolist()}",
               detail=f"sample_next_token({setting}) must return the argmax of every row {argmax.tolist()}, "
                      f"got {tokens.tolist()}")
    # temperature 0 with tied highest scores: the lowest tied id, as torch.argmax
    tied = torch.tensor([[0.5, 2.0, -1.0, 2.0, 0.1], [3.0, 1.0, 3.0, 3.0, 0.0]])
    [tokens] = _samples(student, tied, device, seed=37, temperature=0.0)
    expect(torch.equal(tokens, tied.argmax(dim=-1)),
           "with temperature=0 and tied highest scores, sample_next_token did not return the lowest tied id "
           "(ties go to the lowest id, as torch.argmax)")
    # p = 0 gives greedy: the most likely token is always kept, and with p = 0 nothing else is
    for row in range(2):
        [tokens] = _samples(student, logits[row:row + 1], device, seed=35 + row, rows=500, top_p=0.0)
        expect(bool((tokens == argmax[row]).all()),
               "with top_p=0, sample_next_token drew tokens other than the most likely one: p = 0 keeps "
               "only the most likely token (greedy), it does not switch the filter off")


@graded("test_sample_next_token")
@on_devices
def test_sample_next_token_shapes_and_generator(student, device):
    for batch, vocab in [(1, 3), (4, 7)]:
        _samples(student, _randn(batch, vocab, seed=batch, device=device), device, seed=0)
    logits = _randn(64, 50, seed=40, scale=0.1, device=device)
    first = _samples(student, logits, device, seed=41, repeat=2)
    again = _samples(student, logits, device, seed=41)
    other = _samples(student, logits, device, seed=42)
    expect(torch.equal(first[0], again[0]),
           "two calls with generators seeded alike drew different tokens: pass generator=generator to "
           "torch.multinomial")
    expect(not torch.equal(first[0], other[0]), "generators with different seeds drew the same 64 tokens")
    expect(not torch.equal(first[0], first[1]),
           "two consecutive calls with one generator drew the same 64 tokens: draw from the generator, do not re-seed")
    # generator=None: PyTorch's global generator, so its seed decides
    [seeded], [alike], [unlike] = (_samples(student, logits, device, seed=seed, global_generator=True)
                                   for seed in (43, 43, 44))
    expect(torch.equal(seeded, alike), "with generator=None, two calls after seeding PyTorch's global generator "
                                       "alike drew different tokens: None means the global generator")
    expect(not torch.equal(seeded, unlike), "with generator=None, the seed of PyTorch's global generator made no "
                                            "difference: None means the global generator, not one of your own")
    for kwargs in (dict(temperature=-0.5), dict(top_k=0), dict(top_p=1.5), dict(top_p=-0.1)):
        reply = student.probe("raises", name="sample_next_token", args=[logits.to(device)], kwargs=kwargs)
        setting = ", ".join(f"{k}={v}" for k, v in kwargs.items())
        expect(reply["raised"] == "ValueError", f"sample_next_token({setting}) must raise ValueError, "
               + ("it returned normally" if reply["raised"] is None else f"it raised {reply['raised']}"))


# =============================================================== greedy_decode
def _decoder(seed: int, device: str) -> dict:
    """The fixture reference of a seeded tiny Llama, for the student; ``_decoded`` runs the
    reference on the same model. One layer: decoding does not depend on the depth, and each
    forward pass costs a third less than with two (the closest top candidates along the tests'
    paths stay more than 2e-3 apart in log-probability, far above float32 rounding)."""
    return fixture("decoder_lm", seed=seed, device=device, layers=1)


@functools.lru_cache(maxsize=None)
def _decoder_model(seed: int, device: str):
    """The model of ``_decoder(seed, device)``, built here once (and its logits remembered, see
    ``_Remembered``): the reference decoders only read it."""
    return _Remembered(build_fixture(_decoder(seed, device)))


class _Remembered(torch.nn.Module):
    """``model`` that computes the logits of each input once and returns the remembered ones after.
    A reference decoding and its two nudged copies (``_decoded``) feed the model the same sequences
    step by step (until a nudge changes a choice), and decodings of one prompt share their first
    steps, so most forward passes of the reference decodings are read back instead of recomputed:
    the logits are those of the model itself (deterministic), the nudges and their noise unchanged."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model, self.logits = model, {}

    def forward(self, input_ids: torch.Tensor):
        key = (tuple(input_ids.shape), tuple(input_ids.flatten().tolist()))
        if key not in self.logits:
            self.logits[key] = self.model(input_ids=input_ids).logits
        return types.SimpleNamespace(logits=self.logits[key])


_DECODED: dict[tuple, torch.Tensor | None] = {}
# Every logit moved by up to this much: a decoding that changes has a near-tie within twice as much.
NUDGE = 1e-3


class _Unsettled(Exception):
    """A reference decoding of the drawn prompt turns on a near-tie (see ``_decoded``)."""


class _Nudged(torch.nn.Module):
    """``model`` with a fresh uniform random amount of at most ``NUDGE`` added to every logit."""

    def __init__(self, model: torch.nn.Module, seed: int):
        super().__init__()
        self.model, self.noise = model, torch.Generator().manual_seed(seed)

    def forward(self, input_ids: torch.Tensor, **kwargs):
        logits = self.model(input_ids=input_ids, **kwargs).logits
        noise = (torch.rand(logits.shape, generator=self.noise) * 2 - 1) * NUDGE
        return types.SimpleNamespace(logits=logits + noise.to(logits.device, logits.dtype))


def _decoded(decode, seed: int, device: str, prompt: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    """``decode(model, prompt, *args, **kwargs)`` (``decoding.greedy_decode`` or ``beam_search``) on the
    model of ``_decoder(seed, device)``. The reference is deterministic, so each decoding is computed
    once per grading process (some tests need the same one twice); callers only read the result.

    A decoding is graded only where it is settled: the same on two nudged copies of the model. One
    that turns on a near-tie (two candidates closer than 2 * NUDGE, where an implementation's
    rounding, 1e-6, could decide) raises ``_Unsettled``, and ``_settled`` draws the test's prompts
    again. Drawn prompts meet one about once in a few hundred decodings."""
    key = (decode.__name__, seed, device, tuple(prompt.shape), tuple(prompt.flatten().tolist()), args,
           tuple(sorted(kwargs.items())))
    if key not in _DECODED:
        model = _decoder_model(seed, device)
        result = decode(model, prompt, *args, **kwargs)
        settled = all(torch.equal(decode(_Nudged(model, nudge), prompt, *args, **kwargs), result) for nudge in (1, 2))
        _DECODED[key] = result if settled else None
    if _DECODED[key] is None:
        raise _Unsettled(key)
    return _DECODED[key]


# Which draw of the prompts a ``_settled`` test is on (0: the first).
_ATTEMPT = 0


def _settled(test):
    """Run ``test`` on its first drawn prompts, or, where a reference decoding of them is unsettled
    (``_decoded``), on the next draw: the student's answers are compared only on settled ones."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        global _ATTEMPT
        try:
            for _ATTEMPT in range(20):
                try:
                    return test(*args, **kwargs)
                except _Unsettled:
                    continue
            raise RuntimeError(f"{test.__name__}: no settled prompts in 20 draws")
        finally:
            _ATTEMPT = 0
    return run


def _prompt(batch: int, length: int, *, seed: int, device: str) -> torch.Tensor:
    """Token ids [batch, length] of the draw ``_ATTEMPT`` of the prompts numbered ``seed``."""
    return torch.randint(0, 96, (batch, length), generator=_gen(seed + 1_000_000 * _ATTEMPT)).to(device)


def _expect_tokens(actual, expected: torch.Tensor, what: str) -> None:
    expect_tensor(actual, dtype=torch.int64, device=expected.device, what=what)
    expect(actual.dim() == 2 and actual.size(0) == expected.size(0),
           f"{what} must be [B, T + n], got shape {list(actual.shape)}")
    # The student reads their own tokens and how many differ, never the reference's decoding.
    differ = (f"in {int((actual != expected).sum())} of {expected.numel()} tokens" if actual.shape == expected.shape
              else "in its length")
    expect(actual.shape == expected.shape and torch.equal(actual, expected),
           f"{what} is {actual.tolist()}, which differs from the expected decoding {differ}",
           detail=f"{what} is {actual.tolist()}, expected {expected.tolist()}")


@graded("test_greedy_decode")
@on_devices
@_settled
def test_greedy_decode_matches_reference(student, device):
    for seed, (batch, length, new) in enumerate([(1, 4, 8), (3, 5, 6), (2, 1, 5)]):
        prompt = _prompt(batch, length, seed=seed, device=device)
        _expect_tokens(student.call(_decoder(seed, device), prompt, new),
                       _decoded(decoding.greedy_decode, seed, device, prompt, new),
                       f"greedy_decode(model, prompt {list(prompt.shape)}, max_new_tokens={new})")


@graded("test_greedy_decode")
@on_devices
@_settled
def test_greedy_decode_stops_at_eos(student, device):
    ref = _decoder(1, device)
    prompt = _prompt(3, 4, seed=1, device=device)
    free = _decoded(decoding.greedy_decode, 1, device, prompt, 10)
    # eos = a token row 0 produces at its 3rd step: row 0 finishes early and is padded with eos
    eos = int(free[0, 4 + 2])
    _expect_tokens(student.call(ref, prompt, 10, eos_token_id=eos),
                   _decoded(decoding.greedy_decode, 1, device, prompt, 10, eos_token_id=eos),
                   f"greedy_decode with eos_token_id={eos} (a finished row gets eos at every later step)")
    # one prompt that finishes at its 4th step: decoding stops there
    single = prompt[2:3]
    eos = int(free[2, 4 + 3])
    expected = _decoded(decoding.greedy_decode, 1, device, single, 10, eos_token_id=eos)
    _expect_tokens(student.call(ref, single, 10, eos_token_id=eos), expected,
                   f"greedy_decode with eos_token_id={eos} (stop as soon as every row has produced eos)")


@graded("test_greedy_decode")
@on_devices
@_settled
def test_greedy_decode_edge_cases(student, device):
    ref = _decoder(2, device)
    prompt = _prompt(2, 3, seed=2, device=device)
    _expect_tokens(student.call(ref, prompt, 0), prompt.clone(),
                   "greedy_decode with max_new_tokens=0 (the prompts unchanged)")
    first = _decoded(decoding.greedy_decode, 2, device, prompt[:1], 1)
    eos = int(first[0, -1])
    _expect_tokens(student.call(ref, prompt[:1], 5, eos_token_id=eos),
                   _decoded(decoding.greedy_decode, 2, device, prompt[:1], 5, eos_token_id=eos),
                   "greedy_decode when eos is the very first generated token")
    one = _prompt(1, 1, seed=3, device=device)
    _expect_tokens(student.call(ref, one, 4), _decoded(decoding.greedy_decode, 2, device, one, 4),
                   "greedy_decode from a one-token prompt")


# =============================================================== beam_search
# The contract is the textbook algorithm of the docstring (reference: decoding.beam_search). The seeded
# decoders check it at scale; the hand-made bigram models below put one clause at a time to the test,
# with margins far above float32 rounding and exact ties only where the tie rule is tested.
def _bigram(rows: dict[int, dict[int, float]], vocab: int = 7) -> torch.Tensor:
    """[vocab, vocab] log-probabilities: row ``last`` puts the given probabilities on the given
    tokens and 1e-6 on every other token, then is normalised."""
    probs = torch.full((vocab, vocab), 1e-6)
    for last, nexts in rows.items():
        for token, p in nexts.items():
            probs[last, token] = p
    return (probs / probs.sum(-1, keepdim=True)).log()


def _bigram_model(log_probs: torch.Tensor, device: str) -> dict:
    return fixture("bigram_lm", log_probs=log_probs, device=device)


# Vocabulary of the hand-made models: 0 = eos, 1 = a, 2 = b, 3 = c, 4 = d, 5 = f, 6 = the prompt.
EOS = 0

# Refilling and stopping, two beams, alpha = 1. Step 1: "eos" (ln 0.4 = -0.916) is among the 2 best and
# finishes (score -0.916); "a" (-1.050) runs, and "b" (-1.386), the next-best unfinished candidate,
# refills the beam. Step 2: "b eos" (-1.396, score -0.698) and "a c" (-1.561) are the 2 best: "b eos"
# finishes, the pool holds 2 hypotheses and the search stops, so "b eos" wins although "a c eos"
# (-1.562, score -0.521) would beat it one step later.
# Without refilling, only "a" runs: "a eos" (score -0.983) finishes and "eos" wins. Finished beams
# kept running, or a search that does not stop at k finished hypotheses, end elsewhere.
REFILL_AND_STOP = _bigram({6: {0: 0.4, 1: 0.35, 2: 0.25}, 1: {3: 0.6, 0: 0.4}, 2: {0: 0.99, 4: 0.01},
                           3: {0: 0.999}, 4: {0: 0.999}, 0: {0: 1.0}})

# The length limit finishes the running beams, two beams, alpha = 1, max_new_tokens = 2. Step 1: "a"
# (-0.693) and "b" (refilled) run, "eos" finishes (score -1.204). Step 2 is the last: "a c" (-1.204) and
# "a eos" (-1.609) are the 2 best; "a eos" finishes (score -0.805) and the limit finishes "a c"
# (score -0.602), which wins. A search that scores only the hypotheses ending in eos returns "a eos".
LENGTH_LIMIT = _bigram({6: {1: 0.5, 0: 0.3, 2: 0.2}, 1: {3: 0.6, 0: 0.4}, 2: {0: 0.99}, 3: {0: 1.0}})

# The sign of alpha, three beams: "eos" finishes with L = 1 (log-probability -1.204), "a eos" with
# L = 2 (-1.155), "b d eos" with L = 3 (-1.238), before the pool fills. alpha = -1 ranks them -1.204,
# -2.31, -3.71 (shortest first); alpha = 0 by log-probability alone (-1.204, -1.155, -1.238: "a eos");
# alpha = 1 ranks them -1.204, -0.578, -0.413 (longest first).
LENGTH_SIGNS = _bigram({6: {1: 0.35, 0: 0.3, 2: 0.29, 3: 0.06}, 1: {0: 0.9, 5: 0.1}, 2: {4: 1.0},
                        3: {5: 1.0}, 4: {0: 1.0}, 5: {0: 1.0}})
LENGTH_SIGN_ANSWERS = {-1.0: [[6, 0]], 0.0: [[6, 1, 0]], 1.0: [[6, 2, 4, 0]]}

# Ties. From the prompt, a, b and c tie exactly (equal logits); a and b continue alike, c better.
# One beam takes a (lower token id); two beams take a and b, not c. At step 2 "a eos" and "b eos" tie
# exactly, finish and fill the pool: "a eos", of the earlier beam, ranks first and wins the equal score.
TIES = _bigram({6: {1: 0.3, 2: 0.3, 3: 0.3, 0: 0.1}, 1: {0: 0.6, 5: 0.4}, 2: {0: 0.6, 5: 0.4},
                3: {0: 0.99, 5: 0.01}, 5: {0: 1.0}})


def _expect_beam(student, model: dict, prompt: torch.Tensor, expected, device: str, why: str, **kwargs) -> None:
    expected = torch.as_tensor(expected, device=device)
    _expect_tokens(student.call(model, prompt, **kwargs), expected,
                   f"beam_search({', '.join(f'{k}={v}' for k, v in kwargs.items())}) {why}")


@graded("test_beam_search")
@on_devices
@_settled
def test_beam_search_width_on_seeded_decoders(student, device):
    for seed, (length, beams, new) in [(0, (4, 2, 6)), (3, (4, 3, 5)), (5, (1, 4, 4))]:
        prompt = _prompt(1, length, seed=seed, device=device)
        kwargs = dict(num_beams=beams, max_new_tokens=new)
        _expect_tokens(student.call(_decoder(seed, device), prompt, **kwargs),
                       _decoded(decoding.beam_search, seed, device, prompt, **kwargs),
                       f"beam_search(num_beams={beams}, max_new_tokens={new}) without eos (keep the "
                       f"{beams} most likely candidates at every step)")
    for seed, beams in [(6, 2), (7, 3), (2, 5)]:
        prompt = _prompt(1, 4, seed=seed, device=device)
        free = _decoded(decoding.beam_search, seed, device, prompt, num_beams=beams, max_new_tokens=8)
        eos = int(free[0, 4 + 2])  # a token the best beam wants early
        kwargs = dict(num_beams=beams, max_new_tokens=8, eos_token_id=eos)
        _expect_tokens(student.call(_decoder(seed, device), prompt, **kwargs),
                       _decoded(decoding.beam_search, seed, device, prompt, **kwargs),
                       f"beam_search(num_beams={beams}, max_new_tokens=8, eos_token_id={eos})")


@graded("test_beam_search")
@on_devices
def test_beam_search_eos_refill_and_stopping(student, device):
    prompt = torch.tensor([[6]], device=device)
    model = _bigram_model(REFILL_AND_STOP, device)
    _expect_beam(student, model, prompt, [[6, 2, 0]], device,
                 "on a hand-made model: a candidate ending in eos finishes and leaves the beam, the beam is "
                 "refilled to num_beams from the next-best unfinished candidates, and the search stops as soon "
                 "as num_beams hypotheses have finished",
                 num_beams=2, max_new_tokens=6, eos_token_id=EOS)
    _expect_beam(student, _bigram_model(LENGTH_LIMIT, device), prompt, [[6, 1, 3]], device,
                 "on a hand-made model: at max_new_tokens every running beam is finished (L = max_new_tokens) "
                 "and competes with the hypotheses that ended in eos",
                 num_beams=2, max_new_tokens=2, eos_token_id=EOS)
    # without eos, token 0 is a token like any other ("eos eos", -0.916, is the most likely pair) and
    # only the length limit finishes hypotheses
    _expect_beam(student, model, prompt, [[6, 0, 0]], device,
                 "on a hand-made model without eos_token_id (only the length limit finishes hypotheses)",
                 num_beams=2, max_new_tokens=2)


@graded("test_beam_search")
@on_devices
@_settled
def test_beam_search_length_penalty(student, device):
    prompt = torch.tensor([[6]], device=device)
    model = _bigram_model(LENGTH_SIGNS, device)
    for alpha, expected in LENGTH_SIGN_ANSWERS.items():
        _expect_beam(student, model, prompt, expected, device,
                     "on a hand-made model (score = log-probability / L ** length_penalty, L = generated tokens "
                     "including eos: length_penalty > 0 favours longer hypotheses, < 0 shorter ones)",
                     num_beams=3, max_new_tokens=6, length_penalty=alpha, eos_token_id=EOS)
    ref = _decoder(4, device)
    prompt = _prompt(1, 3, seed=4, device=device)
    free = _decoded(decoding.beam_search, 4, device, prompt, num_beams=3, max_new_tokens=8)
    eos = int(free[0, 3 + 3])
    for alpha in (-1.0, 0.0, 2.0):
        kwargs = dict(num_beams=3, max_new_tokens=8, length_penalty=alpha, eos_token_id=eos)
        _expect_tokens(student.call(ref, prompt, **kwargs),
                       _decoded(decoding.beam_search, 4, device, prompt, **kwargs),
                       f"beam_search(num_beams=3, length_penalty={alpha}, eos_token_id={eos})")


@graded("test_beam_search")
@on_devices
def test_beam_search_tie_rule(student, device):
    prompt = torch.tensor([[6]], device=device)
    model = _bigram_model(TIES, device)
    _expect_beam(student, model, prompt, [[6, 1, 0]], device,
                 "on a hand-made model where tokens 1, 2 and 3 tie exactly: of tied candidates the lower "
                 "token id ranks first", num_beams=1, max_new_tokens=4, eos_token_id=EOS)
    _expect_beam(student, model, prompt, [[6, 1, 0]], device,
                 "on a hand-made model with exact ties: tied candidates rank by beam (earlier first), then "
                 "token id (lower first), and of equal scores the hypothesis that finished first wins",
                 num_beams=2, max_new_tokens=4, eos_token_id=EOS)


@graded("test_beam_search")
@on_devices
@_settled
def test_beam_search_edge_cases(student, device):
    ref = _decoder(3, device)
    prompt = _prompt(1, 5, seed=3, device=device)
    _expect_tokens(student.call(ref, prompt, num_beams=3, max_new_tokens=0), prompt.clone(),
                   "beam_search with max_new_tokens=0 (the prompt unchanged)")
    # the result is the prompt, unchanged, then the generated tokens; input_ids itself is not modified
    kwargs = dict(num_beams=2, max_new_tokens=3, eos_token_id=7)
    reply = student.probe("call_keeping_inputs", name="beam_search", args=[ref, prompt], kwargs=kwargs, keep=[1])
    _expect_tokens(reply["value"], _decoded(decoding.beam_search, 3, device, prompt, **kwargs),
                   "beam_search(num_beams=2, max_new_tokens=3, eos_token_id=7) (the prompt, then the generated tokens)")
    expect(torch.equal(reply["args_after"][0], prompt), "beam_search modified its input_ids; leave the prompt as it is "
                                                        "(work on a copy)")
    # a batch of prompts and num_beams < 1 are refused
    for args, kwargs, what in [([_prompt(2, 3, seed=3, device=device)], dict(num_beams=2), "a batch of 2 prompts"),
                               ([prompt], dict(num_beams=0), "num_beams=0")]:
        reply = student.probe("raises", name="beam_search", args=[ref, *args], kwargs=dict(max_new_tokens=2, **kwargs))
        expect(reply["raised"] == "ValueError",
               f"beam_search with {what} must raise ValueError, got {reply['raised'] or 'no exception'}")
    # one beam is greedy decoding
    ref = _decoder(7, device)
    prompt = _prompt(1, 3, seed=7, device=device)
    free = _decoded(decoding.greedy_decode, 7, device, prompt, 9, eos_token_id=None)
    for eos in (None, int(free[0, 3 + 4])):
        _expect_tokens(student.call(ref, prompt, num_beams=1, max_new_tokens=9, eos_token_id=eos),
                       _decoded(decoding.greedy_decode, 7, device, prompt, 9, eos_token_id=eos),
                       f"beam_search with num_beams=1 (greedy decoding), eos_token_id={eos}")
