"""Stand-in students for the hidden suite of exercise 5 (T5's span corruption)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from autograder.reference import span_corruption


# ---------------------------------------------------------------- wrong
def noise_mask_evenly_spaced(length, *, noise_density=0.15, mean_span_length=3.0, generator=None):
    """The right counts, but the spans always sit at the same evenly spaced places."""
    num_noise = min(max(round(length * noise_density), 1), length - 1)
    num_kept = length - num_noise
    num_spans = min(max(round(num_noise / mean_span_length), 1), num_noise, num_kept)
    device = generator.device if generator is not None else torch.device("cpu")

    def even(n, k):
        return torch.tensor([n // k + (i < n % k) for i in range(k)], device=device)

    runs = torch.stack([even(num_kept, num_spans), even(num_noise, num_spans)], dim=1).flatten()
    return (torch.arange(2 * num_spans, device=device) % 2 == 1).repeat_interleave(runs)


def span_corrupt_one_sentinel(token_ids, noise_mask, *, sentinel_ids, eos_id=None):
    first = list(torch.as_tensor(sentinel_ids).flatten().tolist())[0]
    return span_corruption.span_corrupt(token_ids, noise_mask, sentinel_ids=[first] * len(sentinel_ids), eos_id=eos_id)


def span_corrupt_t5_final_sentinel(token_ids, noise_mask, *, sentinel_ids, eos_id=None):
    """The t5 code base's targets: no final sentinel when the sequence ends with noise."""
    inputs, targets = span_corruption.span_corrupt(token_ids, noise_mask, sentinel_ids=sentinel_ids)
    if bool(noise_mask[-1]):
        targets = targets[:-1]
    if eos_id is not None:
        eos = token_ids.new_full((1,), eos_id)
        inputs, targets = torch.cat([inputs, eos]), torch.cat([targets, eos])
    return inputs, targets


# ---------------------------------------------------------------- correct, written differently
def noise_mask_by_cut_points(length, *, noise_density=0.15, mean_span_length=3.0, generator=None):
    """Uniform splits from sorted random cut points (other draws than the reference)."""
    device = generator.device if generator is not None else torch.device("cpu")
    if length < 2:
        raise ValueError("length must be >= 2")
    num_noise = min(max(round(length * noise_density), 1), length - 1)
    num_kept = length - num_noise
    num_spans = min(max(round(num_noise / mean_span_length), 1), num_noise, num_kept)

    def split(n, k):
        cuts = torch.randperm(n - 1, generator=generator, device=device)[: k - 1].sort().values + 1
        edges = torch.cat([torch.zeros(1, dtype=torch.long, device=device), cuts, torch.tensor([n], device=device)])
        return edges.diff()

    noise = split(num_noise, num_spans)
    kept = split(num_kept, num_spans)
    pattern = torch.tensor([False, True], device=device).repeat(num_spans)
    return pattern.repeat_interleave(torch.stack([kept, noise], dim=1).flatten())


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"random_spans_noise_mask": noise_mask_evenly_spaced, "span_corrupt": span_corrupt_one_sentinel},
    {"span_corrupt": span_corrupt_t5_final_sentinel},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"random_spans_noise_mask": noise_mask_by_cut_points},
]


# ---------------------------------------------------------------- wrong in one clause each
# Named by the clause tables (autograder/reference/clauses/exercise5_span_corruption/).
def _mask_from_counts(num_noise, num_kept, num_spans, generator, device, *, noise_first=False):
    noise = span_corruption._random_segmentation(num_noise, num_spans, generator, device)
    kept = span_corruption._random_segmentation(num_kept, num_spans, generator, device)
    runs = torch.stack([noise, kept] if noise_first else [kept, noise], dim=1).flatten()
    pattern = torch.arange(2 * num_spans, device=device) % 2 == (0 if noise_first else 1)
    return pattern.repeat_interleave(runs)


def _counts(length, noise_density, mean_span_length, *, clip=True, cap=True, rounding=round):
    num_noise = rounding(length * noise_density)
    if clip:
        num_noise = min(max(num_noise, 1), length - 1)
    num_spans = max(rounding(num_noise / mean_span_length), 1)
    if cap:
        num_spans = min(num_spans, num_noise, length - num_noise)
    return num_noise, length - num_noise, num_spans


