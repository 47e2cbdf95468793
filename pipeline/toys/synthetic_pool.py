"""A synthetic annotated candidate pool, for the demo, the benchmark and tests.

Each image has a known true selection frequency (the probability that an honest worker
selects it for its class): by default originals are drawn from Beta(5, 1.6) (they passed
ImageNet's own vote), candidates from a broader Beta(1.6, 1.2). Tasks are built as in the original design:
per class, grids of candidates with the class's originals as positive controls and originals of
the class in ``negative_val_wnids_for_mturk.json`` as negative controls; each task is done by
``annotators`` different workers. A fraction of workers click at random (spammers) and a
fraction of assignments is rejected. Everything is a function of the seed.
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa

from pipeline.core.atomic import atomic_file

NEGATIVE_CONTROL_SELECTION_FREQUENCY = 0.05


@dataclass(frozen=True)
class PoolShape:
    """How big a synthetic pool is and how it was annotated."""

    n_classes: int = 1000
    candidates_per_class: int = 24
    originals_per_class: int = 8
    positive_controls: int = 8  # originals of the class per task, rotating through them
    negative_controls: int = 2
    grid: int = 24  # candidates per task
    annotators: int = 12  # assignments per task
    workers: int = 400
    spammer_fraction: float = 0.05
    rejected_fraction: float = 0.02
    candidate_beta: tuple[float, float] = (1.6, 1.2)  # true selection frequencies of candidates
    original_beta: tuple[float, float] = (5.0, 1.6)  # and of originals


@dataclass
class SyntheticPool:
    """Arrays describing the pool; ``annotations()`` and the writers turn them into inputs."""

    shape: PoolShape
    wnids: np.ndarray  # the classes (sorted)
    candidate_ids: np.ndarray  # object array of 40-hex ids
    candidate_class: np.ndarray
    candidate_true_sf: np.ndarray
    original_ids: np.ndarray
    original_class: np.ndarray
    original_true_sf: np.ndarray
    # tasks and assignments
    task_class: np.ndarray  # per task: the class asked about
    task_images: list  # per task: int array of image indices (candidates, then originals offset)
    assignment_task: np.ndarray
    assignment_worker: np.ndarray
    assignment_rejected: np.ndarray
    worker_is_spammer: np.ndarray
    selected: np.ndarray  # per annotation row, in (assignment, grid position) order

    @property
    def image_ids(self) -> np.ndarray:
        return np.concatenate([self.candidate_ids, self.original_ids])

    def assignment_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """Per annotation row: its assignment and its image index."""
        lengths = np.array([len(t) for t in self.task_images])
        starts = np.r_[0, np.cumsum(lengths)[:-1]]
        flat = np.concatenate(self.task_images)
        per_assignment = lengths[self.assignment_task]
        row_assignment = np.repeat(np.arange(len(self.assignment_task)), per_assignment)
        offset = np.arange(len(row_assignment)) - np.repeat(np.r_[0, np.cumsum(per_assignment)[:-1]], per_assignment)
        return row_assignment, flat[starts[self.assignment_task[row_assignment]] + offset]

    def annotations(self) -> pa.Table:
        """The annotations table (one row per image shown per assignment), built column-wise."""
        from pipeline.rebuild.tables import schema

        row_assignment, row_image = self.assignment_rows()
        assignment_ids = pa.array([f"A{a:09d}" for a in range(len(self.assignment_task))])
        worker_ids = pa.array([f"W{w:06d}" for w in range(self.shape.workers)])
        task_ids = pa.array([f"H{t:08d}" for t in range(len(self.task_class))])
        status = np.where(self.assignment_rejected, "Rejected", "Approved")
        return pa.table(
            {
                "assignment_id": assignment_ids.take(row_assignment),
                "hit_id": task_ids.take(self.assignment_task[row_assignment]),
                "worker_id": worker_ids.take(self.assignment_worker[row_assignment]),
                "status": pa.array(status).take(row_assignment),
                "image_id": pa.array(self.image_ids.tolist(), pa.string()).take(row_image),
                "wnid": pa.array(self.wnids.tolist(), pa.string()).take(self.task_class[self.assignment_task[row_assignment]]),
                "selected": pa.array(self.selected),
            },
            schema=schema("annotations"),
        )

    def candidates_table(self) -> pa.Table:
        from pipeline.rebuild.tables import from_rows

        return from_rows(
            [{"candidate_id": c, "wnid": self.wnids[k]} for c, k in zip(self.candidate_ids, self.candidate_class)],
            "candidates",
        )

    def originals_table(self) -> pa.Table:
        from pipeline.rebuild.tables import from_rows

        return from_rows([{"image_id": o, "wnid": self.wnids[k]} for o, k in zip(self.original_ids, self.original_class)], "originals")

    # --- writing the inputs of `ingest` ---

    def write_candidates_jsonl(self, path) -> Path:
        with atomic_file(path, "w") as f:
            for i, (cid, k) in enumerate(zip(self.candidate_ids, self.candidate_class)):
                record = {"id_ours": cid, "wnid": str(self.wnids[k]), "id_search_engine": str(10**9 + i),
                          "search_engine": "synthetic", "search_key": f"class {int(k)}"}
                f.write(json.dumps(record) + "\n")
        return Path(path)

    def write_originals_csv(self, path) -> Path:
        with atomic_file(path, "w") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(["image_id", "wnid"])
            writer.writerows(zip(self.original_ids, self.wnids[self.original_class]))
        return Path(path)

    def write_batch_results_csv(self, path) -> Path:
        """The annotations as a crowd platform's batch-results CSV (one row per assignment)."""
        ids = self.image_ids
        lengths = np.array([len(t) for t in self.task_images])
        ends = np.cumsum(lengths[self.assignment_task])
        with atomic_file(path, "w") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(["HITId", "HITTypeId", "AssignmentId", "WorkerId", "AssignmentStatus", "Input.wnid", "Input.images", "Answer.selected"])
            for a, task in enumerate(self.assignment_task):
                shown = ids[self.task_images[task]]
                picks = self.selected[ends[a] - len(shown) : ends[a]]
                writer.writerow([
                    f"H{task:08d}", "SYNTHETICTYPE", f"A{a:09d}", f"W{self.assignment_worker[a]:06d}",
                    "Rejected" if self.assignment_rejected[a] else "Approved", self.wnids[self.task_class[task]],
                    json.dumps(shown.tolist()), json.dumps(shown[picks].tolist()),
                ])
        return Path(path)


