"""Shortcuts that would do a graded item's work for the student.

Two layers, because neither is enough alone:

1. *Static*: the solution cell's syntax tree is searched for the forbidden names
   as attributes (``torch.softmax``, ``F.scaled_dot_product_attention``,
   ``model.generate``), imports (``from torch import softmax as s``) and string
   constants (``getattr(torch, "softmax")``). A student's own function may share
   the name (``def softmax``; a recursive ``softmax(x)`` call): bare names are
   therefore not flagged, only attribute access, imports and strings.
2. *Dynamic*: while the grader calls the item, the worker wraps the forbidden
   library callables with tripwires (see ``autograder.sandbox.probes``), which
   catches names assembled at run time.

A flagged item scores zero with a message that names the call.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    names: frozenset[str]  # attribute / import / string names that are not allowed
    tripwires: tuple[str, ...]  # dotted library callables wrapped during the call
    advice: str


def _rule(names, tripwires, advice) -> Rule:
    return Rule(frozenset(names), tuple(tripwires), advice)


_SOFTMAX = ("softmax", "log_softmax", "Softmax", "LogSoftmax", "softmin")
_GENERATE = ("generate", "GenerationMixin", "GenerationConfig")

# Keyed by the grade_id of the solution cell (the function's name).
RULES: dict[str, Rule] = {
    "softmax": _rule(
        _SOFTMAX,
        ("torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax",
         "torch.log_softmax", "torch.nn.functional.log_softmax", "torch.Tensor.log_softmax",
         "torch.special.softmax"),
        "compute exp(x - max) / sum(exp(x - max)) yourself",
    ),
    "scaled_dot_product_attention": _rule(
        ("scaled_dot_product_attention", "MultiheadAttention", "multi_head_attention_forward"),
        ("torch.nn.functional.scaled_dot_product_attention",
         "torch.nn.functional.multi_head_attention_forward"),
        "write the matrix products, the masking and the softmax yourself",
    ),
    "mask_tokens": _rule(
        ("DataCollatorForLanguageModeling", "DataCollatorForWholeWordMask", "torch_mask_tokens",
         "numpy_mask_tokens"),
        ("transformers.DataCollatorForLanguageModeling.torch_mask_tokens",
         "transformers.DataCollatorForLanguageModeling.__call__"),
        "draw the selection and the 80/10/10 replacement with torch random functions",
    ),
    "greedy_decode": _rule(_GENERATE, ("transformers.GenerationMixin.generate",),
                           "loop over time steps and call the model yourself"),
    "beam_search": _rule(_GENERATE, ("transformers.GenerationMixin.generate",),
                         "keep and extend the beams yourself"),
    "sample_next_token": _rule(
        ("TopKLogitsWarper", "TopPLogitsWarper", "TemperatureLogitsWarper", "LogitsProcessorList"),
        ("transformers.TopKLogitsWarper.__call__", "transformers.TopPLogitsWarper.__call__"),
        "apply temperature, top-k and top-p to the logits yourself",
    ),
    "top_k_mask_predictions": _rule(
        ("pipeline", "FillMaskPipeline", "fill-mask"),
        # Every pipeline call goes through Pipeline.__call__, however the object was made.
        ("transformers.pipeline", "transformers.pipelines.base.Pipeline.__call__"),
        "find the [MASK] rows, take the softmax and its top k yourself",
    ),
    "linear_warmup_decay": _rule(
        ("get_linear_schedule_with_warmup", "get_scheduler", "get_constant_schedule_with_warmup"),
        ("transformers.get_linear_schedule_with_warmup", "transformers.get_scheduler"),
        "return the multiplier from step, warmup_steps and total_steps",
    ),
    "train_epoch": _rule(("Trainer", "TrainingArguments"), ("transformers.Trainer.train",),
                         "write the loop: forward, backward, clip, step"),
    "lora_linear": _rule(("peft", "LoraConfig", "get_peft_model", "LoraModel"), (),
                        "build lora_A and lora_B as nn.Parameter yourself"),
    "apply_lora": _rule(("peft", "LoraConfig", "get_peft_model", "LoraModel"), (),
                        "replace the nn.Linear modules with your LoRALinear"),
}


def _names_in(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            found.update(part for part in (node.module or "").split("."))
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                found.update(alias.name.split("."))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.add(node.value)
    return found


def static_violations(grade_id: str, source: str) -> list[str]:
    """Forbidden names used in a solution cell (empty when clean or unknown item)."""
    rule = RULES.get(grade_id)
    if rule is None:
        return []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # the cell fails to run anyway and is reported as such
    return sorted(_names_in(tree) & rule.names)


def message(grade_id: str, used: list[str]) -> str:
    rule = RULES[grade_id]
    return (
        f"'{grade_id}' uses {', '.join(used)}, which does the work this item asks you to do; "
        f"no points for this item. Instead, {rule.advice}."
    )
