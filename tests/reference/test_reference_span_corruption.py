"""span_corruption.py on the T5 paper's worked example and on exact counts."""

import pytest
import torch

from autograder.reference.span_corruption import random_spans_noise_mask, span_corrupt

WORDS = "Thank you for inviting me to your party last week".split()
SENTINELS = {100: "<X>", 101: "<Y>", 102: "<Z>"}


def _words(ids):
    return " ".join(SENTINELS.get(i, WORDS[i] if i < len(WORDS) else f"<{i}>") for i in ids.tolist())


def test_worked_example_from_the_paper():
    ids = torch.arange(10)
    noise = torch.tensor([0, 0, 1, 1, 0, 0, 0, 0, 1, 0], dtype=torch.bool)
    inputs, targets = span_corrupt(ids, noise, sentinel_ids=[100, 101, 102])
    assert _words(inputs) == "Thank you <X> me to your party <Y> week"
    assert _words(targets) == "<X> for inviting <Y> last <Z>"
    assert inputs.dtype == ids.dtype and targets.dtype == ids.dtype

    inputs, targets = span_corrupt(ids, noise, sentinel_ids=torch.tensor([100, 101, 102]), eos_id=1)
    assert inputs.tolist() == [0, 1, 100, 4, 5, 6, 7, 101, 9, 1]
    assert targets.tolist() == [100, 2, 3, 101, 8, 102, 1]


def test_spans_at_the_edges():
    ids = torch.tensor([10, 11, 12, 13, 14])
    noise = torch.tensor([1, 0, 0, 1, 1], dtype=torch.bool)  # starts and ends with noise
    inputs, targets = span_corrupt(ids, noise, sentinel_ids=[90, 91, 92])
    assert inputs.tolist() == [90, 11, 12, 91]
    assert targets.tolist() == [90, 10, 91, 13, 14, 92]


def test_too_few_sentinels_raises():
    noise = torch.tensor([0, 1, 0, 1, 0], dtype=torch.bool)  # 2 spans need 3 sentinels
    with pytest.raises(ValueError):
        span_corrupt(torch.arange(5), noise, sentinel_ids=[90, 91])
    span_corrupt(torch.arange(5), noise, sentinel_ids=[90, 91, 92])


def _runs(mask):
    """(number of True runs, starts with False, ends with True)."""
    starts = mask & ~torch.cat([mask.new_zeros(1), mask[:-1]])
    return int(starts.sum()), not bool(mask[0]), bool(mask[-1])


def test_noise_mask_exact_counts_over_many_lengths():
    g = torch.Generator().manual_seed(0)
    for length in range(2, 300):
        # expected counts from the formula, with Python's round (halves to even)
        num_noise = min(max(round(length * 0.15), 1), length - 1)
        num_spans = min(max(round(num_noise / 3.0), 1), num_noise, length - num_noise)
        mask = random_spans_noise_mask(length, generator=g)
        assert mask.shape == (length,) and mask.dtype == torch.bool
        assert int(mask.sum()) == num_noise, length
        assert _runs(mask) == (num_spans, True, True), length


def test_noise_mask_hand_computed_counts():
    # length 100: round(15.0) = 15 noise tokens in round(5.0) = 5 spans
    mask = random_spans_noise_mask(100, generator=torch.Generator().manual_seed(1))
    assert int(mask.sum()) == 15 and _runs(mask)[0] == 5
    # length 10: round(1.5) = 2 noise tokens (half to even), round(2 / 3) = 1 span
    mask = random_spans_noise_mask(10, generator=torch.Generator().manual_seed(1))
    assert int(mask.sum()) == 2 and _runs(mask)[0] == 1
    # length 30: round(4.5) = 4 (half to even), round(4 / 3) = 1 span
    mask = random_spans_noise_mask(30, generator=torch.Generator().manual_seed(1))
    assert int(mask.sum()) == 4 and _runs(mask)[0] == 1
    # other densities: 50 % of 20 with spans of 2 -> 10 noise tokens, 5 spans
    mask = random_spans_noise_mask(20, noise_density=0.5, mean_span_length=2.0)
    assert int(mask.sum()) == 10 and _runs(mask)[0] == 5
    with pytest.raises(ValueError):
        random_spans_noise_mask(1)


