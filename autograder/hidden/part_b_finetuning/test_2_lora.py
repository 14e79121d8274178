"""Hidden tests of part_b_finetuning.ipynb, B6.1-B6.3: the LoRA layer, its parameter count,
and LoRA applied to an encoder."""
from __future__ import annotations

import math

import torch

from autograder.reference import lora
from autograder.drivers import models, probes  # noqa: F401  (registers the fixtures and probes used below)
from autograder.sandbox.errors import StudentError
from autograder.sandbox.fixtures import build_fixture
from autograder.suite import drawn_ints, expect, expect_close, expect_equal, graded, on_devices

from ._common import _classifier, _gen, _key, _once, _raised


# =============================================================== LoRALinear
def _lora(student, device: str, **params):
    """The student's record of ``drive_lora_layer``."""
    return student.probe("lora_layer", class_name="LoRALinear", device=device, **params)


def _lora_and_reference(student, device: str, **params):
    """The student's record of ``drive_lora_layer``, and the reference's."""
    return _lora(student, device, **params), probes.drive_lora_layer(lora.LoRALinear, device=device, **params)


def _lora_x(*shape: int, seed: int, device: str) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed)).to(device)


@graded("test_lora_linear")
@on_devices
def test_lora_linear_starts_as_the_base_layer(student, device):
    for seed, (d_in, d_out, r, alpha, x_shape) in enumerate([(12, 7, 4, 8, (3, 12)), (5, 9, 1, 1, (2, 4, 5))]):
        x = _lora_x(*x_shape, seed=seed, device=device)
        actual, expected = _lora_and_reference(student, device, in_features=d_in, out_features=d_out, r=r, alpha=alpha,
                                               x=x, seed=seed)
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
    actual = _lora(student, device, in_features=d_in, out_features=d_out, r=r, alpha=6, x=x)
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
        _lora(student, device, in_features=d_in, out_features=d_out, r=0, alpha=6, x=x)
        raised = None
    except StudentError as err:
        raised = err.type_name
    expect(raised == "ValueError", "LoRALinear(base, r=0, alpha=6) must raise ValueError (the rank r must be >= 1), "
           + ("it was built" if raised is None else f"it raised {raised}"))


@graded("test_lora_linear")
@on_devices
def test_lora_linear_initialises_A_kaiming_uniform(student, device):
    d_in, d_out, r = 256, 8, 16
    actual = _lora(student, device, in_features=d_in, out_features=d_out, r=r, alpha=16,
                   x=_lora_x(1, d_in, seed=6, device=device))
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
        actual, expected = _lora_and_reference(student, device, in_features=d_in, out_features=d_out, r=r, alpha=alpha,
                                               x=x, seed=seed, grad_output=grad_output, **weights)
        what = f"LoRALinear(r={r}, alpha={alpha}) with non-zero lora_A, lora_B (base(x) + (x A^T B^T) * alpha / r)"
        # tolerance: float32 rounding of three small matrix products
        expect_close(actual["output"], expected["output"], atol=1e-5, rtol=1e-5, what=what)


@graded("test_lora_linear")
@on_devices
def test_lora_linear_gradients_reach_only_A_and_B(student, device):
    d_in, d_out, r, alpha = 8, 5, 2, 6
    g = _gen(20)
    weights = dict(lora_A=torch.randn(r, d_in, generator=g).to(device),
                   lora_B=torch.randn(d_out, r, generator=g).to(device))
    x = _lora_x(4, d_in, seed=21, device=device)
    grad_output = torch.randn(4, d_out, generator=g).to(device)
    actual, expected = _lora_and_reference(student, device, in_features=d_in, out_features=d_out, r=r, alpha=alpha, x=x,
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
