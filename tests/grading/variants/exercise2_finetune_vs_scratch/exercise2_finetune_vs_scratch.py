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


# ---------------------------------------------------------------- wrong in one clause each
# Named by the clause tables (autograder/reference/clauses/exercise2_finetune_vs_scratch/).
def _draw(labels, quota, seed):
    generator = torch.Generator().manual_seed(seed)
    chosen = [torch.nonzero(labels == c).flatten()[torch.randperm(int((labels == c).sum()), generator=generator)[:k]]
              for c, k in quota.items()]
    return torch.cat(chosen).sort().values if chosen else torch.zeros(0, dtype=torch.long)


def subsample_without_redistribution(labels, n, seed):
    """floor(n / C) or ceil(n / C) per class, capped at the class size: a class that runs out leaves places empty."""
    labels = torch.as_tensor(labels).reshape(-1)
    if not 0 <= n <= labels.numel():
        raise ValueError("n out of range")
    classes = torch.unique(labels).tolist()
    share, extra = divmod(n, len(classes))
    return _draw(labels, {c: min(share + (i < extra), int((labels == c).sum())) for i, c in enumerate(classes)}, seed)


def subsample_extras_to_larger_classes(labels, n, seed):
    labels = torch.as_tensor(labels).reshape(-1)
    if not 0 <= n <= labels.numel():
        raise ValueError("n out of range")
    flipped = labels.max() + labels.min() - labels  # class order reversed, counts unchanged
    return exercises.subsample_balanced(flipped, n, seed)


def subsample_int32(labels, n, seed):
    return exercises.subsample_balanced(labels, n, seed).int()


def subsample_clamps_n(labels, n, seed):
    return exercises.subsample_balanced(labels, min(max(n, 0), len(labels)), seed)


def subsample_sorts_labels_in_place(labels, n, seed):
    result = exercises.subsample_balanced(labels, n, seed)
    if isinstance(labels, torch.Tensor):
        labels.copy_(labels.sort().values)
    return result


def subsample_tensors_only(labels, n, seed):
    if not 0 <= n <= labels.numel():
        raise ValueError("n out of range")
    return exercises.subsample_balanced(labels, n, seed)


# ---------------------------------------------------------------- more correct ones, written differently
def subsample_by_random_keys(labels, n, seed):
    """Quotas by filling level by level; each class's examples ranked by random keys (uniform subsets)."""
    labels = torch.tensor(list(labels)) if not isinstance(labels, torch.Tensor) else labels.reshape(-1)
    if n < 0 or n > labels.numel():
        raise ValueError("n out of range")
    classes = labels.unique().tolist()
    sizes = [int((labels == c).sum()) for c in classes]
    quota = [0] * len(classes)
    for _ in range(n):  # the next place goes to the first class (by value) with the fewest taken and room left
        open_ = [i for i in range(len(classes)) if quota[i] < sizes[i]]
        quota[min(open_, key=lambda i: (quota[i], i))] += 1
    keys = torch.rand(labels.numel(), generator=torch.Generator().manual_seed(seed))
    chosen = []
    for c, q in zip(classes, quota):
        members = (labels == c).nonzero().flatten()
        chosen += members[keys[members].argsort()[:q]].tolist()
    return torch.tensor(sorted(chosen), dtype=torch.long)


ALTERNATIVES += [{"subsample_balanced": subsample_by_random_keys}]