def _noise_mask(length, noise_density, mean_span_length, generator, *, noise_first=False, **rule):
    if length < 2:
        raise ValueError("length must be >= 2")
    device = generator.device if generator is not None else torch.device("cpu")
    counts = _counts(length, noise_density, mean_span_length, **rule)
    return _mask_from_counts(*counts, generator, device, noise_first=noise_first)


def noise_mask_without_clipping(length, *, noise_density=0.15, mean_span_length=3.0, generator=None):
    return _noise_mask(length, noise_density, mean_span_length, generator, clip=False)


def noise_mask_spans_not_capped(length, *, noise_density=0.15, mean_span_length=3.0, generator=None):
    return _noise_mask(length, noise_density, mean_span_length, generator, cap=False)


def noise_mask_rounds_half_up(length, *, noise_density=0.15, mean_span_length=3.0, generator=None):
    return _noise_mask(length, noise_density, mean_span_length, generator, rounding=lambda x: math.floor(x + 0.5))


def noise_mask_starts_with_noise(length, *, noise_density=0.15, mean_span_length=3.0, generator=None):
    return _noise_mask(length, noise_density, mean_span_length, generator, noise_first=True)


def noise_mask_global_rng(length, *, noise_density=0.15, mean_span_length=3.0, generator=None):
    device = generator.device if generator is not None else torch.device("cpu")
    return span_corruption.random_spans_noise_mask(length, noise_density=noise_density,
                                                   mean_span_length=mean_span_length).to(device)


def noise_mask_without_length_check(length, *, noise_density=0.15, mean_span_length=3.0, generator=None):
    if length < 2:
        return torch.zeros(length, dtype=torch.bool)
    return span_corruption.random_spans_noise_mask(length, noise_density=noise_density,
                                                   mean_span_length=mean_span_length, generator=generator)


def noise_mask_on_cpu(length, **kwargs):
    return span_corruption.random_spans_noise_mask(length, **kwargs).cpu()


def noise_mask_seeds_its_own_generator(length, *, generator=None, **kwargs):
    """With generator=None, a CPU generator of its own with a fixed seed instead of PyTorch's global one."""
    if generator is None:
        generator = torch.Generator().manual_seed(0)
    return span_corruption.random_spans_noise_mask(length, generator=generator, **kwargs)


def span_corrupt_eos_on_targets_only(token_ids, noise_mask, *, sentinel_ids, eos_id=None):
    inputs, targets = span_corruption.span_corrupt(token_ids, noise_mask, sentinel_ids=sentinel_ids, eos_id=eos_id)
    return (inputs[:-1], targets) if eos_id is not None else (inputs, targets)


def span_corrupt_reuses_the_last_sentinel(token_ids, noise_mask, *, sentinel_ids, eos_id=None):
    """Repeats the last sentinel id when there are too few, instead of raising ValueError."""
    sentinels = list(torch.as_tensor(sentinel_ids).flatten().tolist())
    return span_corruption.span_corrupt(token_ids, noise_mask, sentinel_ids=sentinels + sentinels[-1:] * len(token_ids),
                                        eos_id=eos_id)


def span_corrupt_int32(token_ids, noise_mask, *, sentinel_ids, eos_id=None):
    inputs, targets = span_corruption.span_corrupt(token_ids, noise_mask, sentinel_ids=sentinel_ids, eos_id=eos_id)
    return inputs.int(), targets.int()


def span_corrupt_nothing_without_noise(token_ids, noise_mask, *, sentinel_ids, eos_id=None):
    """No noise: the targets are left empty (eos only) instead of holding the first sentinel."""
    inputs, targets = span_corruption.span_corrupt(token_ids, noise_mask, sentinel_ids=sentinel_ids, eos_id=eos_id)
    if not bool(noise_mask.any()):
        targets = targets[1:]
    return inputs, targets


def span_corrupt_on_cpu(token_ids, noise_mask, **kwargs):
    inputs, targets = span_corruption.span_corrupt(token_ids, noise_mask, **kwargs)
    return inputs.cpu(), targets.cpu()