def test_noise_mask_is_seeded_and_random():
    a = random_spans_noise_mask(200, generator=torch.Generator().manual_seed(3))
    b = random_spans_noise_mask(200, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    masks = {
        tuple(random_spans_noise_mask(200, generator=torch.Generator().manual_seed(seed)).tolist())
        for seed in range(20)
    }
    assert len(masks) == 20  # positions vary with the seed


def test_segment_lengths_are_uniform_over_compositions():
    # Splitting 5 tokens into 3 positive parts: C(4, 2) = 6 compositions, each with
    # probability 1/6. 3000 draws: each count within 5 binomial standard deviations.
    from autograder.reference.span_corruption import _random_segmentation

    g = torch.Generator().manual_seed(4)
    n = 3000
    counts = {}
    for _ in range(n):
        lengths = _random_segmentation(5, 3, g, "cpu")
        assert int(lengths.sum()) == 5 and (lengths >= 1).all()
        key = tuple(lengths.tolist())
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 6
    p = 1 / 6
    sigma = (n * p * (1 - p)) ** 0.5
    assert all(abs(c - n * p) <= 5 * sigma for c in counts.values())


def test_round_trip_reconstructs_the_original():
    g = torch.Generator().manual_seed(5)
    sentinels = list(range(1000, 1100))
    for length in (5, 17, 64, 257):
        ids = torch.randint(0, 500, (length,), generator=g)
        mask = random_spans_noise_mask(length, generator=g)
        inputs, targets = span_corrupt(ids, mask, sentinel_ids=sentinels)
        num_spans = _runs(mask)[0]
        assert len(inputs) == length - int(mask.sum()) + num_spans
        assert len(targets) == int(mask.sum()) + num_spans + 1
        # put every span back after its sentinel
        pieces, spans = [], {}
        current = None
        for tok in targets.tolist():
            if tok >= 1000:
                current = tok
                spans[current] = []
            else:
                spans[current].append(tok)
        for tok in inputs.tolist():
            pieces.extend(spans[tok] if tok >= 1000 else [tok])
        assert pieces == ids.tolist()


def test_span_corruption_loss_agrees_with_t5s_own_loss():
    """An independent oracle: transformers' T5ForConditionalGeneration, given ``labels``, shifts
    them right itself and returns the mean cross-entropy over the labels that are not -100. The
    reference's per-row sums, over the course loop's own shift (``week6_pretraining.train``), add
    up to the same mean; and a row of padding only costs 0."""
    from transformers import T5Config, T5ForConditionalGeneration

    from autograder.reference.span_corruption import span_corruption_loss
    from week6_pretraining.train import span_logits

    torch.manual_seed(0)
    config = T5Config(vocab_size=50, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2,
                      decoder_start_token_id=0, pad_token_id=0, dropout_rate=0.0)
    model = T5ForConditionalGeneration(config).eval()
    inputs = torch.randint(1, 50, (3, 9))
    targets = torch.randint(1, 50, (3, 6))
    targets[1, 4:] = -100
    targets[2, 2:] = -100
    with torch.no_grad():
        expected = model(input_ids=inputs, labels=targets).loss
        per_row = span_corruption_loss(span_logits(model, inputs, targets), targets)
    assert per_row.shape == (3,) and per_row.dtype == torch.float32
    assert torch.allclose(per_row.sum() / (targets != -100).sum(), expected, atol=1e-6)
    with torch.no_grad():
        logits = model(input_ids=inputs[:1], decoder_input_ids=torch.zeros(1, 6, dtype=torch.long)).logits
    assert span_corruption_loss(logits, torch.full((1, 6), -100)).tolist() == [0.0]
