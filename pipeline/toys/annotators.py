"""Simulated crowd workers who answer real task folders, and an unannotated toy pool to make tasks from.

:func:`write_toy_pool` writes a pool folder (candidates, originals, no annotations yet) from
:func:`pipeline.toys.synthetic_pool.make_synthetic_pool`, whose images have known true selection
frequencies. :func:`answer_tasks` plays the workers: it reads a folder written by ``tasks``
(the key tells it which image each public name is, as a worker's eyes would) and writes their
answers as an MTurk batch-results CSV, each image selected with its true probability
(:func:`toy_truth`), so that ``ingest --tasks`` and ``selection-frequency`` must recover them.

>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> pool = write_toy_pool(root / "pool", n_classes=2, candidates_per_class=10)
>>> len(pool.candidate_ids), sorted(p.name for p in (root / "pool").glob("*.parquet"))[:2]
(20, ['annotations.parquet', 'candidates.parquet'])
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Optional, Union

import numpy as np

from pipeline.toys.synthetic_pool import NEGATIVE_CONTROL_SELECTION_FREQUENCY, PoolShape, SyntheticPool, make_synthetic_pool

PathLike = Union[str, "os.PathLike[str]"]
Truth = Callable[[str, str], float]  # (image id, asked wnid) -> probability that an honest worker selects it


def write_toy_pool(folder: PathLike, *, seed: int = 0, images: bool = False, shape: Optional[PoolShape] = None, **shape_fields) -> SyntheticPool:
    """Write an unannotated pool folder from a synthetic pool; with ``images``, tiny JPEGs in its image store.

    ``shape_fields`` override fields of :class:`~pipeline.toys.synthetic_pool.PoolShape` (e.g. ``n_classes``).
    """
    base = shape or PoolShape(n_classes=5, candidates_per_class=60, originals_per_class=10)
    shape = PoolShape(**{**base.__dict__, "annotators": 1, "workers": 1, **shape_fields})
    pool = make_synthetic_pool(seed, shape)
    write_unannotated_pool(folder, pool, images=images)
    return pool


def write_unannotated_pool(folder: PathLike, pool: SyntheticPool, *, images: bool = False) -> Path:
    """The pool folder of ``pool``'s candidates and originals, before any annotation (what ``tasks`` reads)."""
    import pyarrow as pa

    from pipeline.core.ownership import owned_directory
    from pipeline.rebuild.pool import POOL_FILES
    from pipeline.rebuild.tables import conform, from_rows, write_table

    with owned_directory(folder, "toys") as tmp:
        for name, ids, classes in (("candidates", pool.candidate_ids, pool.candidate_class), ("originals", pool.original_ids, pool.original_class)):
            id_column = "candidate_id" if name == "candidates" else "image_id"
            table = pa.table({id_column: pa.array(ids.tolist(), pa.string()), "wnid": pa.array(pool.wnids[classes].tolist(), pa.string())})
            write_table(conform(table, name, "synthetic pool"), tmp / POOL_FILES[name])
        write_table(from_rows([], "annotations"), tmp / POOL_FILES["annotations"])
        if images:
            data = [toy_jpeg(i) for i in range(len(pool.candidate_ids))]
            table = pa.table({"candidate_id": pa.array(pool.candidate_ids.tolist(), pa.string()),
                              "path": pa.nulls(len(data), pa.string()), "image": pa.array(data, pa.binary())})
            write_table(table, tmp / POOL_FILES["images"])
        else:
            write_table(from_rows([], "images"), tmp / POOL_FILES["images"])
    return Path(folder)


def crowd_round_trip(pool: SyntheticPool, folder: PathLike, grid, *, seed: int = 0, workers: int = 400,
                     spammer_fraction: float = 0.0, rejected_fraction: float = 0.0, image_columns: bool = False) -> dict:
    """Tasks for ``pool`` answered by simulated workers, as a maintainer's round trip would leave them.

    Writes ``folder/unannotated-pool`` (the input of ``tasks``), ``folder/tasks`` (``tasks`` with
    ``grid``, a :class:`~pipeline.rebuild.task_grid.GridConfig`; no image upload) and
    ``folder/batch-results.csv`` (the workers' answers, for ``ingest --tasks``; without the
    ``Input.image_<k>_url`` columns unless ``image_columns``, to keep it small). Returns the tasks
    summary and the answers' counts.
    """
    from pipeline.rebuild.task_key import SECRET_ENV
    from pipeline.rebuild.tasks import TasksConfig, make_tasks

    folder = Path(folder)
    write_unannotated_pool(folder / "unannotated-pool", pool)
    summary = make_tasks(folder / "unannotated-pool", folder / "tasks", TasksConfig(grid=grid, upload=False),
                         environ={SECRET_ENV: f"toy crowd secret, seed {seed}"})
    answers = answer_tasks(folder / "tasks", folder / "batch-results.csv", toy_truth(pool), seed=seed, workers=workers,
                           spammer_fraction=spammer_fraction, rejected_fraction=rejected_fraction, image_columns=image_columns)
    return {"summary": summary, **answers}