def _negative_control_classes(wnids: np.ndarray) -> np.ndarray:
    mapping = json.loads(resources.files("pipeline").joinpath("data/negative_val_wnids_for_mturk.json").read_text("utf-8"))
    index = {w: i for i, w in enumerate(wnids)}
    # the released mapping where both classes are in the pool, else the next class
    negative = np.array([index.get(mapping.get(w), (i + 1) % len(wnids)) for i, w in enumerate(wnids)])
    own = negative == np.arange(len(wnids))  # the released mapping sends a few classes to themselves
    negative[own] = (np.flatnonzero(own) + 1) % len(wnids)
    return negative


def make_synthetic_pool(seed: int = 0, shape: Optional[PoolShape] = None) -> SyntheticPool:
    """A synthetic pool; identical for identical ``seed`` and ``shape``.

    >>> pool = make_synthetic_pool(0, PoolShape(n_classes=3, candidates_per_class=4, originals_per_class=2,
    ...                                         positive_controls=2, negative_controls=1, grid=4, annotators=3, workers=5))
    >>> len(pool.candidate_ids), len(pool.original_ids), pool.annotations().num_rows  # 3 tasks × 3 workers × 7 images
    (12, 6, 63)
    """
    from imagenetv2.classes import wnids as all_wnids

    shape = shape or PoolShape()
    rng = np.random.default_rng(seed)
    wnids = np.array(all_wnids()[: shape.n_classes])
    n_cand = shape.n_classes * shape.candidates_per_class
    n_orig = shape.n_classes * shape.originals_per_class
    candidate_ids = np.array([hashlib.sha1(f"synthetic candidate {seed} {i}".encode()).hexdigest() for i in range(n_cand)], dtype=object)
    original_ids = np.array([f"ILSVRC2012_val_{i + 1:08d}.JPEG" for i in range(n_orig)], dtype=object)
    candidate_class = np.repeat(np.arange(shape.n_classes), shape.candidates_per_class)
    original_class = np.repeat(np.arange(shape.n_classes), shape.originals_per_class)
    candidate_true_sf = rng.beta(*shape.candidate_beta, n_cand)
    original_true_sf = rng.beta(*shape.original_beta, n_orig)

    negative_class = _negative_control_classes(wnids)
    task_class, task_images = [], []
    for k in range(shape.n_classes):
        cands = np.arange(k * shape.candidates_per_class, (k + 1) * shape.candidates_per_class)
        negatives = n_cand + negative_class[k] * shape.originals_per_class + np.arange(shape.negative_controls)
        for number, start in enumerate(range(0, len(cands), shape.grid)):
            # positive controls rotate through the class's originals from task to task
            slots = (number * shape.positive_controls + np.arange(shape.positive_controls)) % shape.originals_per_class
            positives = n_cand + k * shape.originals_per_class + np.unique(slots)
            images = np.concatenate([cands[start : start + shape.grid], positives, negatives])
            task_class.append(k)
            task_images.append(rng.permutation(images))
    task_class = np.array(task_class)
    n_tasks = len(task_class)
    if shape.annotators > shape.workers:
        raise ValueError(f"annotators ({shape.annotators}) cannot exceed workers ({shape.workers}): each task needs different workers")
    # each task gets `annotators` distinct workers
    assignment_worker = np.argsort(rng.random((n_tasks, shape.workers)), axis=1)[:, : shape.annotators].reshape(-1)
    assignment_task = np.repeat(np.arange(n_tasks), shape.annotators)
    assignment_rejected = rng.random(len(assignment_task)) < shape.rejected_fraction
    worker_is_spammer = rng.random(shape.workers) < shape.spammer_fraction

    pool = SyntheticPool(
        shape, wnids, candidate_ids, candidate_class, candidate_true_sf, original_ids, original_class, original_true_sf,
        task_class, task_images, assignment_task, assignment_worker, assignment_rejected, worker_is_spammer,
        selected=np.zeros(0, bool),
    )
    row_assignment, row_image = pool.assignment_rows()
    image_class = np.concatenate([candidate_class, original_class])
    true_sf = np.concatenate([candidate_true_sf, original_true_sf])
    asked = task_class[assignment_task[row_assignment]]
    probability = np.where(image_class[row_image] == asked, true_sf[row_image], NEGATIVE_CONTROL_SELECTION_FREQUENCY)
    probability = np.where(worker_is_spammer[assignment_worker[row_assignment]], 0.5, probability)
    pool.selected = rng.random(len(row_image)) < probability
    return pool
