"""scoring.py against a transformers causal LM's own loss and torch.topk of torch.softmax."""

import math

import pytest
import torch

from autograder.reference.scoring import sequence_logprob, top_k_next_tokens

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("seed, length", [(0, 2), (1, 9), (2, 30)])
def test_sequence_logprob_matches_llama_loss(tiny_llama, seed, length):
    model = tiny_llama(seed, initializer_range=0.3)
    ids = torch.randint(0, 96, (1, length), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        out = model(input_ids=ids, labels=ids)
    ours = sequence_logprob(out.logits[0], ids[0])
    # the model's loss is the mean over the T - 1 scored tokens, in float32
    expected = -out.loss * (length - 1)
    assert ours.dim() == 0 and ours.dtype == torch.float32
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=1e-5)


def test_sequence_logprob_hand_computed():
    # V = 2, uniform rows: each of the T - 1 scored tokens costs ln 2
    assert math.isclose(sequence_logprob(torch.zeros(4, 2), torch.tensor([0, 1, 1, 0])).item(),
                        -3 * math.log(2), rel_tol=1e-6)
    # row t scores token t + 1: a confident right guess costs ~0, the unshifted reading would cost ~40
    logits = torch.tensor([[0.0, 40.0], [40.0, 0.0], [0.0, 0.0]])
    assert sequence_logprob(logits, torch.tensor([0, 1, 0])).item() == pytest.approx(0.0, abs=1e-6)
    # nothing to score for a single token
    one = sequence_logprob(torch.randn(1, 5), torch.tensor([3]))
    assert one.dim() == 0 and one.item() == 0.0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_sequence_logprob_is_float32_on_logits_device(device, dtype):
    logits = (torch.randn(7, 13, generator=torch.Generator().manual_seed(0)) * 3).to(device, dtype)
    ids = torch.randint(0, 13, (7,), generator=torch.Generator().manual_seed(1)).to(device)
    ours = sequence_logprob(logits, ids)
    assert ours.dtype == torch.float32 and ours.device == logits.device
    expected = torch.log_softmax(logits.float(), -1)[torch.arange(6, device=device), ids[1:]].sum()
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=1e-6)


def test_sequence_logprob_huge_logits_are_finite():
    logits = torch.randn(6, 11, generator=torch.Generator().manual_seed(2)) * 1000
    ids = torch.randint(0, 11, (6,), generator=torch.Generator().manual_seed(3))
    ours = sequence_logprob(logits, ids)
    assert torch.isfinite(ours)
    expected = torch.log_softmax(logits.double(), -1)[torch.arange(5), ids[1:]].sum()
    torch.testing.assert_close(ours.double(), expected, atol=1e-2, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [1, 3, 17])
def test_top_k_next_tokens_matches_topk_of_softmax(device, k):
    logits = (torch.randn(17, generator=torch.Generator().manual_seed(k)) * 2).to(device)
    probs, ids = top_k_next_tokens(logits, k)
    expected = torch.topk(torch.softmax(logits, dim=-1), k)
    assert probs.dtype == torch.float32 and ids.dtype == torch.int64
    assert probs.shape == ids.shape == (k,) and probs.device == ids.device == logits.device
    assert torch.equal(ids, expected.indices)
    torch.testing.assert_close(probs, expected.values, atol=1e-7, rtol=1e-6)
    assert bool((probs[:-1] >= probs[1:]).all())


def test_top_k_next_tokens_half_precision_is_computed_in_float32():
    logits = torch.randn(50, generator=torch.Generator().manual_seed(4)).half()
    probs, ids = top_k_next_tokens(logits, 5)
    expected = torch.topk(torch.softmax(logits.float(), dim=-1), 5)
    assert probs.dtype == torch.float32
    assert torch.equal(ids, expected.indices)
    torch.testing.assert_close(probs, expected.values, atol=1e-7, rtol=1e-6)
    # k = V returns the whole distribution, sorted: it sums to 1
    all_probs, _ = top_k_next_tokens(logits, 50)
    assert all_probs.sum().item() == pytest.approx(1.0, abs=1e-5)
