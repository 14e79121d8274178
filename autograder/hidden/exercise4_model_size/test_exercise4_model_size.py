"""Hidden tests of exercise4_model_size.ipynb: truncating a BERT encoder, the
6 N D compute estimate, and counting parameters by part.

``truncate_encoder`` is driven inside the sandbox by the ``truncate_encoder_run``
probe on a seeded tiny BERT classifier (``bert_classifier``); the same driver
runs here with the reference on an identical model, and the records are
compared. ``count_encoder_parameters`` is called directly on fixture models,
including a masked LM whose decoder is tied to the word embeddings. The
reference's records depend only on the seeded fixtures, so each is computed once
per grading process.
"""
from __future__ import annotations

import functools

import torch

from autograder.reference import exercises
from autograder.drivers import models, probes  # noqa: F401  (registers the fixtures and probes used below)
from autograder.sandbox.fixtures import build_fixture, fixture
from autograder.suite import drawn_ints, expect, expect_close, expect_equal, expect_number, graded, on_devices, seed_for


def _inputs(drawn: int, batch: int = 3, length: int = 9, vocab: int = 64) -> dict[str, torch.Tensor]:
    """Token ids and mask from the drawn seed ``seed_for(seed)``, the last row padded."""
    g = torch.Generator().manual_seed(drawn)
    ids = torch.randint(1, vocab, (batch, length), generator=g)
    mask = torch.ones_like(ids)
    mask[-1, -3:] = 0
    ids[-1, -3:] = 0
    return {"input_ids": ids, "attention_mask": mask}


@functools.lru_cache(maxsize=None)
def _reference_truncation(device: str, num_layers: int, seed: int, layers: int, drawn: int) -> dict:
    """The record of ``drive_truncate_encoder`` with the reference, once per grading process and drawn seed."""
    model = build_fixture(fixture("bert_classifier", seed=seed, layers=layers, device=device))
    return probes.drive_truncate_encoder(exercises.truncate_encoder, model, num_layers, **_inputs(drawn))


def _truncate(student, device: str, num_layers: int, *, seed: int = 0, layers: int = 4, reference: bool = True):
    """The student's record of ``drive_truncate_encoder`` and (when ``reference``) the reference's."""
    model = fixture("bert_classifier", seed=seed, layers=layers, device=device)
    drawn = seed_for(seed)
    actual = student.probe("truncate_encoder_run", model=model, num_layers=num_layers, **_inputs(drawn))
    return actual, _reference_truncation(device, num_layers, seed, layers, drawn) if reference else None


def _expect_same_model(actual, expected, what: str) -> None:
    expect(actual["same_class"], f"{what} must return a model of the same class as its input "
                                 f"(BertForSequenceClassification), got {actual['class_name']}")
    expect(actual["layers"] == expected["layers"], f"{what}: the new encoder has {actual['layers']} layers, not "
                                                   "num_layers",
           detail=f"{what}: the new encoder has {actual['layers']} layers, expected {expected['layers']}")
    expect(actual["config_layers"] == expected["config_layers"],
           f"{what}: new.config.num_hidden_layers is {actual['config_layers']}, not num_layers",
           detail=f"{what}: new.config.num_hidden_layers is {actual['config_layers']}, expected "
                  f"{expected['config_layers']}")
    missing = sorted(set(expected["parameters"]) - set(actual["parameters"]))
    extra = sorted(set(actual["parameters"]) - set(expected["parameters"]))
    expect(not missing and not extra, f"{what}: the new model's parameters differ by name: missing {missing[:4]}, "
                                      f"unexpected {extra[:4]} (keep layers 0 .. num_layers - 1)")
    changed = [name for name, value in expected["parameters"].items()
               if not torch.equal(actual["parameters"][name].cpu(), value.cpu())]
    expect(not changed, f"{what}: {len(changed)} parameters do not hold the original weights, e.g. {changed[:3]} "
                        "(keep the bottom layers, in order, and every other weight as it was)")
    # tolerance: the same weights and inputs; only the order of float32 operations may differ
    expect_close(actual["logits"], expected["logits"], atol=1e-5, rtol=1e-5,
                 what=f"{what}: the new model's logits")


# =============================================================== truncate_encoder
@graded("test_truncate_encoder")
@on_devices
def test_truncate_encoder_keeps_the_bottom_layers(student, device):
    for num_layers, seed in ((2, 0), (3, 1)):
        actual, expected = _truncate(student, device, num_layers, seed=seed)
        _expect_same_model(actual, expected, f"truncate_encoder(4-layer model, {num_layers})")


