"""The three sampling rules of ImageNetV2, vectorised over a whole candidate pool.

This module works on arrays, one entry per candidate, sorted by candidate id; classes are
integers ``0 … n_classes - 1``. :mod:`pipeline.rebuild.revision` turns a pool's tables into these
arrays and the result into a revision file; ``python -m pipeline simulate`` calls the same
functions on its toy world.

Semantics (those of the original pipeline; ``shared/reference/NOTES.md``):

- Exclusions, in order (the first that applies is recorded): ``blacklisted``,
  ``too_few_annotations``, ``below_threshold`` (Threshold rule only), ``near_duplicate``,
  ``review_unfinished``. A candidate with no reason is eligible.
- MatchedFrequency: each class's target counts per selection-frequency bin come from the
  histogram of its original validation images (those with at least ``min_annotations_val``
  annotations; a class with fewer than ``min_images_per_class`` of them makes the revision
  invalid), rounded by largest remainder to ``per_class`` (equal remainders: higher bin first).
  Bins: a value goes to the first bin whose edge it is below, so with edges 0.2/0.4/0.6/0.8
  a value ≥ 0.8 is in the top bin. Each bin is filled at random from the eligible candidates in
  it. A bin that runs short makes the revision invalid, unless upward sampling is allowed:
  then each missing slot is taken from the next higher bin that still has candidates
  (candidates of the previous revision first).
- Threshold: ``per_class`` random eligible candidates per class with selection frequency at
  least the class's threshold.
- TopImages: the ``per_class`` eligible candidates per class with the highest selection
  frequency; ties broken by more annotations, then membership in the previous revision, then
  the larger candidate id (the original sorted the tuple and reversed it).
- Chaining: MatchedFrequency and Threshold first keep the previous revision's images that are
  still eligible (MatchedFrequency: up to each bin's target), then sample only the rest.

All randomness comes from one ``numpy.random.Generator``: one uniform key per candidate (a
random sample of k from a group = the k smallest keys), then a shuffle of the selection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

REASONS = ("blacklisted", "too_few_annotations", "below_threshold", "near_duplicate", "review_unfinished")
ELIGIBLE = 0  # reason code of an eligible candidate; reason i + 1 is REASONS[i]
STANDARD_BINS = (0.2, 0.4, 0.6, 0.8)


@dataclass(frozen=True)
class CandidateArrays:
    """The candidates of a pool as parallel arrays (index = position in candidate-id order)."""

    class_index: np.ndarray  # int, 0 .. n_classes - 1
    selection_frequency: np.ndarray  # float, 0 for a candidate never shown
    num_annotations: np.ndarray  # int
    blacklisted: Optional[np.ndarray] = None  # bool; None = none
    near_duplicate: Optional[np.ndarray] = None  # bool; None = none
    review_finished: Optional[np.ndarray] = None  # bool; None = all
    in_previous: Optional[np.ndarray] = None  # bool; None = no previous revision

    def __len__(self) -> int:
        return len(self.class_index)

    def flag(self, name: str, default: bool) -> np.ndarray:
        value = getattr(self, name)
        return np.full(len(self), default) if value is None else np.asarray(value, bool)


@dataclass
class SamplingResult:
    """What a rule chose, and why every other candidate was not chosen."""

    selected: np.ndarray  # candidate indices in the revision's (shuffled) order
    reason: np.ndarray  # int8 per candidate: ELIGIBLE or 1 + index into REASONS
    carried_over: np.ndarray  # bool per candidate: kept from the previous revision
    shortfall: np.ndarray  # int per class: slots left empty
    is_valid: bool
    problems: list[str] = field(default_factory=list)  # why the revision is invalid
    bins: Optional[np.ndarray] = None  # MatchedFrequency: int8 bin per candidate
    targets: Optional[np.ndarray] = None  # MatchedFrequency: (n_classes, n_bins) target counts
    upward_to_bin: Optional[np.ndarray] = None  # MatchedFrequency: int8, -1 or the bin filled upward

    @property
    def num_upward(self) -> int:
        return 0 if self.upward_to_bin is None else int(np.count_nonzero(self.upward_to_bin >= 0))

    def reason_counts(self) -> dict[str, int]:
        counts = np.bincount(self.reason, minlength=len(REASONS) + 1)
        return {name: int(counts[i + 1]) for i, name in enumerate(REASONS)}


# --- building blocks -------------------------------------------------------------------------


def histogram_bin(selection_frequency, edges: Sequence[float] = STANDARD_BINS) -> np.ndarray:
    """The bin of each value: the first bin whose edge the value is below (≥ last edge: top bin).

    >>> histogram_bin([0.0, 0.19, 0.2, 0.79, 0.8, 1.0]).tolist()
    [0, 0, 1, 3, 4, 4]
    """
    edges = np.asarray(edges, float)
    if edges.ndim != 1 or len(edges) == 0 or np.any(np.diff(edges) <= 0):
        raise ValueError(f"histogram bins must be increasing edges, e.g. [0.2, 0.4, 0.6, 0.8]; got {edges.tolist()}")
    return np.searchsorted(edges, np.asarray(selection_frequency, float), side="right").astype(np.int8)


def largest_remainder(counts, total: int) -> np.ndarray:
    """Scale each row of ``counts`` to sum to ``total``, rounding by largest remainder.

    Each row gets the floors of its exact shares, then one more slot for the bins with the
    largest remainders; equal remainders go to the higher bin first (as the original did). A
    row of zeros stays zeros.

    >>> largest_remainder([[3, 3, 2, 1, 1]], 10).tolist()
    [[3, 3, 2, 1, 1]]
    >>> largest_remainder([[1, 1, 1, 0, 0]], 10).tolist()  # 3.33 each: the top bin gets the extra
    [[3, 3, 4, 0, 0]]
    >>> largest_remainder([[5, 8, 7, 0, 0]], 4).tolist()  # 1.0, 1.6, 1.4 → 1, 2, 1
    [[1, 2, 1, 0, 0]]
    """
    counts = np.atleast_2d(np.asarray(counts, float))
    sums = counts.sum(axis=1, keepdims=True)
    exact = np.divide(total * counts, sums, out=np.zeros_like(counts), where=sums > 0)
    floor = np.floor(exact)
    remainder = exact - floor
    missing = np.where(sums[:, 0] > 0, total - floor.sum(axis=1), 0).round().astype(int)
    n_bins = counts.shape[1]
    bin_index = np.broadcast_to(np.arange(n_bins), counts.shape)
    order = np.lexsort((-bin_index, -remainder), axis=-1)  # per row: largest remainder, then higher bin
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(n_bins)[None, :].repeat(len(counts), 0), axis=-1)
    return (floor + (rank < missing[:, None])).astype(np.int64)


def rank_within_groups(group: np.ndarray, *sort_keys: np.ndarray) -> np.ndarray:
    """Each element's 0-based rank within its group, ordered by ``sort_keys`` (first key first).

    >>> rank_within_groups(np.array([1, 0, 1, 1]), np.array([0.5, 0.1, 0.2, 0.9])).tolist()
    [1, 0, 0, 2]
    """
    order = np.lexsort(tuple(reversed(sort_keys)) + (group,))
    sorted_group = group[order]
    starts = np.flatnonzero(np.r_[True, sorted_group[1:] != sorted_group[:-1]])
    run_start = np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order)) - run_start
    return rank


def exclusion_reasons(
    candidates: CandidateArrays,
    min_annotations: int,
    thresholds: Optional[np.ndarray] = None,
) -> np.ndarray:
    """Each candidate's first exclusion reason (``ELIGIBLE`` = none), in the order of :data:`REASONS`.

    ``thresholds`` (one per class) applies the Threshold rule's ``below_threshold``.
    """
    n = len(candidates)
    checks = [
        candidates.flag("blacklisted", False),
        candidates.num_annotations < min_annotations,
        np.zeros(n, bool) if thresholds is None else candidates.selection_frequency < np.asarray(thresholds, float)[candidates.class_index],
        candidates.flag("near_duplicate", False),
        ~candidates.flag("review_finished", True),
    ]
    reason = np.zeros(n, np.int8)
    for code in range(len(checks), 0, -1):  # the earliest reason wins
        reason[checks[code - 1]] = code
    return reason


def matched_frequency_targets(
    original_class: np.ndarray,
    original_selection_frequency: np.ndarray,
    original_num_annotations: np.ndarray,
    n_classes: int,
    *,
    per_class: int,
    edges: Sequence[float] = STANDARD_BINS,
    min_annotations_val: int = 10,
    min_images_per_class: int = 20,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-class target counts per bin from the originals' histogram, and usable originals per class.

    Only originals with at least ``min_annotations_val`` annotations count. Returns
    ``(targets, usable)``: ``targets`` is ``(n_classes, len(edges) + 1)`` and sums to
    ``per_class`` in every class with any usable original; classes with fewer than
    ``min_images_per_class`` usable originals are the caller's to flag.
    """
    usable = np.asarray(original_num_annotations) >= min_annotations_val
    classes = np.asarray(original_class)[usable]
    bins = histogram_bin(np.asarray(original_selection_frequency)[usable], edges)
    n_bins = len(edges) + 1
    histogram = np.bincount(classes * n_bins + bins, minlength=n_classes * n_bins).reshape(n_classes, n_bins)
    return largest_remainder(histogram, per_class), np.bincount(classes, minlength=n_classes)


