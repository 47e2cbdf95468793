"""The grid rules of the annotation tasks: which images go into which task, in which order.

Per class: its candidates, shuffled (seeded), cut into grids of ``images_per_task - positive -
negative``; the last grid is topped up with other candidates of the class, never left short
(a class with fewer candidates than one grid holds gets one grid of all of them). Each grid gets
``positive`` originals of the class and ``negative`` originals of its most similar class, taken
in turn so that every original is shown before one repeats, and the whole grid is shuffled.

>>> config = GridConfig(images_per_task=8, positive=1, negative=1)
>>> grids = class_grids("n01", [f"c{i}" for i in range(9)], ["p0", "p1"], ["q0"], config, reason="initial")
>>> [len(g.images) for g in grids], sorted(i for i, r in grids[1].images if r != "candidate")
([8, 8], ['p1', 'q0'])
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np


@dataclass(frozen=True)
class GridConfig:
    """How a task is made: its size, its controls, the workers per task, the reward, the seed."""

    images_per_task: int = 48
    positive: int = 3
    negative: int = 3
    assignments: int = 10
    reward: float = 0.10
    seed: int = 0

    def __post_init__(self):
        for name in ("images_per_task", "positive", "negative", "assignments"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
        if self.candidate_slots < 1:
            raise ValueError(
                f"images_per_task ({self.images_per_task}) must exceed positive + negative "
                f"({self.positive} + {self.negative}): a task needs room for candidates"
            )
        if self.assignments < 1:
            raise ValueError(f"assignments must be at least 1, got {self.assignments}")
        if not self.reward >= 0:
            raise ValueError(f"reward must be >= 0 USD, got {self.reward!r}")

    @property
    def candidate_slots(self) -> int:
        return self.images_per_task - self.positive - self.negative


@dataclass(frozen=True)
class Grid:
    """One task before naming: the asked class, (image id, role) in display order, and why it exists."""

    wnid: str
    images: tuple[tuple[str, str], ...]
    reason: str


def class_rng(seed: int, wnid: str, purpose: str) -> np.random.Generator:
    """A generator that depends only on the seed, the class and the purpose (stable across runs)."""
    word = int.from_bytes(hashlib.sha256(f"{wnid}/{purpose}".encode()).digest()[:8], "little")
    return np.random.default_rng([seed, word])


def chunks_topped_up(ids: Sequence[str], size: int, rng: np.random.Generator, fill: Sequence[str] = ()) -> list[list[str]]:
    """``ids`` shuffled and cut into chunks of ``size``; the last is topped up from ``fill``, then from ``ids``."""
    order = [ids[i] for i in rng.permutation(len(ids))]
    chunks = [order[start : start + size] for start in range(0, len(order), size)]
    if chunks and len(chunks[-1]) < size:
        last = chunks[-1]
        spare = [i for i in fill if i not in set(last)] + [i for i in order if i not in set(last) and i not in set(fill)]
        chunks[-1] = last + spare[: size - len(last)]
    return chunks


class Rotation:
    """Controls taken in turn from a shuffled list, so that each is shown before any repeats."""

    def __init__(self, ids: Sequence[str], rng: np.random.Generator):
        self.ids = [ids[i] for i in rng.permutation(len(ids))]
        self.next = 0

    def take(self, n: int) -> list[str]:
        n = min(n, len(self.ids))
        out = [self.ids[(self.next + j) % len(self.ids)] for j in range(n)]
        self.next = (self.next + n) % max(len(self.ids), 1)
        return out


def assemble(wnid: str, candidates: Sequence[str], positives: Sequence[str], negatives: Sequence[str],
             rng: np.random.Generator, reason: str) -> Grid:
    """A grid of the given images at random positions."""
    images = [(i, "candidate") for i in candidates] + [(i, "positive") for i in positives] + [(i, "negative") for i in negatives]
    return Grid(wnid, tuple(images[k] for k in rng.permutation(len(images))), reason)


def class_grids(
    wnid: str,
    candidates: Sequence[str],
    positives: Sequence[str],
    negatives: Sequence[str],
    config: GridConfig,
    *,
    reason: str,
    fill: Sequence[str] = (),
    rng: Optional[np.random.Generator] = None,
) -> list[Grid]:
    """The grids covering ``candidates`` of one class (topped up from ``fill``, then from themselves)."""
    rng = rng or class_rng(config.seed, wnid, reason)
    chunks = chunks_topped_up(list(candidates), config.candidate_slots, rng, fill)
    pos, neg = Rotation(positives, rng), Rotation(negatives, rng)
    return [assemble(wnid, chunk, pos.take(config.positive), neg.take(config.negative), rng, reason) for chunk in chunks]


def original_grids(
    wnid: str,
    originals: Sequence[str],
    candidates: Sequence[str],
    negatives: Sequence[str],
    config: GridConfig,
    *,
    reason: str,
) -> list[Grid]:
    """Follow-up grids that carry extra originals of the class (up to half a grid each), filled with candidates."""
    rng = class_rng(config.seed, wnid, reason)
    per_task = max(config.positive, config.images_per_task // 2 - config.negative)
    neg = Rotation(negatives, rng)
    grids = []
    for start in range(0, len(originals), per_task):
        extra = list(originals[start : start + per_task])
        room = config.images_per_task - len(extra) - min(config.negative, len(negatives))
        filler = [candidates[i] for i in rng.permutation(len(candidates))[:room]]
        grids.append(assemble(wnid, filler, extra, neg.take(config.negative), rng, reason))
    return grids
