"""Stand-in students for the hidden suite of Part B (fine-tuning and LoRA)."""
from __future__ import annotations

import copy
import math

import torch
from torch import nn

from autograder.reference import adapters, answers, arithmetic, finetuning, lora


# ---------------------------------------------------------------- wrong
def schedule_without_warmup(step, *, warmup_steps, total_steps):
    return min(1.0, max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps)))


def freeze_keeps_embeddings_trainable(model, num_layers, *, freeze_embeddings=True):
    return finetuning.freeze_layers(model, num_layers, freeze_embeddings=False)


def freeze_without_reset(model, num_layers, *, freeze_embeddings=True):
    """Freezes, but never makes the other parameters trainable again."""
    encoder = model.base_model
    if not 0 <= num_layers <= len(encoder.encoder.layer):
        raise ValueError("num_layers out of range")
    if freeze_embeddings:
        encoder.embeddings.requires_grad_(False)
    for layer in encoder.encoder.layer[:num_layers]:
        layer.requires_grad_(False)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def train_epoch_without_zero_grad(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    model.train()
    device = next(model.parameters()).device
    batch_losses = []
    for batch in loader:
        loss = model(**{k: v.to(device) for k, v in batch.items()}).loss
        loss.backward()
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        batch_losses.append(loss.item())
    if not batch_losses:
        raise ValueError("empty loader")
    return sum(batch_losses) / len(batch_losses)


def train_epoch_without_clipping(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    return finetuning.train_epoch(model, loader, optimizer, scheduler, max_grad_norm=None)


def train_epoch_scheduler_per_epoch(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    loss = finetuning.train_epoch(model, loader, optimizer, None, max_grad_norm=max_grad_norm)
    if scheduler is not None:
        scheduler.step()
    return loss


@torch.no_grad()
def evaluate_mean_of_batches(model, loader):
    model.eval()
    device = next(model.parameters()).device
    accuracies = []
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        labels = batch.pop("labels")
        accuracies.append((model(**batch).logits.argmax(-1) == labels).float().mean().item())
    if not accuracies:
        raise ValueError("empty loader")
    return sum(accuracies) / len(accuracies)


def evaluate_without_eval_mode(model, loader):
    model.eval = lambda: model  # the reference's model.eval() now does nothing
    try:
        return finetuning.evaluate(model, loader)
    finally:
        del model.eval


class LoRALinearRandomB(lora.LoRALinear):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, r, alpha, dropout)
        nn.init.kaiming_uniform_(self.lora_B, a=math.sqrt(5))


class LoRALinearScaledByAlpha(lora.LoRALinear):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, r, alpha, dropout)
        self.scaling = alpha


def lora_parameter_count_full(d_in, d_out, r):
    return d_in * d_out


def apply_lora_frozen_head(model, target_names=("query", "value"), r=8, alpha=16, dropout=0.0,
                           trainable_names=("classifier",)):
    return lora.apply_lora(model, target_names, r, alpha, dropout, trainable_names=())


def footprint_inverted_savings(energy_mwh, **kwargs):
    result = arithmetic.fine_tuning_footprint(energy_mwh, **kwargs)
    return {**result, "savings_fraction": 1.0 - result["savings_fraction"]}


def _edited(constant: dict, **changes) -> dict:
    return {**constant, **changes}


ARCHITECTURE_TABLE_T5_AS_DECODER = _edited(
    answers.ARCHITECTURE_TABLE, T5={**answers.ARCHITECTURE_TABLE["T5"], "architecture": "decoder"})
MODEL_FOR_TASK_ALL_BERT = {task: "BERT" for task in answers.MODEL_FOR_TASK}
FINETUNE_CONFIG_FROM_SCRATCH_LR = _edited(answers.FINETUNE_CONFIG, learning_rate=1e-2)
GENERATION_SETTINGS_ONE_BEAM = _edited(answers.GENERATION_SETTINGS, beam={"do_sample": False, "num_beams": 1})


# ---------------------------------------------------------------- correct, written differently
def train_epoch_clipping_by_hand(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    model.train()
    device = next(model.parameters()).device
    losses_ = []
    for batch in loader:
        optimizer.zero_grad(set_to_none=True)
        loss = model(**{k: v.to(device) for k, v in batch.items()}).loss
        loss.backward()
        if max_grad_norm is not None:
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            norm = torch.sqrt(sum((g.float() ** 2).sum() for g in grads))
            if norm > max_grad_norm:
                for g in grads:
                    g.mul_(max_grad_norm / (norm + 1e-6))
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses_.append(loss.item())
    if not losses_:
        raise ValueError("the loader yielded no batch")
    return sum(losses_) / len(losses_)


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"linear_warmup_decay": schedule_without_warmup, "freeze_layers": freeze_keeps_embeddings_trainable,
     "train_epoch": train_epoch_without_zero_grad, "evaluate": evaluate_mean_of_batches,
     "LoRALinear": LoRALinearRandomB, "lora_parameter_count": lora_parameter_count_full,
     "apply_lora": apply_lora_frozen_head, "fine_tuning_footprint": footprint_inverted_savings,
     "ARCHITECTURE_TABLE": ARCHITECTURE_TABLE_T5_AS_DECODER, "MODEL_FOR_TASK": MODEL_FOR_TASK_ALL_BERT,
     "FINETUNE_CONFIG": FINETUNE_CONFIG_FROM_SCRATCH_LR, "GENERATION_SETTINGS": GENERATION_SETTINGS_ONE_BEAM},
    {"freeze_layers": freeze_without_reset, "train_epoch": train_epoch_without_clipping,
     "evaluate": evaluate_without_eval_mode, "LoRALinear": LoRALinearScaledByAlpha},
    {"train_epoch": train_epoch_scheduler_per_epoch},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"train_epoch": train_epoch_clipping_by_hand},
]


