"""Hidden tests of part_b_finetuning.ipynb, B3: the learning-rate schedule, layer freezing,
and the training and evaluation loops."""
from __future__ import annotations

import math

import torch

from autograder.reference import finetuning
from autograder.drivers import models, probes  # noqa: F401  (registers the fixtures and probes used below)
from autograder.sandbox.fixtures import build_fixture, fixture
from autograder.suite import drawn_ints, expect, expect_close, expect_equal, expect_number, graded, on_devices, seed_for

from ._common import _batches, _classifier, _key, _once, _raised


# =============================================================== linear_warmup_decay
def _schedule(student, steps, warmup: int, total: int) -> None:
    for step in steps:
        expected = finetuning.linear_warmup_decay(step, warmup_steps=warmup, total_steps=total)
        expect_number(student.call(step, warmup_steps=warmup, total_steps=total), expected, rel=1e-9, abs_tol=1e-12,
                      what=f"linear_warmup_decay({step}, warmup_steps={warmup}, total_steps={total})")


@graded("test_linear_warmup_decay")
def test_linear_warmup_decay_warm_up(student):
    _schedule(student, range(0, 4), warmup=4, total=20)
    _schedule(student, [0, 1, 49, 99], warmup=100, total=1000)


@graded("test_linear_warmup_decay")
def test_linear_warmup_decay_decay_and_after_the_end(student):
    _schedule(student, [4, 5, 12, 19, 20, 21, 50], warmup=4, total=20)
    _schedule(student, [100, 550, 999, 1000, 1001], warmup=100, total=1000)
    warmup, decay = drawn_ints(66, 1, 200, count=2)  # a drawn schedule, at drawn steps
    _schedule(student, drawn_ints(67, 0, warmup + decay + 20, count=6), warmup=warmup, total=warmup + decay)


@graded("test_linear_warmup_decay")
def test_linear_warmup_decay_edge_cases(student):
    _schedule(student, [0, 1, 5, 10, 11], warmup=0, total=10)  # no warm-up: starts at 1
    _schedule(student, [0, 1, 2, 3, 4], warmup=3, total=3)  # warm-up to the last step: 1 there, then 0
    _schedule(student, [0, 1, 2], warmup=1, total=1)
    value = student.call(7, warmup_steps=4, total_steps=20)
    expect(type(value) is float, f"linear_warmup_decay must return a Python float, got {type(value).__name__}")


# =============================================================== freeze_layers
def _freeze(student, calls, *, seed: int = 0, layers: int = 4):
    reference = _classifier("cpu", seed=seed, layers=layers)
    actual = student.probe("freeze_layers_run", model=reference, calls=calls)
    expected = _once(("freeze_layers", _key(reference), _key(calls)), lambda: probes.drive_freeze_layers(
        finetuning.freeze_layers, _as_built(reference), calls))
    return actual, expected


def _as_built(reference: dict) -> torch.nn.Module:
    """The model of ``reference`` in the state ``build_fixture`` gives it, for the reference's
    ``freeze_layers``, which sets requires_grad and nothing else (its records say so: weights unchanged,
    mode kept). So one model is built per process and its requires_grad flags are put back as they
    were built before each use, instead of building the model again."""
    model, built = _once(("as_built", _key(reference)), lambda: _with_flags(build_fixture(reference)))
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(built[name])
    return model


def _with_flags(model: torch.nn.Module) -> tuple[torch.nn.Module, dict[str, bool]]:
    return model, {name: parameter.requires_grad for name, parameter in model.named_parameters()}


def _expect_same_pattern(actual, expected, what: str) -> None:
    wrong = [name for name, trainable in expected["requires_grad"].items()
             if actual["requires_grad"].get(name) is not trainable]
    listed = ", ".join(f"{name} (should be {'trainable' if expected['requires_grad'][name] else 'frozen'})"
                       for name in wrong[:4])
    # Which parameters are wrong is not said: of a flag, that is the answer.
    expect(not wrong, f"after {what}, {len(wrong)} parameters have the wrong requires_grad",
           detail=f"after {what}, {len(wrong)} parameters have the wrong requires_grad: {listed}"
                  + (" ..." if len(wrong) > 4 else ""))
    expect(actual["weights_unchanged"], f"{what} changed parameter values; it may only set requires_grad")