@graded("test_truncate_encoder")
def test_truncate_encoder_leaves_the_original_alone(student):
    actual, _ = _truncate(student, "cpu", 2, seed=2, reference=False)
    expect(not actual["returned_original"], "truncate_encoder must return a new model, not the one it was given")
    expect(actual["original_unchanged"], "truncate_encoder changed the original model (its layers, weights or "
                                         "config.num_hidden_layers): work on a copy (copy.deepcopy)")
    expect(not actual["shares_storage"], f"the new model shares parameters with the original "
                                         f"({actual['shares_storage'][:3]} ...): training one would change the other; "
                                         "copy the model (copy.deepcopy) before removing layers")
    expect(not actual["shares_config"], "the new model uses the original's config object; changing "
                                        "num_hidden_layers there changes the original too: copy the model")


@graded("test_truncate_encoder")
def test_truncate_encoder_extremes_and_range(student):
    actual, expected = _truncate(student, "cpu", 4, seed=3)
    _expect_same_model(actual, expected, "truncate_encoder(4-layer model, 4) (a full copy)")
    actual, expected = _truncate(student, "cpu", 1, seed=4)
    _expect_same_model(actual, expected, "truncate_encoder(4-layer model, 1)")
    for num_layers in (0, 5, -1):
        reply = student.probe("raises", name="truncate_encoder",
                              args=[fixture("bert_classifier", seed=0, layers=4), num_layers])
        expect(reply["raised"] == "ValueError",
               f"truncate_encoder(4-layer model, {num_layers}) must raise ValueError, "
               + ("it returned normally" if reply["raised"] is None else f"it raised {reply['raised']}"))


# =============================================================== training_flops
@graded("test_training_flops")
def test_training_flops(student):
    drawn = tuple(drawn_ints(70, 1, 10 ** 12, count=2))
    for n_params, n_tokens in ((1e8, 2e9), (10_765_056, 6400 * 27), (340_000_000, 3_300_000_000), (7, 3), (0, 10), drawn):
        value = student.call(n_params, n_tokens)
        expect(type(value) is float, f"training_flops({n_params}, {n_tokens}) must return a Python float, "
                                     f"got {type(value).__name__}")
        expect_number(value, exercises.training_flops(n_params, n_tokens), rel=1e-9,
                      what=f"training_flops({n_params}, {n_tokens}) (6 N D)")


# =============================================================== count_encoder_parameters
@functools.lru_cache(maxsize=None)
def _reference_counts(reference: tuple) -> dict:
    """``count_encoder_parameters`` of the reference on the fixture ``dict(reference)``, once per grading process."""
    return exercises.count_encoder_parameters(build_fixture(dict(reference)))


def _expect_counts(student, reference: dict, what: str) -> None:
    actual = student.call(reference)
    expected = _reference_counts(tuple(sorted(reference.items())))
    expect(type(actual) is dict, f"{what} must return a dict, got {type(actual).__name__}")
    expect(set(actual) == set(expected), f"{what} must have exactly the keys {sorted(expected)}, got {sorted(actual)}")
    for key in ("embeddings", "encoder", "head", "total"):
        expect(type(actual[key]) is int, f"{what}[{key!r}] must be a Python int, got {type(actual[key]).__name__}")
        expect_equal(actual[key], expected[key], what=f"{what}[{key!r}]")


@graded("test_count_encoder_parameters")
def test_count_encoder_parameters_classifier_and_bare_model(student):
    _expect_counts(student, fixture("bert_classifier", seed=0, layers=2),
                   "count_encoder_parameters(2-layer BertForSequenceClassification)")
    _expect_counts(student, fixture("bert_classifier", seed=1, layers=4, hidden=16, num_labels=5, vocab_size=80),
                   "count_encoder_parameters(4-layer, 16-wide classifier with 5 labels)")
    _expect_counts(student, fixture("bert_bare", seed=2), "count_encoder_parameters(BertModel with its pooler)")
    layers, labels, vocab = drawn_ints(71, 1, 5), drawn_ints(72, 2, 7), drawn_ints(73, 30, 130)
    _expect_counts(student, fixture("bert_classifier", seed=4, layers=layers[0], num_labels=labels[0], vocab_size=vocab[0]),
                   f"count_encoder_parameters({layers[0]}-layer classifier with {labels[0]} labels, "
                   f"vocabulary {vocab[0]})")
    _expect_counts(student, fixture("bert_bare", seed=3, pooler=False),
                   "count_encoder_parameters(BertModel without a pooler: head = 0)")


@graded("test_count_encoder_parameters")
def test_count_encoder_parameters_tied_weights(student):
    for seed, layers in ((0, 2), (1, 3)):
        _expect_counts(student, fixture("bert_mlm", seed=seed, layers=layers),
                       f"count_encoder_parameters({layers}-layer BertForMaskedLM, decoder tied to the word "
                       "embeddings: count the shared matrix once, in 'embeddings')")