# ---------------------------------------------------------------- more correct ones, written differently
def noise_mask_by_random_keys(length, *, noise_density=0.15, mean_span_length=3.0, generator=None):
    """Cut points from sorting random keys of the gaps (other draws than the reference)."""
    if length < 2:
        raise ValueError("length must be >= 2")
    device = generator.device if generator is not None else torch.device("cpu")
    num_noise = min(max(round(length * noise_density), 1), length - 1)
    num_spans = min(max(round(num_noise / mean_span_length), 1), num_noise, length - num_noise)

    def split(n):
        cuts = torch.rand(n - 1, generator=generator, device=device).argsort()[: num_spans - 1].sort().values + 1
        bounds = torch.cat([cuts.new_zeros(1), cuts, cuts.new_full((1,), n)])
        return bounds.diff()

    noise, kept = split(num_noise), split(length - num_noise)
    mask = []
    for k, m in zip(kept.tolist(), noise.tolist()):
        mask += [False] * k + [True] * m
    return torch.tensor(mask, dtype=torch.bool, device=device)


def span_corrupt_token_by_token(token_ids, noise_mask, *, sentinel_ids, eos_id=None):
    sentinels = torch.as_tensor(sentinel_ids).flatten().tolist()
    inputs, targets, span, previous = [], [], 0, False
    for token, noise in zip(token_ids.tolist(), noise_mask.tolist()):
        if noise and not previous:
            if span >= len(sentinels):
                raise ValueError("too few sentinel ids")
            inputs.append(sentinels[span])
            targets.append(sentinels[span])
            span += 1
        (targets if noise else inputs).append(token)
        previous = noise
    if span >= len(sentinels):
        raise ValueError("too few sentinel ids")
    targets.append(sentinels[span])
    if eos_id is not None:
        inputs.append(eos_id)
        targets.append(eos_id)
    as_tensor = dict(dtype=token_ids.dtype, device=token_ids.device)
    return torch.tensor(inputs, **as_tensor), torch.tensor(targets, **as_tensor)


def span_corrupt_by_runs(token_ids, noise_mask, *, sentinel_ids, eos_id=None):
    """unique_consecutive gives the runs; each noise run becomes its sentinel."""
    sentinels = torch.as_tensor(sentinel_ids).flatten().to(device=token_ids.device, dtype=token_ids.dtype)
    noise_mask = noise_mask.to(token_ids.device).bool()
    values, counts = torch.unique_consecutive(noise_mask, return_counts=True)
    if int(values.sum()) + 1 > len(sentinels):
        raise ValueError("too few sentinel ids")
    inputs, targets, start, span = [], [], 0, 0
    for is_noise, count in zip(values.tolist(), counts.tolist()):
        run = token_ids[start:start + count]
        if is_noise:
            inputs.append(sentinels[span:span + 1])
            targets += [sentinels[span:span + 1], run]
            span += 1
        else:
            inputs.append(run)
        start += count
    targets.append(sentinels[span:span + 1])
    if eos_id is not None:
        eos = token_ids.new_full((1,), eos_id)
        inputs.append(eos)
        targets.append(eos)
    return torch.cat(inputs) if inputs else token_ids[:0], torch.cat(targets)


ALTERNATIVES += [
    {"random_spans_noise_mask": noise_mask_by_random_keys, "span_corrupt": span_corrupt_token_by_token},
    {"span_corrupt": span_corrupt_by_runs},
]


# ---------------------------------------------------------------- span_corruption_loss
def _token_costs(log_probs, targets):
    """[B, L] -log p(target), 0 at the -100 positions, from [B, L, V] log-probabilities."""
    scored = targets != -100
    picked = log_probs.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return -picked.masked_fill(~scored, 0.0)


def span_corruption_loss_mean_per_row(logits, targets):
    """The mean per scored target of each row instead of the sum."""
    targets = targets.to(logits.device)
    costs = _token_costs(torch.log_softmax(logits.float(), dim=-1), targets)
    return costs.sum(dim=1) / (targets != -100).sum(dim=1).clamp(min=1)