# ---------------------------------------------------------------- wrong in one clause each
# Named by the clause tables (autograder/reference/clauses/part_b_finetuning.toml).
def schedule_decays_over_all_steps(step, *, warmup_steps, total_steps):
    if step < warmup_steps:
        return step / warmup_steps
    return max(0.0, (total_steps - step) / max(1, total_steps))


def schedule_negative_after_the_end(step, *, warmup_steps, total_steps):
    if step < warmup_steps:
        return step / warmup_steps
    return (total_steps - step) / max(1, total_steps - warmup_steps)


def schedule_without_floor_on_denominators(step, *, warmup_steps, total_steps):
    if step < warmup_steps:
        return step / warmup_steps
    return max(0.0, (total_steps - step) / (total_steps - warmup_steps))


def schedule_as_tensor(step, *, warmup_steps, total_steps):
    return torch.tensor(finetuning.linear_warmup_decay(step, warmup_steps=warmup_steps, total_steps=total_steps),
                        dtype=torch.float64)


def freeze_top_layers(model, num_layers, *, freeze_embeddings=True):
    layers = model.base_model.encoder.layer
    if not 0 <= num_layers <= len(layers):
        raise ValueError("num_layers out of range")
    model.requires_grad_(True)
    if freeze_embeddings:
        model.base_model.embeddings.requires_grad_(False)
    for layer in layers[len(layers) - num_layers:]:
        layer.requires_grad_(False)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def freeze_ignores_embeddings_flag(model, num_layers, *, freeze_embeddings=True):
    return finetuning.freeze_layers(model, num_layers)


def freeze_counts_tensors(model, num_layers, *, freeze_embeddings=True):
    finetuning.freeze_layers(model, num_layers, freeze_embeddings=freeze_embeddings)
    return sum(1 for p in model.parameters() if p.requires_grad)


def freeze_through_bert_attribute(model, num_layers, *, freeze_embeddings=True):
    """Reaches the encoder as ``model.bert``, which a bare BertModel does not have."""
    encoder = model.bert
    if not 0 <= num_layers <= len(encoder.encoder.layer):
        raise ValueError("num_layers out of range")
    model.requires_grad_(True)
    if freeze_embeddings:
        encoder.embeddings.requires_grad_(False)
    for layer in encoder.encoder.layer[:num_layers]:
        layer.requires_grad_(False)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def freeze_without_range_check(model, num_layers, *, freeze_embeddings=True):
    return finetuning.freeze_layers(model, min(max(num_layers, 0), len(model.base_model.encoder.layer)),
                                    freeze_embeddings=freeze_embeddings)


def freeze_scales_embeddings(model, num_layers, *, freeze_embeddings=True):
    with torch.no_grad():
        model.base_model.embeddings.word_embeddings.weight.mul_(1.5)
    return finetuning.freeze_layers(model, num_layers, freeze_embeddings=freeze_embeddings)


def freeze_sets_train_mode(model, num_layers, *, freeze_embeddings=True):
    model.train()
    return finetuning.freeze_layers(model, num_layers, freeze_embeddings=freeze_embeddings)


def train_epoch_default_no_clipping(model, loader, optimizer, scheduler=None, *, max_grad_norm=None):
    return finetuning.train_epoch(model, loader, optimizer, scheduler, max_grad_norm=max_grad_norm)


