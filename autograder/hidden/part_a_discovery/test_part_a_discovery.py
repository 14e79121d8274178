"""Hidden tests of part_a_discovery.ipynb: scoring text with a causal LM, and the
pre-training cost arithmetic. (The answer constants of this notebook, Spanish
reuse and task categories, are graded elsewhere.)
"""
from __future__ import annotations

import torch

from autograder.reference import answers, arithmetic, scoring
from autograder.drivers import models, probes  # noqa: F401  (registers the fixtures and probes used below)
from autograder.sandbox.fixtures import build_fixture, fixture
from autograder.suite import (drawn_ints, expect, expect_close, expect_each, expect_equal, expect_number, expect_pair,
                             expect_tensor, generator, graded, on_devices, redrawn, top_gaps_at_least)


def _randn(*shape: int, seed: int, scale: float = 1.0, device: str = "cpu",
           dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return (torch.randn(*shape, generator=generator(seed)) * scale).to(device=device, dtype=dtype)


def _ids(length: int, vocab: int, *, seed: int, device: str) -> torch.Tensor:
    return torch.randint(0, vocab, (length,), generator=generator(seed)).to(device)


def _expect_logprob(actual, expected: torch.Tensor, what: str, *, atol: float = 1e-5, rtol: float = 1e-5) -> None:
    expect_tensor(actual, dtype=torch.float32, shape=(), device=expected.device, what=f"{what} (a 0-dim float32 tensor)")
    expect(bool(torch.isfinite(actual)), f"{what} is {float(actual)}; it must be a finite number")
    expect_close(actual, expected, atol=atol, rtol=rtol, what=what)


# =============================================================== sequence_logprob
@graded("test_sequence_logprob")
@on_devices
def test_sequence_logprob_matches_reference(student, device):
    for seed, (length, vocab) in enumerate([(9, 13), (2, 5), (30, 96)]):
        logits = _randn(length, vocab, seed=seed, scale=2.0, device=device)
        token_ids = _ids(length, vocab, seed=seed + 100, device=device)
        # tolerance: float32 rounding of a sum of up to 29 log-probabilities
        _expect_logprob(student.call(logits, token_ids), scoring.sequence_logprob(logits, token_ids),
                        f"sequence_logprob on logits {list(logits.shape)}")


@graded("test_sequence_logprob")
def test_sequence_logprob_scores_each_token_from_the_previous_position(student):
    # row t is sure of token_ids[t + 1]: every scored token costs ~0, while reading row t for
    # token t (no shift) would cost ~40 per token
    token_ids = torch.tensor([3, 0, 2, 1, 4])
    logits = torch.zeros(5, 5)
    logits[torch.arange(4), token_ids[1:]] = 40.0
    _expect_logprob(student.call(logits, token_ids), torch.tensor(0.0), atol=1e-5, rtol=0.0,
                    what="sequence_logprob when logits[t] puts all its mass on token_ids[t + 1] "
                         "(logits[t - 1] scores token t; the first token is not scored)")
    model = build_fixture(fixture("decoder_lm", seed=3))
    token_ids = _ids(12, 96, seed=4, device="cpu")
    with torch.no_grad():
        out = model(input_ids=token_ids[None], labels=token_ids[None])
    # tolerance: float32 rounding; the model's loss is the mean over the 11 scored tokens
    _expect_logprob(student.call(out.logits[0], token_ids), -out.loss * 11, atol=1e-4,
                    what="sequence_logprob of a tiny Llama's logits (-(T - 1) times the model's own loss)")


@graded("test_sequence_logprob")
@on_devices
def test_sequence_logprob_edge_cases(student, device):
    logits = _randn(1, 7, seed=10, device=device)
    _expect_logprob(student.call(logits, _ids(1, 7, seed=11, device=device)), torch.tensor(0.0, device=device),
                    atol=1e-7, rtol=0.0, what="sequence_logprob of a single token (nothing to score: 0.0)")
    base = _randn(6, 11, seed=12, scale=2.0, device=device)
    token_ids = _ids(6, 11, seed=13, device=device)
    for name, logits in [("logits + 1000", base + 1000), ("1000 * logits", 1000 * base)]:
        # tolerance: float32 rounding relative to values of size up to ~1e4
        _expect_logprob(student.call(logits, token_ids), scoring.sequence_logprob(logits, token_ids),
                        f"sequence_logprob of {name} (use log_softmax, which subtracts the maximum)",
                        atol=1e-3, rtol=1e-5)
    for dtype in (torch.float16, torch.bfloat16):
        logits = base.to(dtype)
        # tolerance: float32 rounding; a computation in half precision is off by ~1e-2
        _expect_logprob(student.call(logits, token_ids), scoring.sequence_logprob(logits, token_ids),
                        f"sequence_logprob of {dtype} logits (compute in float32: logits.float())", atol=1e-4)


# =============================================================== top_k_next_tokens
def _top_k(student, logits: torch.Tensor, k: int):
    return expect_pair(student.call(logits, k), what="top_k_next_tokens", names="probs, ids")


def _expect_top_k(student, logits: torch.Tensor, k: int, what: str, *, atol: float = 1e-7) -> None:
    probs, ids = _top_k(student, logits, k)
    expected_probs, expected_ids = scoring.top_k_next_tokens(logits, k)
    expect_equal(ids, expected_ids, what=f"the ids of {what}")
    # tolerance: float32 rounding of a softmax
    expect_close(probs, expected_probs, atol=atol, rtol=1e-5, what=f"the probabilities of {what}")


@graded("test_top_k_next_tokens")
@on_devices
def test_top_k_next_tokens_matches_topk_of_softmax(student, device):
    for seed, (vocab, k) in enumerate([(17, 3), (17, 1), (17, 17), (1000, 5), (2, 2)]):
        # the k + 1 largest 1e-5 apart or more: a softmax's rounding (1e-7 relative) cannot reorder them
        logits = redrawn(seed, lambda g: torch.randn(vocab, generator=g) * 2.0,
                         lambda x: top_gaps_at_least(x, 1e-5, top=k)).to(device)
        _expect_top_k(student, logits, k, f"top_k_next_tokens(logits [{vocab}], k={k}) (most likely first)")


@graded("test_top_k_next_tokens")
@on_devices
def test_top_k_next_tokens_half_precision_and_large_logits(student, device):
    # the 6 largest stay distinct in float16 and bfloat16 (whose spacing near 2 is 0.016): no ties
    base = redrawn(20, lambda g: torch.randn(50, generator=g) * 2.0,
                   lambda x: all(top_gaps_at_least(x.to(dtype), 1e-3, top=5) for dtype in (torch.float16, torch.bfloat16))
                   ).to(device)
    for dtype in (torch.float16, torch.bfloat16):
        # tolerance: float32 rounding; a softmax in half precision is off by ~1e-3
        _expect_top_k(student, base.to(dtype), 5, f"top_k_next_tokens of {dtype} logits (probabilities in "
                                                  "float32, computed in float32)", atol=1e-6)
    _expect_top_k(student, base * 10 + 1000, 4, "top_k_next_tokens of 10 * logits + 1000 (a stable softmax)")


# =============================================================== pretraining_costs
def _expect_costs(student, args: tuple, what: str) -> None:
    expected = arithmetic.pretraining_costs(*args)
    actual = student.call(*args)
    expect(type(actual) is dict, f"{what} must return a dict, got {type(actual).__name__}")
    expect(set(actual) == set(expected), f"{what} must have exactly the keys {sorted(expected)}, got {sorted(actual)}")
    for key, value in expected.items():
        expect_number(actual[key], value, rel=1e-9, abs_tol=1e-9, what=f"{what}[{key!r}]")


@graded("test_pretraining_costs")
def test_pretraining_costs_sharing_saves(student):
    _expect_costs(student, (100, 1_000_000.0, 5_000_000.0, 10_000.0), "pretraining_costs(100, 1e6, 5e6, 1e4)")


@graded("test_pretraining_costs")
def test_pretraining_costs_when_sharing_costs_more(student):
    # one company alone: pre-training a shared model and adapting it costs more than one model from scratch
    _expect_costs(student, (1, 1_000_000.0, 5_000_000.0, 10_000.0), "pretraining_costs(1, 1e6, 5e6, 1e4)")
    _expect_costs(student, (3, 2.0, 10.0, 1.0), "pretraining_costs(3, 2, 10, 1)")


@graded("test_pretraining_costs")
def test_pretraining_costs_other_settings(student):
    n, scratch, pretrain, adapt = drawn_ints(60, 1, 100_000, count=4)  # a drawn case: n from 1 to 99,999
    drawn = (n, scratch / 8, pretrain * 16.0, adapt / 64)
    for args in [(1000, 12.5, 4000.0, 0.25), (7, 3.0, 21.0, 0.0), (50, 4.6e6, 4.6e6, 4.6e3), drawn]:
        _expect_costs(student, args, f"pretraining_costs{args}")


# ------------------------------------------------------------------ answer constants
def _answers_of(student, name: str, keys) -> dict:
    value = student.value(name)
    expect(type(value) is dict, f"{name} must be a dict, got {type(value).__name__}")
    missing = sorted(set(keys) - set(value))
    expect(not missing, f"{name} lacks the keys {missing}")
    return value


def _wrong(name: str, given: dict, keys) -> list[str]:
    accepted = answers.accepted

    return [key for key in keys if given.get(key) not in accepted(name, key)]


# The groups of answers the tests of the answer constants grade, one test each: the answer a group's
# items share -> the constant, what the items are and a hint for a wrong one.
ANSWER_GROUPS = {
    "reuse": ("SPANISH_REUSE", "items an English speaker can reuse", "ask whether English already gave you this"),
    "learn": ("SPANISH_REUSE", "items that must be learned fresh", "ask whether English has it at all"),
    "general": ("TASK_CATEGORIES", "general skills", "ask whether every text needs it"),
    "specific": ("TASK_CATEGORIES", "domain-specific skills", "ask whether it serves one domain only"),
}


def _expect_answers(student, group: str) -> None:
    """The answers of the items of ``group`` (ANSWER_GROUPS): a share of the points for each one right
    (a defensible alternative that ``answers.ACCEPTED`` names counts as right)."""
    name, what, hint = ANSWER_GROUPS[group]
    key = getattr(answers, name)
    items = [item for item, answer in key.items() if answer == group]
    given = _answers_of(student, name, key)
    wrong = _wrong(name, given, items)
    # Which items are wrong is not said: of a choice between two groups, that is the answer key.
    right = f"{len(items) - len(wrong)} of the {len(items)} {what} are right"
    expect_each(len(items) - len(wrong), len(items), f"{right} ({hint})",
                detail=f"{right}; marked otherwise: {', '.join(repr(item) for item in wrong)} ({hint})")


@graded("test_spanish_reuse")
def test_spanish_reuse_what_transfers(student):
    _expect_answers(student, "reuse")


@graded("test_spanish_reuse")
def test_spanish_reuse_what_is_new(student):
    _expect_answers(student, "learn")


@graded("test_task_categories")
def test_task_categories_general_skills(student):
    _expect_answers(student, "general")


@graded("test_task_categories")
def test_task_categories_specific_skills(student):
    _expect_answers(student, "specific")
