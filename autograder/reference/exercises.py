"""The chapter's programming exercises 2-4: data efficiency, classification as
generation, and model size.

- Exercise 2 (pre-trained vs from scratch): ``subsample_balanced`` draws the
  class-balanced training subsets of the data-efficiency curve.
- Exercise 3 (classification as generation): a decoder classifies a review by
  comparing the log-probabilities of the label words " negative" and " positive"
  after a prompt (``build_prompt``, ``label_log_probs``, ``classify_by_generation``);
  fine-tuned to write the label word, it trains on the batches of
  ``label_word_targets`` (the loss on the label word's ids only).
- Exercise 4 (model size): ``truncate_encoder`` keeps the bottom layers of a BERT
  model, ``count_encoder_parameters`` splits its parameters, ``training_flops`` is
  the 6 N D approximation of Kaplan et al. (2020).
"""
from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from torch import nn

# Exercise 3: label 0 is written " negative", label 1 " positive" (a space, then the word).
LABEL_WORDS = ("negative", "positive")
INSTRUCTION = "Classify the sentiment of each movie review as positive or negative."


# ======================================================================= exercise 2
def subsample_balanced(labels: torch.Tensor | Sequence[int], n: int, seed: int) -> torch.Tensor:
    """Indices of ``n`` examples whose classes are as balanced as possible.

    Args:
        labels: the class of every example, a 1-D integer tensor or a sequence of
            ints. The classes are the distinct values that occur in it.
        n: how many indices to return, 0 <= n <= len(labels) (else ValueError).
        seed: the draw is a function of (labels, n, seed) only: the same arguments
            give the same indices, and the global random generators are neither
            used nor advanced (draw from ``torch.Generator().manual_seed(seed)``).

    How many per class: hand out the n places one at a time, going round the
    classes in increasing order of their value and skipping a class once all its
    examples are taken. So every class gets floor(n / C) or ceil(n / C) of the n
    places, the smaller classes (by value) getting the extra ones, unless a class
    runs out, in which case it contributes all its examples and the others share
    the rest in the same way. Which examples of a class: a uniformly random subset
    of that size (every subset equally likely).

    Returns:
        A LongTensor [n] on the CPU: indices into ``labels``, sorted in increasing
        order, without repetitions. ``labels`` is not modified.

    Not allowed: sklearn or datasets helpers that do the stratified sampling
    (``train_test_split``, ``StratifiedShuffleSplit``, ``Dataset.train_test_split``).

    Using the global random generator is graded; merely advancing it is not graded.
    """
    labels = torch.as_tensor(labels).reshape(-1).cpu()
    if not 0 <= n <= labels.numel():
        raise ValueError(f"n must lie in [0, {labels.numel()}], got {n}")
    classes = torch.unique(labels).tolist()  # sorted
    members = {c: torch.nonzero(labels == c).flatten() for c in classes}

    quota = {c: 0 for c in classes}
    placed = 0
    while placed < n:
        for c in classes:
            if placed < n and quota[c] < members[c].numel():
                quota[c] += 1
                placed += 1

    generator = torch.Generator().manual_seed(seed)
    chosen = []
    for c in classes:
        order = torch.randperm(members[c].numel(), generator=generator)
        chosen.append(members[c][order[: quota[c]]])
    if not chosen:
        return torch.zeros(0, dtype=torch.long)
    return torch.cat(chosen).sort().values.long()


# ======================================================================= exercise 3
def build_prompt(review: str, examples: Sequence[tuple[str, int]] = (), *, instruction: str = INSTRUCTION) -> str:
    """The prompt that asks a language model for the sentiment of ``review``.

    The prompt is, with no character added or dropped:

        the instruction, then a blank line ("\\n\\n")   (both left out when instruction == "")
        for each (text, label) in examples, in order:
            "Review: {text}\\nSentiment: {word}\\n\\n"    with word = LABEL_WORDS[label]
        "Review: {review}\\nSentiment:"

    The prompt ends right after the colon: the label word, with its leading space
    (" positive" / " negative"), is what the model should write next.

    Args:
        review: the text to classify, inserted as is.
        examples: demonstrations, pairs (text, label) with label 0 (negative) or 1
            (positive); none gives a zero-shot prompt.
        instruction: the first line.

    Returns:
        The prompt, a str.
    """
    parts = [instruction + "\n\n"] if instruction else []
    for text, label in examples:
        parts.append(f"Review: {text}\nSentiment: {LABEL_WORDS[int(label)]}\n\n")
    parts.append(f"Review: {review}\nSentiment:")
    return "".join(parts)


