"""Hidden tests of exercise3_classification_as_generation.ipynb: the prompt, the
label log-probabilities, batched classification with a causal LM, and the
training batches of the decoder fine-tuned to write the label word.

``classify_by_generation`` runs inside the sandbox on a seeded tiny Llama
(``decoder_lm``) with a small word-level tokenizer (``prompt_tokenizer``, padding
on the right by default, like SmolLM2's); both are built from the same parameters
here for the reference. Predictions are compared only for reviews where the
reference's two label log-probabilities (each prompt's own: read at its last real
token, which under the causal mask sees none of the padding after it) differ by
more than ``CLEAR_MARGIN``, so that rounding differences between correct
implementations (left padding, right padding read at the last real token, other
batch sizes) cannot flip a prediction. The reference only reads its model and
tokenizer, so each model is built once, and the margins of a set of reviews
computed once, per grading process.

``label_word_targets`` is compared exactly with the reference, on a hand-made batch
whose pad id also occurs inside a prompt and on drawn batches (prompt and label-word
lengths, ids and pad id drawn), padded on each side.
"""
from __future__ import annotations

import functools
import random

import torch

from autograder.reference import exercises
from autograder.drivers import models, probes  # noqa: F401  (registers the fixtures and probes used below)
from autograder.sandbox.errors import StudentError
from autograder.sandbox.fixtures import build_fixture, fixture
from autograder.suite import drawn_ints, expect, expect_close, expect_equal, expect_tensor, generator, graded, on_devices, seed_for

CLEAR_MARGIN = 1e-3


def _gen(seed: int) -> torch.Generator:
    return generator(seed)


# =============================================================== build_prompt
def _expect_same_text(actual, expected: str, what: str) -> None:
    expect(type(actual) is str, f"{what} must return a str, got {type(actual).__name__}")
    if actual == expected:
        return
    at = next((i for i, (a, b) in enumerate(zip(actual, expected)) if a != b), min(len(actual), len(expected)))
    # The student reads their own prompt around the first difference, never the reference's text.
    yours = f"yours there: ...{actual[max(0, at - 25):at + 25]!r}, {len(actual)} characters in all"
    expect(False, f"{what} differs from the template at character {at} ({yours})",
           detail=f"{what} differs from the template at character {at}: expected "
                  f"...{expected[max(0, at - 25):at + 25]!r}, got ...{actual[max(0, at - 25):at + 25]!r} "
                  f"(lengths {len(expected)} and {len(actual)})")


@graded("test_build_prompt")
def test_build_prompt_zero_shot(student):
    for review in ("A gripping, beautifully shot film.", "''Conan'' meets ''Rocky''... and loses", "bad"):
        _expect_same_text(student.call(review), exercises.build_prompt(review),
                          f"build_prompt({review!r}) with the default instruction")
    _expect_same_text(student.call("It drags.", instruction="Is this review positive or negative?"),
                      exercises.build_prompt("It drags.", instruction="Is this review positive or negative?"),
                      "build_prompt('It drags.', instruction='Is this review positive or negative?')")
    drawn = _reviews(20, 1, min_words=3)[0]
    _expect_same_text(student.call(drawn), exercises.build_prompt(drawn), f"build_prompt({drawn!r})")
    _expect_same_text(student.call("It drags.", instruction=""), exercises.build_prompt("It drags.", instruction=""),
                      "build_prompt('It drags.', instruction='') (no instruction line and no blank line)")


@graded("test_build_prompt")
def test_build_prompt_few_shot(student):
    examples = [("A joy from start to finish.", 1), ("Two hours I will never get back.", 0),
                ("Smart, funny and warm.", 1), ("The plot makes no sense.", 0)]
    for k in (1, 2, 4):
        _expect_same_text(student.call("Quietly moving.", examples[:k]),
                          exercises.build_prompt("Quietly moving.", examples[:k]),
                          f"build_prompt('Quietly moving.', {k} examples)")
    drawn = [(review, label) for review, label in zip(_reviews(21, 3, min_words=2), drawn_ints(22, 0, 2, count=3))]
    _expect_same_text(student.call(_reviews(23, 1)[0], drawn), exercises.build_prompt(_reviews(23, 1)[0], drawn),
                      f"build_prompt({_reviews(23, 1)[0]!r}, {drawn!r})")
    shuffled = (examples[3], examples[0])
    _expect_same_text(student.call("Meh.", shuffled, instruction="Label each review."),
                      exercises.build_prompt("Meh.", shuffled, instruction="Label each review."),
                      "build_prompt('Meh.', 2 examples, instruction='Label each review.')")
    _expect_same_text(student.call("Meh.", examples[:2], instruction=""),
                      exercises.build_prompt("Meh.", examples[:2], instruction=""),
                      "build_prompt('Meh.', 2 examples, instruction='')")


