"""Your own Part B functions, for use in another notebook.

Exercise 1 pre-trains two tiny models with the masking and the two losses that you
write in Part B (``mask_tokens``, ``mlm_loss``, ``clm_loss``). Rather than copying
them, it reads them from your ``part_b_bert_gpt.ipynb``::

    from week6_helpers.part_b import PartBNotReady, part_b_functions

    try:
        mask_tokens, mlm_loss, clm_loss = part_b_functions("mask_tokens", "mlm_loss", "clm_loss")
    except PartBNotReady as problem:
        print(problem)          # what to finish in Part B first

Exercise 3 fine-tunes the decoder with your LoRA of the other Part B notebook, the
same way, naming the notebook::

    LoRALinear, apply_lora = part_b_functions("LoRALinear", "apply_lora",
                                              notebook="part_b_finetuning.ipynb")

What runs is what the grader would run from that notebook: its locked setup cells
and then the cells you write in (the ones that held ``raise NotImplementedError()``),
in order, in a fresh namespace. Nothing else of the notebook (model loading,
experiments, check cells) is executed, and the notebook file is only read. Because
the file is read from disk, save Part B after you change it.

Each requested function (or class) is then tried once on a tiny input, with the
global random generators saved and restored around the try (``LoRALinear`` draws
its ``lora_A`` from them), so reading Part B changes no later random draw. When
the notebook is missing, a function is not defined, is still the stub, or raises
on that input, :class:`PartBNotReady` says which, and what to do, naming the
notebook it read.
"""
from __future__ import annotations

import json
import sys
import types
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from . import cells

PART_B_NOTEBOOK = "part_b_bert_gpt.ipynb"
STUB_ERROR = NotImplementedError


class PartBNotReady(RuntimeError):
    """Part B cannot provide the requested functions yet; the message says what to finish."""


# ------------------------------------------------------------------------- reading the notebook
def _runnable_cells(notebook: dict) -> list[tuple[int, str, str]]:
    """(cell number from 1, name, source) of the setup cells and the cells the student writes in."""
    runnable = []
    for number, cell in enumerate(notebook.get("cells", []), start=1):
        if cell.get("cell_type") != "code":
            continue
        meta, name = cells.nbgrader(cell), cells.name(cell, number)
        is_setup = meta.get("locked") and not meta.get("grade") and not meta.get("solution") \
            and name.startswith("setup")
        is_answer = meta.get("solution") and not meta.get("grade")
        if is_setup or is_answer:
            runnable.append((number, name, cells.source(cell)))
    return runnable


def _load_namespace(path: Path) -> tuple[dict, dict[str, str]]:
    """Run the setup and answer cells of ``path``; (namespace, {cell name: error})."""
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PartBNotReady(f"could not read {path}: {err}. Open it in JupyterLab and save it again.") from err
    module = types.ModuleType("week6_part_b_student")
    module.__file__ = str(path)
    sys.modules[module.__name__] = module  # so that classes and dataclasses defined there work
    errors: dict[str, str] = {}
    for number, name, source in _runnable_cells(notebook):
        try:
            exec(compile(source, f"<{path.name}, cell {number} ({name})>", "exec"), module.__dict__)
        except STUB_ERROR:
            errors[name] = "still the stub (raise NotImplementedError())"
        except Exception as err:  # noqa: BLE001  (the student's code: report it, never crash here)
            errors[name] = f"raised {type(err).__name__}: {err}"
    return module.__dict__, errors


# ------------------------------------------------------------------------- one call on a tiny input
def _scalar(value, what: str) -> None:
    if not (isinstance(value, torch.Tensor) and value.dim() == 0 and torch.isfinite(value)):
        raise ValueError(f"{what} should be a finite 0-dim tensor, got {value!r}")


def _try_mask_tokens(mask_tokens: Callable) -> None:
    ids = torch.tensor([[2, 5, 6, 7, 8, 9, 3]])
    out = mask_tokens(ids, mask_token_id=4, vocab_size=12, special_token_ids=[0, 1, 2, 3, 4],
                      mlm_probability=0.5, generator=torch.Generator().manual_seed(0))
    if not (isinstance(out, tuple) and len(out) == 2 and all(isinstance(t, torch.Tensor) for t in out)
            and all(t.shape == ids.shape for t in out)):
        raise ValueError("should return (masked_ids, labels), two tensors of the shape of input_ids")