def train_epoch_without_train_mode(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    model.train = lambda mode=True: model  # the reference's model.train() now does nothing
    try:
        return finetuning.train_epoch(model, loader, optimizer, scheduler, max_grad_norm=max_grad_norm)
    finally:
        del model.train


def train_epoch_weighted_by_examples(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    model.train()
    device = next(model.parameters()).device
    total, examples = 0.0, 0
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        optimizer.zero_grad()
        loss = model(**batch).loss
        loss.backward()
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        total += loss.item() * len(batch["labels"])
        examples += len(batch["labels"])
    if not examples:
        raise ValueError("the loader yielded no batch")
    return total / examples


def train_epoch_returns_tensor(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    return torch.tensor(finetuning.train_epoch(model, loader, optimizer, scheduler, max_grad_norm=max_grad_norm))


def train_epoch_empty_is_zero(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    loader = list(loader)
    return finetuning.train_epoch(model, loader, optimizer, scheduler, max_grad_norm=max_grad_norm) if loader else 0.0


def train_epoch_batches_left_in_place(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    """Never moves the batches to the model's device."""
    model.train()
    batch_losses = []
    for batch in loader:
        optimizer.zero_grad()
        loss = model(**batch).loss
        loss.backward()
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        batch_losses.append(loss.item())
    if not batch_losses:
        raise ValueError("the loader yielded no batch")
    return sum(batch_losses) / len(batch_losses)


def evaluate_returns_tensor(model, loader):
    return torch.tensor(finetuning.evaluate(model, loader))


def evaluate_empty_is_zero(model, loader):
    loader = list(loader)
    return finetuning.evaluate(model, loader) if loader else 0.0


@torch.no_grad()
def evaluate_batches_left_in_place(model, loader):
    model.eval()
    correct, total = 0, 0
    for batch in loader:
        batch = dict(batch)
        labels = batch.pop("labels")
        correct += int((model(**batch).logits.argmax(-1) == labels).sum())
        total += labels.numel()
    if not total:
        raise ValueError("the loader yielded no example")
    return correct / total


@torch.no_grad()
def evaluate_passes_labels(model, loader):
    """The evaluation loop of transformers' run_glue_no_trainer example: the whole batch, labels
    included, goes to the model (which then computes a loss nobody reads)."""
    model.eval()
    device = next(model.parameters()).device
    correct, total = 0, 0
    for batch in loader:
        batch = {name: tensor.to(device) for name, tensor in batch.items()}
        outputs = model(**batch)
        correct += int((outputs.logits.argmax(dim=-1) == batch["labels"]).sum())
        total += batch["labels"].numel()
    if not total:
        raise ValueError("the loader yielded no example")
    return correct / total


class LoRALinearCopiesBase(lora.LoRALinear):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(copy.deepcopy(base), r, alpha, dropout)


class LoRALinearTrainableBase(lora.LoRALinear):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, r, alpha, dropout)
        self.base.requires_grad_(True)


class LoRALinearTransposedB(lora.LoRALinear):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, r, alpha, dropout)
        self.lora_B = nn.Parameter(torch.zeros(r, base.out_features))

    def forward(self, x):
        return self.base(x) + (self.dropout(x) @ self.lora_A.T @ self.lora_B) * self.scaling


class LoRALinearNormalA(lora.LoRALinear):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, r, alpha, dropout)
        nn.init.normal_(self.lora_A)


class LoRALinearDetachedA(lora.LoRALinear):
    def forward(self, x):
        return self.base(x) + (self.dropout(x) @ self.lora_A.detach().T @ self.lora_B.T) * self.scaling


class LoRALinearWithoutRankCheck(lora.LoRALinear):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, max(r, 1), alpha, dropout)
        self.r, self.scaling = r, alpha / r


class LoRALinearOnCpu(lora.LoRALinear):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, r, alpha, dropout)
        self.lora_A = nn.Parameter(self.lora_A.detach().cpu())
        self.lora_B = nn.Parameter(self.lora_B.detach().cpu())


def apply_lora_query_only(model, target_names=("query",), r=8, alpha=16, dropout=0.0, trainable_names=("classifier",)):
    return lora.apply_lora(model, target_names, r, alpha, dropout, trainable_names)


def apply_lora_leaves_the_rest_trainable(model, target_names=("query", "value"), r=8, alpha=16, dropout=0.0,
                                         trainable_names=("classifier",)):
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    lora.apply_lora(model, target_names, r, alpha, dropout, trainable_names)
    for name, p in model.named_parameters():
        if name in trainable:
            p.requires_grad_(True)
    return model


def apply_lora_default_rank(model, target_names=("query", "value"), r=8, alpha=16, dropout=0.0,
                            trainable_names=("classifier",)):
    return lora.apply_lora(model, target_names, 8, alpha, dropout, trainable_names)