@graded("test_freeze_layers")
def test_freeze_layers_requires_grad_pattern(student):
    for num_layers in (0, 1, 3, 4):
        calls = [{"num_layers": num_layers}]
        actual, expected = _freeze(student, calls)
        _expect_same_pattern(actual, expected, f"freeze_layers(model, {num_layers}) on a 4-layer BERT classifier "
                                               "(embeddings and layers 0..num_layers-1 frozen, the rest trainable)")


@graded("test_freeze_layers")
def test_freeze_layers_returns_trainable_count(student):
    for call in ({"num_layers": 2, "freeze_embeddings": False}, {"num_layers": 4}, {"num_layers": 0}):
        actual, expected = _freeze(student, [call])
        what = f"freeze_layers(model, {call['num_layers']}" + (
            f", freeze_embeddings={call['freeze_embeddings']})" if "freeze_embeddings" in call else ")")
        _expect_same_pattern(actual, expected, what)
        expect_equal(actual["returned"][0], expected["returned"][0],
                     what=f"the value returned by {what} (the number of trainable parameter elements)")


@graded("test_freeze_layers")
def test_freeze_layers_repeated_calls_bare_model_and_range(student):
    calls = [{"num_layers": 4}, {"num_layers": 1, "freeze_embeddings": False}]
    actual, expected = _freeze(student, calls)
    _expect_same_pattern(actual, expected, "freeze_layers(model, 4) then freeze_layers(model, 1, "
                                           "freeze_embeddings=False) (the second call must unfreeze layers 1..3 "
                                           "and the embeddings again)")
    expect(actual["training"] is False, "freeze_layers changed the model's train/eval mode; leave it as it is")
    actual, expected = _freeze(student, [{"num_layers": 2, "target": "base"}])
    _expect_same_pattern(actual, expected, "freeze_layers(bert_model, 2) on a bare BertModel (its own base_model)")
    expect_equal(actual["returned"][0], expected["returned"][0], what="the value returned for the bare BertModel")
    for num_layers in (-1, 5):
        reply = student.probe("raises", name="freeze_layers",
                              args=[fixture("bert_classifier", seed=0, layers=4), num_layers])
        expect(reply["raised"] == "ValueError",
               f"freeze_layers(model, {num_layers}) on a 4-layer model must raise ValueError, "
               + ("it returned normally" if reply["raised"] is None else f"it raised {reply['raised']}"))


# =============================================================== train_epoch
# The training and evaluation loops run on a one-layer classifier: their contract (the order of the
# steps, the modes, the means, the devices) does not depend on the depth, and a step runs about a
# third fewer operations (forward, backward and update) than with two layers.
LOOP_LAYERS = 1


def _train(student, device: str, batches, *, model_seed: int = 0, dropout: float = 0.0, **kwargs):
    reference = _classifier(device, seed=model_seed, dropout=dropout, layers=LOOP_LAYERS)
    actual = student.probe("train_epoch_run", model=reference, batches=batches, **kwargs)
    expected = _once(("train_epoch", _key(reference), _key(batches), _key(kwargs)), lambda: probes.drive_train_epoch(
        finetuning.train_epoch, build_fixture(reference), batches, **kwargs))
    return actual, expected


def _expect_same_training(actual, expected, what: str) -> None:
    steps, wanted = len(actual["lrs"]), len(expected["lrs"])
    expect(steps == wanted, f"{what}: optimizer.step() was called {steps} times for {wanted} batches; "
                            "step exactly once per batch")
    # tolerance: float32 rounding of a few SGD steps (the same operations give identical values)
    for name, value in expected["parameters"].items():
        expect(name in actual["parameters"], f"{what}: the model lost its parameter {name}")
        expect_close(actual["parameters"][name], value, atol=1e-5, rtol=1e-4,
                     what=f"{what}: parameter {name} after the epoch (zero_grad, forward, backward, "
                          "clip, step, in this order, once per batch)")
    expect_number(actual["loss"], expected["loss"], rel=1e-5,
                  what=f"{what}: the returned loss (the mean of the batch losses loss.item(), each batch "
                       "weighing the same)")


