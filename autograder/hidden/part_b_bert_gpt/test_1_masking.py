"""Hidden tests of part_b_bert_gpt.ipynb, B1: MLM corruption (``mask_tokens``) and the
training signal it gives, BERT's two-segment input and its next-sentence pairs."""
from __future__ import annotations

import math

import torch

from autograder.reference import arithmetic, masking, sentence_pairs
from autograder.drivers import models, probes  # noqa: F401  (registers the fixtures and probes used below)
from autograder.suite import (
    drawn_ints, expect, expect_equal, expect_pair, expect_tensor, graded, on_devices, seed_for, within_sigma,
)

from ._common import _expect_dict_close, _gen


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
