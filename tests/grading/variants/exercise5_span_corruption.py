"""Stand-in students for the hidden suite of exercise 5 (T5's span corruption)."""
from __future__ import annotations

import torch

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
