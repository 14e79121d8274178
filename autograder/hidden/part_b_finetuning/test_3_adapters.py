"""Hidden tests of part_b_finetuning.ipynb, B6.4: bottleneck adapters, and the trainable-parameter
counts of LoRA, adapters, prompt tuning and BitFit."""
from __future__ import annotations

import math

import torch

from autograder.reference import adapters
from autograder.drivers import models, probes  # noqa: F401  (registers the fixtures and probes used below)
from autograder.sandbox.fixtures import build_fixture, fixture
from autograder.suite import drawn_ints, expect, expect_close, expect_equal, graded, on_devices

from ._common import _gen, _key, _once, _raised


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
