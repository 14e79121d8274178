"""Stand-in students for the hidden suite of exercise 3 (classification as generation, and the
training batches of the decoder fine-tuned to write the label word).

``classify_always_negative`` and ``classify_always_positive`` are no mutant round: they show that
every classification test needs both classes (tests/grading/test_suite_details.py).
"""
from __future__ import annotations

import torch

from autograder.reference import exercises


# ---------------------------------------------------------------- wrong
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


# ---------------------------------------------------------------- correct, written differently
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


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"build_prompt": build_prompt_no_blank_line, "label_log_probs": label_log_probs_over_labels_only,
     "classify_by_generation": classify_right_padding},
    {"build_prompt": build_prompt_trailing_space, "label_log_probs": label_log_probs_no_upcast,
     "classify_by_generation": classify_without_attention_mask},
    {"label_log_probs": label_log_probs_naive, "classify_by_generation": classify_label_words_without_space},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"label_log_probs": label_log_probs_by_logsumexp, "classify_by_generation": classify_right_padded_gather},
    {"classify_by_generation": classify_left_padded_with_positions},
]


# ---------------------------------------------------------------- wrong in one clause each
# Named by the clause tables (autograder/reference/clauses/exercise3_classification_as_generation/).
def build_prompt_blank_line_without_instruction(review, examples=(), *, instruction=exercises.INSTRUCTION):
    prompt = exercises.build_prompt(review, examples, instruction=instruction)
    return prompt if instruction else "\n\n" + prompt


def build_prompt_swapped_label_words(review, examples=(), *, instruction=exercises.INSTRUCTION):
    return exercises.build_prompt(review, [(text, 1 - int(label)) for text, label in examples],
                                  instruction=instruction)


def build_prompt_default_instruction(review, examples=(), *, instruction=exercises.INSTRUCTION):
    return exercises.build_prompt(review, examples, instruction=exercises.INSTRUCTION if instruction else "")


def label_log_probs_sorted_ids(last_logits, label_token_ids):
    ids = torch.as_tensor(label_token_ids, dtype=torch.long).reshape(-1).sort().values
    return exercises.label_log_probs(last_logits, ids)


def label_log_probs_on_cpu(last_logits, label_token_ids):
    return exercises.label_log_probs(last_logits, label_token_ids).cpu()


def classify_ignores_examples(model, tokenizer, reviews, examples=(), batch_size=8):
    return exercises.classify_by_generation(model, tokenizer, reviews, (), batch_size)


def classify_as_floats(model, tokenizer, reviews, examples=(), batch_size=8):
    return exercises.classify_by_generation(model, tokenizer, reviews, examples, batch_size).float()


def classify_empty_as_floats(model, tokenizer, reviews, examples=(), batch_size=8):
    if not reviews:
        return torch.tensor([])
    return exercises.classify_by_generation(model, tokenizer, reviews, examples, batch_size)


# ---------------------------------------------------------------- more correct ones, written differently
def build_prompt_by_lines(review, examples=(), *, instruction=exercises.INSTRUCTION):
    """Blocks joined by blank lines instead of each block carrying its own."""
    words = {0: "negative", 1: "positive"}
    blocks = ([instruction] if instruction else []) + [f"Review: {text}\nSentiment: {words[int(label)]}"
                                                       for text, label in examples]
    return "\n\n".join(blocks + [f"Review: {review}\nSentiment:"])


def build_prompt_by_concatenation(review, examples=(), *, instruction=exercises.INSTRUCTION):
    prompt = instruction + "\n\n" if instruction != "" else ""
    for text, label in examples:
        prompt += "Review: " + text + "\nSentiment: " + ("positive" if int(label) == 1 else "negative") + "\n\n"
    return prompt + "Review: " + review + "\nSentiment:"


def label_log_probs_shifted_by_max(last_logits, label_token_ids):
    x = last_logits.float()
    shifted = x - x.max(dim=-1, keepdim=True).values
    log_z = shifted.exp().sum(-1, keepdim=True).log()
    ids = torch.as_tensor(label_token_ids).reshape(-1).long().to(x.device)
    return shifted.index_select(-1, ids) - log_z


