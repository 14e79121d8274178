"""Stand-in students for the masking section of part_b_bert_gpt.ipynb (B1): masking, the MLM
signal, BERT's sentence pairs."""
from __future__ import annotations

import torch

from autograder.reference import arithmetic, masking, sentence_pairs


# ---------------------------------------------------------------- wrong: mask_tokens, one clause each
def mask_tokens_selects_specials(input_ids, *, special_token_ids, **kwargs):
    return masking.mask_tokens(input_ids, special_token_ids=[], **kwargs)


def mask_tokens_never_keeps(input_ids, *, mask_token_id, vocab_size, special_token_ids, mlm_probability=0.15,
                            generator=None):
    """80 % [MASK], 20 % random, never left unchanged."""
    device = input_ids.device
    special = torch.isin(input_ids, torch.as_tensor(list(special_token_ids), device=device))
    p = torch.full(input_ids.shape, mlm_probability, device=device).masked_fill(special, 0.0)
    selected = torch.bernoulli(p, generator=generator).bool()
    to_mask = torch.bernoulli(torch.full(input_ids.shape, 0.8, device=device), generator=generator).bool() & selected
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=device, dtype=input_ids.dtype)
    masked = torch.where(selected & ~to_mask, random_ids, input_ids.masked_fill(to_mask, mask_token_id))
    return masked, input_ids.masked_fill(~selected, -100)


def mask_tokens_global_rng(input_ids, *, generator=None, **kwargs):
    return masking.mask_tokens(input_ids, generator=None, **kwargs)


def mask_tokens_reseeds(input_ids, *, generator=None, **kwargs):
    """Deterministic, but from a generator of its own: every generator state gives the same output."""
    return masking.mask_tokens(input_ids, generator=torch.Generator(input_ids.device).manual_seed(0), **kwargs)


def mask_tokens_fixed_outcome_draws(input_ids, *, mask_token_id, vocab_size, special_token_ids,
                                    mlm_probability=0.15, generator=None):
    """Selection from the generator, but the 80/10/10 choice and the random ids from a fixed seed."""
    common = dict(mask_token_id=mask_token_id, vocab_size=vocab_size, special_token_ids=special_token_ids)
    _, labels = masking.mask_tokens(input_ids, mlm_probability=mlm_probability, generator=generator, **common)
    fixed = torch.Generator(input_ids.device).manual_seed(0)
    everywhere, _ = masking.mask_tokens(input_ids, mlm_probability=1.0, generator=fixed, **common)
    return torch.where(labels != -100, everywhere, input_ids), labels


def mask_tokens_modifies_input(input_ids, **kwargs):
    masked, labels = masking.mask_tokens(input_ids, **kwargs)
    input_ids.copy_(masked)
    return input_ids, labels


def mask_tokens_labels_zero(input_ids, **kwargs):
    """Fills the labels of unselected positions with 0 instead of -100."""
    masked, labels = masking.mask_tokens(input_ids, **kwargs)
    return masked, labels.masked_fill(labels == -100, 0)


def mask_tokens_labels_int32(input_ids, **kwargs):
    masked, labels = masking.mask_tokens(input_ids, **kwargs)
    return masked, labels.to(torch.int32 if input_ids.dtype != torch.int32 else torch.int64)


def mask_tokens_random_ids_low_half(input_ids, *, vocab_size, **kwargs):
    """Random replacements drawn from [0, vocab_size / 2) only."""
    masked, labels = masking.mask_tokens(input_ids, vocab_size=vocab_size, **kwargs)
    ceiling = vocab_size // 2
    random = (labels != -100) & (masked != labels) & (masked != kwargs["mask_token_id"]) & (masked >= ceiling)
    return torch.where(random, masked - ceiling, masked), labels


def mask_tokens_skips_after_specials(input_ids, *, special_token_ids, **kwargs):
    """Also treats the token right after a special token as special (an off-by-one special mask)."""
    masked, labels = masking.mask_tokens(input_ids, special_token_ids=special_token_ids, **kwargs)
    special = torch.isin(input_ids, torch.as_tensor(list(special_token_ids), device=input_ids.device))
    after = torch.zeros_like(special)
    after[:, 1:] = special[:, :-1]
    return torch.where(after, input_ids, masked), labels.masked_fill(after, -100)