# =============================================================== label_log_probs
def _expect_log_probs(student, logits: torch.Tensor, ids, what: str, *, atol: float) -> None:
    expected = exercises.label_log_probs(logits, ids)
    actual = student.call(logits, ids)
    expect_tensor(actual, dtype=torch.float32, shape=expected.shape, device=logits.device,
                  what=f"{what} (float32 [B, L] on the device of the logits)")
    expect(bool(torch.isfinite(actual).all()), f"{what} contains -inf or NaN: compute a numerically stable "
                                               "log-softmax (subtract the maximum, or use log_softmax)")
    # tolerance: float32 rounding of a log-sum-exp over the vocabulary
    expect_close(actual, expected, atol=atol, rtol=1e-6,
                 what=f"{what} (log_softmax over the whole vocabulary, taken at the label ids)")


@graded("test_label_log_probs")
@on_devices
def test_label_log_probs_values(student, device):
    g = _gen(0)
    logits = (3 * torch.randn(4, 50, generator=g)).to(device)
    _expect_log_probs(student, logits, [3, 17], "label_log_probs(logits [4, 50], [3, 17])", atol=1e-5)
    _expect_log_probs(student, logits, torch.tensor([17, 3, 3, 49]), "label_log_probs(logits, tensor([17, 3, 3, 49]))",
                      atol=1e-5)
    one = torch.randn(1, 7, generator=g).to(device)
    _expect_log_probs(student, one, list(range(7)), "label_log_probs(logits [1, 7], all 7 ids)", atol=1e-5)
    large = (1000 * torch.randn(3, 40, generator=g)).to(device)  # exp() overflows in float32
    _expect_log_probs(student, large, [0, 5, 39], "label_log_probs(logits of size ~1000, [0, 5, 39])", atol=1e-3)


@graded("test_label_log_probs")
@on_devices
def test_label_log_probs_low_precision_logits(student, device):
    g = _gen(1)
    for dtype in (torch.float16, torch.bfloat16):
        logits = (4 * torch.randn(5, 300, generator=g)).to(device=device, dtype=dtype)
        _expect_log_probs(student, logits, [7, 250], f"label_log_probs({str(dtype).replace('torch.', '')} logits, "
                                                     "[7, 250]) (upcast to float32 before the log-softmax)", atol=1e-4)
    wide = (2 * torch.randn(2, 49152, generator=g)).to(device)  # SmolLM2's vocabulary size
    _expect_log_probs(student, wide, [2731, 3524], "label_log_probs(logits [2, 49152], [2731, 3524])", atol=1e-4)


# =============================================================== classify_by_generation
def _reviews(seed: int, count: int, *, min_words: int = 1, max_words: int = 14) -> list[str]:
    rng = random.Random(seed_for(seed))
    return [" ".join(rng.choice(models.REVIEW_WORDS) for _ in range(rng.randint(min_words, max_words)))
            for _ in range(count)]


def _fixtures(seed: int, device: str, padding_side: str = "right"):
    model = fixture("decoder_lm", seed=seed, vocab_size=models.PROMPT_VOCAB_SIZE, device=device)
    tokenizer = fixture("prompt_tokenizer", padding_side=padding_side)
    return model, tokenizer


@functools.lru_cache(maxsize=None)
def _reference_fixtures(seed: int, device: str) -> tuple:
    """The model and tokenizer of ``_fixtures(seed, device)`` for the reference, built once per
    grading process (only read: forward passes under no_grad)."""
    return tuple(build_fixture(reference) for reference in _fixtures(seed, device))


@functools.lru_cache(maxsize=None)
@torch.no_grad()
def _margins(seed: int, device: str, reviews: tuple[str, ...], examples: tuple) -> torch.Tensor:
    """log P(" positive") - log P(" negative") of the reference for each review, on the model of
    ``_fixtures(seed, device)``. The prompts go through in one batch padded on the right, each read
    at its last real token: under the causal mask no real token attends to the padding after it,
    so each margin is that of the prompt alone (one forward pass instead of one per review)."""
    model, tokenizer = _reference_fixtures(seed, device)
    ids = [tokenizer(" " + word, add_special_tokens=False).input_ids[0] for word in exercises.LABEL_WORDS]
    device = next(model.parameters()).device
    prompts = [exercises.build_prompt(review, examples) for review in reviews]
    batch = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="right").to(device)
    logits = model(**batch).logits
    last = batch["attention_mask"].sum(dim=1) - 1
    scores = exercises.label_log_probs(logits[torch.arange(len(prompts), device=device), last], ids)
    return (scores[:, 1] - scores[:, 0]).cpu()


