"""Shortcuts that would do a graded item's work for the student.

Two layers, because neither is enough alone:

1. *Static*: the solution cell's syntax tree is searched for the forbidden names
   as attributes (``torch.softmax``, ``F.scaled_dot_product_attention``,
   ``model.generate``), imports (``from torch import softmax as s``) and string
   constants (``getattr(torch, "softmax")``). A student's own function may share
   the name (``def softmax``; a recursive ``softmax(x)`` call): bare names are
   therefore not flagged, only attribute access, imports and strings. It is
   computed once, when the grading is planned, and gives the first message.
2. *Dynamic*: while the grader calls the item, the worker watches what executes
   (``autograder.sandbox.watch``): the tensor operators of ``aten_ops`` and the
   library functions of ``entry_points``, however they were reached (an alias, a
   name assembled at run time, a reference captured before the call, a method
   form, ``functools.partial``, ``exec``).

Operators are named only where the item's calls run nothing but the student's code
(``softmax``, ``scaled_dot_product_attention``, and the assembled BERT's three items, which
take tensors only). Elsewhere the grader hands the
student a model whose attention legitimately runs softmax, so those rules name the
library's Python entry points (``generate``, the collator, the pipeline, the
schedulers, ``Trainer``, the logits warpers) instead.

A flagged item scores zero with a message that names what ran; so does an item
during whose call the instrumentation itself was modified.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    names: frozenset[str]  # attribute / import / string names that are not allowed (static)
    advice: str
    # Operator name prefixes ("aten._softmax") that may not execute during the item's calls.
    aten_ops: tuple[str, ...] = ()
    # Library functions ("module:Qual.name") that may not execute during the item's calls.
    entry_points: tuple[str, ...] = ()

    @property
    def watched(self) -> bool:
        """Whether the item's calls run under the worker's watch."""
        return bool(self.aten_ops or self.entry_points)

    def watch_params(self) -> dict[str, list[str]]:
        """What the guarded probes of ``autograder.sandbox.watch`` are sent."""
        return {"aten_ops": list(self.aten_ops), "entry_points": list(self.entry_points)}


def _rule(names, advice, *, aten_ops=(), entry_points=()) -> Rule:
    return Rule(frozenset(names), advice, tuple(aten_ops), tuple(entry_points))


_SOFTMAX = ("softmax", "log_softmax", "Softmax", "LogSoftmax", "softmin")
_GENERATE = ("generate", "GenerationMixin", "GenerationConfig")

# Every operator that computes a softmax: torch.softmax, F.softmax, Tensor.softmax,
# torch.special.softmax, nn.Softmax and F.softmin all reach aten._softmax; the
# attention kernels use _safe_softmax and _masked_softmax. logsumexp is not one:
# it is a step of a hand-written, stable softmax.
_SOFTMAX_OPS = ("aten._softmax", "aten._log_softmax", "aten.softmax", "aten.log_softmax",
                "aten._safe_softmax", "aten._masked_softmax", "aten._sparse_softmax",
                "aten._sparse_log_softmax", "aten.special_softmax", "aten.special_log_softmax",
                "aten._nested_tensor_softmax")
# F.scaled_dot_product_attention and the kernels it chooses from (on CPU
# _scaled_dot_product_flash_attention_for_cpu), and nn.MultiheadAttention's fused path.
_ATTENTION_OPS = ("aten.scaled_dot_product_attention", "aten._scaled_dot_product", "aten._fused_sdp_choice",
                  "aten._flash_attention", "aten._efficient_attention", "aten._cudnn_attention",
                  "aten._native_multi_head_attention", "aten._triton_multi_head_attention",
                  "aten._triton_scaled_dot_attention")
# generate() and the loops it runs (a student may call those directly).
_GENERATION = ("transformers.generation.utils:GenerationMixin.generate",
               "transformers.generation.utils:GenerationMixin._sample",
               "transformers.generation.utils:GenerationMixin._beam_search")

# Attention done by a library module rather than by the student's own pieces: torch's
# MultiheadAttention (its Python path; the fused one runs the _ATTENTION_OPS) and the BERT
# modules of transformers, whose forward passes are what the assembled-BERT items ask for.
_BERT = "transformers.models.bert.modeling_bert"
_BERT_MODULES = ("BertModel", "BertEmbeddings", "BertEncoder", "BertLayer", "BertAttention", "BertSelfAttention",
                 "BertSelfOutput", "BertIntermediate", "BertOutput")
_LIBRARY_ATTENTION = ("torch.nn.modules.activation:MultiheadAttention.forward",
                      "torch.nn.functional:multi_head_attention_forward",
                      *(f"{_BERT}:{module}.forward" for module in _BERT_MODULES))
_ASSEMBLED = ("scaled_dot_product_attention", "MultiheadAttention", "multi_head_attention_forward", *_BERT_MODULES)


def _assembled(advice: str) -> Rule:
    """An item of the assembled BERT: no library attention or BERT module, by name or by what runs
    (its calls take tensors only, so every attention operator that runs is the student's doing).
    F.scaled_dot_product_attention on inputs its fused kernels do not take (3-D ones) falls back to
    a decomposition whose only mark is _safe_softmax; a softmax the student calls (torch.softmax:
    aten._softmax) is ``softmax``'s matter, not these items'."""
    return _rule(_ASSEMBLED, advice, aten_ops=(*_ATTENTION_OPS, "aten._safe_softmax", "aten._masked_softmax"),
                 entry_points=_LIBRARY_ATTENTION)


# peft builds every adapter through a tuner (BaseTuner.__init__: LoraModel, prompt tuning's
# model wrapper, ...) or a PeftModel; a LoRA layer made alone sets itself up in update_layer.
_PEFT = ("peft.mapping_func:get_peft_model", "peft.peft_model:PeftModel.__init__",
         "peft.tuners.tuners_utils:BaseTuner.__init__", "peft.tuners.lora.layer:LoraLayer.update_layer",
         "peft.tuners.lora.layer:Linear.forward")

# Keyed by the grade_id of the solution cell (the function's name).
RULES: dict[str, Rule] = {
    "softmax": _rule(_SOFTMAX, "compute exp(x - max) / sum(exp(x - max)) yourself", aten_ops=_SOFTMAX_OPS),
    "scaled_dot_product_attention": _rule(
        ("scaled_dot_product_attention", "MultiheadAttention", "multi_head_attention_forward"),
        "write the matrix products, the masking and the softmax yourself",
        aten_ops=_ATTENTION_OPS + _SOFTMAX_OPS,
    ),
    "multi_head_self_attention": _assembled(
        "project, split into heads and call your scaled_dot_product_attention, then merge and project"),
    "encoder_layer": _assembled("add each sub-layer to its input and apply F.layer_norm, with your attention"),
    "bert_encoder": _assembled("sum the three embeddings, normalise, and run your encoder_layer for each layer"),
    "mask_tokens": _rule(
        ("DataCollatorForLanguageModeling", "DataCollatorForWholeWordMask", "torch_mask_tokens",
         "numpy_mask_tokens"),
        "draw the selection and the 80/10/10 replacement with torch random functions",
        # Calling a collator masks through these (its __call__ is the shared DataCollatorMixin's).
        entry_points=("transformers.data.data_collator:DataCollatorForLanguageModeling.torch_mask_tokens",
                      "transformers.data.data_collator:DataCollatorForLanguageModeling.numpy_mask_tokens"),
    ),
    "greedy_decode": _rule(_GENERATE, "loop over time steps and call the model yourself", entry_points=_GENERATION),
    "beam_search": _rule(_GENERATE, "keep and extend the beams yourself", entry_points=_GENERATION),
    "sample_next_token": _rule(
        ("TopKLogitsWarper", "TopPLogitsWarper", "TemperatureLogitsWarper", "LogitsProcessorList"),
        "apply temperature, top-k and top-p to the logits yourself",
        entry_points=("transformers.generation.logits_process:TopKLogitsWarper.__call__",
                      "transformers.generation.logits_process:TopPLogitsWarper.__call__",
                      "transformers.generation.logits_process:TemperatureLogitsWarper.__call__"),
    ),
    "top_k_mask_predictions": _rule(
        ("pipeline", "FillMaskPipeline", "fill-mask"),
        "find the [MASK] rows, take the softmax and its top k yourself",
        # Every pipeline call goes through Pipeline.__call__, however the object was made;
        # postprocess is the softmax and top k of the fill-mask pipeline, callable alone.
        entry_points=("transformers.pipelines:pipeline", "transformers.pipelines.base:Pipeline.__call__",
                      "transformers.pipelines.fill_mask:FillMaskPipeline.postprocess"),
    ),
    "linear_warmup_decay": _rule(
        ("get_linear_schedule_with_warmup", "get_scheduler", "get_constant_schedule_with_warmup"),
        "return the multiplier from step, warmup_steps and total_steps",
        # The lambda is the multiplier itself, the one the schedule's LambdaLR calls.
        entry_points=("transformers.optimization:get_linear_schedule_with_warmup",
                      "transformers.optimization:get_scheduler",
                      "transformers.optimization:_get_linear_schedule_with_warmup_lr_lambda"),
    ),
    "train_epoch": _rule(("Trainer", "TrainingArguments"), "write the loop: forward, backward, clip, step",
                         entry_points=("transformers.trainer:Trainer.train",
                                       "transformers.trainer:Trainer.training_step")),
    "subsample_balanced": _rule(
        ("train_test_split", "StratifiedShuffleSplit", "StratifiedKFold"),
        "draw each class's examples with torch's random functions yourself",
        entry_points=("sklearn.model_selection._split:train_test_split",
                      "sklearn.model_selection._split:StratifiedShuffleSplit._iter_indices",
                      "datasets.arrow_dataset:Dataset.train_test_split"),
    ),
    "classify_by_generation": _rule(
        (*_GENERATE, "pipeline", "TextGenerationPipeline"),
        "score each label's tokens with one forward pass of the model yourself",
        entry_points=(*_GENERATION, "transformers.pipelines:pipeline", "transformers.pipelines.base:Pipeline.__call__"),
    ),
    "lora_linear": _rule(("peft", "LoraConfig", "get_peft_model", "LoraModel"),
                        "build lora_A and lora_B as nn.Parameter yourself", entry_points=_PEFT),
    "apply_lora": _rule(("peft", "LoraConfig", "get_peft_model", "LoraModel"),
                        "replace the nn.Linear modules with your LoRALinear", entry_points=_PEFT),
    "peft_parameter_counts": _rule(("peft", "LoraConfig", "PromptTuningConfig", "get_peft_model", "PeftModel"),
                                   "count from the model's modules and config yourself", entry_points=_PEFT),
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


TAMPERED = "the grading instrumentation was modified"


def tamper_message(grade_id: str, changes: list[str]) -> str:
    """The message of an item during whose call the shortcut check itself was switched off."""
    return f"while '{grade_id}' ran, {TAMPERED} ({'; '.join(changes)}); no points for this item."