ALTERNATIVES += [
    {"build_prompt": build_prompt_by_lines, "label_log_probs": label_log_probs_shifted_by_max},
    {"build_prompt": build_prompt_by_concatenation},
]


# ---------------------------------------------------------------- label_word_targets: wrong in one clause each
def _targets(prompt_ids, label_ids, pad_token_id, padding_side="left"):
    return exercises.label_word_targets(prompt_ids, label_ids, pad_token_id, padding_side=padding_side)


def label_word_targets_right_by_default(prompt_ids, label_ids, pad_token_id, *, padding_side="right"):
    return _targets(prompt_ids, label_ids, pad_token_id, padding_side)


def label_word_targets_always_left(prompt_ids, label_ids, pad_token_id, *, padding_side="left"):
    _targets(prompt_ids, label_ids, pad_token_id, padding_side)  # the checks, then the argument is ignored
    return _targets(prompt_ids, label_ids, pad_token_id, "left")


def label_word_targets_flipped_rows(prompt_ids, label_ids, pad_token_id, *, padding_side="left"):
    """Left padding by padding on the right and flipping the rows: the ids come out reversed."""
    right = _targets(prompt_ids, label_ids, pad_token_id, "right" if padding_side == "left" else padding_side)
    return tuple(t.flip(1) for t in right) if padding_side == "left" else right


def label_word_targets_pads_with_zero(prompt_ids, label_ids, pad_token_id, *, padding_side="left"):
    input_ids, attention_mask, labels = _targets(prompt_ids, label_ids, pad_token_id, padding_side)
    return input_ids.masked_fill(attention_mask == 0, 0), attention_mask, labels


def label_word_targets_one_pad_too_many(prompt_ids, label_ids, pad_token_id, *, padding_side="left"):
    input_ids, attention_mask, labels = _targets(prompt_ids, label_ids, pad_token_id, padding_side)
    extra = [torch.full((len(input_ids), 1), value, dtype=torch.long) for value in (pad_token_id, 0, -100)]
    both = zip(extra, (input_ids, attention_mask, labels))
    return tuple(torch.cat([e, t] if padding_side == "left" else [t, e], dim=1) for e, t in both)


def label_word_targets_mask_all_ones(prompt_ids, label_ids, pad_token_id, *, padding_side="left"):
    input_ids, attention_mask, labels = _targets(prompt_ids, label_ids, pad_token_id, padding_side)
    return input_ids, torch.ones_like(attention_mask), labels


def label_word_targets_mask_from_pad_id(prompt_ids, label_ids, pad_token_id, *, padding_side="left"):
    input_ids, _, labels = _targets(prompt_ids, label_ids, pad_token_id, padding_side)
    return input_ids, (input_ids != pad_token_id).long(), labels


def label_word_targets_labels_on_prompt(prompt_ids, label_ids, pad_token_id, *, padding_side="left"):
    """Trains on every token of the row, as in language modelling: the prompt is not ignored."""
    input_ids, attention_mask, _ = _targets(prompt_ids, label_ids, pad_token_id, padding_side)
    return input_ids, attention_mask, input_ids.masked_fill(attention_mask == 0, -100)


def label_word_targets_labels_on_padding(prompt_ids, label_ids, pad_token_id, *, padding_side="left"):
    input_ids, attention_mask, labels = _targets(prompt_ids, label_ids, pad_token_id, padding_side)
    return input_ids, attention_mask, labels.masked_fill(attention_mask == 0, pad_token_id)


def label_word_targets_last_word_id_only(prompt_ids, label_ids, pad_token_id, *, padding_side="left"):
    input_ids, attention_mask, labels = _targets(prompt_ids, label_ids, pad_token_id, padding_side)
    last = torch.zeros_like(labels, dtype=torch.bool)
    for row, length in enumerate(attention_mask.sum(1).tolist()):
        last[row, (labels.size(1) - 1) if padding_side == "left" else (length - 1)] = True
    return input_ids, attention_mask, labels.masked_fill(~last, -100)