def _expect_classification(student, seed: int, device: str, reviews, examples=(), *, what: str,
                           padding_side: str = "right", **kwargs) -> None:
    model_ref, tokenizer_ref = _fixtures(seed, device, padding_side)
    actual = student.call(model_ref, tokenizer_ref, reviews, examples, **kwargs)
    expect_tensor(actual, dtype=torch.long, shape=(len(reviews),), device="cpu",
                  what=f"{what}: the predictions (a LongTensor [N] on the CPU)")
    expect(bool(((actual == 0) | (actual == 1)).all()), f"{what}: predictions must be 0 or 1, got {actual.tolist()}")
    margins = _margins(seed, device, tuple(reviews), tuple(examples))
    expected = (margins > 0).long()
    clear = margins.abs() > CLEAR_MARGIN
    wrong = [i for i in range(len(reviews)) if clear[i] and int(actual[i]) != int(expected[i])]
    # Which reviews are wrong is not said: of a prediction of 0 or 1, that is the answer.
    shown = "; ".join(f"review {i} {reviews[i]!r}: predicted {int(actual[i])}, expected {int(expected[i])}"
                      for i in wrong[:3])
    hint = ("Check the prompt, the label tokens (' negative', ' positive' with their space), left padding with the "
            "attention mask, and that you read the logits at the last position")
    expect(not wrong, f"{what}: {len(wrong)} of {int(clear.sum())} predictions are wrong. {hint}",
           detail=f"{what}: {len(wrong)} of {int(clear.sum())} predictions are wrong ({shown}). {hint}")


@graded("test_classify_by_generation")
@on_devices
def test_classify_by_generation_zero_shot(student, device):
    reviews = _reviews(0, 12)  # two batches of the default size 8: 8 + 4, lengths 1 to 14 words
    _expect_classification(student, 3, device, reviews, what="classify_by_generation(model, tokenizer, 12 reviews)")
    _expect_classification(student, 8, device, _reviews(1, 9),
                           what="classify_by_generation on another model, 9 reviews")


@graded("test_classify_by_generation")
@on_devices
def test_classify_by_generation_few_shot_and_batch_sizes(student, device):
    examples = [("a boring mess", 0), ("I loved it !", 1), ("superb acting", 1), ("dull and too long", 0)]
    reviews = _reviews(2, 10)
    for k, batch_size in ((1, 1), (2, 3), (4, 10)):
        _expect_classification(student, 6, device, reviews, examples[:k], batch_size=batch_size,
                               what=f"classify_by_generation with {k} examples, batch_size={batch_size}")


@graded("test_classify_by_generation")
def test_classify_by_generation_padding_and_edge_cases(student):
    # one very short review among long ones, all in one batch: the padding must not change any prediction
    reviews = ["gem"] + _reviews(3, 7, min_words=10, max_words=16) + ["awful"]
    _expect_classification(student, 9, "cpu", reviews, batch_size=16,
                           what="classify_by_generation on reviews of 1 and 10-16 words in one batch")
    _expect_classification(student, 9, "cpu", reviews, batch_size=16, padding_side="left",
                           what="classify_by_generation with a tokenizer that already pads on the left")
    _expect_classification(student, 3, "cpu", ["a great film"], what="classify_by_generation on one review")
    model_ref, tokenizer_ref = _fixtures(3, "cpu")
    empty = student.call(model_ref, tokenizer_ref, [])
    expect_tensor(empty, dtype=torch.long, shape=(0,), device="cpu",
                  what="classify_by_generation(model, tokenizer, []) (an empty LongTensor)")
    expect_equal(empty, torch.zeros(0, dtype=torch.long), what="classify_by_generation(model, tokenizer, [])")


# =============================================================== label_word_targets
TARGET_NAMES = ("input_ids", "attention_mask", "labels")


def _token_lists(number: int, count: int, low: int, high: int, vocab: int = 60) -> list[list[int]]:
    """``count`` lists of token ids in [0, vocab), of drawn lengths in [low, high)."""
    lengths = drawn_ints(number, low, high, count=count)
    g = generator(number + 100)
    return [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]


