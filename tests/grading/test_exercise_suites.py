"""The hidden suites of the programming exercises 1-4, graded in this process with
stand-in students (the pattern of ``test_hidden_suites.py``).

* The references earn every point, and the points of each grade cell add up to
  the cell's points (from the course model, autograder/course.py).
* Deliberately wrong solutions lose points on their own cell, and only there.
* Correct solutions written differently from the reference earn every point.
* A function that still raises NotImplementedError scores zero, with the status
  "error" and a message that says it is not implemented.
* The classification tests are discriminating: a classifier that always answers
  the same class fails each of them.

Suites run through ``autograder.pytest_plugin.run_hidden_suite`` with an
``InProcessSession`` (no sandbox; values still cross the wire format), on the CPU.
"""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from torch import nn

REPO = Path(__file__).resolve().parents[2]
from autograder.course import load_course  # noqa: E402
from autograder.reference import exercises, scoring  # noqa: E402
from autograder.drivers import models, probes  # noqa: E402,F401  (the fixtures and probes of the suites)
from tests.grading.inprocess import (  # noqa: E402
    GRADER_BUG,
    failures,
    grade_in_process,
    grading_environment,
    points_per_cell,
    reference_namespace,
)

# The exercises whose hidden suites are exercised here (exercise 5: test_hidden_suites.py),
# and the points of their auto-graded cells, from the course model.
STEMS = ["exercise1_masked_predictions", "exercise2_finetune_vs_scratch", "exercise3_classification_as_generation",
         "exercise4_model_size"]
CELL_POINTS: dict[str, dict[str, float]] = {stem: load_course().notebook(stem).test_points for stem in STEMS}
# The graded functions of each exercise (test_functions_cover_every_auto_graded_cell).
FUNCTIONS = {
    "exercise1_masked_predictions": ["top_k_mask_predictions"],
    "exercise2_finetune_vs_scratch": ["subsample_balanced"],
    "exercise3_classification_as_generation": ["build_prompt", "label_log_probs", "classify_by_generation"],
    "exercise4_model_size": ["truncate_encoder", "training_flops", "count_encoder_parameters"],
}


def cell_of(name: str) -> str:
    return f"test_{name}"


# ============================================================================ wrong solutions
# -- exercise 1
def _one_sequence(logits, input_ids):
    return (logits[0] if logits.dim() == 3 else logits), (input_ids[0] if input_ids.dim() == 2 else input_ids)


def top_k_renormalised_over_k(logits, input_ids, mask_token_id, k=5):
    """Softmax over the k best logits only: the k probabilities sum to one."""
    logits, input_ids = _one_sequence(logits, input_ids)
    if not 1 <= k <= logits.size(-1):
        raise ValueError("bad k")
    rows = logits[(input_ids == mask_token_id).to(logits.device)].float()
    top = rows.topk(k, dim=-1)
    return top.values.softmax(-1), top.indices


def top_k_first_blank_only(logits, input_ids, mask_token_id, k=5):
    probs, ids = scoring.top_k_mask_predictions(logits, input_ids, mask_token_id, k)
    return probs[:1], ids[:1]


def top_k_bert_mask_id(logits, input_ids, mask_token_id, k=5):
    """Looks for BERT's id 103 instead of the argument."""
    return scoring.top_k_mask_predictions(logits, input_ids, 103, k)


def top_k_softmax_in_input_dtype(logits, input_ids, mask_token_id, k=5):
    logits, input_ids = _one_sequence(logits, input_ids)
    if not 1 <= k <= logits.size(-1):
        raise ValueError("bad k")
    rows = logits[(input_ids == mask_token_id).to(logits.device)]
    top = rows.softmax(-1).topk(k, dim=-1)
    return top.values.float(), top.indices


def top_k_in_place(logits, input_ids, mask_token_id, k=5):
    """Right answer, but subtracts the maximum from the caller's logits in place."""
    logits.sub_(logits.max())
    return scoring.top_k_mask_predictions(logits, input_ids, mask_token_id, k)


def top_k_no_range_check(logits, input_ids, mask_token_id, k=5):
    logits, input_ids = _one_sequence(logits, input_ids)
    k = max(1, min(k, logits.size(-1)))
    return scoring.top_k_mask_predictions(logits, input_ids, mask_token_id, k)


# -- exercise 2
def subsample_ignores_classes(labels, n, seed):
    """A random subset of n, whatever the classes."""
    labels = torch.as_tensor(labels)
    if not 0 <= n <= labels.numel():
        raise ValueError("n out of range")
    order = torch.randperm(labels.numel(), generator=torch.Generator().manual_seed(seed))
    return order[:n].sort().values