def mask_tokens_ignores_probability(input_ids, *, mlm_probability=0.15, **kwargs):
    return masking.mask_tokens(input_ids, mlm_probability=0.15, **kwargs)


# ---------------------------------------------------------------- wrong: the other functions
def mlm_signal_inverted(n_tokens, mask_rate=0.15):
    result = arithmetic.mlm_signal(n_tokens, mask_rate)
    return {**result, "passes_for_equal_signal": mask_rate}


def mask_tokens_one_uniform(input_ids, *, mask_token_id, vocab_size, special_token_ids, mlm_probability=0.15,
                            generator=None):
    """One uniform per position decides everything: u < p selects; below 0.8 p [MASK], below 0.9 p random."""
    device, p = input_ids.device, mlm_probability
    special = torch.isin(input_ids, torch.as_tensor(list(special_token_ids), device=device))
    u = torch.rand(input_ids.shape, generator=generator, device=device)
    selected = (u < p) & ~special
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=device, dtype=input_ids.dtype)
    masked = torch.where(selected & (u < 0.8 * p), torch.full_like(input_ids, mask_token_id), input_ids)
    masked = torch.where(selected & (u >= 0.8 * p) & (u < 0.9 * p), random_ids, masked)
    return masked, input_ids.masked_fill(~selected, -100)


def mask_tokens_multinomial(input_ids, *, mask_token_id, vocab_size, special_token_ids, mlm_probability=0.15,
                            generator=None):
    """One categorical draw per position over (not selected, [MASK], random, unchanged); random ids only
    where needed, in row-major order."""
    device, p = input_ids.device, mlm_probability
    special = torch.isin(input_ids, torch.as_tensor(list(special_token_ids), device=device))
    probs = torch.tensor([1 - p, 0.8 * p, 0.1 * p, 0.1 * p], device=device).expand(input_ids.numel(), 4)
    outcome = torch.multinomial(probs, 1, generator=generator).view(input_ids.shape)
    outcome = outcome.masked_fill(special, 0)
    masked = input_ids.clone()
    masked[outcome == 1] = mask_token_id
    swap = outcome == 2
    masked[swap] = torch.randint(vocab_size, (int(swap.sum()),), generator=generator, device=device,
                                 dtype=input_ids.dtype)
    labels = torch.full_like(input_ids, -100)
    labels[outcome > 0] = input_ids[outcome > 0]
    return masked, labels


def mask_tokens_with_uniforms(input_ids, *, mask_token_id, vocab_size, special_token_ids, mlm_probability=0.15,
                              generator=None):
    """Two uniforms per position instead of three Bernoulli grids."""
    device = input_ids.device
    special = torch.isin(input_ids, torch.as_tensor(list(special_token_ids), device=device))
    u = torch.rand(input_ids.shape, generator=generator, device=device)
    v = torch.rand(input_ids.shape, generator=generator, device=device)
    selected = (u < mlm_probability) & ~special
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=device, dtype=input_ids.dtype)
    masked = input_ids.clone()
    masked[selected & (v < 0.8)] = mask_token_id
    swap = selected & (v >= 0.8) & (v < 0.9)
    masked[swap] = random_ids[swap]
    return masked, torch.where(selected, input_ids, torch.full_like(input_ids, -100))


def mask_tokens_seeds_its_own_generator(input_ids, *, generator=None, **kwargs):
    """With generator=None, a generator of its own with a fixed seed instead of PyTorch's global one."""
    if generator is None:
        generator = torch.Generator(device=input_ids.device).manual_seed(0)
    return masking.mask_tokens(input_ids, generator=generator, **kwargs)


def mlm_signal_whole_predictions(n_tokens, mask_rate=0.15):
    result = arithmetic.mlm_signal(n_tokens, mask_rate)
    return {**result, "mlm_predictions": int(result["mlm_predictions"])}


def mlm_signal_minus_one(n_tokens, mask_rate=0.15):
    return {**arithmetic.mlm_signal(n_tokens, mask_rate), "clm_predictions": n_tokens - 1}


def mlm_signal_fixed_rate(n_tokens, mask_rate=0.15):
    return arithmetic.mlm_signal(n_tokens)