def apply_lora_silent_without_match(model, target_names=("query", "value"), r=8, alpha=16, dropout=0.0,
                                    trainable_names=("classifier",)):
    try:
        return lora.apply_lora(model, target_names, r, alpha, dropout, trainable_names)
    except ValueError:
        return model


def apply_lora_returns_nothing(model, *args, **kwargs):
    lora.apply_lora(model, *args, **kwargs)


class Adapter(lora.LoRALinear):
    """A LoRA layer of another name than the notebook's LoRALinear."""


def apply_lora_with_its_own_class(model, target_names=("query", "value"), r=8, alpha=16, dropout=0.0,
                                  trainable_names=("classifier",)):
    model.requires_grad_(False)
    targets = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
               if name in set(target_names) and isinstance(child, nn.Linear)]
    if not targets:
        raise ValueError("no layer matches")
    for parent, name, child in targets:
        setattr(parent, name, Adapter(child, r=r, alpha=alpha, dropout=dropout))
    for name, p in model.named_parameters():
        if set(trainable_names).intersection(name.split(".")):
            p.requires_grad_(True)
    return model


def footprint_inverted_ratio(energy_mwh, *, ref_energy_mwh=1287, ref_co2_tonnes=552, ref_cost_usd=4.6e6):
    ratio = ref_energy_mwh / energy_mwh
    return {"co2_tonnes": ratio * ref_co2_tonnes, "cost_usd": ratio * ref_cost_usd, "savings_fraction": 1.0 - ratio}


def footprint_ignores_reference_run(energy_mwh, **kwargs):
    return arithmetic.fine_tuning_footprint(energy_mwh)


def footprint_extra_key(energy_mwh, **kwargs):
    return {**arithmetic.fine_tuning_footprint(energy_mwh, **kwargs), "energy_mwh": energy_mwh}


ARCHITECTURE_TABLE_GPT_BIDIRECTIONAL = _edited(
    answers.ARCHITECTURE_TABLE, GPT={**answers.ARCHITECTURE_TABLE["GPT"], "context": "bidirectional"})
MODEL_FOR_TASK_NER_BY_GPT = _edited(answers.MODEL_FOR_TASK, **{"named entity recognition": "GPT"})
MODEL_FOR_TASK_GENERATION_BY_BERT = _edited(answers.MODEL_FOR_TASK, **{"text generation": "BERT"})
MODEL_FOR_TASK_TRANSLATION_BY_BERT = _edited(answers.MODEL_FOR_TASK, translation="BERT")
FINETUNE_CONFIG_FLOAT_EPOCHS = _edited(answers.FINETUNE_CONFIG, num_train_epochs=3.0)
FINETUNE_CONFIG_HEAVY_DECAY = _edited(answers.FINETUNE_CONFIG, weight_decay=0.5)
FINETUNE_CONFIG_FREEZE_AS_WORD = _edited(answers.FINETUNE_CONFIG, freeze_embeddings="no")
GENERATION_SETTINGS_SAMPLING_WITHOUT_SAMPLE = _edited(
    answers.GENERATION_SETTINGS, sampling={"do_sample": False, "temperature": 0.7})


# ---------------------------------------------------------------- more correct ones, written differently
def schedule_by_cases(step, *, warmup_steps, total_steps):
    if step >= total_steps:
        return 0.0
    if step < warmup_steps:
        return step / warmup_steps
    return (total_steps - step) / (total_steps - warmup_steps)


def schedule_by_fractions(step, *, warmup_steps, total_steps):
    """Exact rational arithmetic, rounded to a float once."""
    from fractions import Fraction

    if step < warmup_steps:
        return float(Fraction(step, max(1, warmup_steps)))
    return float(max(Fraction(0), Fraction(total_steps - step, max(1, total_steps - warmup_steps))))


def freeze_by_parameter_names(model, num_layers, *, freeze_embeddings=True):
    base = model.base_model
    depth = len(base.encoder.layer)
    if num_layers < 0 or num_layers > depth:
        raise ValueError(f"num_layers must be in [0, {depth}]")
    frozen = tuple(f"encoder.layer.{i}." for i in range(num_layers)) + (("embeddings.",) if freeze_embeddings else ())
    for p in model.parameters():
        p.requires_grad = True
    for name, p in base.named_parameters():
        if name.startswith(frozen):
            p.requires_grad = False
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def freeze_module_by_module(model, num_layers, *, freeze_embeddings=True):
    layers = list(model.base_model.encoder.layer)
    if not 0 <= num_layers <= len(layers):
        raise ValueError("num_layers out of range")
    frozen_modules = layers[:num_layers] + ([model.base_model.embeddings] if freeze_embeddings else [])
    frozen = {id(p) for module in frozen_modules for p in module.parameters()}
    for p in model.parameters():
        p.requires_grad_(id(p) not in frozen)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def train_epoch_losses_as_tensors(model, loader, optimizer, scheduler=None, *, max_grad_norm=1.0):
    model.train()
    device = next(model.parameters()).device
    losses_ = []
    for batch in loader:
        inputs = {name: tensor.to(device) for name, tensor in batch.items()}
        optimizer.zero_grad(set_to_none=False)
        loss = model(**inputs).loss
        loss.backward()
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None], max_grad_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses_.append(loss.detach().double())
    if not losses_:
        raise ValueError("the loader yielded no batch")
    return float(torch.stack(losses_).mean())


