"""The probes of the Week 6 hidden suites: instructor-written steps run next to student code.

A probe runs inside the worker, beside the student's namespace, and returns only
plain data. Where a test must drive a stateful object (a training loop, a LoRA
layer, a truncated encoder), the steps live in a ``drive_*`` function that the
probe runs with the student's code and the hidden test runs with the reference's,
so both go through exactly the same steps. Randomness: a probe that needs a seeded
global generator forks the RNG state (``forked_rng``), leaving the caller's
generators as it found them.

Probes (``student.probe(name, **params)``), each documented below:
``seeded_call``, ``call_keeping_inputs``, ``raises``, ``train_epoch_run``,
``evaluate_run``, ``freeze_layers_run``, ``lora_layer``, ``apply_lora_run``,
``bottleneck_adapter_run``, ``peft_counts_run``, ``subsample_balanced_seeds``,
``truncate_encoder_run``.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from autograder.sandbox.fixtures import seed_cpu, seeded
from autograder.sandbox.probes import register_probe, student_definition

MISSING = "__default__"  # a keyword the driver must leave out, so the function's default applies


@contextlib.contextmanager
def forked_rng(device: torch.device | str, seed: int | None) -> Iterator[None]:
    """Seed the global generators of the CPU and of ``device`` (when CUDA) for a
    block, restoring their states afterwards."""
    device = torch.device(device)
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        if seed is not None and devices:
            torch.manual_seed(seed)
        elif seed is not None:
            seed_cpu(seed)
        yield


def register_driver(name: str, driver: Callable, default: str, *positional: str, key: str = "name") -> None:
    """Register as probe ``name`` a run of ``driver`` with the student's definition named by
    ``params[key]`` (default ``default``), then the ``positional`` params in that order, and
    every other param as a keyword: the hidden test runs the same driver with the reference's."""
    def probe(namespace: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        params = dict(params)
        definition = student_definition(namespace, params.pop(key, default))
        return driver(definition, *(params.pop(name) for name in positional), **params)

    probe.__name__ = probe.__qualname__ = name
    probe.__doc__ = f"``{driver.__name__}`` with the student's ``{default}``."
    register_probe(name)(probe)


# --------------------------------------------------------------------- calls
@register_probe("seeded_call")
def seeded_call(namespace: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Call a student function with a ``torch.Generator`` built here (a generator
    cannot cross the boundary).

    params: ``name`` (the function), ``args`` (list, default []), ``kwargs`` (dict,
    default {}), ``seed`` (int), ``device`` (of the generator, default "cpu"),
    ``generator_kwarg`` (default "generator"), ``repeat`` (default 1: the number
    of calls, all drawing from the one generator, so consecutive calls continue
    its stream), ``stack`` (default False: when every result is a tensor of one
    shape, return them stacked along a new first dimension, which crosses the
    boundary much faster than thousands of small tensors), ``rows`` (default
    None: when given, the first argument is a tensor of one row, [1, ...], and
    the function receives it repeated ``rows`` times, [rows, ...], a contiguous
    tensor built here, so that thousands of identical rows need not cross the
    boundary), ``return_args`` (default True; False when the test does not look
    at the inputs afterwards, so that large inputs are not sent back),
    ``global_generator`` (default False; True: the function gets ``generator=None``
    and PyTorch's global generators, of the CPU and of ``device``, are seeded with
    ``seed`` for the calls and restored afterwards: for "None: the global generator").

    Returns ``{"values": [result of each call] (or their stack), "stacked": bool,
    "args_after": args after the calls (None unless return_args)}`` (to check
    that the function did not modify its inputs).
    """
    function = student_definition(namespace, params["name"])
    args, kwargs = list(params.get("args", [])), dict(params.get("kwargs", {}))
    if params.get("rows") is not None:
        args[0] = _repeat_row(args[0], params["rows"])
    device, global_generator = params.get("device", "cpu"), params.get("global_generator", False)
    kwargs[params.get("generator_kwarg", "generator")] = (
        None if global_generator else torch.Generator(device=device).manual_seed(params["seed"]))
    with forked_rng(device, params["seed"]) if global_generator else contextlib.nullcontext():
        values = [function(*args, **kwargs) for _ in range(params.get("repeat", 1))]
    stackable = (params.get("stack", False) and all(type(v) is torch.Tensor for v in values)
                 and len({(v.shape, v.dtype, v.device) for v in values}) == 1)
    return {"values": torch.stack(values) if stackable else values, "stacked": bool(stackable),
            "args_after": args if params.get("return_args", True) else None}


def _repeat_row(row: Any, rows: int) -> torch.Tensor:
    """``row`` [1, ...] as ``rows`` identical rows [rows, ...], a contiguous tensor of its own."""
    if type(row) is not torch.Tensor or row.dim() == 0 or row.size(0) != 1:
        raise ValueError(f"rows= needs a first argument of one row [1, ...], got {type(row).__name__} "
                         f"{list(getattr(row, 'shape', []))}")
    return row.expand(rows, *row.shape[1:]).contiguous()


@register_probe("call_keeping_inputs")
def call_keeping_inputs(namespace: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Call ``params["name"](*args, **kwargs)`` and send back its inputs as well.

    Returns ``{"value": the result, "args_after": args after the call}``: a value
    crossing the boundary is a copy, so a function that modifies its inputs can
    only be caught here, next to the call. ``keep`` (a list of positions; default:
    all) sends back only those arguments, for a call whose other arguments (a
    model) cannot cross the boundary.
    """
    function = student_definition(namespace, params["name"])
    args = list(params.get("args", []))
    value = function(*args, **params.get("kwargs", {}))
    return {"value": value, "args_after": [args[i] for i in params.get("keep", range(len(args)))]}


@register_probe("raises")
def raises(namespace: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Call ``params["name"](*args, **kwargs)`` and report what it raised.

    Returns ``{"raised": exception type name or None, "message": str}``; the
    return value of a call that did not raise is dropped.
    """
    function = student_definition(namespace, params["name"])
    try:
        function(*params.get("args", []), **params.get("kwargs", {}))
    except Exception as err:  # noqa: BLE001 - the point is to see which one
        return {"raised": type(err).__name__, "message": str(err)[:300]}
    return {"raised": None, "message": ""}


def _guard(catch: bool, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    if not catch:
        return run()
    try:
        return run()
    except Exception as err:  # noqa: BLE001
        return {"raised": type(err).__name__, "message": str(err)[:300]}


# -- fine-tuning loop

def drive_train_epoch(train_epoch: Callable, model: nn.Module, batches: list[dict[str, torch.Tensor]], *,
                      lr: float = 0.1, momentum: float = 0.0, max_grad_norm: Any = MISSING,
                      warmup_steps: int | None = None, total_steps: int | None = None,
                      seed: int = 0, start_mode: str = "eval", catch: bool = False) -> dict[str, Any]:
    """One epoch of ``train_epoch`` with SGD on ``model``, recorded.

    The model is put in ``start_mode`` first; the global generators are seeded
    with ``seed`` (dropout) and restored afterwards. With ``warmup_steps`` and
    ``total_steps`` a ``LambdaLR`` with the linear warm-up/decay schedule is
    passed as the scheduler. ``max_grad_norm=MISSING`` leaves the keyword out.

    Returns ``{"loss": what train_epoch returned, "parameters": {name: tensor}
    after the epoch, "training": model.training afterwards, "lrs": [learning
    rate at each optimizer.step()], "grad_norms": [global gradient L2 norm at
    each optimizer.step()]}``, or ``{"raised": ...}`` when ``catch`` and it raised.
    """
    def run() -> dict[str, Any]:
        device = next(model.parameters()).device
        model.train(start_mode == "train")
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
        lrs: list[float] = []
        grad_norms: list[float] = []

        def record(optimizer, args, kwargs) -> None:  # runs before every optimizer.step()
            lrs.append(float(optimizer.param_groups[0]["lr"]))
            grads = [p.grad.detach().double().norm() for p in model.parameters() if p.grad is not None]
            grad_norms.append(float(torch.stack(grads).norm()) if grads else 0.0)

        optimizer.register_step_pre_hook(record)
        scheduler = None
        if warmup_steps is not None:
            def multiplier(step: int) -> float:
                if step < warmup_steps:
                    return step / max(1, warmup_steps)
                return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, multiplier)
        kwargs = {} if max_grad_norm == MISSING else {"max_grad_norm": max_grad_norm}
        with forked_rng(device, seed):
            loss = train_epoch(model, batches, optimizer, scheduler, **kwargs)
        return {
            "loss": loss,
            "parameters": {name: p.detach() for name, p in model.named_parameters()},
            "training": bool(model.training),
            "lrs": lrs,
            "grad_norms": grad_norms,
        }
    return _guard(catch, run)


register_driver("train_epoch_run", drive_train_epoch, "train_epoch", "model", "batches")

@contextlib.contextmanager
def recording_labels(model: nn.Module) -> Iterator[list[bool]]:
    """For each forward pass of ``model`` in the block, whether it was given ``labels`` (by
    keyword or by position, not None). The record wraps ``model.forward`` itself, so a call of
    ``model(...)`` and one of ``model.forward(...)`` are both seen."""
    forward = model.forward
    signature = inspect.signature(forward)
    given: list[bool] = []

    @functools.wraps(forward)
    def recorded(*args: Any, **kwargs: Any) -> Any:
        try:
            arguments = signature.bind_partial(*args, **kwargs).arguments
        except TypeError:  # the model itself will say what is wrong with the call
            arguments = kwargs
        given.append(arguments.get("labels", kwargs.get("labels")) is not None)
        return forward(*args, **kwargs)

    model.forward = recorded
    try:
        yield given
    finally:
        vars(model).pop("forward", None)


def drive_evaluate(evaluate: Callable, model: nn.Module, batches: list[dict[str, torch.Tensor]], *,
                   start_mode: str = "train", seed: int = 0, catch: bool = False) -> dict[str, Any]:
    """``evaluate(model, batches)`` after putting the model in ``start_mode``.

    Returns ``{"accuracy": what evaluate returned, "training": model.training
    afterwards, "labels_passed": whether any forward pass was given the labels}``
    (or ``{"raised": ...}`` when ``catch``)."""
    def run() -> dict[str, Any]:
        model.train(start_mode == "train")
        with forked_rng(next(model.parameters()).device, seed), recording_labels(model) as labels_given:
            accuracy = evaluate(model, batches)
        return {"accuracy": accuracy, "training": bool(model.training), "labels_passed": any(labels_given)}
    return _guard(catch, run)


register_driver("evaluate_run", drive_evaluate, "evaluate", "model", "batches")

def drive_freeze_layers(freeze_layers: Callable, model: nn.Module, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply ``freeze_layers`` once per entry of ``calls``, in order, to one model.

    Each call is ``{"num_layers": n, "freeze_embeddings": bool (optional; left
    out when absent), "target": "model" | "base" (the BertModel inside)}``.

    Returns ``{"returned": [what each call returned], "requires_grad": {name:
    bool} after the last call, "weights_unchanged": bool, "training":
    model.training afterwards}``.
    """
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    returned = []
    for call in calls:
        target = model.base_model if call.get("target", "model") == "base" else model
        kwargs = {"freeze_embeddings": call["freeze_embeddings"]} if "freeze_embeddings" in call else {}
        returned.append(freeze_layers(target, call["num_layers"], **kwargs))
    named = dict(model.named_parameters())
    return {
        "returned": returned,
        "requires_grad": {name: bool(p.requires_grad) for name, p in named.items()},
        "weights_unchanged": all(name in named and torch.equal(named[name].detach(), value)
                                 for name, value in before.items()),
        "training": bool(model.training),
    }


register_driver("freeze_layers_run", drive_freeze_layers, "freeze_layers", "model", "calls")

# -- LoRA

def drive_lora_layer(cls: type, *, in_features: int, out_features: int, r: int, alpha: float,
                     x: torch.Tensor, device: str = "cpu", seed: int = 0, init_seed: int = 1,
                     lora_A: torch.Tensor | None = None, lora_B: torch.Tensor | None = None,
                     grad_output: torch.Tensor | None = None) -> dict[str, Any]:
    """Wrap a seeded ``nn.Linear`` (on ``device``) in ``cls(base, r, alpha)`` and run it.

    The new layer's own initialisation draws from the global generators seeded
    with ``init_seed``. Then ``initial_output = layer(x)``; when ``lora_A`` and
    ``lora_B`` are given they are copied into the layer's ``lora_A``/``lora_B``,
    ``output = layer(x)`` and ``(output * grad_output).sum()`` is
    back-propagated.

    Returns (detached copies): ``initial_output``, ``output`` and ``grads``
    ({name: gradient or None}, when weights were given); ``base_output`` (the
    seeded base layer's output before wrapping); ``initial`` ({name: tensor} of
    the parameters right after construction); ``requires_grad`` ({name: bool});
    ``trainable`` (number of trainable scalars); ``keeps_base`` (the layer holds
    the very base module it was given, as ``.base``); ``base_unchanged`` (the
    base's weight and bias still hold their values).
    """
    with seeded(seed):
        base = nn.Linear(in_features, out_features)
    base = base.to(device)
    base_weight, base_bias = base.weight.detach().clone(), base.bias.detach().clone()
    with torch.no_grad():
        base_output = base(x)
    with forked_rng(device, init_seed):
        layer = cls(base, r, alpha)
    named = dict(layer.named_parameters())
    result: dict[str, Any] = {
        "base_output": base_output,
        "initial": {name: p.detach().clone() for name, p in named.items()},
        "requires_grad": {name: bool(p.requires_grad) for name, p in named.items()},
        "trainable": int(sum(p.numel() for p in named.values() if p.requires_grad)),
        "keeps_base": getattr(layer, "base", None) is base,
    }
    with torch.no_grad():
        result["initial_output"] = layer(x).detach()
    if lora_A is not None and lora_B is not None:
        for name, value in (("lora_A", lora_A), ("lora_B", lora_B)):
            mine = getattr(layer, name, None)
            if not isinstance(mine, nn.Parameter) or mine.shape != value.shape:
                found = "missing" if mine is None else f"of shape {list(getattr(mine, 'shape', []))}"
                raise AttributeError(f"the layer's {name} is {found}; expected an nn.Parameter of shape "
                                     f"{list(value.shape)}")
        with torch.no_grad():
            layer.lora_A.copy_(lora_A)
            layer.lora_B.copy_(lora_B)
        output = layer(x)
        if output.requires_grad:
            (output * grad_output).sum().backward()
        result["output"] = output.detach()
        result["grads"] = {name: (None if p.grad is None else p.grad.detach())
                           for name, p in layer.named_parameters()}
    result["base_unchanged"] = bool(torch.equal(base.weight.detach(), base_weight)
                                    and torch.equal(base.bias.detach(), base_bias))
    return result


register_driver("lora_layer", drive_lora_layer, "LoRALinear", key="class_name")

def _lora_modules(model: nn.Module) -> dict[str, nn.Module]:
    """Modules that carry LoRA weights, by dotted name (what ``apply_lora`` added)."""
    return {name: module for name, module in model.named_modules()
            if isinstance(getattr(module, "lora_A", None), nn.Parameter)
            and isinstance(getattr(module, "lora_B", None), nn.Parameter)}


def drive_apply_lora(apply_lora: Callable, model: nn.Module, *, input_ids: torch.Tensor,
                     attention_mask: torch.Tensor, kwargs: dict[str, Any], init_seed: int = 1,
                     weights_seed: int = 2, catch: bool = False) -> dict[str, Any]:
    """``apply_lora(model, **kwargs)`` on a BERT classifier, then a look inside.

    The logits on (``input_ids``, ``attention_mask``) are taken before, right
    after (LoRA starts as the identity), and after every LoRA module got new
    ``lora_A``/``lora_B`` values drawn from a generator seeded with
    ``weights_seed``, in the order of the modules' sorted names and shapes (so
    the same values land in the same places for any correct implementation).

    Returns ``{"returned_model": apply_lora returned the model itself,
    "lora_modules": sorted names of the modules with lora_A/lora_B,
    "lora_shapes": {module: [shape of A, shape of B]}, "class_names": {module:
    class name}, "trainable_outside_lora": sorted names of trainable parameters
    not in a LoRA module, "lora_trainable": every lora_A/lora_B is trainable,
    "frozen_inside_lora": no other parameter of a LoRA module is trainable,
    "trainable": number of trainable scalars, "logits_before", "logits_applied",
    "logits_adapted"}``, or ``{"raised": ...}`` when ``catch`` and it raised.
    """
    def run() -> dict[str, Any]:
        device = next(model.parameters()).device
        ids, mask = input_ids.to(device), attention_mask.to(device)
        with torch.no_grad():
            before = model(input_ids=ids, attention_mask=mask).logits
        with forked_rng(device, init_seed):
            returned = apply_lora(model, **kwargs)
        with torch.no_grad():
            applied = model(input_ids=ids, attention_mask=mask).logits
        modules = _lora_modules(model)
        names = sorted(modules)
        generator = torch.Generator().manual_seed(weights_seed)
        with torch.no_grad():
            for name in names:
                for weight in (modules[name].lora_A, modules[name].lora_B):
                    weight.copy_(0.2 * torch.randn(weight.shape, generator=generator))
            adapted = model(input_ids=ids, attention_mask=mask).logits
        in_lora = {f"{name}.{param}" for name in names for param, _ in modules[name].named_parameters()}
        trainable = {name for name, p in model.named_parameters() if p.requires_grad}
        lora_weights = {f"{name}.{w}" for name in names for w in ("lora_A", "lora_B")}
        return {
            "returned_model": returned is model,
            "lora_modules": names,
            "lora_shapes": {name: [list(modules[name].lora_A.shape), list(modules[name].lora_B.shape)]
                            for name in names},
            "class_names": {name: type(modules[name]).__name__ for name in names},
            "trainable_outside_lora": sorted(trainable - in_lora),
            "lora_trainable": lora_weights <= trainable,
            "frozen_inside_lora": not ((in_lora - lora_weights) & trainable),
            "trainable": int(sum(p.numel() for p in model.parameters() if p.requires_grad)),
            "logits_before": before,
            "logits_applied": applied,
            "logits_adapted": adapted,
        }
    return _guard(catch, run)


register_driver("apply_lora_run", drive_apply_lora, "apply_lora", "model")

# -- beyond LoRA: bottleneck adapters and trainable-parameter counts
ADAPTER_PARTS = ("down.weight", "down.bias", "up.weight", "up.bias")


def _adapter_part(adapter: nn.Module, part: str) -> Any:
    """``adapter.down.weight`` and the like, reached through the attributes (None when missing)."""
    module_name, _, attribute = part.partition(".")
    return getattr(getattr(adapter, module_name, None), attribute, None)


def drive_bottleneck_adapter(cls: type, *, hidden_size: int, bottleneck: int, x: torch.Tensor,
                             device: str = "cpu", init_seed: int = 1,
                             weights: dict[str, torch.Tensor] | None = None,
                             grad_output: torch.Tensor | None = None) -> dict[str, Any]:
    """Build ``cls(hidden_size, bottleneck)``, move it to ``x``'s device and dtype, and run it on ``x``.

    The adapter is built on the CPU with the global generators seeded with ``init_seed`` (and
    restored afterwards), then moved with ``.to(device=..., dtype=x.dtype)``. ``initial_output``
    is its output on ``x`` right away; when ``weights`` ({"down.weight": ..., "down.bias": ...,
    "up.weight": ..., "up.bias": ...}) are given they are copied into the adapter's ``down`` and
    ``up`` layers, ``output = adapter(x)`` (without gradients), and then ``(adapter(x) *
    grad_output).sum()`` is back-propagated. Every forward pass gets a copy of ``x``, compared
    with ``x`` afterwards.

    Returns (detached copies): ``linears`` ({"down"/"up": [class name, in_features,
    out_features, has a bias] or None when the attribute is no ``nn.Linear``}), ``initial``
    ({part: tensor} of the four parts right after construction, on the CPU in float64, None when
    missing), ``extra_parameters`` (names of parameters that are none of the four parts),
    ``frozen`` (names of parameters with requires_grad False), ``trainable`` (number of trainable
    scalars), ``initial_output``, ``x_unchanged`` (the forward passes left their copy of ``x`` as
    it was), and with weights ``output``, ``grads`` ({part: gradient or None}) and
    ``backward_error`` (the message of a RuntimeError raised by the backward pass, else None).
    """
    with forked_rng("cpu", init_seed):
        adapter = cls(hidden_size, bottleneck)
    adapter = adapter.to(device=device, dtype=x.dtype)
    parts = {part: _adapter_part(adapter, part) for part in ADAPTER_PARTS}
    ids = {id(p) for p in parts.values() if isinstance(p, nn.Parameter)}
    named = dict(adapter.named_parameters())
    linears = {}
    for name in ("down", "up"):
        layer = getattr(adapter, name, None)
        linears[name] = ([type(layer).__name__, layer.in_features, layer.out_features, layer.bias is not None]
                         if isinstance(layer, nn.Linear) else None)
    result: dict[str, Any] = {
        "linears": linears,
        "initial": {part: (p.detach().to("cpu", torch.float64).clone() if isinstance(p, torch.Tensor) else None)
                    for part, p in parts.items()},
        "extra_parameters": sorted(name for name, p in named.items() if id(p) not in ids),
        "frozen": sorted(name for name, p in named.items() if not p.requires_grad),
        "trainable": int(sum(p.numel() for p in named.values() if p.requires_grad)),
    }
    copies = [x.clone()]
    with torch.no_grad():
        result["initial_output"] = adapter(copies[-1]).detach().clone()
    if weights is not None:
        for part, value in weights.items():
            mine = parts[part]
            if not isinstance(mine, nn.Parameter) or mine.shape != value.shape:
                found = "missing" if mine is None else f"of shape {list(getattr(mine, 'shape', []))}"
                raise AttributeError(f"the adapter's {part} is {found}; expected an nn.Parameter of shape "
                                     f"{list(value.shape)}")
        with torch.no_grad():
            for part, value in weights.items():
                parts[part].copy_(value)
            copies.append(x.clone())
            result["output"] = adapter(copies[-1]).detach().clone()
        copies.append(x.clone())
        result["backward_error"] = None
        try:
            output = adapter(copies[-1])
            if output.requires_grad:
                (output * grad_output).sum().backward()
        except RuntimeError as err:  # e.g. autograd refusing an input modified in place
            result["backward_error"] = str(err)[:300]
        result["grads"] = {part: (None if getattr(p, "grad", None) is None else p.grad.detach().clone())
                           for part, p in parts.items()}
    result["x_unchanged"] = all(torch.equal(seen, x) for seen in copies)
    return result


register_driver("bottleneck_adapter_run", drive_bottleneck_adapter, "BottleneckAdapter", key="class_name")

def _model_state(model: nn.Module) -> dict[str, Any]:
    return {
        "modules": [(name, type(module).__name__) for name, module in model.named_modules()],
        "parameters": {name: (p.detach().clone(), bool(p.requires_grad)) for name, p in model.named_parameters()},
        "training": bool(model.training),
    }


def drive_peft_parameter_counts(function: Callable, model: nn.Module, *, kwargs: dict[str, Any],
                                frozen: list[str] = (), catch: bool = False) -> dict[str, Any]:
    """``function(model, **kwargs)`` on a BERT classifier, and whether the model is left as it was.

    First every parameter whose name starts with one of ``frozen`` gets requires_grad=False (a
    model part-way through some experiment: the counts must not depend on it).

    Returns ``{"counts": what the function returned, "changes": what differs in the model
    afterwards (modules added, removed or replaced, parameters whose values or requires_grad
    changed, the train/eval mode), at most 5 lines}``, or ``{"raised": ...}`` when ``catch`` and
    it raised.
    """
    def run() -> dict[str, Any]:
        for name, p in model.named_parameters():
            if name.startswith(tuple(frozen)):
                p.requires_grad_(False)
        before = _model_state(model)
        counts = function(model, **kwargs)
        after = _model_state(model)
        changes = [f"module {name} ({kind}) is gone or replaced" for name, kind in before["modules"]
                   if (name, kind) not in after["modules"]]
        changes += [f"module {name} ({kind}) was added" for name, kind in after["modules"]
                    if (name, kind) not in before["modules"]]
        for name, (value, requires_grad) in before["parameters"].items():
            if name not in after["parameters"]:
                continue  # reported with its module
            new_value, new_requires_grad = after["parameters"][name]
            if new_requires_grad != requires_grad:
                changes.append(f"{name}.requires_grad changed from {requires_grad} to {new_requires_grad}")
            elif not torch.equal(new_value, value):
                changes.append(f"the values of {name} changed")
        if after["training"] != before["training"]:
            changes.append("the train/eval mode changed")
        return {"counts": counts, "changes": changes[:5]}
    return _guard(catch, run)


register_driver("peft_counts_run", drive_peft_parameter_counts, "peft_parameter_counts", "model")

# -- exercise 2: balanced subsampling
@register_probe("subsample_balanced_seeds")
def subsample_balanced_seeds(namespace: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Call the student's ``subsample_balanced(labels, n, seed)`` once per seed.

    params: ``labels`` (tensor or list), ``n``, ``seeds`` (list of ints), ``name``
    (default "subsample_balanced"). The global generator is seeded with 0 first
    (and restored after), so code that wrongly draws from it gives the same
    stream in every run.

    Returns ``{"values": the results stacked along a new first dimension when they
    are all tensors of one shape (else the list), "stacked": bool, "labels_after":
    labels after the calls}``.
    """
    function = student_definition(namespace, params.get("name", "subsample_balanced"))
    labels, n = params["labels"], params["n"]
    with forked_rng("cpu", 0):
        values = [function(labels, n, seed) for seed in params["seeds"]]
    stackable = (all(type(v) is torch.Tensor for v in values)
                 and len({(v.shape, v.dtype, v.device) for v in values}) == 1 and len(values) > 0)
    return {"values": torch.stack(values) if stackable else values, "stacked": bool(stackable),
            "labels_after": labels}


# -- exercise 4: a shallower encoder
def drive_truncate_encoder(truncate_encoder: Callable, model: nn.Module, num_layers: int, *,
                           input_ids: torch.Tensor, attention_mask: torch.Tensor) -> dict[str, Any]:
    """``truncate_encoder(model, num_layers)`` on a BERT model, then a look at both models.

    Returns ``{"class_name": class of the new model, "same_class": same class as
    the original, "returned_original": the very object passed in, "config_layers":
    new.config.num_hidden_layers, "layers": len(new.base_model.encoder.layer),
    "parameters": {name: tensor} of the new model, "logits": the new model's
    output on (input_ids, attention_mask) in eval mode, "original_unchanged": the
    original still has its layers, config value and weights, "shares_storage":
    names of the new model's parameters that share memory with a parameter of the
    original, "shares_config": the new model's config is the original's object}``.
    """
    device = next(model.parameters()).device
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    layers_before = len(model.base_model.encoder.layer)
    config_before = model.config.num_hidden_layers

    new = truncate_encoder(model, num_layers)

    named = dict(model.named_parameters())
    original_pointers = {p.data_ptr() for p in model.parameters()}
    new_named = dict(new.named_parameters())
    new.eval()
    with torch.no_grad():
        output = new(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device))
    logits = output.logits if hasattr(output, "logits") else output.last_hidden_state
    return {
        "class_name": type(new).__name__,
        "same_class": type(new) is type(model),
        "returned_original": new is model,
        "config_layers": getattr(new.config, "num_hidden_layers", None),
        "layers": len(new.base_model.encoder.layer),
        "parameters": {name: p.detach() for name, p in new_named.items()},
        "logits": logits.detach(),
        "original_unchanged": bool(
            len(model.base_model.encoder.layer) == layers_before
            and model.config.num_hidden_layers == config_before
            and set(named) == set(before)
            and all(torch.equal(named[name].detach(), value) for name, value in before.items())),
        "shares_storage": sorted(name for name, p in new_named.items() if p.data_ptr() in original_pointers),
        "shares_config": new.config is model.config,
    }


register_driver("truncate_encoder_run", drive_truncate_encoder, "truncate_encoder", "model", "num_layers")