"""losses.py against a transformers causal LM's own loss and F.cross_entropy."""

import math

import pytest
import torch
import torch.nn.functional as F

from autograder.reference.losses import clm_loss, mlm_loss

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("seed", [0, 1])
def test_clm_loss_matches_llama_loss_without_padding(tiny_llama, seed):
    model = tiny_llama(seed, initializer_range=0.02)
    ids = torch.randint(0, 96, (3, 10), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        out = model(input_ids=ids, labels=ids)
    # tolerance: float32 summation order
    torch.testing.assert_close(clm_loss(out.logits, ids), out.loss, atol=1e-6, rtol=1e-6)


def test_clm_loss_matches_llama_loss_with_padding(tiny_llama):
    model = tiny_llama(3, initializer_range=0.02)
    pad = 0
    ids = torch.randint(1, 96, (3, 9), generator=torch.Generator().manual_seed(3))
    attention_mask = torch.ones_like(ids)
    attention_mask[1, 6:] = 0  # right padding
    attention_mask[2, 3:] = 0
    ids = ids.masked_fill(attention_mask == 0, pad)
    labels = ids.masked_fill(attention_mask == 0, -100)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=attention_mask, labels=labels)
    ours = clm_loss(out.logits, ids, attention_mask)
    torch.testing.assert_close(ours, out.loss, atol=1e-6, rtol=1e-6)
    # the padding matters: scoring the pad targets gives a different number
    assert abs(clm_loss(out.logits, ids).item() - out.loss.item()) > 1e-3


def test_clm_loss_hand_computed():
    # V = 2, uniform logits: every scored target costs ln 2; targets t = 1, 2 of row 0 only
    logits = torch.zeros(2, 3, 2)
    ids = torch.tensor([[0, 1, 0], [1, 1, 1]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    loss = clm_loss(logits, ids, mask)
    torch.testing.assert_close(loss, torch.tensor(math.log(2)), atol=1e-7, rtol=0)
    # a confident correct prediction costs ~0: position 0 predicts ids[0, 1] = 1
    logits = torch.tensor([[[0.0, 30.0], [0.0, 0.0]]])
    torch.testing.assert_close(clm_loss(logits, torch.tensor([[0, 1]])), torch.tensor(0.0), atol=1e-7, rtol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_clm_loss_is_float32_on_logits_device(device, dtype):
    logits = torch.randn(2, 5, 11, generator=torch.Generator().manual_seed(0)).to(device, dtype)
    ids = torch.randint(0, 11, (2, 5), generator=torch.Generator().manual_seed(1)).to(device)
    loss = clm_loss(logits, ids)
    assert loss.dim() == 0 and loss.dtype == torch.float32 and loss.device == logits.device
    expected = F.cross_entropy(logits[:, :-1].float().reshape(-1, 11), ids[:, 1:].reshape(-1))
    torch.testing.assert_close(loss, expected, atol=1e-6, rtol=1e-6)


def test_clm_loss_with_nothing_to_score_is_differentiable_zero():
    logits = torch.randn(2, 1, 7, requires_grad=True)  # T == 1: no next token
    loss = clm_loss(logits, torch.zeros(2, 1, dtype=torch.long))
    assert loss.item() == 0.0
    loss.backward()
    assert torch.equal(logits.grad, torch.zeros_like(logits))

    logits = torch.randn(1, 4, 7, requires_grad=True)
    loss = clm_loss(logits, torch.ones(1, 4, dtype=torch.long), torch.tensor([[1, 0, 0, 0]]))
    assert loss.item() == 0.0 and loss.requires_grad


@pytest.mark.parametrize("device", DEVICES)
def test_mlm_loss_matches_cross_entropy(device):
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(4, 12, 30, generator=g).to(device)
    labels = torch.randint(0, 30, (4, 12), generator=g)
    labels[torch.rand(4, 12, generator=g) > 0.15] = -100
    labels = labels.to(device)
    loss = mlm_loss(logits, labels)
    expected = F.cross_entropy(logits.view(-1, 30), labels.view(-1), ignore_index=-100)
    torch.testing.assert_close(loss, expected, atol=1e-6, rtol=1e-6)
    loss_half = mlm_loss(logits.half(), labels)
    assert loss_half.dtype == torch.float32
    # tolerance: the float16 rounding of the logits (~1e-3 relative) moves the loss by < 1e-2
    torch.testing.assert_close(loss_half, expected, atol=1e-2, rtol=0)


def test_mlm_loss_without_labels_is_differentiable_zero():
    logits = torch.randn(2, 3, 5, requires_grad=True)
    loss = mlm_loss(logits, torch.full((2, 3), -100))
    assert loss.item() == 0.0 and loss.dtype == torch.float32
    loss.backward()
    assert torch.equal(logits.grad, torch.zeros_like(logits))