@torch.no_grad()
def evaluate_by_concatenation(model, loader):
    model.eval()
    device = next(model.parameters()).device
    predictions, labels = [], []
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        labels.append(batch.pop("labels"))
        predictions.append(model(**batch).logits.argmax(-1))
    if not labels:
        raise ValueError("the loader yielded no example")
    labels = torch.cat(labels)
    if not labels.numel():
        raise ValueError("the loader yielded no example")
    return int((torch.cat(predictions) == labels).sum()) / labels.numel()


def evaluate_example_by_example(model, loader):
    model.eval()
    device = next(model.parameters()).device
    right = seen = 0
    with torch.inference_mode():
        for batch in loader:
            inputs = {k: v.to(device) for k, v in batch.items() if k != "labels"}
            for predicted, label in zip(model(**inputs).logits.argmax(-1).tolist(), batch["labels"].tolist()):
                right += predicted == label
                seen += 1
    if not seen:
        raise ValueError("the loader yielded no example")
    return right / seen


class LoRALinearByFunctional(nn.Module):
    """F.linear twice for the low-rank path; A drawn by nn.init.uniform_ on the same bounds."""

    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__()
        if r < 1:
            raise ValueError("r must be >= 1")
        self.base, self.r, self.alpha, self.scaling = base, r, alpha, alpha / r
        for p in base.parameters():
            p.requires_grad_(False)
        bound = 1 / math.sqrt(base.in_features)
        like = dict(device=base.weight.device, dtype=base.weight.dtype)
        self.lora_A = nn.Parameter(nn.init.uniform_(torch.empty(r, base.in_features, **like), -bound, bound))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r, **like))
        self.dropout = nn.Dropout(dropout) if dropout else nn.Identity()

    def forward(self, x):
        low_rank = nn.functional.linear(nn.functional.linear(self.dropout(x), self.lora_A), self.lora_B)
        return self.base(x) + low_rank * self.scaling


class LoRALinearMergedForward(lora.LoRALinear):
    """Without dropout, one product with W + scaling * B A (gradients still reach A and B)."""

    def forward(self, x):
        if not isinstance(self.dropout, nn.Identity):
            return super().forward(x)
        weight = self.base.weight + self.scaling * (self.lora_B @ self.lora_A)
        return nn.functional.linear(x, weight, self.base.bias)


def lora_parameter_count_by_parts(d_in, d_out, r):
    return r * d_in + d_out * r


def lora_parameter_count_from_shapes(d_in, d_out, r):
    return torch.empty(r, d_in).numel() + torch.empty(d_out, r).numel()


def apply_lora_by_module_names(model, target_names=("query", "value"), r=8, alpha=16, dropout=0.0,
                               trainable_names=("classifier",)):
    for p in model.parameters():
        p.requires_grad = False
    names = [name for name, module in model.named_modules()
             if isinstance(module, nn.Linear) and name.rsplit(".", 1)[-1] in set(target_names)]
    if not names:
        raise ValueError("no nn.Linear matches target_names")
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        setattr(parent, child, lora.LoRALinear(getattr(parent, child), r, alpha, dropout))
    for name, p in model.named_parameters():
        if any(part in set(trainable_names) for part in name.split(".")):
            p.requires_grad = True
    return model


def apply_lora_recursively(model, target_names=("query", "value"), r=8, alpha=16, dropout=0.0,
                           trainable_names=("classifier",)):
    model.requires_grad_(False)
    targets, trainable = set(target_names), set(trainable_names)

    def adapt(module):
        count = 0
        for name, child in list(module.named_children()):
            if name in targets and isinstance(child, nn.Linear):
                setattr(module, name, lora.LoRALinear(child, r, alpha, dropout))
                count += 1
            else:
                count += adapt(child)
        return count

    if not adapt(model):
        raise ValueError("no nn.Linear matches target_names")
    for name, p in model.named_parameters():
        if not trainable.isdisjoint(name.split(".")):
            p.requires_grad_(True)
    return model


