"""Selection frequencies: how often workers selected an image as showing a class.

The selection frequency of an image for a class is the number of assignments that selected it
divided by the number that showed it, counting Submitted and Approved assignments only
(Rejected ones are dropped). It is computed for every (image, class) pair shown: candidates
and the original validation images embedded in the tasks as controls (positive controls for
their own class, negative controls for a similar class).

Optionally, workers who fail the controls are dropped first: a worker's control accuracy is
the fraction of control images they answered right (selected a positive control, left a
negative one); workers below ``min_control_accuracy`` lose all their assignments. Off by
default (the original pipeline did not filter workers); the report lists whom it dropped.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core.ownership import check_output_file, owned_files
from pipeline.rebuild.pool import SELECTION_FREQUENCIES as OUTPUT_NAME
from pipeline.rebuild.tables import COUNTED_STATUSES, conform, write_table

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]


def encode(column) -> tuple[np.ndarray, pa.Array]:
    """Integer codes and the sorted dictionary of a string column (code order = string order)."""
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    chunks = pa.table({"c": column}).unify_dictionaries().column("c").chunks
    if not chunks:
        return np.zeros(0, np.int64), pa.array([], pa.string())
    dictionary = chunks[0].dictionary
    indices = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in chunks]).astype(np.int64)
    order = pc.sort_indices(dictionary).to_numpy()
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return rank[indices], dictionary.take(pa.array(order))


@dataclass
class _Codes:
    """The annotation columns the computation needs, as integer codes into sorted dictionaries."""

    image: np.ndarray
    images: pa.Array
    wnid: np.ndarray
    wnids: pa.Array
    worker: np.ndarray
    workers: pa.Array
    selected: np.ndarray
    counted: np.ndarray
    label: np.ndarray  # per image code: the original's label as a wnid code, -1 for candidates, -2 label never asked

    @classmethod
    def of(cls, annotations: pa.Table, originals: pa.Table) -> "_Codes":
        image, images = encode(annotations.column("image_id"))
        wnid, wnids = encode(annotations.column("wnid"))
        worker, workers = encode(annotations.column("worker_id"))
        status, statuses = encode(annotations.column("status"))
        counted = np.isin(status, np.flatnonzero(pc.is_in(statuses, pa.array(COUNTED_STATUSES)).to_numpy(zero_copy_only=False)))
        selected = annotations.column("selected").to_numpy().astype(bool)
        label = np.full(len(images), -1, np.int64)
        where = pc.index_in(originals.column("image_id"), images).to_numpy(zero_copy_only=False)
        found = ~np.isnan(where.astype(float))
        label_code = pc.index_in(originals.column("wnid"), wnids).to_numpy(zero_copy_only=False).astype(float)
        label[where[found].astype(np.int64)] = np.where(np.isnan(label_code[found]), -2, label_code[found]).astype(np.int64)
        return cls(image, images, wnid, wnids, worker, workers, selected, counted, label)


def _control_accuracy(codes: _Codes) -> tuple[np.ndarray, np.ndarray]:
    """Per worker code: controls answered and answered right (counted assignments only)."""
    label = codes.label[codes.image]
    control = codes.counted & (label != -1)
    right = control & (codes.selected == (label == codes.wnid))
    n = len(codes.workers)
    return np.bincount(codes.worker[control], minlength=n), np.bincount(codes.worker[right], minlength=n)


def worker_control_accuracy(annotations: pa.Table, originals: pa.Table) -> pa.Table:
    """Per worker: ``controls`` answered (counted assignments only), ``correct`` and ``control_accuracy``.

    A control is an original image; the right answer is "selected" when the task's class is the
    original's label and "not selected" otherwise. Workers who saw no control are absent.
    """
    return _accuracy_table(_Codes.of(annotations, originals))


def _accuracy_table(codes: _Codes) -> pa.Table:
    controls, correct = _control_accuracy(codes)
    seen = np.flatnonzero(controls)
    return pa.table(
        {
            "worker_id": codes.workers.take(pa.array(seen)),
            "controls": pa.array(controls[seen], pa.int64()),
            "correct": pa.array(correct[seen], pa.int64()),
            "control_accuracy": pa.array(correct[seen] / np.maximum(controls[seen], 1), pa.float64()),
        }
    )


def compute_selection_frequencies(
    annotations: pa.Table,
    originals: pa.Table,
    *,
    min_control_accuracy: Optional[float] = None,
) -> tuple[pa.Table, dict]:
    """The selection-frequencies table and a report.

    Rows are sorted by (image_id, wnid). ``min_control_accuracy`` (in [0, 1], default off)
    drops the assignments of workers whose control accuracy is below it.

    >>> from pipeline.rebuild.tables import from_rows
    >>> rows = [dict(assignment_id=f"a{i}", hit_id="h", worker_id=f"w{i}", status=s, image_id="c" * 40,
    ...              wnid="n01440764", selected=sel) for i, (s, sel) in enumerate(
    ...         [("Approved", True), ("Submitted", True), ("Submitted", False), ("Rejected", True)])]
    >>> table, report = compute_selection_frequencies(from_rows(rows, "annotations"), from_rows([], "originals"))
    >>> table.to_pylist()[0]["num_shown"], table.to_pylist()[0]["selection_frequency"]
    (3, 0.6666666666666666)
    >>> report["annotation_rows"]
    {'total': 4, 'counted': 3, 'rejected': 1, 'dropped_workers': 0}
    """
    if min_control_accuracy is not None and not 0.0 <= min_control_accuracy <= 1.0:
        raise ValueError(f"min_control_accuracy must be in [0, 1] (or None for no filter), got {min_control_accuracy!r}")
    codes = _Codes.of(annotations, originals)
    accuracy = _accuracy_table(codes)
    keep = codes.counted.copy()
    dropped = accuracy.slice(0, 0)
    if min_control_accuracy is not None:
        dropped = accuracy.filter(pc.less(accuracy.column("control_accuracy"), min_control_accuracy))
        dropped_codes = pc.index_in(dropped.column("worker_id"), codes.workers).to_numpy(zero_copy_only=False).astype(np.int64)
        keep &= ~np.isin(codes.worker, dropped_codes)
    n_wnids = max(len(codes.wnids), 1)
    pair = codes.image[keep] * n_wnids + codes.wnid[keep]  # sorted codes: pair order = (image_id, wnid) order
    pairs, inverse, shown = np.unique(pair, return_inverse=True, return_counts=True)
    chosen = np.bincount(inverse, weights=codes.selected[keep], minlength=len(pairs)).astype(np.int64)
    image_code = pairs // n_wnids
    table = pa.table(
        {
            "image_id": codes.images.take(pa.array(image_code)),
            "wnid": codes.wnids.take(pa.array(pairs % n_wnids)),
            "is_original": pa.array(codes.label[image_code] != -1),
            "num_shown": pa.array(shown, pa.int64()),
            "num_selected": pa.array(chosen, pa.int64()),
            "selection_frequency": pa.array(chosen / shown, pa.float64()),
        }
    )
    table = conform(table, "selection_frequencies", "selection frequencies")
    report = _report(annotations.num_rows, int(codes.counted.sum()), int(keep.sum()), table, originals, accuracy, dropped, min_control_accuracy)
    return table, report


def _report(n_rows, n_counted, n_kept, table, originals, accuracy, dropped, min_control_accuracy) -> dict:
    labels = originals.select(["image_id", "wnid"]).rename_columns(["image_id", "label"])
    own_class = table.filter(table.column("is_original")).join(labels, "image_id")
    own_class = own_class.filter(pc.equal(own_class.column("wnid"), own_class.column("label")))
    candidate_sf = pc.filter(table.column("selection_frequency"), pc.invert(table.column("is_original")))
    return {
        "counted_statuses": list(COUNTED_STATUSES),
        "annotation_rows": {
            "total": n_rows,
            "counted": n_kept,
            "rejected": n_rows - n_counted,
            "dropped_workers": n_counted - n_kept,
        },
        "pairs": {"total": table.num_rows, "candidates": len(candidate_sf), "originals": table.num_rows - len(candidate_sf)},
        "mean_selection_frequency": {
            "candidates": _mean(candidate_sf.to_numpy()),
            "originals_own_class": _mean(own_class.column("selection_frequency").to_numpy()),
        },
        "worker_filter": {
            "min_control_accuracy": min_control_accuracy,
            "workers_with_controls": accuracy.num_rows,
            "mean_control_accuracy": _mean(accuracy.column("control_accuracy").to_numpy()),
            "dropped": dropped.to_pylist(),
        },
    }


def _mean(values: np.ndarray) -> Optional[float]:
    return float(np.mean(values)) if len(values) else None


def selection_frequency_stage(
    pool: PathLike,
    output: Optional[PathLike] = None,
    *,
    min_control_accuracy: Optional[float] = None,
    classes=None,
) -> tuple[Path, dict]:
    """The ``selection-frequency`` stage: read the pool, write the table and its report atomically.

    ``classes`` (a :class:`pipeline.rebuild.classes.ClassList`, default ImageNet-1k) is the class
    list the pool's classes must belong to.

    ``output`` defaults to ``<pool>/selection_frequencies.parquet``; the report goes beside it
    with the suffix ``.json``. Both are checked before any work (neither may be one of the pool's
    own tables, or a file this project did not write) and written as one unit.
    """
    from pipeline.rebuild.pool import INGEST_REPORT, POOL_FILES, load_pool

    output = Path(output) if output is not None else Path(pool) / OUTPUT_NAME
    if output.suffix.lower() != ".parquet":
        raise ValueError(f"--output must name a .parquet file (the report goes beside it as .json), got {output}")
    outputs = [output.with_suffix(".json"), output]
    pool_files = [Path(pool) / name for name in (*POOL_FILES.values(), INGEST_REPORT)]
    for path in outputs:
        check_output_file(path, "selection-frequency", inputs=pool_files)
    loaded = load_pool(pool, ("originals", "annotations"), dictionary=True)
    _check_classes(loaded, classes)
    table, report = compute_selection_frequencies(loaded.annotations, loaded.originals, min_control_accuracy=min_control_accuracy)
    with owned_files(outputs, "selection-frequency", inputs=pool_files) as (report_tmp, table_tmp):
        report_tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        write_table(table, table_tmp)
    logger.info("wrote %s (%d pairs)", output, table.num_rows)
    return output, report


def _check_classes(loaded, classes) -> None:
    import pyarrow.compute as pc

    from pipeline.rebuild.classes import imagenet_1k

    classes = classes or imagenet_1k()
    for name in ("annotations", "originals"):
        wnids = pc.unique(getattr(loaded, name).column("wnid").cast("string")).to_pylist()
        classes.check_ids(wnids, f"pool table {name}")