def toy_jpeg(number: int, size: tuple[int, int] = (64, 48)) -> bytes:
    """A small JPEG whose colour depends on ``number`` (distinct files for distinct images)."""
    from pipeline.toys.synthetic import encode_jpeg

    rng = np.random.default_rng(number)
    pixels = np.clip(rng.uniform(0, 255, 3)[None, None, :] + rng.normal(0, 10, (size[1], size[0], 3)), 0, 255)
    return encode_jpeg(pixels.astype(np.uint8), quality=90)


def write_original_images(path: PathLike, pool: SyntheticPool) -> Path:
    """A Parquet table of ``image_id`` and JPEG bytes for the pool's originals (``tasks --original-images``)."""
    import pyarrow as pa

    from pipeline.rebuild.tables import write_table

    ids = pool.original_ids.tolist()
    data = [toy_jpeg(10**6 + i) for i in range(len(ids))]
    return write_table(pa.table({"image_id": pa.array(ids, pa.string()), "image": pa.array(data, pa.binary())}), path)


def toy_truth(pool: SyntheticPool) -> Truth:
    """The true selection probability of (image, asked class) in a synthetic pool."""
    own = dict(zip(pool.candidate_ids.tolist(), pool.candidate_true_sf.tolist()))
    own.update(zip(pool.original_ids.tolist(), pool.original_true_sf.tolist()))
    label = dict(zip(pool.candidate_ids.tolist(), pool.wnids[pool.candidate_class].tolist()))
    label.update(zip(pool.original_ids.tolist(), pool.wnids[pool.original_class].tolist()))
    return lambda image_id, wnid: own[image_id] if label[image_id] == wnid else NEGATIVE_CONTROL_SELECTION_FREQUENCY


def answer_tasks(
    tasks_folder: PathLike,
    output: PathLike,
    truth: Truth,
    *,
    seed: int = 0,
    workers: int = 50,
    assignments: Optional[int] = None,
    spammer_fraction: float = 0.0,
    rejected_fraction: float = 0.0,
    id_prefix: str = "",
    image_columns: bool = True,
) -> dict:
    """Simulated workers answer every task of ``tasks_folder``; their batch-results CSV goes to ``output``.

    Each task gets ``assignments`` (default: the folder's) distinct workers out of ``workers``; a
    spammer selects each image with probability 0.5; a fraction of assignments is rejected.
    ``image_columns``: write the ``Input.image_<k>_url`` columns, as MTurk does (without them the
    file is much smaller). Returns the counts written and the spammers' ids.
    """
    import csv

    from pipeline.core.atomic import atomic_file
    from pipeline.rebuild.batch_results import read_batch_input, results_columns, results_row
    from pipeline.rebuild.task_key import SUMMARY, TaskKey

    folder = Path(tasks_folder)
    key = TaskKey.load([folder])
    assignments = assignments or json.loads((folder / SUMMARY).read_text("utf-8"))["config"]["assignments"]
    if assignments > workers:
        raise ValueError(f"assignments ({assignments}) cannot exceed workers ({workers}): each task needs different workers")
    rng = np.random.default_rng([seed, 17])
    spammer = rng.random(workers) < spammer_fraction
    batch = read_batch_input(folder)
    inputs = [c for c in batch[0] if image_columns or not c.startswith("image_")]
    columns = results_columns(inputs)
    count = 0
    with atomic_file(output, "w") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(columns)
        for number, row in enumerate(batch):
            task = key.tasks[row["task_id"]]
            urls = np.array([row[f"image_{k}_url"] for k in range(1, len(task.images) + 1)], dtype=object)
            p = np.array([truth(key.entries[name].id, task.wnid) for name in task.images])
            shown = {c: row[c] for c in inputs}
            for w in rng.permutation(workers)[:assignments]:
                chosen = rng.random(len(p)) < (0.5 if spammer[w] else p)
                status = "Rejected" if rng.random() < rejected_fraction else "Approved"
                fields = {"HITId": f"{id_prefix}H{number:08d}", "HITTypeId": "TOYTYPE", "AssignmentId": f"{id_prefix}A{number:06d}{int(w):05d}",
                          "WorkerId": f"W{int(w):05d}", "AssignmentStatus": status, "WorkTimeInSeconds": 60}
                answer = results_row(fields, shown, urls[chosen])
                writer.writerow([answer[c] for c in columns])
                count += 1
    return {"assignments": count, "tasks": len(batch), "spammers": [f"W{int(w):05d}" for w in np.flatnonzero(spammer)]}


def demo_round_trip(pool: SyntheticPool, folder: PathLike, shape: PoolShape, seed: int, *, positive: int, echo=print) -> dict:
    """The demo's round trip: one grid per class (all its candidates, ``positive`` + 3 hidden controls), ``shape``'s workers."""
    from pipeline.rebuild.task_grid import GridConfig

    grid = GridConfig(images_per_task=shape.candidates_per_class + positive + 3, positive=positive, negative=3,
                      assignments=shape.annotators, seed=0)
    crowd = crowd_round_trip(pool, folder, grid, seed=seed, workers=shape.workers,
                             spammer_fraction=shape.spammer_fraction, rejected_fraction=shape.rejected_fraction)
    echo(f"      {crowd['summary']['tasks']:,} tasks of {grid.images_per_task} images "
         f"(MTurk cost at this size: {crowd['summary']['cost']['total_usd']:,.2f} USD)")
    return crowd