def footprint_per_mwh(energy_mwh, *, ref_energy_mwh=1287, ref_co2_tonnes=552, ref_cost_usd=4.6e6):
    return {"co2_tonnes": energy_mwh * (ref_co2_tonnes / ref_energy_mwh),
            "cost_usd": energy_mwh * (ref_cost_usd / ref_energy_mwh),
            "savings_fraction": (ref_energy_mwh - energy_mwh) / ref_energy_mwh}


def footprint_from_saving(energy_mwh, **reference_run):
    """The saving first: what is not spent, scaled back."""
    run = {"ref_energy_mwh": 1287, "ref_co2_tonnes": 552, "ref_cost_usd": 4.6e6, **reference_run}
    saved = 1 - energy_mwh / run["ref_energy_mwh"]
    return {"savings_fraction": saved, "co2_tonnes": run["ref_co2_tonnes"] * (1 - saved),
            "cost_usd": run["ref_cost_usd"] * (1 - saved)}


ALTERNATIVES += [
    {"linear_warmup_decay": schedule_by_cases, "freeze_layers": freeze_by_parameter_names,
     "train_epoch": train_epoch_losses_as_tensors, "evaluate": evaluate_by_concatenation,
     "LoRALinear": LoRALinearByFunctional, "lora_parameter_count": lora_parameter_count_by_parts,
     "apply_lora": apply_lora_by_module_names, "fine_tuning_footprint": footprint_per_mwh},
    {"linear_warmup_decay": schedule_by_fractions, "freeze_layers": freeze_module_by_module,
     "evaluate": evaluate_example_by_example, "LoRALinear": LoRALinearMergedForward,
     "lora_parameter_count": lora_parameter_count_from_shapes, "apply_lora": apply_lora_recursively,
     "fine_tuning_footprint": footprint_from_saving},
]


# ---------------------------------------------------------------- beyond LoRA: wrong in one clause each
class AdapterWithoutBottleneckCheck(adapters.BottleneckAdapter):
    def __init__(self, hidden_size, bottleneck):
        super().__init__(hidden_size, max(bottleneck, 1))


class AdapterWithoutDownBias(adapters.BottleneckAdapter):
    def __init__(self, hidden_size, bottleneck):
        super().__init__(hidden_size, bottleneck)
        self.down = nn.Linear(hidden_size, bottleneck, bias=False)


class AdapterWithScale(adapters.BottleneckAdapter):
    """A learned output scale, starting at 1: the same function, one parameter too many."""

    def __init__(self, hidden_size, bottleneck):
        super().__init__(hidden_size, bottleneck)
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, x):
        return x + self.scale * self.up(self.act(self.down(x)))


class AdapterFrozenDown(adapters.BottleneckAdapter):
    def __init__(self, hidden_size, bottleneck):
        super().__init__(hidden_size, bottleneck)
        self.down.requires_grad_(False)


class AdapterZeroDown(adapters.BottleneckAdapter):
    """Both projections zero: the adapter starts as the identity, and no gradient ever reaches it."""

    def __init__(self, hidden_size, bottleneck):
        super().__init__(hidden_size, bottleneck)
        nn.init.zeros_(self.down.weight)
        nn.init.zeros_(self.down.bias)


class AdapterRandomUp(adapters.BottleneckAdapter):
    def __init__(self, hidden_size, bottleneck):
        super().__init__(hidden_size, bottleneck)
        self.up.reset_parameters()  # nn.Linear's random initialisation instead of zero


class AdapterWithoutResidual(adapters.BottleneckAdapter):
    def forward(self, x):
        return self.up(self.act(self.down(x)))


class AdapterReLU(adapters.BottleneckAdapter):
    def forward(self, x):
        return x + self.up(torch.relu(self.down(x)))


class AdapterFlattens(adapters.BottleneckAdapter):
    """Works on a matrix of rows and forgets to put the leading dimensions back."""

    def forward(self, x):
        rows = x.reshape(-1, x.shape[-1])
        return rows + self.up(self.act(self.down(rows)))


class AdapterFloat32Output(adapters.BottleneckAdapter):
    def forward(self, x):
        return super().forward(x).float()


class AdapterOutputOnCpu(adapters.BottleneckAdapter):
    def forward(self, x):
        return super().forward(x).cpu()


class AdapterAddsInPlace(adapters.BottleneckAdapter):
    def forward(self, x):
        return x.add_(self.up(self.act(self.down(x))))


class AdapterDetachedDown(adapters.BottleneckAdapter):
    def forward(self, x):
        return x + self.up(self.act(self.down(x).detach()))


def _head(model) -> int:
    return sum(p.numel() for p in model.classifier.parameters())