def subsample_first_of_each_class(labels, n, seed):
    """Right counts, but always the first members of each class."""
    labels = torch.as_tensor(labels)
    quota = exercises.subsample_balanced(labels, n, 0)
    chosen = []
    for c in torch.unique(labels):
        k = int((labels[quota] == c).sum())
        chosen.append(torch.nonzero(labels == c).flatten()[:k])
    return torch.cat(chosen).sort().values


def subsample_global_rng(labels, n, seed):
    """Right counts, drawn from the global generator (seed ignored)."""
    return exercises.subsample_balanced(labels, n, int(torch.randint(0, 2**31, (1,))))


def subsample_unsorted(labels, n, seed):
    result = exercises.subsample_balanced(labels, n, seed)
    return result.flip(0)


# -- exercise 3
def build_prompt_no_blank_line(review, examples=(), *, instruction=exercises.INSTRUCTION):
    return exercises.build_prompt(review, examples, instruction=instruction).replace(
        instruction + "\n\n", instruction + "\n", 1) if instruction else exercises.build_prompt(review, examples,
                                                                                                instruction="")


def build_prompt_trailing_space(review, examples=(), *, instruction=exercises.INSTRUCTION):
    return exercises.build_prompt(review, examples, instruction=instruction) + " "


def label_log_probs_over_labels_only(last_logits, label_token_ids):
    ids = torch.as_tensor(label_token_ids, dtype=torch.long).to(last_logits.device)
    return torch.log_softmax(last_logits.float()[:, ids], dim=-1)


def label_log_probs_no_upcast(last_logits, label_token_ids):
    ids = torch.as_tensor(label_token_ids, dtype=torch.long).to(last_logits.device)
    return torch.log_softmax(last_logits, dim=-1)[:, ids]


def label_log_probs_naive(last_logits, label_token_ids):
    ids = torch.as_tensor(label_token_ids, dtype=torch.long).to(last_logits.device)
    x = last_logits.float()
    return torch.log(torch.exp(x) / torch.exp(x).sum(-1, keepdim=True))[:, ids]


@torch.no_grad()
def _classify(model, tokenizer, reviews, examples=(), batch_size=8, *, padding_side="left", mask=True,
              words=(" negative", " positive")):
    ids = [tokenizer(word, add_special_tokens=False).input_ids[0] for word in words]
    device = next(model.parameters()).device
    out = [torch.zeros(0, dtype=torch.long)]
    for start in range(0, len(reviews), batch_size):
        prompts = [exercises.build_prompt(r, examples) for r in reviews[start:start + batch_size]]
        batch = tokenizer(prompts, return_tensors="pt", padding=True, padding_side=padding_side).to(device)
        kwargs = {"attention_mask": batch["attention_mask"]} if mask else {}
        logits = model(input_ids=batch["input_ids"], **kwargs).logits[:, -1]
        scores = exercises.label_log_probs(logits, ids)
        out.append((scores[:, 1] > scores[:, 0]).long().cpu())
    return torch.cat(out)


def classify_right_padding(model, tokenizer, reviews, examples=(), batch_size=8):
    """Pads on the right (the tokenizer's default) and reads position -1: a pad for short prompts."""
    return _classify(model, tokenizer, reviews, examples, batch_size, padding_side="right")


def classify_without_attention_mask(model, tokenizer, reviews, examples=(), batch_size=8):
    return _classify(model, tokenizer, reviews, examples, batch_size, mask=False)


def classify_label_words_without_space(model, tokenizer, reviews, examples=(), batch_size=8):
    return _classify(model, tokenizer, reviews, examples, batch_size, words=("negative", "positive"))


def classify_always_negative(model, tokenizer, reviews, examples=(), batch_size=8):
    return torch.zeros(len(reviews), dtype=torch.long)


def classify_always_positive(model, tokenizer, reviews, examples=(), batch_size=8):
    return torch.ones(len(reviews), dtype=torch.long)


# -- exercise 4
def truncate_keeps_top_layers(model, num_layers):
    layers = model.base_model.encoder.layer
    if not 1 <= num_layers <= len(layers):
        raise ValueError("num_layers out of range")
    new = copy.deepcopy(model)
    new.base_model.encoder.layer = nn.ModuleList(list(new.base_model.encoder.layer)[len(layers) - num_layers:])
    new.config.num_hidden_layers = num_layers
    return new


def truncate_in_place(model, num_layers):
    layers = model.base_model.encoder.layer
    if not 1 <= num_layers <= len(layers):
        raise ValueError("num_layers out of range")
    model.base_model.encoder.layer = nn.ModuleList(list(layers)[:num_layers])
    model.config.num_hidden_layers = num_layers
    return model