def _shuffled(selected_mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return rng.permutation(np.flatnonzero(selected_mask))


def _keys(candidates: CandidateArrays, rng: np.random.Generator) -> np.ndarray:
    return rng.random(len(candidates))


def _short_classes_message(shortfall: np.ndarray, class_names: Optional[Sequence[str]], what: str) -> str:
    short = np.flatnonzero(shortfall)
    names = [str(class_names[i]) if class_names is not None else str(i) for i in short[:10]]
    return f"{len(short)} class(es) {what}: {', '.join(names)}{' ...' if len(short) > 10 else ''}"


# --- the rules -------------------------------------------------------------------------------


def sample_matched_frequency(
    candidates: CandidateArrays,
    targets: np.ndarray,
    *,
    rng: np.random.Generator,
    min_annotations: int = 10,
    edges: Sequence[float] = STANDARD_BINS,
    allow_upward_sampling: bool = False,
    class_names: Optional[Sequence[str]] = None,
) -> SamplingResult:
    """MatchedFrequency: fill each class's bins to ``targets`` (from :func:`matched_frequency_targets`).

    >>> c = CandidateArrays(np.zeros(6, int), np.array([.1, .3, .5, .9, .95, .85]), np.full(6, 10))
    >>> r = sample_matched_frequency(c, np.array([[0, 1, 1, 1, 0]]), rng=np.random.default_rng(0))
    >>> r.is_valid, r.problems, sorted(r.selected.tolist())  # bin 3 (0.6-0.8) is empty
    (False, ['1 class(es) short in some bin (upward sampling is off): 0'], [1, 2])
    >>> r = sample_matched_frequency(c, np.array([[0, 1, 1, 1, 0]]), rng=np.random.default_rng(0), allow_upward_sampling=True)
    >>> r.is_valid, r.num_upward, len(r.selected)  # the slot of bin 3 is filled from bin 4
    (True, 1, 3)
    """
    n_classes, n_bins = targets.shape
    keys = _keys(candidates, rng)
    reason = exclusion_reasons(candidates, min_annotations)
    eligible = reason == ELIGIBLE
    bins = histogram_bin(candidates.selection_frequency, edges)
    if n_bins != len(edges) + 1:
        raise ValueError(f"targets have {n_bins} bins but the edges {list(edges)} make {len(edges) + 1}")
    group = candidates.class_index.astype(np.int64) * n_bins + bins
    target = targets.reshape(-1)[group]
    in_previous = candidates.flag("in_previous", False)

    # Keep the previous revision's eligible images, up to each bin's target (a random subset if more).
    previous = eligible & in_previous
    carried = previous & (rank_within_groups(np.where(previous, group, -1), keys) < target)
    carried_per_group = np.bincount(group[carried], minlength=n_classes * n_bins)

    # Fill the rest of each bin at random from the other eligible candidates.
    free = eligible & ~carried
    rank = rank_within_groups(np.where(free, group, -1), keys)
    remaining = np.maximum(targets.reshape(-1) - carried_per_group, 0)
    chosen = free & (rank < remaining[group])
    available = np.bincount(group[free], minlength=n_classes * n_bins)
    missing = np.maximum(remaining - available, 0).reshape(n_classes, n_bins)

    upward_to_bin, problems = _fill_short_bins(missing, free & ~chosen, group, keys, in_previous, allow_upward_sampling, class_names)
    selected = carried | chosen | (upward_to_bin >= 0)
    return SamplingResult(
        selected=_shuffled(selected, rng),
        reason=reason,
        carried_over=carried,
        shortfall=missing.sum(axis=1),
        is_valid=not problems,
        problems=problems,
        bins=bins,
        targets=targets,
        upward_to_bin=upward_to_bin,
    )


def _fill_short_bins(missing, leftover, group, keys, in_previous, allow_upward_sampling, class_names):
    """Upward sampling for the bins short of their target (in place on ``missing``); the problems left."""
    n_bins = missing.shape[1]
    upward_to_bin = np.full(len(group), -1, np.int8)
    problems = []
    if missing.any() and not allow_upward_sampling:
        problems.append(_short_classes_message(missing.sum(axis=1), class_names, "short in some bin (upward sampling is off)"))
    elif missing.any():
        _sample_upward(missing, leftover, group, n_bins, keys, in_previous, upward_to_bin)
        if missing.any():
            problems.append(_short_classes_message(missing.sum(axis=1), class_names, "short with no higher bin to sample from"))
    return upward_to_bin, problems


def _sample_upward(missing, leftover, group, n_bins, keys, in_previous, upward_to_bin) -> None:
    """Fill missing slots from the next higher non-empty bin, in place (only short classes loop)."""
    for cls in np.flatnonzero(missing.any(axis=1)):
        members = np.flatnonzero(leftover & (group // n_bins == cls))
        # per bin: leftover candidates, previous-revision ones first, then by key
        members = members[np.lexsort((keys[members], ~in_previous[members]))]
        queues = {b: list(members[group[members] % n_bins == b]) for b in range(n_bins)}
        for b in range(n_bins):
            while missing[cls, b] > 0:
                source = next((h for h in range(b + 1, n_bins) if queues[h]), None)
                if source is None:
                    break
                upward_to_bin[queues[source].pop(0)] = b
                missing[cls, b] -= 1


def sample_threshold(
    candidates: CandidateArrays,
    thresholds: np.ndarray,
    *,
    rng: np.random.Generator,
    per_class: int,
    min_annotations: int = 10,
    class_names: Optional[Sequence[str]] = None,
) -> SamplingResult:
    """Threshold: ``per_class`` random eligible candidates per class at or above the class's threshold.

    >>> c = CandidateArrays(np.array([0, 0, 0, 1, 1]), np.array([.9, .7, .69, .55, .4]), np.full(5, 10))
    >>> r = sample_threshold(c, np.array([0.7, 0.5]), rng=np.random.default_rng(0), per_class=2)
    >>> sorted(r.selected.tolist()), r.shortfall.tolist(), r.reason_counts()["below_threshold"]
    ([0, 1, 3], [0, 1], 2)
    """
    n_classes = len(thresholds)
    keys = _keys(candidates, rng)
    reason = exclusion_reasons(candidates, min_annotations, thresholds)
    eligible = reason == ELIGIBLE
    carried = eligible & candidates.flag("in_previous", False)
    cls = candidates.class_index
    remaining = np.maximum(per_class - np.bincount(cls[carried], minlength=n_classes), 0)
    free = eligible & ~carried
    chosen = free & (rank_within_groups(np.where(free, cls, -1), keys) < remaining[cls])
    shortfall = np.maximum(remaining - np.bincount(cls[free], minlength=n_classes), 0)
    problems = [_short_classes_message(shortfall, class_names, "have too few candidates above the threshold")] if shortfall.any() else []
    return SamplingResult(
        selected=_shuffled(carried | chosen, rng),
        reason=reason,
        carried_over=carried,
        shortfall=shortfall,
        is_valid=not problems,
        problems=problems,
    )


def sample_top_images(
    candidates: CandidateArrays,
    n_classes: int,
    *,
    rng: np.random.Generator,
    per_class: int,
    min_annotations: int = 10,
    class_names: Optional[Sequence[str]] = None,
) -> SamplingResult:
    """TopImages: the ``per_class`` eligible candidates with the highest selection frequency per class.

    Ties: more annotations first, then the previous revision's images, then the larger index
    (= larger candidate id).

    >>> c = CandidateArrays(np.zeros(4, int), np.array([.9, .9, .9, .8]), np.array([10, 12, 10, 30]),
    ...                     in_previous=np.array([False, False, True, False]))
    >>> sorted(sample_top_images(c, 1, rng=np.random.default_rng(0), per_class=2).selected.tolist())
    [1, 2]
    """
    keys = _keys(candidates, rng)  # unused by the rule; drawn so that the shuffle's stream matches the other rules
    del keys
    reason = exclusion_reasons(candidates, min_annotations)
    eligible = reason == ELIGIBLE
    in_previous = candidates.flag("in_previous", False)
    cls = candidates.class_index
    rank = rank_within_groups(
        np.where(eligible, cls, -1),
        -candidates.selection_frequency,
        -candidates.num_annotations,
        -in_previous.astype(np.int8),
        -np.arange(len(candidates)),
    )
    chosen = eligible & (rank < per_class)
    shortfall = np.maximum(per_class - np.bincount(cls[chosen], minlength=n_classes), 0)
    problems = [_short_classes_message(shortfall, class_names, "have too few eligible candidates")] if shortfall.any() else []
    return SamplingResult(
        selected=_shuffled(chosen, rng),
        reason=reason,
        carried_over=chosen & in_previous,
        shortfall=shortfall,
        is_valid=not problems,
        problems=problems,
    )