def peft_counts_extra_key(model, **kwargs):
    return {**adapters.peft_parameter_counts(model, **kwargs), "head": _head(model)}


def peft_counts_as_floats(model, **kwargs):
    return {key: float(value) for key, value in adapters.peft_parameter_counts(model, **kwargs).items()}


def peft_counts_full_trainable_only(model, **kwargs):
    counts = adapters.peft_parameter_counts(model, **kwargs)
    return {**counts, "full": sum(p.numel() for p in model.parameters() if p.requires_grad)}


def peft_counts_pooler_in_head(model, **kwargs):
    """Counts the pooler as part of the head (its bias was already in BitFit's count)."""
    counts = adapters.peft_parameter_counts(model, **kwargs)
    pooler = model.base_model.pooler.dense
    return {**counts, **{key: counts[key] + pooler.weight.numel() + pooler.bias.numel()
                         for key in ("lora", "adapters", "prompt_tuning")},
            "bitfit": counts["bitfit"] + pooler.weight.numel()}


def peft_counts_lora_on_key_too(model, *, lora_r, adapter_bottleneck, prompt_length):
    counts = adapters.peft_parameter_counts(model, lora_r=lora_r, adapter_bottleneck=adapter_bottleneck,
                                        prompt_length=prompt_length)
    keys = sum(lora_r * (m.in_features + m.out_features) for name, m in model.named_modules()
               if isinstance(m, nn.Linear) and name.endswith(".key"))
    return {**counts, "lora": counts["lora"] + keys}


def peft_counts_one_adapter_per_layer(model, **kwargs):
    counts = adapters.peft_parameter_counts(model, **kwargs)
    return {**counts, "adapters": (counts["adapters"] - _head(model)) // 2 + _head(model)}


def peft_counts_adapters_without_biases(model, *, lora_r, adapter_bottleneck, prompt_length):
    counts = adapters.peft_parameter_counts(model, lora_r=lora_r, adapter_bottleneck=adapter_bottleneck,
                                        prompt_length=prompt_length)
    d, layers = model.config.hidden_size, len(model.base_model.encoder.layer)
    return {**counts, "adapters": 2 * layers * 2 * d * adapter_bottleneck + _head(model)}


def peft_counts_prompt_in_every_layer(model, *, lora_r, adapter_bottleneck, prompt_length):
    """Prefix tuning's count (vectors in every layer), not prompt tuning's."""
    counts = adapters.peft_parameter_counts(model, lora_r=lora_r, adapter_bottleneck=adapter_bottleneck,
                                        prompt_length=prompt_length)
    d, layers = model.config.hidden_size, len(model.base_model.encoder.layer)
    return {**counts, "prompt_tuning": layers * prompt_length * d + _head(model)}


def peft_counts_bitfit_without_layernorms(model, **kwargs):
    counts = adapters.peft_parameter_counts(model, **kwargs)
    norms = sum(m.bias.numel() for m in model.base_model.modules() if isinstance(m, nn.LayerNorm))
    return {**counts, "bitfit": counts["bitfit"] - norms}


def peft_counts_bitfit_without_pooler(model, **kwargs):
    counts = adapters.peft_parameter_counts(model, **kwargs)
    return {**counts, "bitfit": counts["bitfit"] - model.base_model.pooler.dense.bias.numel()}


def peft_counts_assumes_four_times_wider_ffn(model, *, lora_r, adapter_bottleneck, prompt_length):
    """BitFit from BERT-base's proportions: a feed-forward block 4 times the hidden size."""
    counts = adapters.peft_parameter_counts(model, lora_r=lora_r, adapter_bottleneck=adapter_bottleneck,
                                        prompt_length=prompt_length)
    d, layers = model.config.hidden_size, len(model.base_model.encoder.layer)
    per_layer = 4 * d + d + 4 * d + d + d  # q, k, v, o; LayerNorm; intermediate; output; LayerNorm
    return {**counts, "bitfit": d + layers * per_layer + d + _head(model)}


def peft_counts_without_argument_check(model, *, lora_r, adapter_bottleneck, prompt_length):
    return adapters.peft_parameter_counts(model, lora_r=max(lora_r, 1), adapter_bottleneck=max(adapter_bottleneck, 1),
                                      prompt_length=max(prompt_length, 1))


def peft_counts_builds_lora_in_place(model, *, lora_r, adapter_bottleneck, prompt_length):
    """Counts LoRA's trainable parameters by applying LoRA to the model itself."""
    counts = adapters.peft_parameter_counts(model, lora_r=lora_r, adapter_bottleneck=adapter_bottleneck,
                                        prompt_length=prompt_length)
    lora.apply_lora(model, r=lora_r)
    return {**counts, "lora": sum(p.numel() for p in model.parameters() if p.requires_grad)}


# ---------------------------------------------------------------- beyond LoRA: correct, written differently
class BottleneckAdapterByHand(nn.Module):
    """up is built first (so down draws other random numbers), forward by explicit products and the
    erf form of the GELU."""

    def __init__(self, hidden_size, bottleneck):
        super().__init__()
        if bottleneck <= 0:
            raise ValueError("bottleneck must be positive")
        self.up = nn.Linear(bottleneck, hidden_size)
        self.down = nn.Linear(hidden_size, bottleneck)
        with torch.no_grad():
            self.up.weight.fill_(0.0)
            self.up.bias.fill_(0.0)

    def forward(self, x):
        h = torch.matmul(x, self.down.weight.t()) + self.down.bias
        h = 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))
        return x + torch.matmul(h, self.up.weight.t()) + self.up.bias