def span_corruption_loss_shifted(logits, targets):
    """Shifts as clm_loss does: logits[:, t] scored against targets[:, t + 1]."""
    targets = targets.to(logits.device)
    return _token_costs(torch.log_softmax(logits[:, :-1].float(), dim=-1), targets[:, 1:]).sum(dim=1)


def span_corruption_loss_scores_padding(logits, targets):
    """Reads -100 as class 0 and scores it like any other target."""
    targets = targets.to(logits.device).clamp(min=0)
    return _token_costs(torch.log_softmax(logits.float(), dim=-1), targets).sum(dim=1)


def span_corruption_loss_nan_when_empty(logits, targets):
    """Right wherever a row has a target; NaN (0 / 0) for a row without one."""
    total = span_corruption.span_corruption_loss(logits, targets)
    empty = (targets.to(logits.device) == -100).all(dim=1)
    return total.masked_fill(empty, float("nan"))


def span_corruption_loss_batch_total(logits, targets):
    """The batch's total as one 0-dim tensor instead of one value per row."""
    return span_corruption.span_corruption_loss(logits, targets).sum()


def span_corruption_loss_naive_softmax(logits, targets):
    """log(exp(x) / sum exp(x)) without subtracting the maximum: inf and NaN for large logits."""
    exp = logits.float().exp()
    log_probs = (exp / exp.sum(dim=-1, keepdim=True)).log()
    return _token_costs(log_probs, targets.to(logits.device)).sum(dim=1)


def span_corruption_loss_in_input_dtype(logits, targets):
    """The log-softmax in the logits' own dtype (float16, bfloat16), upcast only at the end."""
    log_probs = torch.log_softmax(logits, dim=-1)
    return _token_costs(log_probs, targets.to(logits.device)).sum(dim=1).float()


def span_corruption_loss_in_logits_dtype(logits, targets):
    """Computed in float32, but returned in the logits' dtype."""
    return span_corruption.span_corruption_loss(logits, targets).to(logits.dtype)


def span_corruption_loss_on_cpu(logits, targets):
    return span_corruption.span_corruption_loss(logits, targets).cpu()


def span_corruption_loss_mean_per_token(logits, targets):
    """The mean per scored target token of the whole batch (what training minimises), a 0-dim tensor."""
    total = span_corruption.span_corruption_loss(logits, targets).sum()
    return total / (targets != -100).sum().clamp(min=1)


def span_corruption_loss_by_logsumexp(logits, targets):
    """-log softmax(x)[y] = logsumexp(x) - x[y], masked by multiplying with the scored positions."""
    x = logits.float()
    targets = targets.to(x.device)
    scored = (targets != -100).float()
    picked = x.gather(-1, (targets * (targets >= 0)).unsqueeze(-1)).squeeze(-1)
    return ((torch.logsumexp(x, dim=-1) - picked) * scored).sum(dim=-1)


def span_corruption_loss_by_cross_entropy(logits, targets):
    """F.cross_entropy over the flattened batch, reduction="none", folded back into rows."""
    batch, length, vocab = logits.shape
    costs = F.cross_entropy(logits.float().reshape(-1, vocab), targets.to(logits.device).reshape(-1),
                            ignore_index=-100, reduction="none")
    return costs.reshape(batch, length).sum(dim=1)


def span_corruption_loss_row_by_row(logits, targets):
    """A Python loop over the rows, each scored on its kept positions only with nll_loss."""
    losses = []
    for row_logits, row_targets in zip(logits.float(), targets.to(logits.device)):
        kept = row_targets != -100
        log_probs = F.log_softmax(row_logits[kept], dim=-1)
        losses.append(F.nll_loss(log_probs, row_targets[kept], reduction="sum") if bool(kept.any())
                      else row_logits.new_zeros(()))
    return torch.stack(losses)


MUTANTS += [
    {"span_corruption_loss": span_corruption_loss_shifted},
    {"span_corruption_loss": span_corruption_loss_mean_per_token},
    {"span_corruption_loss": span_corruption_loss_in_input_dtype},
]

ALTERNATIVES += [
    {"span_corruption_loss": span_corruption_loss_by_logsumexp},
    {"span_corruption_loss": span_corruption_loss_by_cross_entropy},
    {"span_corruption_loss": span_corruption_loss_row_by_row},
]
