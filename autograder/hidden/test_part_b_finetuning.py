"""Hidden tests of part_b_finetuning.ipynb: the learning-rate schedule, layer
freezing, the training and evaluation loops, LoRA, bottleneck adapters, the
trainable-parameter counts of LoRA, adapters, prompt tuning and BitFit, and the
cost arithmetic.

Stateful code (loops over a model, modules) is driven inside the sandbox by the
probes of ``autograder.drivers.probes``; the very same driver runs here with
the reference implementation on an identical, seeded model, and the two records
are compared. A record of the reference depends only on those seeded inputs, so
it is computed once per grading process (``_once``). The answer constants of this notebook (architecture table, model
for task, fine-tuning configuration, generation settings) are graded elsewhere.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from autograder.reference import adapters, answers, arithmetic, finetuning, lora
from autograder.drivers import models, probes  # noqa: F401  (registers the fixtures and probes used below)
from autograder.sandbox.errors import StudentError
from autograder.sandbox.fixtures import build_fixture, fixture
from autograder.suite import drawn_ints, expect, expect_close, expect_equal, expect_number, generator, graded, on_devices, seed_for


def _gen(seed: int) -> torch.Generator:
    return generator(seed)


def _expect_dict_close(actual, expected: dict, *, rel: float, what: str, public: bool = False) -> None:
    expect(type(actual) is dict, f"{what} must return a dict, got {type(actual).__name__}")
    expect(set(actual) == set(expected), f"{what} must have exactly the keys {sorted(expected)}, got {sorted(actual)}")
    for key, value in expected.items():
        expect_number(actual[key], value, rel=rel, what=f"{what}[{key!r}]", public=public)


def _batches(seed: int, sizes: list[int], *, length: int = 10, vocab: int = 64) -> list[dict[str, torch.Tensor]]:
    """A loader as a list of batches. Label = which of the tokens 5, 6, 7 occurs in the
    row (learnable by a tiny BERT); token 1 plays [CLS]; the last row of every batch
    has two padding positions."""
    g = _gen(seed)
    batches = []
    for size in sizes:
        labels = torch.randint(0, 3, (size,), generator=g)
        ids = torch.randint(10, vocab, (size, length), generator=g)
        ids[:, 0] = 1
        position = torch.randint(1, length - 2, (size,), generator=g)
        ids[torch.arange(size), position] = 5 + labels
        mask = torch.ones_like(ids)
        mask[-1, -2:] = 0
        ids[-1, -2:] = 0
        batches.append({"input_ids": ids, "attention_mask": mask, "labels": labels})
    return batches


def _classifier(device: str, **params) -> dict:
    """The fixture reference of a seeded tiny BERT classifier: the student gets it, the reference
    runs on the same model built here (``build_fixture``)."""
    return fixture("bert_classifier", device=device, **params)


_REFERENCE: dict[tuple, Any] = {}


def _once(key: tuple, compute: Callable[[], Any]) -> Any:
    """``compute()``, a record of the reference, computed once per grading process for ``key``: the
    reference is deterministic in the inputs the key names (see ``_key``), and callers only read it."""
    if key not in _REFERENCE:
        _REFERENCE[key] = compute()
    return _REFERENCE[key]


def _key(value: Any) -> Any:
    """``value`` (fixture references, batches, keywords: tensors in lists and dicts) as a hashable key
    that tells different inputs apart."""
    if type(value) is torch.Tensor:
        return str(value.dtype), str(value.device), tuple(value.shape), tuple(value.flatten().tolist())
    if type(value) is dict:
        return tuple(sorted((name, _key(item)) for name, item in value.items()))
    if type(value) in (list, tuple):
        return tuple(_key(item) for item in value)
    return value


def _raised(reply) -> str | None:
    return reply.get("raised") if type(reply) is dict else None


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


# =============================================================== LoRALinear
def _lora(student, device: str, *, reference: bool = True, **params):
    """The student's record and (when ``reference``) the reference's, of ``drive_lora_layer``."""
    actual = student.probe("lora_layer", class_name="LoRALinear", device=device, **params)
    expected = probes.drive_lora_layer(lora.LoRALinear, device=device, **params) if reference else None
    return actual, expected


def _lora_x(*shape: int, seed: int, device: str) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed)).to(device)


@graded("test_lora_linear")
@on_devices
def test_lora_linear_starts_as_the_base_layer(student, device):
    for seed, (d_in, d_out, r, alpha, x_shape) in enumerate([(12, 7, 4, 8, (3, 12)), (5, 9, 1, 1, (2, 4, 5))]):
        x = _lora_x(*x_shape, seed=seed, device=device)
        actual, expected = _lora(student, device, in_features=d_in, out_features=d_out, r=r, alpha=alpha, x=x, seed=seed)
        # tolerance: float32 rounding (B = 0 makes the update exactly zero)
        expect_close(actual["initial_output"], expected["base_output"], atol=1e-6, rtol=1e-6,
                     what=f"LoRALinear(base, r={r}, alpha={alpha})(x) right after construction (lora_B starts "
                          "at zero, so the layer must compute exactly base(x))")
        expect(actual["keeps_base"], "LoRALinear must keep the layer it wraps as self.base (not a copy)")
        expect(actual["base_unchanged"], "LoRALinear changed the weights of the base layer; keep them as they are")


@graded("test_lora_linear")
@on_devices
def test_lora_linear_parameters_and_freezing(student, device):
    d_in, d_out, r = 10, 6, 3
    x = _lora_x(2, d_in, seed=5, device=device)
    actual, _ = _lora(student, device, in_features=d_in, out_features=d_out, r=r, alpha=6, x=x, reference=False)
    initial, requires_grad = actual["initial"], actual["requires_grad"]
    for name, shape in (("lora_A", (r, d_in)), ("lora_B", (d_out, r))):
        expect(name in initial, f"LoRALinear must have an nn.Parameter named {name}; its parameters are {sorted(initial)}")
        expect(tuple(initial[name].shape) == shape,
               f"{name} has shape {list(initial[name].shape)}; it must be {list(shape)} for in_features={d_in}, "
               f"out_features={d_out}, r={r}")
        expect(requires_grad[name], f"{name} must be trainable (requires_grad=True)")
    expect(bool((initial["lora_B"] == 0).all()), "lora_B must start at zero, so that the layer starts as base(x)")
    frozen = [name for name in initial if name not in ("lora_A", "lora_B") and requires_grad[name]]
    expect(not frozen, f"the base layer must be frozen (requires_grad=False); trainable: {frozen}")
    expect_equal(actual["trainable"], lora.lora_parameter_count(d_in, d_out, r),
                 what="the number of trainable parameter elements of LoRALinear (r * (in_features + out_features))")
    try:
        student.probe("lora_layer", class_name="LoRALinear", device=device, in_features=d_in, out_features=d_out,
                      r=0, alpha=6, x=x)
        raised = None
    except StudentError as err:
        raised = err.type_name
    expect(raised == "ValueError", "LoRALinear(base, r=0, alpha=6) must raise ValueError (the rank r must be >= 1), "
           + ("it was built" if raised is None else f"it raised {raised}"))


@graded("test_lora_linear")
@on_devices
def test_lora_linear_initialises_A_kaiming_uniform(student, device):
    d_in, d_out, r = 256, 8, 16
    x = _lora_x(1, d_in, seed=6, device=device)
    actual, _ = _lora(student, device, in_features=d_in, out_features=d_out, r=r, alpha=16, x=x, reference=False)
    a = actual["initial"].get("lora_A")
    expect(a is not None and tuple(a.shape) == (r, d_in), "LoRALinear must have lora_A of shape [r, in_features]")
    a = a.double().flatten().cpu()
    bound = 1 / math.sqrt(d_in)
    expect(bool((a.abs() <= bound * (1 + 1e-5)).all()),
           f"lora_A has entries up to {float(a.abs().max()):.4f} in size; Kaiming-uniform with a = sqrt(5) draws "
           f"from [-1/sqrt(in_features), 1/sqrt(in_features)] = ±{bound:.4f}")
    n = a.numel()
    # uniform on [-b, b]: mean 0 (sd b / sqrt(3n)), mean square b^2 / 3 (sd b^2 sqrt(4 / 45 / n)); 5-sigma bands
    mean_square, mean = float((a ** 2).mean()), float(a.mean())
    expect(abs(mean - 0.0) <= 5 * bound / math.sqrt(3 * n),
           f"the entries of lora_A average {mean:.5f}; a uniform draw on ±{bound:.4f} averages 0")
    expect(abs(mean_square - bound ** 2 / 3) <= 5 * bound ** 2 * math.sqrt(4 / 45 / n),
           f"the mean square of lora_A is {mean_square:.3g}; it is about {bound ** 2 / 3:.3g} for a uniform draw "
           f"on ±{bound:.4f} (nn.init.kaiming_uniform_(A, a=math.sqrt(5)); A must be random, not zero)")


@graded("test_lora_linear")
@on_devices
def test_lora_linear_forward_with_trained_weights(student, device):
    for seed, (d_in, d_out, r, alpha, x_shape) in enumerate([(12, 7, 4, 8, (3, 12)), (6, 6, 2, 2, (2, 3, 6)),
                                                             (9, 4, 8, 4, (1, 9))], start=10):
        g = _gen(seed)
        weights = dict(lora_A=torch.randn(r, d_in, generator=g).to(device),
                       lora_B=torch.randn(d_out, r, generator=g).to(device))
        x = _lora_x(*x_shape, seed=seed, device=device)
        grad_output = torch.ones(*x_shape[:-1], d_out, device=device)
        actual, expected = _lora(student, device, in_features=d_in, out_features=d_out, r=r, alpha=alpha, x=x,
                                 seed=seed, grad_output=grad_output, **weights)
        # tolerance: float32 rounding of three small matrix products
        expect_close(actual["output"], expected["output"], atol=1e-5, rtol=1e-5,
                     what=f"LoRALinear(r={r}, alpha={alpha}) with non-zero lora_A, lora_B "
                          "(base(x) + (x A^T B^T) * alpha / r)")


@graded("test_lora_linear")
@on_devices
def test_lora_linear_gradients_reach_only_A_and_B(student, device):
    d_in, d_out, r, alpha = 8, 5, 2, 6
    g = _gen(20)
    weights = dict(lora_A=torch.randn(r, d_in, generator=g).to(device),
                   lora_B=torch.randn(d_out, r, generator=g).to(device))
    x = _lora_x(4, d_in, seed=21, device=device)
    grad_output = torch.randn(4, d_out, generator=g).to(device)
    actual, expected = _lora(student, device, in_features=d_in, out_features=d_out, r=r, alpha=alpha, x=x,
                             grad_output=grad_output, **weights)
    for name in ("lora_A", "lora_B"):
        grad = actual["grads"].get(name)
        expect(grad is not None, f"{name} received no gradient: it must take part in forward()")
        # tolerance: float32 rounding
        expect_close(grad, expected["grads"][name], atol=1e-5, rtol=1e-5, what=f"the gradient of {name}")
    leaked = [name for name, grad in actual["grads"].items() if name not in ("lora_A", "lora_B") and grad is not None]
    expect(not leaked, f"the frozen base received gradients ({leaked}); set requires_grad=False on its parameters")


# =============================================================== lora_parameter_count
@graded("test_lora_parameter_count")
def test_lora_parameter_count(student):
    for d_in, d_out, r in [(768, 768, 16), (768, 3072, 8), (5, 3, 1), (4096, 1024, 64), drawn_ints(68, 1, 5000, 3)]:
        expect_equal(student.call(d_in, d_out, r), lora.lora_parameter_count(d_in, d_out, r),
                     what=f"lora_parameter_count({d_in}, {d_out}, {r})")


# =============================================================== apply_lora
def _lora_inputs(seed: int) -> dict[str, torch.Tensor]:
    """The inputs on which ``drive_apply_lora`` runs the classifier of ``seed``."""
    g = _gen(seed)
    return dict(input_ids=torch.randint(1, 64, (3, 8), generator=g), attention_mask=torch.ones(3, 8, dtype=torch.long))


def _apply_lora(student, device: str, kwargs: dict, *, seed: int):
    """The student's record of ``drive_apply_lora`` on a seeded classifier, and the reference's."""
    reference, inputs = _classifier(device, seed=seed), _lora_inputs(seed)
    actual = student.probe("apply_lora_run", model=reference, kwargs=kwargs, **inputs)
    expected = _once(("apply_lora", _key(reference), _key(kwargs), _key(inputs)), lambda: probes.drive_apply_lora(
        lora.apply_lora, build_fixture(reference), kwargs=kwargs, **inputs))
    return actual, expected


def _expect_same_adaptation(actual, expected, what: str) -> None:
    expect(actual["returned_model"], f"{what} must return the model it was given (modified in place)")
    expect(actual["lora_modules"] == expected["lora_modules"],
           f"{what}: the layers with a LoRA adapter are {actual['lora_modules']}, not every nn.Linear whose name "
           "ends in one of target_names",
           detail=f"{what}: the layers with a LoRA adapter are {actual['lora_modules']}, expected "
                  f"{expected['lora_modules']}")
    expect(actual["lora_shapes"] == expected["lora_shapes"],
           f"{what}: lora_A/lora_B have the wrong shapes {actual['lora_shapes']} ([r, in_features] and "
           "[out_features, r] of the layer each wraps)",
           detail=f"{what}: lora_A/lora_B have the wrong shapes {actual['lora_shapes']}, expected "
                  f"{expected['lora_shapes']}")
    classes = sorted(set(actual["class_names"].values()))
    expect(classes in ([], ["LoRALinear"]), f"{what}: the adapted layers must be your LoRALinear, got {classes}")
    expect(actual["trainable_outside_lora"] == expected["trainable_outside_lora"],
           f"{what}: apart from lora_A/lora_B, the trainable parameters are {actual['trainable_outside_lora']}, "
           "not those named in trainable_names (freeze everything, then unfreeze trainable_names)",
           detail=f"{what}: apart from lora_A/lora_B, the trainable parameters are "
                  f"{actual['trainable_outside_lora']}, expected {expected['trainable_outside_lora']}")
    expect(actual["lora_trainable"] and actual["frozen_inside_lora"] == expected["frozen_inside_lora"],
           f"{what}: every lora_A/lora_B must be trainable and the wrapped base layers frozen")
    expect_equal(actual["trainable"], expected["trainable"], what=f"{what}: the number of trainable elements")
    # tolerance: float32 rounding; right after apply_lora the model computes what it computed before
    expect_close(actual["logits_applied"], actual["logits_before"], atol=1e-6, rtol=1e-6,
                 what=f"{what}: the logits right after adding the adapters (lora_B = 0: nothing changes)")
    expect_close(actual["logits_adapted"], expected["logits_adapted"], atol=1e-5, rtol=1e-5,
                 what=f"{what}: the logits once every lora_A/lora_B holds non-zero values (the adapters must be "
                      "used in the forward pass, scaled by alpha / r)")


@graded("test_apply_lora")
@on_devices
def test_apply_lora_adapts_query_and_value(student, device):
    actual, expected = _apply_lora(student, device, {}, seed=0)
    _expect_same_adaptation(actual, expected, "apply_lora(model) with its defaults (query and value, r=8, alpha=16)")


@graded("test_apply_lora")
@on_devices
def test_apply_lora_other_targets_and_no_match(student, device):
    kwargs = dict(target_names=["key", "dense"], r=2, alpha=4.0, trainable_names=["classifier"])
    actual, expected = _apply_lora(student, device, kwargs, seed=1)
    _expect_same_adaptation(actual, expected, "apply_lora(model, target_names=['key', 'dense'], r=2, alpha=4)")
    reply = student.probe("apply_lora_run", model=_classifier(device, seed=2),
                          kwargs=dict(target_names=["no_such_layer"]), catch=True, **_lora_inputs(2))
    expect(_raised(reply) == "ValueError",
           "apply_lora must raise ValueError when no nn.Linear matches target_names, "
           + (f"it raised {_raised(reply)}" if _raised(reply) else "it returned normally"))


# =============================================================== BottleneckAdapter
def _adapter(student, device: str, *, hidden_size: int, bottleneck: int, x: torch.Tensor, reference: bool = True,
             **params):
    """The student's record and (when ``reference``) the reference's, of ``drive_bottleneck_adapter``."""
    actual = student.probe("bottleneck_adapter_run", class_name="BottleneckAdapter", device=device,
                           hidden_size=hidden_size, bottleneck=bottleneck, x=x, **params)
    expected = probes.drive_bottleneck_adapter(adapters.BottleneckAdapter, device=device, hidden_size=hidden_size,
                                               bottleneck=bottleneck, x=x, **params) if reference else None
    return actual, expected


def _adapter_cases(number: int) -> list[tuple[int, int, tuple[int, ...], torch.dtype]]:
    """(hidden_size, bottleneck, shape of x, dtype): two fixed cases and one drawn, whose number of
    leading dimensions (1 to 3) and sizes are drawn too."""
    hidden, bottleneck, leading, *sizes = drawn_ints(number, 1, 24, count=6)
    drawn_shape = tuple(1 + size % 5 for size in sizes[: 1 + leading % 3]) + (hidden + 1,)
    return [(12, 3, (4, 12), torch.float32), (8, 5, (2, 3, 8), torch.float64),
            (hidden + 1, 1 + bottleneck % 8, drawn_shape, torch.float32)]


@graded("test_bottleneck_adapter")
def test_bottleneck_adapter_parameters_and_initialisation(student):
    d, m = 256, 32
    actual, _ = _adapter(student, "cpu", hidden_size=d, bottleneck=m, x=torch.randn(2, d, generator=_gen(70)),
                         reference=False)
    for name, (d_in, d_out) in (("down", (d, m)), ("up", (m, d))):
        layer = actual["linears"][name]
        expect(layer is not None, f"BottleneckAdapter({d}, {m}) must have an nn.Linear called {name}")
        expect(layer[1:] == [d_in, d_out, True],
               f"BottleneckAdapter({d}, {m}).{name} is an nn.Linear({layer[1]}, {layer[2]}, bias={layer[3]}), "
               f"expected nn.Linear({d_in}, {d_out}) with a bias")
    expect(not actual["extra_parameters"], f"BottleneckAdapter has parameters besides down's and up's weight and "
                                           f"bias: {actual['extra_parameters']}")
    expect(not actual["frozen"], f"every parameter of the adapter must be trainable; frozen: {actual['frozen']}")
    expect_equal(actual["trainable"], 2 * d * m + d + m,
                 what=f"the number of trainable numbers of BottleneckAdapter({d}, {m}) (2 d m + d + m)")
    bound = 1 / math.sqrt(d)
    for part in ("down.weight", "down.bias"):
        expect(actual["initial"][part] is not None, f"BottleneckAdapter has no {part}")
        values = actual["initial"][part].flatten()
        expect(bool((values.abs() <= bound * (1 + 1e-5)).all()),
               f"{part} has entries up to {float(values.abs().max()):.4f} in size; nn.Linear's own initialisation "
               f"draws from [-1/sqrt(hidden_size), 1/sqrt(hidden_size)] = ±{bound:.4f}")
    weight = actual["initial"]["down.weight"].flatten()
    n = weight.numel()
    # uniform on [-b, b]: mean 0 (sd b / sqrt(3n)), mean square b^2 / 3 (sd b^2 sqrt(4 / 45 / n)); 5-sigma bands
    mean, mean_square = float(weight.mean()), float((weight ** 2).mean())
    expect(abs(mean) <= 5 * bound / math.sqrt(3 * n) and
           abs(mean_square - bound ** 2 / 3) <= 5 * bound ** 2 * math.sqrt(4 / 45 / n),
           f"down.weight has mean {mean:.5f} and mean square {mean_square:.3g}; nn.Linear's own initialisation "
           f"(uniform on ±{bound:.4f}) gives 0 and {bound ** 2 / 3:.3g}: keep it, down must be random")
    reply = student.probe("raises", name="BottleneckAdapter", args=[8, 0])
    expect(reply["raised"] == "ValueError",
           "BottleneckAdapter(8, 0) must raise ValueError (the bottleneck must be at least 1), "
           + ("it was built" if reply["raised"] is None else f"it raised {reply['raised']}"))


@graded("test_bottleneck_adapter")
@on_devices
def test_bottleneck_adapter_starts_as_the_identity(student, device):
    for index, (d, m, shape, dtype) in enumerate(_adapter_cases(71)):
        x = torch.randn(shape, generator=_gen(72 + index), dtype=dtype).to(device)
        actual, _ = _adapter(student, device, hidden_size=d, bottleneck=m, x=x, reference=False)
        # tolerance: up is zero, so the update is exactly zero
        expect_close(actual["initial_output"], x, atol=1e-7, rtol=1e-7,
                     what=f"BottleneckAdapter({d}, {m}) on x of shape {list(shape)}, {dtype}, right after "
                          "construction (up starts at zero: the output must be x itself, with x's shape, dtype "
                          "and device)")
        up = [actual["initial"][part] for part in ("up.weight", "up.bias")]
        expect(all(p is not None and not p.any() for p in up), "up.weight and up.bias must start at zero")


@graded("test_bottleneck_adapter")
@on_devices
def test_bottleneck_adapter_forward_with_trained_weights(student, device):
    for index, (d, m, shape, dtype) in enumerate(_adapter_cases(75)):
        g = _gen(76 + index)
        weights = {"down.weight": torch.randn(m, d, generator=g, dtype=dtype) * 2 / math.sqrt(d),
                   "down.bias": torch.randn(m, generator=g, dtype=dtype),
                   "up.weight": torch.randn(d, m, generator=g, dtype=dtype) / math.sqrt(m),
                   "up.bias": torch.randn(d, generator=g, dtype=dtype)}
        weights = {part: value.to(device) for part, value in weights.items()}
        x = torch.randn(shape, generator=g, dtype=dtype).to(device)
        grad_output = torch.randn(shape, generator=g, dtype=dtype).to(device)
        actual, expected = _adapter(student, device, hidden_size=d, bottleneck=m, x=x, weights=weights,
                                    grad_output=grad_output)
        what = f"BottleneckAdapter({d}, {m}) with non-zero weights on x of shape {list(shape)}, {dtype}"
        # tolerance: rounding of two small matrix products and the GELU (float32: 1e-5)
        tolerance = 1e-5 if dtype == torch.float32 else 1e-10
        expect_close(actual["output"], expected["output"], atol=tolerance, rtol=tolerance,
                     what=f"{what} (x + up(gelu(down(x))), the exact GELU)")
        expect(actual["x_unchanged"], f"{what} modified its input x; return a new tensor")
        expect(actual["backward_error"] is None,
               f"back-propagating through {what} failed: {actual['backward_error']}")
        for part in probes.ADAPTER_PARTS:
            grad = actual["grads"].get(part)
            expect(grad is not None, f"{part} received no gradient: it must take part in forward()")
            expect_close(grad, expected["grads"][part], atol=tolerance, rtol=tolerance,
                         what=f"the gradient of {part} ({what})")


# =============================================================== peft_parameter_counts
PEFT_KEYS = ("full", "lora", "adapters", "prompt_tuning", "bitfit")


def _sized_classifier(number: int) -> dict:
    """A fixture reference of a BERT classifier whose sizes are drawn: 1-4 layers, 1-4 heads of
    2-12 dimensions, a feed-forward width of 4-80, 2-6 labels, 20-80 word pieces, 1-3 token types."""
    layers, heads, head_dim, intermediate, labels, vocab, types = drawn_ints(number, 0, 10 ** 6, count=7)
    heads = 1 + heads % 4
    return fixture("bert_classifier_sized", seed=number, layers=1 + layers % 4, heads=heads,
                   hidden=heads * (2 + head_dim % 11), intermediate=4 + intermediate % 77, num_labels=2 + labels % 5,
                   vocab_size=20 + vocab % 61, type_vocab_size=1 + types % 3)


def _sizes(reference: dict) -> str:
    return (f"a BertForSequenceClassification with {reference.get('layers', 2)} layers, hidden size "
            f"{reference.get('hidden', 32)}, feed-forward size {reference.get('intermediate', 48)} and "
            f"{reference.get('num_labels', 3)} labels")


def _peft_cases(number: int) -> list[tuple[dict, dict, list[str]]]:
    """(fixture reference, keywords, parameter-name prefixes frozen before the call): a fixed model with
    its embeddings frozen, and a drawn one with drawn keywords."""
    r, m, length = drawn_ints(number + 1, 1, 33, count=3)
    return [(fixture("bert_classifier_sized", seed=0, layers=3, hidden=24, heads=4, intermediate=40, num_labels=3),
             dict(lora_r=4, adapter_bottleneck=6, prompt_length=10), ["bert.embeddings"]),
            (_sized_classifier(number), dict(lora_r=r, adapter_bottleneck=m, prompt_length=length), [])]


def _peft_counts(student, reference: dict, kwargs: dict, frozen: list[str]):
    """The student's record of ``drive_peft_parameter_counts`` and the reference's counts."""
    actual = student.probe("peft_counts_run", model=reference, kwargs=kwargs, frozen=frozen)
    expected = _once(("peft_parameter_counts", _key(reference), _key(kwargs)),
                     lambda: probes.drive_peft_parameter_counts(adapters.peft_parameter_counts, build_fixture(reference),
                                                                kwargs=kwargs))
    return actual["counts"], expected["counts"], actual


def _expect_counts(counts, expected: dict, keys, what: str) -> None:
    expect(type(counts) is dict, f"{what} must return a dict, got {type(counts).__name__}")
    for key in keys:
        expect(key in counts, f"the result of {what} has no key {key!r}")
        expect(type(counts[key]) is int,
               f"the {key!r} count of {what} must be a Python int, got {type(counts[key]).__name__}")
        expect_equal(counts[key], expected[key], what=f"the {key!r} count of {what}")


def _call(reference: dict, kwargs: dict, frozen: list[str]) -> str:
    settings = ", ".join(f"{name}={value}" for name, value in kwargs.items())
    return (f"peft_parameter_counts(model, {settings}) on {_sizes(reference)}"
            + (" (embeddings frozen before the call)" if frozen else ""))


@graded("test_peft_parameter_counts")
def test_peft_parameter_counts_full_lora_and_head(student):
    for reference, kwargs, frozen in _peft_cases(80):
        counts, expected, _ = _peft_counts(student, reference, kwargs, frozen)
        what = _call(reference, kwargs, frozen)
        expect(type(counts) is dict and set(counts) == set(PEFT_KEYS),
               f"{what} must return a dict with exactly the keys {list(PEFT_KEYS)}, got "
               + (f"{sorted(counts)}" if type(counts) is dict else type(counts).__name__))
        _expect_counts(counts, expected, ("full", "lora"), what)


@graded("test_peft_parameter_counts")
def test_peft_parameter_counts_adapters_and_prompt_tuning(student):
    for reference, kwargs, frozen in _peft_cases(82):
        counts, expected, _ = _peft_counts(student, reference, kwargs, frozen)
        _expect_counts(counts, expected, ("adapters", "prompt_tuning"), _call(reference, kwargs, frozen))


@graded("test_peft_parameter_counts")
def test_peft_parameter_counts_bitfit_arguments_and_model_left_alone(student):
    for reference, kwargs, frozen in _peft_cases(84):
        counts, expected, record = _peft_counts(student, reference, kwargs, frozen)
        what = _call(reference, kwargs, frozen)
        _expect_counts(counts, expected, ("bitfit",), what)
        expect(not record["changes"], f"{what} changed the model: {'; '.join(record['changes'])}. Count, do not "
                                      "build: leave the model exactly as it was")
    reference = fixture("bert_classifier_sized", seed=1)
    for name in ("lora_r", "adapter_bottleneck", "prompt_length"):
        kwargs = {"lora_r": 2, "adapter_bottleneck": 2, "prompt_length": 2, name: 0}
        reply = student.probe("peft_counts_run", model=reference, kwargs=kwargs, catch=True)
        expect(_raised(reply) == "ValueError",
               f"peft_parameter_counts(model, {name}=0) must raise ValueError (each of lora_r, adapter_bottleneck "
               "and prompt_length must be at least 1), "
               + (f"it raised {_raised(reply)}" if _raised(reply) else "it returned normally"))


# =============================================================== fine_tuning_footprint
@graded("test_fine_tuning_footprint")
def test_fine_tuning_footprint_against_gpt3(student):
    for energy in (1287.0, 1.5, 0.02, drawn_ints(69, 1, 10 ** 6)[0] / 64):
        # public: the release's visible test shows the reference run itself (1287 MWh)
        _expect_dict_close(student.call(energy), arithmetic.fine_tuning_footprint(energy), rel=1e-9,
                           what=f"fine_tuning_footprint({energy})", public=energy == 1287.0)


@graded("test_fine_tuning_footprint")
def test_fine_tuning_footprint_other_reference_run(student):
    reference_run = dict(ref_energy_mwh=50.0, ref_co2_tonnes=20.0, ref_cost_usd=1e5)
    for energy in (5.0, 75.0):
        _expect_dict_close(student.call(energy, **reference_run),
                           arithmetic.fine_tuning_footprint(energy, **reference_run), rel=1e-9,
                           what=f"fine_tuning_footprint({energy}, ref_energy_mwh=50, ref_co2_tonnes=20, "
                                "ref_cost_usd=1e5)")


# ------------------------------------------------------------------ answer constants (B4, B5)
def _constant(student, name: str) -> dict:
    value = student.value(name)
    expect(type(value) is dict, f"{name} must be a dict, got {type(value).__name__}")
    return value


def _mismatches(name: str, given: dict, keys) -> list[str]:
    return [key for key in keys if given.get(key) not in answers.accepted(name, key)]


def _not_right(wrong: list[str], items) -> str:
    """How many of ``items`` are wrong, never which: of a choice among a few, which is the answer key."""
    return f"{len(wrong)} of the {len(items)} entries {'is' if len(wrong) == 1 else 'are'} not right yet"


@graded("test_architecture_table")
def test_architecture_table_bert_and_gpt(student):
    table = _constant(student, "ARCHITECTURE_TABLE")
    for model in ("BERT", "GPT"):
        row = table.get(model)
        expect(type(row) is dict, f"ARCHITECTURE_TABLE[{model!r}] must be a dict")
        wrong = [c for c, v in answers.ARCHITECTURE_TABLE[model].items() if row.get(c) != v]
        expect(not wrong, f"ARCHITECTURE_TABLE[{model!r}]: {_not_right(wrong, answers.ARCHITECTURE_TABLE[model])}",
               detail=f"ARCHITECTURE_TABLE[{model!r}]: {', '.join(wrong)} not right yet")


@graded("test_architecture_table")
def test_architecture_table_t5(student):
    row = _constant(student, "ARCHITECTURE_TABLE").get("T5")
    expect(type(row) is dict, "ARCHITECTURE_TABLE['T5'] must be a dict")
    wrong = [c for c, v in answers.ARCHITECTURE_TABLE["T5"].items() if row.get(c) != v]
    expect(not wrong, f"ARCHITECTURE_TABLE['T5']: {_not_right(wrong, answers.ARCHITECTURE_TABLE['T5'])}",
           detail=f"ARCHITECTURE_TABLE['T5']: {', '.join(wrong)} not right yet")


@graded("test_model_for_task")
def test_model_for_task_understanding(student):
    given = _constant(student, "MODEL_FOR_TASK")
    tasks = ["sentiment analysis", "named entity recognition"]
    wrong = _mismatches("MODEL_FOR_TASK", given, tasks)
    expect(not wrong, f"MODEL_FOR_TASK: {_not_right(wrong, tasks)} (a label per input or per token)",
           detail=f"MODEL_FOR_TASK: reconsider {wrong}")


@graded("test_model_for_task")
def test_model_for_task_generation_and_qa(student):
    given = _constant(student, "MODEL_FOR_TASK")
    tasks = ["text generation", "question answering"]
    wrong = _mismatches("MODEL_FOR_TASK", given, tasks)
    expect(not wrong, f"MODEL_FOR_TASK: {_not_right(wrong, tasks)}", detail=f"MODEL_FOR_TASK: reconsider {wrong}")


@graded("test_model_for_task")
def test_model_for_task_sequence_to_sequence(student):
    given = _constant(student, "MODEL_FOR_TASK")
    tasks = ["translation", "summarization"]
    wrong = _mismatches("MODEL_FOR_TASK", given, tasks)
    expect(not wrong, f"MODEL_FOR_TASK: {_not_right(wrong, tasks)} (a whole input becomes a new output text)",
           detail=f"MODEL_FOR_TASK: reconsider {wrong}")


# The accepted ranges are the answer key: a message points to the handout instead of quoting them.
SEE_B5 = "(see the handout's B5 table of typical values)"


def _in_range(config: dict, key: str) -> bool:
    low, high = answers.FINETUNE_RANGES[key]
    value = config.get(key)
    return type(value) in (int, float) and low <= value <= high


@graded("test_finetune_config")
def test_finetune_config_learning_rate_and_warmup(student):
    config = _constant(student, "FINETUNE_CONFIG")
    for key in ("learning_rate", "warmup_ratio"):
        low, high = answers.FINETUNE_RANGES[key]
        expect(_in_range(config, key), f"FINETUNE_CONFIG[{key!r}] = {config.get(key)!r} is outside the sound "
                                       f"range for fine-tuning a pre-trained encoder {SEE_B5}",
               detail=f"FINETUNE_CONFIG[{key!r}] = {config.get(key)!r} is outside [{low:g}, {high:g}]")


@graded("test_finetune_config")
def test_finetune_config_batch_and_epochs(student):
    config = _constant(student, "FINETUNE_CONFIG")
    for key in ("per_device_train_batch_size", "num_train_epochs"):
        low, high = answers.FINETUNE_RANGES[key]
        expect(type(config.get(key)) is int, f"FINETUNE_CONFIG[{key!r}] must be an int")
        expect(_in_range(config, key), f"FINETUNE_CONFIG[{key!r}] = {config.get(key)!r} is outside the sound "
                                       f"range {SEE_B5}",
               detail=f"FINETUNE_CONFIG[{key!r}] = {config.get(key)!r} is outside [{low}, {high}]")


@graded("test_finetune_config")
def test_finetune_config_regularisation(student):
    config = _constant(student, "FINETUNE_CONFIG")
    low, high = answers.FINETUNE_RANGES["weight_decay"]
    expect(_in_range(config, "weight_decay"), f"FINETUNE_CONFIG['weight_decay'] is outside the sound range {SEE_B5}",
           detail=f"FINETUNE_CONFIG['weight_decay'] = {config.get('weight_decay')!r} is outside "
                  f"[{low:g}, {high:g}]")
    expect(type(config.get("freeze_embeddings")) is bool, "FINETUNE_CONFIG['freeze_embeddings'] must be True or False")


@graded("test_generation_settings")
def test_generation_settings_greedy_and_sampling(student):
    settings = _constant(student, "GENERATION_SETTINGS")
    greedy, sampling = settings.get("greedy"), settings.get("sampling")
    expect(type(greedy) is dict and type(sampling) is dict, "GENERATION_SETTINGS needs dicts for greedy and sampling")
    expect(greedy.get("do_sample", False) is False and greedy.get("num_beams", 1) == 1,
           "greedy decoding neither samples nor keeps several beams")
    temperature = sampling.get("temperature", 1.0)
    expect(sampling.get("do_sample") is True, "sampling needs do_sample=True")
    expect(type(temperature) in (int, float) and 0 < temperature <= 2,
           f"a sampling temperature of {temperature!r} is not a sound one (handout B5, and the temperatures of "
           "part_b_bert_gpt)",
           detail=f"a sampling temperature of {temperature!r} is outside (0, 2]")


@graded("test_generation_settings")
def test_generation_settings_beam(student):
    beam = _constant(student, "GENERATION_SETTINGS").get("beam")
    expect(type(beam) is dict, "GENERATION_SETTINGS['beam'] must be a dict")
    beams = beam.get("num_beams")
    expect(type(beams) is int and 2 <= beams <= 10, f"beam search needs a few beams (an int num_beams), got "
                                                     f"{beams!r}", detail=f"beam search needs num_beams in [2, 10], "
                                                                          f"got {beams!r}")
    expect(beam.get("do_sample", False) is False, "plain beam search does not sample")