def label_log_probs(last_logits: torch.Tensor, label_token_ids: Sequence[int] | torch.Tensor) -> torch.Tensor:
    """Log-probabilities of the label tokens at the position after the prompt.

        result[b, j] = log_softmax(last_logits[b])[label_token_ids[j]]

    the log-softmax taken over the whole vocabulary (so the values are the model's
    log P(label token | prompt), and exp(result) summed over the labels is the
    share of probability mass the model puts on the labels, at most 1).

    Args:
        last_logits: [B, V] next-token scores at the last position of B prompts,
            any floating dtype.
        label_token_ids: L token ids (a sequence of ints or a 1-D integer tensor).

    Returns:
        A float32 tensor [B, L] on the device of ``last_logits``, computed in
        float32 (numerically stable for logits of any size).
    """
    ids = torch.as_tensor(label_token_ids, dtype=torch.long).reshape(-1).to(last_logits.device)
    return torch.log_softmax(last_logits.float(), dim=-1)[:, ids]


def _label_token_ids(tokenizer) -> list[int]:
    """The first token id of " negative" and of " positive" (label 0, label 1)."""
    return [tokenizer(" " + word, add_special_tokens=False).input_ids[0] for word in LABEL_WORDS]


@torch.no_grad()
def classify_by_generation(model, tokenizer, reviews: Sequence[str], examples: Sequence[tuple[str, int]] = (),
                           batch_size: int = 8) -> torch.Tensor:
    """Classify reviews by asking a causal LM which label word comes next.

    For each review: prompt = build_prompt(review, examples) (default instruction);
    the model reads the prompt; the prediction is 1 when the next token " positive"
    is more likely than " negative" (strictly), else 0. The label tokens are the
    first token of ``tokenizer(" " + word, add_special_tokens=False).input_ids``
    for the words of LABEL_WORDS; compare them with ``label_log_probs``.

    Reviews are processed ``batch_size`` at a time, padded on the left (the next
    token of every prompt is then read at the last position, -1), with the
    attention mask passed to the model so that no prompt attends to padding.
    The tokenizer's other defaults are used. Runs under torch.no_grad() on the
    model's device; the model and tokenizer are left as they are.

    Args:
        model: a causal LM (``transformers``), in eval mode.
        tokenizer: its tokenizer (with a pad token).
        reviews: the N texts.
        examples: demonstrations for build_prompt, the same for every review.
        batch_size: prompts per forward pass.

    Returns:
        A LongTensor [N] of 0/1 on the CPU (empty for no reviews).

    Not allowed: ``model.generate`` or a ``transformers`` pipeline; call the model yourself.

    Not graded: predictions whose two label log-probabilities lie within 1e-3 of each other
    (rounding may flip them), how the prompts are batched and padded (only the predictions
    are compared), and whether the model and the tokenizer are left as they were found.
    """
    ids = _label_token_ids(tokenizer)
    device = next(model.parameters()).device
    predictions = [torch.zeros(0, dtype=torch.long)]
    for start in range(0, len(reviews), batch_size):
        prompts = [build_prompt(review, examples) for review in reviews[start:start + batch_size]]
        batch = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left").to(device)
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], logits_to_keep=1).logits
        scores = label_log_probs(logits[:, -1], ids)
        predictions.append((scores[:, 1] > scores[:, 0]).long().cpu())
    return torch.cat(predictions)