def truncate_keeps_config(model, num_layers):
    new = exercises.truncate_encoder(model, num_layers)
    new.config.num_hidden_layers = model.config.num_hidden_layers
    return new


def truncate_without_range_check(model, num_layers):
    new = copy.deepcopy(model)
    new.base_model.encoder.layer = nn.ModuleList(list(new.base_model.encoder.layer)[:max(num_layers, 1)])
    new.config.num_hidden_layers = len(new.base_model.encoder.layer)
    return new


def training_flops_forward_only(n_params, n_tokens):
    return float(2 * n_params * n_tokens)


def count_from_state_dict(model):
    """Counts every entry of the state dict: a tied matrix twice."""
    sizes = {name: t.numel() for name, t in model.state_dict().items()}
    embeddings = sum(v for k, v in sizes.items() if ".embeddings." in f".{k}")
    encoder = sum(v for k, v in sizes.items() if ".encoder." in f".{k}")
    total = sum(sizes.values())
    return {"embeddings": embeddings, "encoder": encoder, "head": total - embeddings - encoder, "total": total}


def count_head_is_classifier_only(model):
    counts = exercises.count_encoder_parameters(model)
    head = sum(p.numel() for p in getattr(model, "classifier", nn.Identity()).parameters())
    return {**counts, "head": head, "total": counts["embeddings"] + counts["encoder"] + head}


MUTANTS: dict[str, list[dict[str, object]]] = {
    # In one round every mutated name belongs to a different cell.
    "exercise1_masked_predictions": [
        {"top_k_mask_predictions": top_k_renormalised_over_k},
        {"top_k_mask_predictions": top_k_first_blank_only},
        {"top_k_mask_predictions": top_k_bert_mask_id},
        {"top_k_mask_predictions": top_k_softmax_in_input_dtype},
        {"top_k_mask_predictions": top_k_in_place},
        {"top_k_mask_predictions": top_k_no_range_check},
    ],
    "exercise2_finetune_vs_scratch": [
        {"subsample_balanced": subsample_ignores_classes},
        {"subsample_balanced": subsample_first_of_each_class},
        {"subsample_balanced": subsample_global_rng},
        {"subsample_balanced": subsample_unsorted},
    ],
    "exercise3_classification_as_generation": [
        {"build_prompt": build_prompt_no_blank_line, "label_log_probs": label_log_probs_over_labels_only,
         "classify_by_generation": classify_right_padding},
        {"build_prompt": build_prompt_trailing_space, "label_log_probs": label_log_probs_no_upcast,
         "classify_by_generation": classify_without_attention_mask},
        {"label_log_probs": label_log_probs_naive, "classify_by_generation": classify_label_words_without_space},
    ],
    "exercise4_model_size": [
        {"truncate_encoder": truncate_keeps_top_layers, "training_flops": training_flops_forward_only,
         "count_encoder_parameters": count_from_state_dict},
        {"truncate_encoder": truncate_in_place, "count_encoder_parameters": count_head_is_classifier_only},
        {"truncate_encoder": truncate_keeps_config},
        {"truncate_encoder": truncate_without_range_check},
    ],
}


# ============================================================================ correct, written differently
def top_k_by_log_softmax_and_sort(logits, input_ids, mask_token_id, k=5):
    """Loops over the positions, sorts log-probabilities in float64, exponentiates at the end."""
    logits = logits.reshape(-1, logits.size(-1))
    input_ids = input_ids.reshape(-1).cpu()
    if k < 1 or k > logits.size(-1):
        raise ValueError(f"k={k} out of range")
    probs, ids = [], []
    for position in range(input_ids.numel()):
        if int(input_ids[position]) == mask_token_id:
            row = torch.log_softmax(logits[position].double(), dim=-1)
            values, order = torch.sort(row, descending=True)
            probs.append(values[:k].exp().float())
            ids.append(order[:k])
    if not probs:
        return (torch.zeros(0, k, dtype=torch.float32, device=logits.device),
                torch.zeros(0, k, dtype=torch.long, device=logits.device))
    return torch.stack(probs), torch.stack(ids)