@graded("test_train_epoch")
@on_devices
def test_train_epoch_matches_reference_sgd(student, device):
    batches = _batches(0, [8, 5, 8, 3])
    actual, expected = _train(student, device, batches, lr=0.5, max_grad_norm=None)
    _expect_same_training(actual, expected, "train_epoch with SGD(lr=0.5), max_grad_norm=None")
    batches = _batches(1, [6, 6, 6])
    actual, expected = _train(student, device, batches, model_seed=1, lr=0.2, momentum=0.9, max_grad_norm=None)
    _expect_same_training(actual, expected, "train_epoch with SGD(lr=0.2, momentum=0.9), max_grad_norm=None")


# The learning rate of the clipping test: with SGD(lr=1.0) the unclipped norms of the one-layer
# classifier grow past 1.3 (the default limit's threshold in _batches_clipped_at) within the 4 steps
# in about 3 draws of batches in 5 (measured: 75 of 120; in 18 of 120 with lr=0.5), so the search
# below ends after one or two draws, and all 40 draws miss with a probability below 1e-12.
CLIP_LR = 1.0


def _batches_clipped_at(limit: float, seed: int, sizes: list[int], device: str, **kwargs):
    """The first batches of the seeds ``seed``, ``seed + 100``, ... on which the reference's
    gradient norm, unclipped, exceeds ``limit`` by 30 % at some step: clipping at ``limit``
    then changes the training far beyond the tolerance (see CLIP_LR for how often a draw qualifies)."""
    reference = _classifier(device, seed=0, layers=LOOP_LAYERS)
    unclipped_kwargs = {**kwargs, "max_grad_norm": None}
    for attempt in range(40):
        batches = _batches(seed + 100 * attempt, sizes)
        unclipped = _once(("train_epoch", _key(reference), _key(batches), _key(unclipped_kwargs)),
                          lambda: probes.drive_train_epoch(finetuning.train_epoch, build_fixture(reference),
                                                           batches, **unclipped_kwargs))
        if max(unclipped["grad_norms"], default=0.0) > 1.3 * limit:
            return batches
    raise RuntimeError(f"no batches with a gradient norm above {1.3 * limit} in 40 draws")


@graded("test_train_epoch")
@on_devices
def test_train_epoch_clips_the_gradient_norm(student, device):
    for kwargs, limit in [(dict(max_grad_norm=0.3), 0.3), ({}, 1.0)]:
        batches = _batches_clipped_at(limit, 2, [8, 5, 8, 3], device, lr=CLIP_LR)
        actual, expected = _train(student, device, batches, lr=CLIP_LR, **kwargs)
        what = f"train_epoch with max_grad_norm={limit}" + ("" if kwargs else " (the default)")
        norms = actual["grad_norms"]
        # tolerance: clip_grad_norm_ scales by max_norm / (norm + 1e-6), float32 rounding
        expect(all(norm <= limit * (1 + 1e-4) for norm in norms),
               f"{what}: the global gradient norms at optimizer.step() were "
               f"{[round(n, 4) for n in norms]}; clip them to at most {limit} "
               "(torch.nn.utils.clip_grad_norm_ over all parameters, after backward, before step)")
        _expect_same_training(actual, expected, what)


@graded("test_train_epoch")
@on_devices
def test_train_epoch_steps_the_scheduler_once_per_batch(student, device):
    batches = _batches(3, [4, 4, 4, 4, 4])
    actual, expected = _train(student, device, batches, lr=0.4, warmup_steps=2, total_steps=6)
    lrs, wanted = actual["lrs"], expected["lrs"]
    expect(len(lrs) == len(wanted) and all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) for a, b in zip(lrs, wanted)),
           f"the learning rates at the optimizer steps were {[round(x, 4) for x in lrs]}, not the schedule's: "
           "call scheduler.step() once per batch, after optimizer.step()",
           detail=f"the learning rates at the optimizer steps were {[round(x, 4) for x in lrs]}, expected "
                  f"{[round(x, 4) for x in wanted]}")
    _expect_same_training(actual, expected, "train_epoch with a warm-up/decay scheduler")


