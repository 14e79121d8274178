"""finetuning.py against transformers' scheduler, hand parameter counts and a hand-written loop."""

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from autograder.reference.finetuning import evaluate, freeze_layers, linear_warmup_decay, train_epoch

# ---------------------------------------------------------------- schedule


@pytest.mark.parametrize("warmup, total", [(0, 10), (3, 10), (10, 10), (5, 20), (1, 1), (4, 0)])
def test_schedule_matches_transformers(warmup, total):
    from transformers import get_linear_schedule_with_warmup

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    hf = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=warmup, num_training_steps=total)
    hf_lambda = hf.lr_lambdas[0]
    for step in range(total + 6):
        ours = linear_warmup_decay(step, warmup_steps=warmup, total_steps=total)
        assert isinstance(ours, float) and 0.0 <= ours <= 1.0
        assert ours == hf_lambda(step), step  # same formula: exactly equal


def test_schedule_hand_computed_and_usable_in_lambdalr():
    values = [linear_warmup_decay(s, warmup_steps=2, total_steps=6) for s in range(8)]
    assert values == [0.0, 0.5, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    assert linear_warmup_decay(0, warmup_steps=0, total_steps=4) == 1.0  # no warm-up: start at full lr

    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: linear_warmup_decay(s, warmup_steps=2, total_steps=6)
    )
    lrs = []
    for _ in range(7):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs == pytest.approx([0.1 * v for v in values[:7]], abs=1e-12)


# ---------------------------------------------------------------- freezing


def _bert_parameter_counts(h=32, i=64, vocab=100, positions=64, types=2, labels=3):
    """Parameter counts of the tiny BERT, by hand from its dimensions."""
    embeddings = (vocab + positions + types) * h + 2 * h  # three tables + LayerNorm
    layer = (
        4 * (h * h + h)  # W_q, W_k, W_v, W_o with biases
        + 2 * h  # attention LayerNorm
        + (h * i + i) + (i * h + h)  # feed-forward up and down
        + 2 * h  # output LayerNorm
    )
    pooler = h * h + h
    classifier = h * labels + labels
    return embeddings, layer, pooler, classifier


@pytest.mark.parametrize("num_layers", [0, 1, 3, 4])
@pytest.mark.parametrize("freeze_embeddings", [True, False])
def test_freeze_layers_trainable_count(tiny_bert_classifier, num_layers, freeze_embeddings):
    model = tiny_bert_classifier(0)
    embeddings, layer, pooler, classifier = _bert_parameter_counts()
    total = embeddings + 4 * layer + pooler + classifier
    assert sum(p.numel() for p in model.parameters()) == total  # the hand count is right

    trainable = freeze_layers(model, num_layers, freeze_embeddings=freeze_embeddings)
    expected = total - num_layers * layer - (embeddings if freeze_embeddings else 0)
    assert trainable == expected
    assert trainable == sum(p.numel() for p in model.parameters() if p.requires_grad)
    layers = model.bert.encoder.layer
    assert all(not p.requires_grad for l in layers[:num_layers] for p in l.parameters())
    assert all(p.requires_grad for l in layers[num_layers:] for p in l.parameters())
    assert all(p.requires_grad for p in model.classifier.parameters())


def test_freeze_layers_is_idempotent_and_works_on_bare_bert(tiny_bert_classifier):
    model = tiny_bert_classifier(0)
    freeze_layers(model, 4)
    embeddings, layer, pooler, classifier = _bert_parameter_counts()
    # a second call with fewer layers unfreezes the others again
    assert freeze_layers(model, 1, freeze_embeddings=False) == 3 * layer + embeddings + pooler + classifier
    assert freeze_layers(model.bert, 2) == 2 * layer + pooler  # a BertModel is its own base_model


@pytest.mark.parametrize("num_layers", [-1, 5])
def test_freeze_layers_rejects_out_of_range(tiny_bert_classifier, num_layers):
    with pytest.raises(ValueError):
        freeze_layers(tiny_bert_classifier(0), num_layers)


# ---------------------------------------------------------------- training and evaluation


def _toy_dataset(seed, n, length=10):
    """Label = which of tokens 5, 6, 7 follows the first token: quickly learnable by a tiny BERT."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (n,), generator=g)
    ids = torch.randint(10, 100, (n, length), generator=g)
    ids[:, 0] = 1  # a [CLS]-like first token
    ids[:, 1] = 5 + labels
    return TensorDataset(ids, torch.ones_like(ids), labels)


def _loader(dataset, seed, batch_size=16):
    def collate(rows):
        ids, mask, labels = map(torch.stack, zip(*rows))
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}

    return DataLoader(
        dataset, batch_size=batch_size, shuffle=True, collate_fn=collate,
        generator=torch.Generator().manual_seed(seed),
    )


def _setup(tiny_bert_classifier, epochs, steps_per_epoch, lr=3e-3):
    from transformers import get_linear_schedule_with_warmup

    model = tiny_bert_classifier(0, num_layers=2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, 2, epochs * steps_per_epoch)
    return model, optimizer, scheduler


@pytest.mark.slow
def test_train_epoch_is_bit_identical_to_a_hand_loop(tiny_bert_classifier):
    data = _toy_dataset(0, n=48)
    epochs = 3

    torch.manual_seed(123)  # dropout draws come from the global generator
    model, optimizer, scheduler = _setup(tiny_bert_classifier, epochs, 3)
    loader = _loader(data, 1)
    ours = [train_epoch(model, loader, optimizer, scheduler, max_grad_norm=0.05) for _ in range(epochs)]

    torch.manual_seed(123)
    hand, hand_optimizer, hand_scheduler = _setup(tiny_bert_classifier, epochs, 3)
    hand_loader = _loader(data, 1)
    expected, clipped = [], 0
    for _ in range(epochs):
        hand.train()
        losses = []
        for batch in hand_loader:
            hand_optimizer.zero_grad()
            loss = hand(**batch).loss
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(hand.parameters(), 0.05)
            clipped += bool(norm > 0.05)
            hand_optimizer.step()
            hand_scheduler.step()
            losses.append(loss.item())
        expected.append(sum(losses) / len(losses))

    assert ours == expected  # exact: same operations in the same order
    for (name, p), q in zip(model.named_parameters(), hand.parameters()):
        assert torch.equal(p, q), name
    assert optimizer.param_groups[0]["lr"] == hand_optimizer.param_groups[0]["lr"]
    assert clipped > 0  # the clipping branch was exercised


@pytest.mark.slow
def test_train_epoch_lowers_the_loss_and_evaluate_counts_accuracy(tiny_bert_classifier):
    torch.manual_seed(0)
    data = _toy_dataset(1, n=64)
    model = tiny_bert_classifier(0, num_layers=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loader = _loader(data, 2)
    losses = [train_epoch(model, loader, optimizer, max_grad_norm=None) for _ in range(8)]
    # starts at chance, ln 3 = 1.10; a clear drop, not noise (it reaches ~0.05)
    assert losses[0] > 1.0 and losses[-1] < 0.5 * losses[0]
    assert model.training

    eval_loader = _loader(data, 3, batch_size=20)  # uneven last batch (64 = 3 * 20 + 4)
    accuracy = evaluate(model, eval_loader)
    assert not model.training
    # oracle: accuracy computed by hand on the whole data set at once
    ids, mask, labels = data.tensors
    with torch.no_grad():
        predictions = model(input_ids=ids, attention_mask=mask).logits.argmax(-1)
    assert accuracy == pytest.approx((predictions == labels).float().mean().item(), abs=1e-12)
    assert isinstance(accuracy, float) and accuracy > 0.9  # chance is 1/3
