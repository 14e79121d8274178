"""Hidden tests of part_b_bert_gpt.ipynb, B2: the two pre-training losses."""
from __future__ import annotations

import torch

from autograder.reference import losses
from autograder.suite import expect, expect_close, expect_tensor, graded, on_devices

from ._common import _gen, _randn


# =============================================================== clm_loss
def _ids(batch: int, length: int, vocab: int, *, seed: int, device: str) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=_gen(seed)).to(device)


def _expect_loss(actual, expected: torch.Tensor, *, what: str, atol: float = 1e-5, rtol: float = 1e-5) -> None:
    expect_tensor(actual, dtype=torch.float32, shape=(), device=expected.device,
                  what=f"{what} (a 0-dim float32 tensor)")
    expect(not bool(torch.isnan(actual)), f"{what} is NaN")
    expect_close(actual, expected, atol=atol, rtol=rtol, what=what)


def _expect_stable(student, reference, base, targets) -> None:
    """The student's loss equals ``reference``'s on logits shifted or scaled far from 0, and on
    half-precision logits, against the same ``targets``."""
    name = reference.__name__
    for label, logits in [("logits + 1000", base + 1000), ("1000 * logits", 1000 * base)]:
        # tolerance: float32 rounding, relative to losses of size up to ~1e4; inputs near 1000
        # are only known to 6e-5 (one ulp), which a log-sum-exp formulation passes on
        _expect_loss(student.call(logits, targets), reference(logits, targets), atol=2e-4, rtol=1e-5,
                     what=f"{name} of {label} (use a log-softmax or log-sum-exp that subtracts the maximum)")
    for dtype in (torch.float16, torch.bfloat16):
        logits = base.to(dtype)
        # tolerance: float32 rounding; a loss computed in half precision is off by ~1e-3
        _expect_loss(student.call(logits, targets), reference(logits, targets), atol=2e-4, rtol=0.0,
                     what=f"{name} of {dtype} logits (compute in float32: logits.float())")


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
    _expect_stable(student, losses.clm_loss, base, _ids(2, 6, 17, seed=12, device=device))


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
    _expect_stable(student, losses.mlm_loss, base, _mlm_labels(3, 8, 21, seed=13, rate=0.4, device=device))
