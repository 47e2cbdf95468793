"""``--limit N``: a seeded sample of N rows spread over the classes, the same for every model.

Test sets are often sorted by class (ImageNetV2, CIFAR-10.1), so the first N rows would score a
few classes only. :func:`limit_sample` takes the rows round by round: in each round every class
that has rows left gives one row chosen at random, in a random order of the classes, until N
rows are taken; the rows are then scored in their order in the split. The sample depends only
on the labels, N and the seed, so every model of a run and every re-run scores the same rows.
"""

from __future__ import annotations

import numpy as np

LIMIT_SEED = 0
LIMIT_SAMPLE = f"rows spread over the classes, seed {LIMIT_SEED}"  # recorded in the job signatures


def limit_sample(labels, n: int, seed: int = LIMIT_SEED) -> np.ndarray:
    """Row indices (ascending) of a seeded sample of ``n`` rows spread as evenly as possible over the classes.

    >>> labels = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
    >>> rows = limit_sample(labels, 6)
    >>> sorted(np.bincount(np.asarray(labels)[rows]).tolist())
    [2, 2, 2]
    >>> np.array_equal(rows, limit_sample(labels, 6)), len(limit_sample(labels, 50))
    (True, 12)
    """
    labels = np.asarray(labels)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"--limit must be a positive number of images, got {n!r}")
    if n >= len(labels):
        return np.arange(len(labels))
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(labels))  # rows in a random order
    _, classes = np.unique(labels[order], return_inverse=True)
    by_class = np.argsort(classes, kind="stable")  # grouped by class, random order within each
    starts = np.flatnonzero(np.r_[True, np.diff(classes[by_class]) != 0])
    rank = np.empty(len(labels), dtype=np.int64)
    rank[by_class] = np.arange(len(labels)) - np.repeat(starts, np.diff(np.r_[starts, len(labels)]))
    priority = rng.permutation(classes.max() + 1)[classes]  # the order of the classes within a round
    taken = np.lexsort((priority, rank))[:n]
    return np.sort(order[taken])