def _try_mlm_loss(mlm_loss: Callable) -> None:
    _scalar(mlm_loss(torch.zeros(3, 5), torch.tensor([1, -100, 4])), "mlm_loss of [3, 5] logits")


def _try_clm_loss(clm_loss: Callable) -> None:
    _scalar(clm_loss(torch.zeros(2, 4, 5), torch.tensor([[1, 2, 3, 4], [0, 1, 2, 3]])),
            "clm_loss of [2, 4, 5] logits")


def _try_lora_linear(lora_linear: Callable) -> None:
    layer = lora_linear(nn.Linear(3, 2), r=1, alpha=2.0)
    out = layer(torch.ones(4, 3))
    if not (isinstance(out, torch.Tensor) and tuple(out.shape) == (4, 2)):
        raise ValueError("LoRALinear(nn.Linear(3, 2), r=1, alpha=2) should map a [4, 3] input to [4, 2]")


def _try_apply_lora(apply_lora: Callable) -> None:
    model = nn.Sequential()
    model.add_module("query", nn.Linear(3, 3))
    model.add_module("value", nn.Linear(3, 3))
    result = apply_lora(model, target_names=("query",), r=1, alpha=2.0)
    out = result(torch.ones(2, 3)) if isinstance(result, nn.Module) else None
    if not (isinstance(out, torch.Tensor) and tuple(out.shape) == (2, 3)):
        raise ValueError("apply_lora(model, target_names=('query',), r=1, alpha=2) should return the model, "
                         "still mapping a [2, 3] input to [2, 3]")
    if not any(param.requires_grad for param in model.parameters()):
        raise ValueError("after apply_lora(model, target_names=('query',), ...) no parameter is trainable")


TRIALS: dict[str, Callable[[Callable], None]] = {
    "mask_tokens": _try_mask_tokens,
    "mlm_loss": _try_mlm_loss,
    "clm_loss": _try_clm_loss,
    "LoRALinear": _try_lora_linear,    # part_b_finetuning.ipynb
    "apply_lora": _try_apply_lora,     # part_b_finetuning.ipynb
}


# ------------------------------------------------------------------------- the helper
def part_b_functions(*names: str, notebook: str | Path = PART_B_NOTEBOOK):
    """The functions ``names`` as defined in your Part B notebook (one function, or a tuple).

    Args:
        names: the names of the functions, e.g. ``"mask_tokens", "mlm_loss", "clm_loss"``
            (or ``"LoRALinear", "apply_lora"`` with ``notebook="part_b_finetuning.ipynb"``).
        notebook: your Part B notebook; a relative path is taken from the current
            folder, which in JupyterLab is the folder of the notebook you run.

    Raises:
        PartBNotReady: the notebook is missing or unreadable, or a function is not
            defined, is still the stub, or raises on a tiny input; the message lists
            every problem and what to do first.
    """
    if not names:
        raise TypeError("name at least one function, e.g. part_b_functions('mask_tokens')")
    path = Path(notebook)
    if not path.is_absolute():
        path = Path.cwd() / path
    if not path.is_file():
        raise PartBNotReady(
            f"{path.name} is not in {path.parent}. Keep your Part B notebook in the same folder as this one "
            f"(or pass its path: part_b_functions(..., notebook='path/to/{path.name}')).")
    namespace, errors = _load_namespace(path)
    problems = []
    found = []
    for name in names:
        function = namespace.get(name)
        if not callable(function):
            why = errors.get(name, "is not defined there")
            problems.append(f"- {name}: {why}" if name in errors else f"- {name} {why}")
            continue
        try:
            with torch.random.fork_rng(devices=[]):  # the try leaves the global generator as it was
                TRIALS.get(name, lambda f: None)(function)
        except STUB_ERROR:
            problems.append(f"- {name}: still raises NotImplementedError; write it and run its check cell")
            continue
        except Exception as err:  # noqa: BLE001
            problems.append(f"- {name}: raised {type(err).__name__} on a tiny example ({err}); "
                            "run its check cell in Part B")
            continue
        found.append(function)
    if problems:
        raise PartBNotReady(
            f"Your Part B functions are not ready yet ({path.name}, as last saved):\n" + "\n".join(problems)
            + f"\nFinish them in {path.name} until their check cells pass, save it, and run this cell again.")
    return found[0] if len(found) == 1 else tuple(found)