@graded("test_train_epoch")
@on_devices
def test_train_epoch_train_mode_mean_loss_and_empty_loader(student, device):
    batches = _batches(4, [9, 2, 5])  # unequal sizes: the mean is over batches, not examples
    actual, expected = _train(student, device, batches, lr=0.3, start_mode="eval")
    expect(type(actual["loss"]) is float, f"train_epoch must return a Python float (loss.item()), "
                                          f"got {type(actual['loss']).__name__}")
    expect(actual["training"] is True, "train_epoch left the model in eval mode: call model.train() first "
                                       "(dropout must be on while training)")
    # tolerance: float32 rounding
    expect_number(actual["loss"], expected["loss"], rel=1e-5,
                  what="the returned loss (the mean of the batch losses, each batch weighing the same)")
    reply = student.probe("train_epoch_run", model=_classifier(device, seed=0, layers=LOOP_LAYERS), batches=[],
                          catch=True)
    expect(_raised(reply) == "ValueError",
           "train_epoch with a loader that yields no batch must raise ValueError, "
           + (f"it raised {_raised(reply)}" if _raised(reply) else "it returned normally"))


# =============================================================== evaluate
def _labelled_for_accuracy(model, batches, correct_per_batch: list[int]):
    """Relabel ``batches`` so that exactly the first k examples of each batch are predicted right
    by ``model`` (in the mode it is in)."""
    out = []
    with torch.no_grad():
        for batch, k in zip(batches, correct_per_batch):
            predictions = model(input_ids=batch["input_ids"].to(model.device),
                                attention_mask=batch["attention_mask"].to(model.device)).logits.argmax(-1).cpu()
            labels = (predictions + 1) % 3
            labels[:k] = predictions[:k]
            out.append({**batch, "labels": labels})
    return out


@graded("test_evaluate")
@on_devices
def test_evaluate_counts_every_example(student, device):
    reference = _classifier(device, seed=3, layers=LOOP_LAYERS)

    def labelled_and_evaluated():
        model = build_fixture(reference)
        # 2/7, 2/2 and 1/5 right: 5/14 = 0.357 per example (0.495 as a mean of batch accuracies)
        batches = _labelled_for_accuracy(model, _batches(5, [7, 2, 5]), [2, 2, 1])
        return batches, probes.drive_evaluate(finetuning.evaluate, model, batches, start_mode="eval")

    batches, expected = _once(("evaluate", _key(reference), seed_for(5)), labelled_and_evaluated)
    actual = student.probe("evaluate_run", model=reference, batches=batches, start_mode="eval")
    expect(type(actual["accuracy"]) is float,
           f"evaluate must return a Python float, got {type(actual['accuracy']).__name__}")
    expect_number(actual["accuracy"], expected["accuracy"], rel=1e-9,
                  what="evaluate's accuracy (correct predictions / examples, over all batches)")
    expect(actual["labels_passed"] is False,
           "evaluate gave the labels to the model: call it on the inputs without \"labels\" "
           "(take the labels out of the batch before model(**inputs))")


@graded("test_evaluate")
@on_devices
def test_evaluate_uses_eval_mode(student, device):
    reference = _classifier(device, seed=4, dropout=0.3, layers=LOOP_LAYERS)
    batches = _once(("eval_mode_labels", _key(reference), seed_for(6)), lambda: _labelled_for_accuracy(  # all right in eval mode
        build_fixture(reference).eval(), _batches(6, [8, 8, 8]), [8, 8, 8]))
    actual = student.probe("evaluate_run", model=reference, batches=batches, start_mode="train")
    expect(actual["training"] is False, "evaluate must put the model in eval mode (model.eval()) and leave it there")
    expect_number(actual["accuracy"], 1.0, rel=1e-9,
                  what="evaluate's accuracy on examples labelled with the eval-mode predictions "
                       "(dropout must be off: call model.eval())")
    reply = student.probe("evaluate_run", model=reference, batches=[], catch=True)
    expect(_raised(reply) == "ValueError",
           "evaluate with a loader that yields no example must raise ValueError, "
           + (f"it raised {_raised(reply)}" if _raised(reply) else "it returned normally"))