class BottleneckAdapterSequential(nn.Module):
    """down re-drawn uniformly on its own bounds, the three steps in an nn.Sequential sharing the layers."""

    def __init__(self, hidden_size, bottleneck):
        super().__init__()
        if not bottleneck >= 1:
            raise ValueError("bottleneck must be >= 1")
        self.down = nn.Linear(hidden_size, bottleneck)
        bound = 1 / math.sqrt(hidden_size)
        nn.init.uniform_(self.down.weight, -bound, bound)
        nn.init.uniform_(self.down.bias, -bound, bound)
        self.up = nn.Linear(bottleneck, hidden_size)
        self.up.weight.data.zero_()
        self.up.bias.data.zero_()
        self.block = nn.Sequential(self.down, nn.GELU(), self.up)

    def forward(self, x):
        return torch.add(x, self.block(x))


def peft_counts_by_building(model, *, lora_r, adapter_bottleneck, prompt_length):
    """Builds each method on a copy of the model and counts what requires grad."""
    if min(lora_r, adapter_bottleneck, prompt_length) < 1:
        raise ValueError("every setting must be at least 1")

    def trainable(m):
        return sum(p.numel() for p in m.parameters() if p.requires_grad)

    def copy_with_head():
        clone = copy.deepcopy(model)
        clone.requires_grad_(False)
        clone.classifier.requires_grad_(True)
        return clone

    with torch.random.fork_rng(devices=[]):  # the copies draw from the global generator: leave it as it was
        adapted = lora.apply_lora(copy.deepcopy(model), r=lora_r)
        housed = copy_with_head()
        d = housed.config.hidden_size
        for layer in housed.base_model.encoder.layer:
            for block in (layer.attention.output, layer.output):
                block.dense = nn.Sequential(block.dense, adapters.BottleneckAdapter(d, adapter_bottleneck))
    biased = copy_with_head()
    for name, p in biased.base_model.named_parameters():
        p.requires_grad_(name.endswith("bias"))
    prompt = nn.Parameter(torch.zeros(prompt_length, model.base_model.embeddings.word_embeddings.weight.shape[1]))
    return {"full": sum(p.numel() for p in model.parameters()), "lora": trainable(adapted),
            "adapters": trainable(housed), "prompt_tuning": prompt.numel() + trainable(copy_with_head()),
            "bitfit": trainable(biased)}


def peft_counts_from_config(model, *, lora_r, adapter_bottleneck, prompt_length):
    """Formulas over the config's sizes, for BERT's layout."""
    for value in (lora_r, adapter_bottleneck, prompt_length):
        if value < 1:
            raise ValueError("lora_r, adapter_bottleneck and prompt_length must be >= 1")
    c = model.config
    h, i, n = c.hidden_size, c.intermediate_size, c.num_hidden_layers
    head = h * c.num_labels + c.num_labels
    embeddings = (c.vocab_size + c.max_position_embeddings + c.type_vocab_size) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    pooler = h * h + h
    return {"full": embeddings + n * layer + pooler + head,
            "lora": n * 2 * lora_r * (h + h) + head,
            "adapters": n * 2 * (2 * h * adapter_bottleneck + h + adapter_bottleneck) + head,
            "prompt_tuning": prompt_length * h + head,
            "bitfit": h + n * (4 * h + h + i + h + h) + h + head}


MUTANTS += [
    {"BottleneckAdapter": AdapterWithoutResidual, "peft_parameter_counts": peft_counts_one_adapter_per_layer},
]

ALTERNATIVES += [
    {"BottleneckAdapter": BottleneckAdapterByHand, "peft_parameter_counts": peft_counts_by_building},
    {"BottleneckAdapter": BottleneckAdapterSequential, "peft_parameter_counts": peft_counts_from_config},
]
