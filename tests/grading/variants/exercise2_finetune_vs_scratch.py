"""Stand-in students for the hidden suite of exercise 2 (fine-tuning versus training from scratch)."""
from __future__ import annotations

import torch

from autograder.reference import exercises


# ---------------------------------------------------------------- wrong
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


# ---------------------------------------------------------------- correct, written differently
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


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"subsample_balanced": subsample_ignores_classes},
    {"subsample_balanced": subsample_first_of_each_class},
    {"subsample_balanced": subsample_global_rng},
    {"subsample_balanced": subsample_unsorted},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"subsample_balanced": subsample_by_one_shuffle},
]