def subsample_by_one_shuffle(labels, n, seed):
    """Shuffle all indices once, then walk the shuffled order taking examples while
    their class still has room; the quotas come from a closed formula."""
    labels = torch.as_tensor(labels).reshape(-1)
    if n < 0 or n > labels.numel():
        raise ValueError(f"n={n} is out of range")
    classes = sorted(set(labels.tolist()))
    sizes = {c: int((labels == c).sum()) for c in classes}
    quota = dict.fromkeys(classes, 0)
    remaining, open_classes = n, [c for c in classes if sizes[c] > 0]
    while remaining and open_classes:  # fill level by level
        share, extra = divmod(remaining, len(open_classes))
        for i, c in enumerate(open_classes):
            take = min(sizes[c] - quota[c], share + (1 if i < extra else 0))
            quota[c] += take
            remaining -= take
        open_classes = [c for c in open_classes if quota[c] < sizes[c]]
    order = torch.randperm(labels.numel(), generator=torch.Generator().manual_seed(seed + 12345))
    taken = dict.fromkeys(classes, 0)
    chosen = []
    for i in order.tolist():
        c = int(labels[i])
        if taken[c] < quota[c]:
            taken[c] += 1
            chosen.append(i)
    return torch.tensor(sorted(chosen), dtype=torch.long)


def label_log_probs_by_logsumexp(last_logits, label_token_ids):
    x = last_logits.double()
    ids = torch.as_tensor(list(torch.as_tensor(label_token_ids).reshape(-1).tolist()), device=x.device)
    return (x.index_select(-1, ids) - torch.logsumexp(x, dim=-1, keepdim=True)).float()


@torch.no_grad()
def classify_right_padded_gather(model, tokenizer, reviews, examples=(), batch_size=8):
    """Right padding, reading the logits at each prompt's last real token."""
    if not reviews:
        return torch.zeros(0, dtype=torch.long)
    ids = [tokenizer(" " + w, add_special_tokens=False).input_ids[0] for w in exercises.LABEL_WORDS]
    device = next(model.parameters()).device
    out = []
    for start in range(0, len(reviews), batch_size):
        prompts = [exercises.build_prompt(r, examples) for r in reviews[start:start + batch_size]]
        batch = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="right").to(device)
        logits = model(**batch).logits
        last = batch["attention_mask"].sum(dim=1) - 1
        scores = exercises.label_log_probs(logits[torch.arange(len(prompts), device=device), last], ids)
        out.append((scores[:, 1] > scores[:, 0]).long().cpu())
    return torch.cat(out)


@torch.no_grad()
def classify_left_padded_with_positions(model, tokenizer, reviews, examples=(), batch_size=8):
    """Left padding set on the tokenizer (and restored), position ids from the mask as in generate()."""
    ids = [tokenizer(" " + w, add_special_tokens=False).input_ids[0] for w in exercises.LABEL_WORDS]
    device = next(model.parameters()).device
    old_side, tokenizer.padding_side = tokenizer.padding_side, "left"
    try:
        out = []
        for start in range(0, len(reviews), batch_size):
            prompts = [exercises.build_prompt(r, examples) for r in reviews[start:start + batch_size]]
            batch = tokenizer(prompts, return_tensors="pt", padding=True).to(device)
            positions = (batch["attention_mask"].cumsum(-1) - 1).clamp(min=0)
            logits = model(**batch, position_ids=positions).logits[:, -1]
            scores = exercises.label_log_probs(logits, ids)
            out.append(scores.argmax(-1).cpu())
    finally:
        tokenizer.padding_side = old_side
    return torch.cat(out) if out else torch.empty(0, dtype=torch.long)


def truncate_from_config(model, num_layers):
    """A fresh model built from an edited copy of the config, loaded with the kept weights."""
    layers = len(model.base_model.encoder.layer)
    if num_layers < 1 or num_layers > layers:
        raise ValueError(f"num_layers must be between 1 and {layers}")
    config = copy.deepcopy(model.config)
    config.num_hidden_layers = num_layers
    new = type(model)(config).to(next(model.parameters()).device)
    prefix = "encoder.layer." if model.base_model is model else f"{model.base_model_prefix}.encoder.layer."
    state = {k: v for k, v in model.state_dict().items()
             if not k.startswith(prefix) or int(k[len(prefix):].split(".")[0]) < num_layers}
    new.load_state_dict(state)
    return new.train(model.training)


def count_by_pointer(model):
    seen = set()

    def part(module):
        total = 0
        for p in module.parameters():
            if p.data_ptr() not in seen:
                seen.add(p.data_ptr())
                total += p.numel()
        return total

    embeddings = part(model.base_model.embeddings)
    encoder = part(model.base_model.encoder)
    head = part(model)
    return {"total": embeddings + encoder + head, "head": head, "encoder": encoder, "embeddings": embeddings}