def _drawn_batch(number: int) -> tuple[list[list[int]], list[list[int]], int]:
    """A drawn batch (prompts, label words, pad id): 3 to 6 drawn rows, then a row with a
    one-id prompt and a one-id word and a row with a 12-id prompt and a 3-id word, so that
    every batch is padded and holds a label word of several ids."""
    rows = drawn_ints(number, 3, 7)[0]
    prompts = _token_lists(number + 1, rows, 1, 12) + [[7], list(range(20, 32))]
    words = _token_lists(number + 2, rows, 1, 4) + [[8], [41, 42, 43]]
    pad = drawn_ints(number + 3, 60, 90)[0]
    return prompts, words, pad


def _expect_targets(student, prompts, words, pad: int, what: str, **kwargs) -> None:
    expected = exercises.label_word_targets(prompts, words, pad, **kwargs)
    actual = student.call(prompts, words, pad, **kwargs)
    expect(type(actual) in (tuple, list) and len(actual) == 3,
           f"{what} must return a tuple (input_ids, attention_mask, labels), got "
           + (f"a {type(actual).__name__} of length {len(actual)}" if type(actual) in (tuple, list)
              else type(actual).__name__))
    for name, mine, reference in zip(TARGET_NAMES, actual, expected):
        expect_tensor(mine, dtype=torch.long, shape=reference.shape, device="cpu",
                      what=f"{what}: {name} (a LongTensor [B, T] on the CPU, T the longest prompt + label word)")
        if not torch.equal(mine, reference):
            row = int((mine != reference).any(dim=1).nonzero()[0])
            case = f"{what}: {name} differs in row {row} (prompt {prompts[row]}, label word {words[row]}, pad id {pad})"
            expect(False, f"{case}: got {mine[row].tolist()}",
                   detail=f"{case}: got {mine[row].tolist()}, expected {reference[row].tolist()}")


def _raised(student, *args, **kwargs) -> str | None:
    """The name of the exception the student's call raised (None: it returned)."""
    try:
        student.call(*args, **kwargs)
    except StudentError as err:
        if err.type_name == "NotImplementedError":
            raise  # a stub: graded as not implemented
        return err.type_name
    return None


@graded("test_label_word_targets")
def test_label_word_targets_left_padding(student):
    # the pad id 0 also occurs inside the first prompt: the padding is told by position
    _expect_targets(student, [[0, 5, 6], [9], [4, 0]], [[1], [2, 3], [1]], 0,
                    what="label_word_targets([[0, 5, 6], [9], [4, 0]], [[1], [2, 3], [1]], pad_token_id=0)")
    prompts, words, pad = _drawn_batch(30)
    _expect_targets(student, prompts, words, pad,
                    what=f"label_word_targets on {len(prompts)} drawn rows (default padding side: left)")
    prompts, words, pad = _drawn_batch(35)
    _expect_targets(student, prompts, words, pad, padding_side="left",
                    what=f"label_word_targets on {len(prompts)} drawn rows, padding_side='left'")


@graded("test_label_word_targets")
def test_label_word_targets_right_padding(student):
    _expect_targets(student, [[0, 5, 6], [9], [4, 0]], [[1], [2, 3], [1]], 0, padding_side="right",
                    what="label_word_targets([[0, 5, 6], [9], [4, 0]], [[1], [2, 3], [1]], pad_token_id=0, "
                         "padding_side='right')")
    prompts, words, pad = _drawn_batch(40)
    _expect_targets(student, prompts, words, pad, padding_side="right",
                    what=f"label_word_targets on {len(prompts)} drawn rows, padding_side='right'")
    one_prompt, one_word = _token_lists(45, 1, 2, 9), _token_lists(46, 1, 1, 3)
    _expect_targets(student, one_prompt, one_word, 3, padding_side="right",
                    what=f"label_word_targets({one_prompt}, {one_word}, pad_token_id=3, padding_side='right') "
                         "(one row: no padding)")


@graded("test_label_word_targets")
def test_label_word_targets_errors(student):
    prompts, words, pad = _drawn_batch(50)
    cases = {
        f"{len(prompts)} prompts and {len(words) - 1} label words": (prompts, words[:-1], pad),
        "no rows (B = 0)": ([], [], pad),
        "an empty prompt": (prompts[:1] + [[]], words[:2], pad),
        "an empty label word": (prompts[:2], words[:1] + [[]], pad),
    }
    for case, args in cases.items():
        raised = _raised(student, *args)
        expect(raised == "ValueError", f"label_word_targets with {case} must raise ValueError, "
                                       + (f"it raised {raised}" if raised else "it returned normally"))
    raised = _raised(student, prompts, words, pad, padding_side="middle")
    expect(raised == "ValueError", "label_word_targets(..., padding_side='middle') must raise ValueError "
                                   "(only 'left' and 'right'), " + (f"it raised {raised}" if raised else
                                                                    "it returned normally"))