def label_word_targets(prompt_ids: Sequence[Sequence[int]], label_ids: Sequence[Sequence[int]], pad_token_id: int,
                       *, padding_side: str = "left") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch that teaches a causal LM to write the label word after its prompt.

    Row b holds the prompt followed by its label word, prompt_ids[b] + label_ids[b]
    (n_b ids), and the B rows are padded with ``pad_token_id`` to T = max_b n_b (no
    longer): on the left with padding_side="left" (the default: every row then ends
    with its label word), on the right with padding_side="right" (every row starts
    at position 0).

    Args:
        prompt_ids: B prompts, each a list of token ids (Python ints), at least one id.
        label_ids: B label words, each a list of token ids, at least one id; the words
            may have different numbers of ids.
        pad_token_id: the id written at the padding positions. It may also occur
            inside a prompt: tell the padding by position, not by value.
        padding_side: "left" or "right".

    Returns:
        (input_ids, attention_mask, labels), three LongTensors [B, T] on the CPU:
        the padded rows; 1 at the n_b positions of row b's ids and 0 at its padding;
        and -100 everywhere except at the positions of the label word's ids, which
        hold those ids (labels == input_ids there): every id of the word, none of the
        prompt, none of the padding. The labels are not shifted: as in
        ``transformers``, the loss compares labels[:, t] with the logits at position t - 1.

    Raises:
        ValueError: prompt_ids and label_ids differ in length, there are no rows
            (B = 0), a prompt or a label word has no ids, or padding_side is neither
            "left" nor "right".
    """
    if padding_side not in ("left", "right"):
        raise ValueError(f"padding_side must be 'left' or 'right', got {padding_side!r}")
    if len(prompt_ids) != len(label_ids):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(label_ids)} label words")
    if len(prompt_ids) == 0:
        raise ValueError("no rows: give at least one prompt and its label word")
    rows = [([int(i) for i in prompt], [int(i) for i in word]) for prompt, word in zip(prompt_ids, label_ids)]
    if any(not prompt or not word for prompt, word in rows):
        raise ValueError("every prompt and every label word needs at least one token id")

    width = max(len(prompt) + len(word) for prompt, word in rows)
    input_ids = torch.full((len(rows), width), int(pad_token_id), dtype=torch.long)
    attention_mask = torch.zeros(len(rows), width, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    for row, (prompt, word) in enumerate(rows):
        length = len(prompt) + len(word)
        first = width - length if padding_side == "left" else 0   # where the row's ids begin
        input_ids[row, first:first + length] = torch.tensor(prompt + word)
        attention_mask[row, first:first + length] = 1
        labels[row, first + len(prompt):first + length] = torch.tensor(word)  # the word's ids only
    return input_ids, attention_mask, labels


# ======================================================================= exercise 4
def truncate_encoder(model: nn.Module, num_layers: int) -> nn.Module:
    """A copy of a BERT model that keeps only its bottom ``num_layers`` layers.

    The copy has the same class as ``model`` (e.g. BertForSequenceClassification)
    and the same weights everywhere (embeddings, pooler, task head), except that
    its encoder (``copy.base_model.encoder.layer``) holds only the layers
    0 .. num_layers - 1, and ``copy.config.num_hidden_layers == num_layers``.
    It shares no parameter or config object with ``model``, which is left
    unchanged (its layers, weights and config).

    Args:
        model: a ``transformers`` BERT model with L layers (``model.base_model``
            is the BertModel).
        num_layers: in [1, L], else ValueError.

    Returns:
        The new model.
    """
    layers = model.base_model.encoder.layer
    if not 1 <= num_layers <= len(layers):
        raise ValueError(f"num_layers must lie in [1, {len(layers)}], got {num_layers}")
    new = copy.deepcopy(model)
    new.base_model.encoder.layer = nn.ModuleList(list(new.base_model.encoder.layer)[:num_layers])
    new.config.num_hidden_layers = num_layers
    return new


def training_flops(n_params: float, n_tokens: float) -> float:
    """Training compute in floating-point operations, C = 6 N D (Kaplan et al., 2020).

    Per token, the forward pass costs about 2 N operations (a multiply and an add
    per weight) and the backward pass about 4 N (gradients for the activations
    and for the weights).

    Args:
        n_params: N, the number of parameters that take part in matrix products
            (Kaplan et al. count the non-embedding parameters).
        n_tokens: D, the number of tokens processed during training.

    Returns:
        6 * n_params * n_tokens as a Python float.
    """
    return float(6 * n_params * n_tokens)


def count_encoder_parameters(model: nn.Module) -> dict[str, int]:
    """Number of parameters of a BERT model, split by part.

    Returns:
        {"embeddings": elements of ``model.base_model.embeddings``,
         "encoder": elements of ``model.base_model.encoder`` (the layers),
         "head": every other element (pooler, classifier, MLM head, ...),
         "total": all elements of the model},
        Python ints with embeddings + encoder + head == total. A tensor shared by
        two modules (tied weights, such as an MLM decoder tied to the word
        embeddings) is counted once, in the first of embeddings / encoder / head
        that holds it.
    """
    base = model.base_model
    seen: set[int] = set()

    def count(parameters) -> int:
        total = 0
        for p in parameters:
            if id(p) not in seen:
                seen.add(id(p))
                total += p.numel()
        return total

    embeddings = count(base.embeddings.parameters())
    encoder = count(base.encoder.parameters())
    head = count(model.parameters())
    return {"embeddings": embeddings, "encoder": encoder, "head": head, "total": embeddings + encoder + head}