def label_word_targets_shifted_labels(prompt_ids, label_ids, pad_token_id, *, padding_side="left"):
    """Shifts the labels itself (labels[t] = the id at t + 1), as a hand-written loss would."""
    input_ids, attention_mask, labels = _targets(prompt_ids, label_ids, pad_token_id, padding_side)
    shifted = torch.full_like(labels, -100)
    shifted[:, :-1] = labels[:, 1:]
    return input_ids, attention_mask, shifted


def label_word_targets_bool_mask(prompt_ids, label_ids, pad_token_id, *, padding_side="left"):
    input_ids, attention_mask, labels = _targets(prompt_ids, label_ids, pad_token_id, padding_side)
    return input_ids, attention_mask.bool(), labels


def label_word_targets_no_checks(prompt_ids, label_ids, pad_token_id, *, padding_side="left"):
    """Never raises: zip drops unmatched rows, empty parts and batches go through, any side but
    "left" pads on the right."""
    rows = [(list(p), list(w)) for p, w in zip(prompt_ids, label_ids)]
    width = max((len(p) + len(w) for p, w in rows), default=0)
    input_ids = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros(len(rows), width, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    for row, (p, w) in enumerate(rows):
        first = width - len(p) - len(w) if padding_side == "left" else 0
        if p + w:
            input_ids[row, first:first + len(p) + len(w)] = torch.tensor(p + w)
            attention_mask[row, first:first + len(p) + len(w)] = 1
        if w:
            labels[row, first + len(p):first + len(p) + len(w)] = torch.tensor(w)
    return input_ids, attention_mask, labels


# ---------------------------------------------------------------- label_word_targets: correct, written differently
def _check_targets_arguments(prompt_ids, label_ids, padding_side):
    if padding_side not in {"left", "right"}:
        raise ValueError("padding_side")
    if not prompt_ids or len(prompt_ids) != len(label_ids):
        raise ValueError("rows")
    if not all(prompt_ids) or not all(label_ids):
        raise ValueError("empty prompt or label word")


def label_word_targets_by_pad_sequence(prompt_ids, label_ids, pad_token_id, *, padding_side="left"):
    """torch's pad_sequence on the right; for left padding, on the reversed rows, reversed back."""
    from torch.nn.utils.rnn import pad_sequence

    _check_targets_arguments(prompt_ids, label_ids, padding_side)
    ids = [torch.tensor([*p, *w], dtype=torch.long) for p, w in zip(prompt_ids, label_ids)]
    targets = [torch.tensor([-100] * len(p) + [*w], dtype=torch.long) for p, w in zip(prompt_ids, label_ids)]
    ones = [torch.ones(len(i), dtype=torch.long) for i in ids]
    left = padding_side == "left"

    def pad(rows, value):
        rows = [r.flip(0) for r in rows] if left else rows
        padded = pad_sequence(rows, batch_first=True, padding_value=value)
        return padded.flip(1) if left else padded

    return pad(ids, pad_token_id), pad(ones, 0), pad(targets, -100)


def label_word_targets_by_lists(prompt_ids, label_ids, pad_token_id, *, padding_side="left"):
    """Padded Python lists first, one tensor each at the end."""
    _check_targets_arguments(prompt_ids, label_ids, padding_side)
    width = max(len(p) + len(w) for p, w in zip(prompt_ids, label_ids))
    ids, mask, labels = [], [], []
    for p, w in zip(prompt_ids, label_ids):
        gap = width - len(p) - len(w)
        parts = ([pad_token_id] * gap, [*p, *w]), ([0] * gap, [1] * (len(p) + len(w))), \
            ([-100] * gap, [-100] * len(p) + [*w])
        for out, (padding, real) in zip((ids, mask, labels), parts):
            out.append(padding + real if padding_side == "left" else real + padding)
    return torch.tensor(ids), torch.tensor(mask), torch.tensor(labels)


MUTANTS[0]["label_word_targets"] = label_word_targets_labels_on_prompt
MUTANTS[1]["label_word_targets"] = label_word_targets_mask_from_pad_id
MUTANTS[2]["label_word_targets"] = label_word_targets_right_by_default
ALTERNATIVES[0]["label_word_targets"] = label_word_targets_by_pad_sequence
ALTERNATIVES[1]["label_word_targets"] = label_word_targets_by_lists