ALTERNATIVES: dict[str, list[dict[str, object]]] = {
    "exercise1_masked_predictions": [{"top_k_mask_predictions": top_k_by_log_softmax_and_sort}],
    "exercise2_finetune_vs_scratch": [{"subsample_balanced": subsample_by_one_shuffle}],
    "exercise3_classification_as_generation": [
        {"label_log_probs": label_log_probs_by_logsumexp, "classify_by_generation": classify_right_padded_gather},
        {"classify_by_generation": classify_left_padded_with_positions},
    ],
    "exercise4_model_size": [{"truncate_encoder": truncate_from_config, "count_encoder_parameters": count_by_pointer}],
}


# ============================================================================ the tests
@pytest.fixture(scope="module", autouse=True)
def _grading_environment():
    with grading_environment():
        yield


def _namespace(**overrides) -> dict:
    namespace = reference_namespace()
    namespace.update(overrides)
    return namespace


@pytest.mark.parametrize("stem", STEMS)
def test_reference_earns_every_point(stem):
    results = grade_in_process(stem, _namespace())
    assert results, f"the suite of {stem} ran no test"
    assert all(r.status == "passed" for r in results), "the reference lost points:\n" + failures(results)
    cells = points_per_cell(results)
    assert set(cells) == set(CELL_POINTS[stem]), f"cells graded by the suite: {sorted(cells)}"
    for cell, points in CELL_POINTS[stem].items():
        assert cells[cell] == (points, points), f"{cell}: earned/available {cells[cell]}, the cell has {points}"


@pytest.mark.parametrize("stem", STEMS)
def test_functions_cover_every_auto_graded_cell(stem):
    """FUNCTIONS names every graded function of the notebook: the not-implemented test stubs them all."""
    assert {cell_of(name) for name in FUNCTIONS[stem]} == set(CELL_POINTS[stem])


ALTERNATIVE_ROUNDS = [pytest.param(stem, index, id=f"{stem}-{index}")
                      for stem, rounds in ALTERNATIVES.items() for index in range(len(rounds))]


@pytest.mark.parametrize("stem, index", ALTERNATIVE_ROUNDS)
def test_alternative_correct_solutions_earn_every_point(stem, index):
    results = grade_in_process(stem, _namespace(**ALTERNATIVES[stem][index]))
    assert all(r.status == "passed" for r in results), (
        f"correct solutions written differently from the reference lost points:\n{failures(results)}")


MUTANT_ROUNDS = [pytest.param(stem, index, id=f"{stem}-{index}")
                 for stem, rounds in MUTANTS.items() for index in range(len(rounds))]


@pytest.mark.parametrize("stem, index", MUTANT_ROUNDS)
def test_wrong_solutions_lose_points_on_their_cell(stem, index):
    mutants = MUTANTS[stem][index]
    mutated_cells = {cell_of(name) for name in mutants}
    assert len(mutated_cells) == len(mutants), "one mutant per cell and round"
    results = grade_in_process(stem, _namespace(**mutants))
    assert not any(GRADER_BUG in r.message for r in results), "a test crashed:\n" + failures(results)
    cells = points_per_cell(results)
    for name, mutant in mutants.items():
        earned, available = cells[cell_of(name)]
        assert earned < available, f"{mutant.__name__} kept all {available} points of {cell_of(name)}"
    for cell, (earned, available) in cells.items():
        if cell not in mutated_cells:
            assert earned == available, f"{cell} lost points although it was not mutated:\n{failures(results, cell)}"


@pytest.mark.parametrize("constant", [classify_always_negative, classify_always_positive])
def test_every_classification_test_needs_both_classes(constant):
    results = grade_in_process("exercise3_classification_as_generation", _namespace(classify_by_generation=constant))
    graded = [r for r in results if r.grade_id == "test_classify_by_generation"]
    assert graded and all(r.status == "failed" for r in graded), (
        f"{constant.__name__} passed a classification test:\n"
        + "\n".join(f"  {r.test} [{r.status}]" for r in graded))


@pytest.mark.parametrize("stem", STEMS)
def test_not_implemented_scores_zero_with_error_status(stem):
    def stub(*args, **kwargs):
        raise NotImplementedError

    stubs = dict.fromkeys(FUNCTIONS[stem], stub)
    results = grade_in_process(stem, _namespace(**stubs))
    graded_cells = {cell_of(name) for name in stubs}
    stubbed = [r for r in results if r.grade_id in graded_cells]
    assert {r.grade_id for r in stubbed} == graded_cells
    for result in stubbed:
        assert result.points == 0 and result.status == "error", (result.test, result.status, result.message)
        assert "not implemented" in result.message, (result.test, result.message)