def mask_tokens_changes_unselected(input_ids, **kwargs):
    masked, labels = masking.mask_tokens(input_ids, **kwargs)
    unselected = labels == masking.IGNORE_INDEX
    masked = masked.clone()
    masked[unselected & (masked > 4)] -= 1  # an ordinary unselected token is not kept as it was
    return masked, labels


# ---------------------------------------------------------------- more correct ones, written differently
def mlm_signal_by_rates(n_tokens, mask_rate=0.15):
    return {"mlm_predictions": n_tokens * mask_rate, "clm_predictions": n_tokens,
            "passes_for_equal_signal": 1 / mask_rate}


def mlm_signal_by_ratio(n_tokens, mask_rate=0.15):
    masked = mask_rate * n_tokens
    return {"passes_for_equal_signal": n_tokens / masked, "clm_predictions": n_tokens, "mlm_predictions": masked}


# ---------------------------------------------------------------- bert_pair_input and make_nsp_pairs
def bert_pair_input_by_arithmetic(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    """Correct: the kept lengths as a min/max formula, one tensor per output by concatenation."""
    if not tokens_a or not tokens_b or max_length < 5:
        raise ValueError("two non-empty segments and max_length >= 5")
    room = max_length - 3
    n_a, n_b = len(tokens_a), len(tokens_b)
    if n_a + n_b > room:
        short = min(n_a, n_b)
        low = min(short, room // 2) if 2 * short > room else short
        high = room - low
        n_a, n_b = (high, low) if n_a > n_b else (low, high)
    a, b = tokens_a[:n_a], tokens_b[:n_b]
    ids = torch.tensor([cls_id] + a + [sep_id] + b + [sep_id])
    types = torch.cat([torch.zeros(len(a) + 2, dtype=torch.long), torch.ones(len(b) + 1, dtype=torch.long)])
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": torch.ones_like(ids)}


def bert_pair_input_by_lengths(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    """Correct: one token at a time from the longer segment, then the odd token given back to the
    segment that was longer at the start (the tokenizer's rule, reached by a loop)."""
    if len(tokens_a) == 0 or len(tokens_b) == 0:
        raise ValueError("empty segment")
    if max_length < 5:
        raise ValueError("max_length < 5")
    n_a, n_b = len(tokens_a), len(tokens_b)
    b_first = n_b >= n_a
    while n_a + n_b > max_length - 3:
        if n_a > n_b or (n_a == n_b and not b_first):
            n_a -= 1
        else:
            n_b -= 1
    if n_a != n_b and abs(n_a - n_b) == 1 and (n_a > n_b) == b_first and n_a + n_b == max_length - 3:
        n_a, n_b = n_b, n_a  # equal halves but the odd token went to the shorter one: hand it over
    parts = [[cls_id], tokens_a[:n_a], [sep_id], tokens_b[:n_b], [sep_id]]
    ids = torch.tensor([t for part in parts for t in part], dtype=torch.int64)
    types = (torch.arange(len(ids)) > n_a + 1).long()
    return {"attention_mask": torch.ones(len(ids), dtype=torch.int64), "token_type_ids": types, "input_ids": ids}


def _pairs_by_coin(documents, generator, *, p_is_next=0.5, own_document_too=False):
    """make_nsp_pairs_flat's examples, no checks: the coin's probability and whether A's own
    document is in the NotNext pool are knobs, so its mutants differ from it in one clause."""
    out = []
    for d, document in enumerate(documents):
        pool = [s for e, other in enumerate(documents) if own_document_too or e != d for s in other]
        for a, following in zip(document, document[1:]):
            if float(torch.rand(1, generator=generator)) < p_is_next:
                out.append((a, following, 0))
            else:
                out.append((a, pool[int(torch.randint(0, len(pool), (1,), generator=generator))], 1))
    return out


def make_nsp_pairs_flat(documents, generator):
    """Correct: the other documents' sentences listed once per document, indexed with randint."""
    if len(documents) < 2 or any(not d for d in documents):
        raise ValueError("at least two documents, each with a sentence")
    return _pairs_by_coin(documents, generator)


def make_nsp_pairs_multinomial(documents, generator):
    """Correct: a document drawn in proportion to its size, then a sentence of it; the coin as randint(2)."""
    if len(documents) < 2:
        raise ValueError("two documents at least")
    if min(map(len, documents)) == 0:
        raise ValueError("an empty document")
    sizes = torch.tensor([len(d) for d in documents], dtype=torch.float)
    out = []
    for d, document in enumerate(documents):
        weights = sizes.clone()
        weights[d] = 0
        for i in range(len(document) - 1):
            if int(torch.randint(2, (1,), generator=generator)) == 0:
                out.append((document[i], document[i + 1], 0))
                continue
            e = int(torch.multinomial(weights, 1, generator=generator))
            k = int(torch.randint(len(documents[e]), (1,), generator=generator))
            out.append((document[i], documents[e][k], 1))
    return out


def _pair(a, b, cls_id, sep_id, types=None):
    ids = torch.tensor([cls_id, *a, sep_id, *b, sep_id])
    if types is None:
        types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    return {"input_ids": ids, "token_type_ids": torch.tensor(types), "attention_mask": torch.ones_like(ids)}


def _fit(a, b, max_length, *, odd_to_shorter=False, front=False):
    """The reference's kept lengths (or, odd_to_shorter, the odd token given to the shorter segment)."""
    out = sentence_pairs.bert_pair_input(list(a) or [0], list(b) or [0], cls_id=-1, sep_id=-2,
                                         max_length=max(max_length, 5))
    n_a = int((out["token_type_ids"] == 0).sum()) - 2
    n_b = int((out["token_type_ids"] == 1).sum()) - 1
    if odd_to_shorter and len(a) + len(b) + 3 > max_length and abs(n_a - n_b) == 1 and 2 * min(len(a), len(b)) > max_length - 3:
        n_a, n_b = n_b, n_a
    a, b = list(a), list(b)
    return (a[len(a) - n_a:], b[len(b) - n_b:]) if front else (a[:n_a], b[:n_b])


def bert_pair_input_all_type_zero(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    out = sentence_pairs.bert_pair_input(tokens_a, tokens_b, cls_id=cls_id, sep_id=sep_id, max_length=max_length)
    return {**out, "token_type_ids": torch.zeros_like(out["token_type_ids"])}


def bert_pair_input_sep_in_segment_a(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    """The first [SEP] gets token type 1."""
    a, b = _fit(tokens_a, tokens_b, max_length)
    return _pair(a, b, cls_id, sep_id, [0] * (len(a) + 1) + [1] * (len(b) + 2))


def bert_pair_input_one_sep(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    """No [SEP] at the end."""
    out = sentence_pairs.bert_pair_input(tokens_a, tokens_b, cls_id=cls_id, sep_id=sep_id, max_length=max_length + 1)
    return {key: value[:-1] for key, value in out.items()}


def bert_pair_input_odd_token_to_the_shorter(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    return _pair(*_fit(tokens_a, tokens_b, max_length, odd_to_shorter=True), cls_id, sep_id)


def bert_pair_input_cuts_the_front(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    return _pair(*_fit(tokens_a, tokens_b, max_length, front=True), cls_id, sep_id)


def bert_pair_input_cuts_only_b(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    b = list(tokens_b)[:max(1, max_length - 3 - len(tokens_a))]
    a = list(tokens_a)[:max_length - 3 - len(b)]
    return _pair(a, b, cls_id, sep_id)


def bert_pair_input_ignores_specials_in_length(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    """max_length counts the segments only."""
    return _pair(*_fit(tokens_a, tokens_b, max_length + 3), cls_id, sep_id)


def bert_pair_input_int32(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    out = sentence_pairs.bert_pair_input(tokens_a, tokens_b, cls_id=cls_id, sep_id=sep_id, max_length=max_length)
    return {key: value.int() for key, value in out.items()}


def bert_pair_input_accepts_empty(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    if max_length < 5:
        raise ValueError("max_length")
    return _pair(*_fit(tokens_a, tokens_b, max_length), cls_id, sep_id)


def bert_pair_input_accepts_short_max_length(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    if not tokens_a or not tokens_b:
        raise ValueError("empty")
    return _pair(*_fit(tokens_a, tokens_b, max(max_length, 5)), cls_id, sep_id)


def bert_pair_input_modifies_input(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    out = sentence_pairs.bert_pair_input(tokens_a, tokens_b, cls_id=cls_id, sep_id=sep_id, max_length=max_length)
    while len(tokens_a) + len(tokens_b) + 3 > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()
    return out


def make_nsp_pairs_labels_swapped(documents, generator):
    return [(a, b, 1 - label) for a, b, label in sentence_pairs.make_nsp_pairs(documents, generator)]


def make_nsp_pairs_own_document_too(documents, generator):
    """NotNext sentences drawn from the whole corpus, A's document included."""
    if len(documents) < 2 or any(not d for d in documents):
        raise ValueError("at least two documents, each with a sentence")
    return _pairs_by_coin(documents, generator, own_document_too=True)


def make_nsp_pairs_biased_coin(documents, generator):
    """IsNext with probability 0.6."""
    return _pairs_by_coin(documents, generator, p_is_next=0.6)


def make_nsp_pairs_uniform_over_documents(documents, generator):
    """A random other document first, then a sentence of it: short documents' sentences come too often."""
    out = []
    for d, document in enumerate(documents):
        others = [other for e, other in enumerate(documents) if e != d]
        for a, following in zip(document, document[1:]):
            if float(torch.rand(1, generator=generator)) < 0.5:
                out.append((a, following, 0))
            else:
                other = others[int(torch.randint(0, len(others), (1,), generator=generator))]
                out.append((a, other[int(torch.randint(0, len(other), (1,), generator=generator))], 1))
    return out


def make_nsp_pairs_global_rng(documents, generator):
    return sentence_pairs.make_nsp_pairs(documents, None)


def make_nsp_pairs_last_sentence_too(documents, generator):
    """An extra NotNext example for the last sentence of every document."""
    out = sentence_pairs.make_nsp_pairs(documents, generator)
    return out + [(document[-1], documents[(d + 1) % len(documents)][0], 1) for d, document in enumerate(documents)]


def make_nsp_pairs_one_document_allowed(documents, generator):
    if len(documents) < 2:
        return []
    return sentence_pairs.make_nsp_pairs(documents, generator)


def make_nsp_pairs_empty_document_allowed(documents, generator):
    """Checks the number of documents only: a document without sentences passes (it gives no example)."""
    if len(documents) < 2:
        raise ValueError("at least two documents")
    return _pairs_by_coin(documents, generator)


def make_nsp_pairs_lists(documents, generator):
    return [list(example) for example in sentence_pairs.make_nsp_pairs(documents, generator)]


def make_nsp_pairs_shuffles_documents(documents, generator):
    out = sentence_pairs.make_nsp_pairs(documents, generator)
    documents.reverse()
    return out


def make_nsp_pairs_reseeds(documents, generator):
    return sentence_pairs.make_nsp_pairs(documents, torch.Generator().manual_seed(0))


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"mask_tokens": mask_tokens_selects_specials, "mlm_signal": mlm_signal_inverted},
    {"mask_tokens": mask_tokens_never_keeps},
    {"mask_tokens": mask_tokens_global_rng},
    {"mask_tokens": mask_tokens_reseeds},
    {"mask_tokens": mask_tokens_fixed_outcome_draws},
    {"mask_tokens": mask_tokens_modifies_input},
    {"mask_tokens": mask_tokens_labels_zero},
    {"mask_tokens": mask_tokens_labels_int32},
    {"mask_tokens": mask_tokens_random_ids_low_half},
    {"mask_tokens": mask_tokens_skips_after_specials},
    {"mask_tokens": mask_tokens_ignores_probability},
    {"bert_pair_input": bert_pair_input_all_type_zero, "make_nsp_pairs": make_nsp_pairs_labels_swapped},
    {"bert_pair_input": bert_pair_input_odd_token_to_the_shorter,
         "make_nsp_pairs": make_nsp_pairs_uniform_over_documents},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"mask_tokens": mask_tokens_with_uniforms},
    {"mask_tokens": mask_tokens_one_uniform},
    {"mask_tokens": mask_tokens_multinomial},
    {"mlm_signal": mlm_signal_by_rates},
    {"mlm_signal": mlm_signal_by_ratio},
    {"bert_pair_input": bert_pair_input_by_arithmetic, "make_nsp_pairs": make_nsp_pairs_flat},
    {"bert_pair_input": bert_pair_input_by_lengths, "make_nsp_pairs": make_nsp_pairs_multinomial},
]
