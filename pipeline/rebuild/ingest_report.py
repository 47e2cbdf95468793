"""The report of ``ingest`` (``ingest.json`` in the pool folder): counts of what came in, and the inputs' sha256."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from pipeline.core.integrity import file_digest
from pipeline.rebuild.tables import STATUSES


def ingest_report(candidates: pa.Table, originals: pa.Table, annotations: pa.Table, images: pa.Table, *inputs) -> dict:
    """Counts of candidates, originals, assignments per status, workers, tasks, annotation rows,
    candidates never shown or without an image; each input file's sha256 (``inputs``: the
    candidates, originals and results paths and the images folder or table).
    """
    import pyarrow.compute as pc

    by_assignment = annotations.group_by(["assignment_id", "status"]).aggregate([])
    statuses = {s: 0 for s in STATUSES}
    for status in by_assignment.column("status").to_pylist():
        statuses[status] += 1
    shown = set(annotations.column("image_id").unique().to_pylist())
    candidate_ids = candidates.column("candidate_id").to_pylist()
    with_image = set(images.column("candidate_id").to_pylist())
    candidates_path, originals_path, results_paths, images_folder = inputs
    files = [candidates_path, originals_path, *results_paths]
    return {
        "candidates": candidates.num_rows,
        "originals": originals.num_rows,
        "assignments": {"total": by_assignment.num_rows, **statuses},
        "workers": pc.count_distinct(annotations.column("worker_id")).as_py(),
        "tasks": pc.count_distinct(annotations.column("hit_id")).as_py(),
        "annotation_rows": annotations.num_rows,
        "candidates_never_shown": sum(1 for c in candidate_ids if c not in shown),
        "image_files": images.num_rows,
        "candidates_without_image": sum(1 for c in candidate_ids if c not in with_image),
        "inputs": {Path(p).name: file_digest(p).sha256 for p in files},
        "images_folder": None if images_folder is None else Path(images_folder).name,
    }
