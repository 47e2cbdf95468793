"""``python -m pipeline simulate``: why matching on noisy selection frequencies makes a harder set.

A toy world (after Engstrom et al. 2020, "Identifying statistical bias in dataset replication")
where every image's true selection frequency is known:

- Images are 16×16 grayscale: background 0; class 0 a horizontal bar (rows 6–9, columns
  2–13), class 1 a vertical bar (rows 2–13, columns 6–9), of contrast c ~ U(0, 0.6), plus
  Gaussian noise of standard deviation 1.5. Classes are equally likely.
- An annotator confirms an image's label with probability Φ((c − 0.3)/0.2), its true selection
  frequency; k annotators give a Binomial(k, p) count, drawn directly.
- The classifier is fixed: class 1 when ⟨T1 − T0, x⟩ > 0 (T the two bar masks).
- The original test set: 60,000 web images, those a majority of 10 annotators confirm (≥ 6),
  the first 10,000.
- The replication: a new pool of 80,000 images from the same source, labelled by k annotators
  together with the first 5,000 original images; 5,000 new images (2,500 per class) are
  sampled by each rule on the observed frequencies, through the same functions as ``sample``
  (:mod:`pipeline.rebuild.sampling_rules`; MatchedFrequency with upward sampling, bins 0.2/0.4/0.6/0.8).
  The row ``MF-posterior`` is MatchedFrequency on posterior-mean selection frequencies
  (:mod:`pipeline.rebuild.selection_prior`), the correction of ``sample --match-on posterior``.

Per row and seed: mean observed and true selection frequency of the 5,000 annotated originals
and of the 5,000 new images, accuracy on the 10,000 originals and on the new images, and the
change (new − original) in points. The table gives means over seeds and the change as
mean [min, max]. Images with the same seed are shared by the rows; the annotations are shared
by the rows with the same k.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Union

import numpy as np
from scipy.special import ndtr

from pipeline.rebuild.selection_prior import debiased_frequencies
from pipeline.rebuild.sampling_rules import (
    STANDARD_BINS,
    CandidateArrays,
    matched_frequency_targets,
    sample_matched_frequency,
    sample_threshold,
    sample_top_images,
)

PathLike = Union[str, "os.PathLike[str]"]

SIZE = 16
NOISE = 1.5
MAX_CONTRAST = 0.6
WEB_IMAGES = 60_000
ORIGINAL_VOTERS = 10
ORIGINAL_SET = 10_000
POOL = 80_000
ANNOTATED_ORIGINALS = 5_000
NEW_SET = 5_000
CHUNK = 20_000
SEEDS = tuple(range(10))
ROWS = (("MatchedFrequency", 10), ("MatchedFrequency", 40), ("MatchedFrequency", 200), ("Threshold0.7", 10), ("TopImages", 10),
        ("MF-posterior", 10))
# MF-posterior: MatchedFrequency on posterior-mean selection frequencies (sample --match-on posterior)
POSTERIOR_PRIOR = "mixture"
JSON_KEYS = (
    "strategy", "annotators", "observed_sf_original", "observed_sf_new", "true_sf_original", "true_sf_new",
    "accuracy_original", "accuracy_new", "change_mean", "change_min", "change_max",
)


def bar_masks() -> np.ndarray:
    """T0 (horizontal bar, rows 6–9 × columns 2–13) and T1 (vertical bar, rows 2–13 × columns 6–9).

    >>> masks = bar_masks()
    >>> masks.shape, int(masks[0].sum()), int(masks[1].sum()), int((masks[0] * masks[1]).sum())
    ((2, 16, 16), 48, 48, 16)
    """
    masks = np.zeros((2, SIZE, SIZE), np.float32)
    masks[0, 6:10, 2:14] = 1
    masks[1, 2:14, 6:10] = 1
    return masks


def true_selection_frequency(contrast: np.ndarray) -> np.ndarray:
    """Φ((c − 0.3)/0.2): the probability that an annotator confirms the label."""
    return ndtr((contrast - 0.3) / 0.2)


@dataclass(frozen=True)
class Images:
    """Draws from the web: label, contrast, true selection frequency, whether the classifier is right."""

    label: np.ndarray
    contrast: np.ndarray
    true_sf: np.ndarray
    correct: np.ndarray

    def take(self, index) -> "Images":
        return Images(self.label[index], self.contrast[index], self.true_sf[index], self.correct[index])


def draw_images(n: int, rng: np.random.Generator) -> Images:
    """``n`` images from the web, rendered and classified (in chunks, float32)."""
    masks = bar_masks()
    direction = masks[1] - masks[0]
    label = rng.integers(0, 2, n)
    contrast = rng.uniform(0, MAX_CONTRAST, n)
    correct = np.empty(n, bool)
    for start in range(0, n, CHUNK):
        stop = min(start + CHUNK, n)
        x = rng.standard_normal((stop - start, SIZE, SIZE), dtype=np.float32) * np.float32(NOISE)
        x += contrast[start:stop, None, None].astype(np.float32) * masks[label[start:stop]]
        prediction = np.einsum("nij,ij->n", x, direction) > 0
        correct[start:stop] = prediction == (label[start:stop] == 1)
    return Images(label, contrast, true_selection_frequency(contrast), correct)


@dataclass(frozen=True)
class World:
    originals: Images  # the original test set (10,000)
    pool: Images  # the replication's candidate pool (80,000)


def make_world(seed: int) -> World:
    """The original test set and the new pool for one seed."""
    rng = np.random.default_rng([seed, 0])
    web = draw_images(WEB_IMAGES, rng)
    votes = rng.binomial(ORIGINAL_VOTERS, web.true_sf)
    kept = np.flatnonzero(votes > ORIGINAL_VOTERS // 2)
    if len(kept) < ORIGINAL_SET:
        raise RuntimeError(f"only {len(kept)} of {WEB_IMAGES} web images passed the vote; need {ORIGINAL_SET}")
    originals = web.take(kept[:ORIGINAL_SET])
    return World(originals, draw_images(POOL, rng))


def sample_new_set(strategy: str, world: World, observed_originals: np.ndarray, observed_pool: np.ndarray, k: int, rng) -> np.ndarray:
    """Indices of the 5,000 pool images ``strategy`` chooses, by the functions ``sample`` uses."""
    per_class = NEW_SET // 2
    annotations = np.full(POOL, k)
    if strategy == "MF-posterior":  # each group's observed counts shrunk toward its own fitted prior
        observed_originals, observed_pool, _ = debiased_frequencies(
            observed_originals, np.full(ANNOTATED_ORIGINALS, k), observed_pool, annotations, kind=POSTERIOR_PRIOR)
        strategy = "MatchedFrequency"
    candidates = CandidateArrays(class_index=world.pool.label, selection_frequency=observed_pool, num_annotations=annotations)
    if strategy == "MatchedFrequency":
        annotated = world.originals.take(slice(0, ANNOTATED_ORIGINALS))
        targets, _ = matched_frequency_targets(
            annotated.label, observed_originals, np.full(ANNOTATED_ORIGINALS, k), 2,
            per_class=per_class, edges=STANDARD_BINS, min_annotations_val=k, min_images_per_class=1,
        )
        result = sample_matched_frequency(candidates, targets, rng=rng, min_annotations=k, allow_upward_sampling=True)
    elif strategy == "Threshold0.7":
        result = sample_threshold(candidates, np.full(2, 0.7), rng=rng, per_class=per_class, min_annotations=k)
    elif strategy == "TopImages":
        result = sample_top_images(candidates, 2, rng=rng, per_class=per_class, min_annotations=k)
    else:
        raise ValueError(f"unknown strategy {strategy!r}; the strategies are MatchedFrequency, MF-posterior, Threshold0.7, TopImages")
    if not result.is_valid:
        raise RuntimeError(f"{strategy} with k = {k} could not fill the new set: {'; '.join(result.problems)}")
    return result.selected


def simulate_seed(seed: int, rows: Sequence[tuple[str, int]] = ROWS) -> list[dict]:
    """One seed: the per-row figures (fractions; accuracy in percent)."""
    world = make_world(seed)
    annotated = world.originals.take(slice(0, ANNOTATED_ORIGINALS))
    accuracy_original = 100 * world.originals.correct.mean()
    results = []
    observations = {}
    for number, (strategy, k) in enumerate(rows):
        if k not in observations:  # one labelling per k, shared by the rules
            rng = np.random.default_rng([seed, 1, k])
            observations[k] = (rng.binomial(k, annotated.true_sf) / k, rng.binomial(k, world.pool.true_sf) / k)
        observed_originals, observed_pool = observations[k]
        chosen = sample_new_set(strategy, world, observed_originals, observed_pool, k, np.random.default_rng([seed, 2, number]))
        new = world.pool.take(chosen)
        accuracy_new = 100 * new.correct.mean()
        results.append({
            "strategy": strategy,
            "annotators": k,
            "observed_sf_original": float(observed_originals.mean()),
            "observed_sf_new": float(observed_pool[chosen].mean()),
            "true_sf_original": float(annotated.true_sf.mean()),
            "true_sf_new": float(new.true_sf.mean()),
            "accuracy_original": float(accuracy_original),
            "accuracy_new": float(accuracy_new),
            "change": float(accuracy_new - accuracy_original),
        })
    return results


def simulate(seeds: Sequence[int] = SEEDS, rows: Sequence[tuple[str, int]] = ROWS, progress=None) -> list[dict]:
    """The table: one dict per row with the keys of :data:`JSON_KEYS` (means over seeds)."""
    per_seed = []
    for seed in (progress(seeds) if progress else seeds):
        per_seed.append(simulate_seed(seed, rows))
    table = []
    for i, (strategy, k) in enumerate(rows):
        values = [r[i] for r in per_seed]
        change = np.array([v["change"] for v in values])
        row = {"strategy": strategy, "annotators": k}
        for key in JSON_KEYS[2:8]:
            row[key] = float(np.mean([v[key] for v in values]))
        row |= {"change_mean": float(change.mean()), "change_min": float(change.min()), "change_max": float(change.max())}
        table.append(row)
    return table


def format_table(table: list[dict]) -> str:
    """The rows as a text table (selection frequencies to 2 decimals, accuracies and changes to 1)."""
    lines = [
        f"{'strategy':<17}{'k':>4}  {'observed SF':>13}  {'true SF':>11}  {'accuracy %':>13}  {'change (points)':>22}",
        f"{'':<17}{'':>4}  {'orig / new':>13}  {'orig / new':>11}  {'orig / new':>13}  {'mean [min, max]':>22}",
    ]
    for r in table:
        lines.append(
            f"{r['strategy']:<17}{r['annotators']:>4}  "
            f"{r['observed_sf_original']:>5.2f} / {r['observed_sf_new']:<5.2f}  "
            f"{r['true_sf_original']:>4.2f} / {r['true_sf_new']:<4.2f}  "
            f"{r['accuracy_original']:>5.1f} / {r['accuracy_new']:<5.1f}  "
            f"{r['change_mean']:>+5.1f} [{r['change_min']:+.1f}, {r['change_max']:+.1f}]".rjust(22)
        )
    if any(r["strategy"] == "MF-posterior" for r in table):
        lines.append(f"MF-posterior: MatchedFrequency on each image's posterior-mean selection frequency ({POSTERIOR_PRIOR} prior "
                     "fitted by maximum likelihood to the originals and to the candidates separately; sample --match-on posterior)")
    return "\n".join(lines)


def write_json(table: list[dict], path: PathLike) -> Path:
    """The rows as a JSON list of objects with exactly the keys of :data:`JSON_KEYS`, atomically and marked.

    A file this project did not write, a folder or a read-only file at ``path`` is refused
    (:func:`pipeline.core.ownership.check_output_file`; call it before simulating).
    """
    from pipeline.core.ownership import write_owned_text

    return write_owned_text(path, json.dumps([{k: r[k] for k in JSON_KEYS} for r in table], indent=2) + "\n", "simulate")
