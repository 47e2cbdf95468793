"""Review status: is every neighbour closer than the review threshold reviewed?

A candidate is sufficiently reviewed for a measure when its nearest *unreviewed* neighbour is
farther than the measure's threshold (the original's review thresholds, on the scales in
:data:`SCALES`). Reviewed pairs come from the review app (JSON Lines, Parquet or CSV rows
``candidate_id, metric, reference_id[, reference_source], reviewer, date, decision``) or from
the original pipeline's JSON ``{candidate: {metric: {reviewer, date, references: [...]}}}``.
A pair reviewed on one measure's list counts as reviewed on every list.

>>> import pyarrow as pa
>>> neighbours = pa.table({"candidate_id": ["c", "c"], "metric": ["l2", "l2"], "rank": [1, 2],
...     "reference_id": ["r1", "r2"], "reference_source": ["train", "train"], "distance": [5e7, 9e7]})
>>> status = review_status(neighbours, {("c", "r1", None)}, {"l2": 1.2e8}, top_k=30)
>>> status.column("reviewed_up_to").to_pylist(), status.column("sufficiently_reviewed").to_pylist()
([90000000.0], [False])
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa

THRESHOLDS = {"l2": 1.2e8, "fc7": 1.32e4, "dssim": 0.2205}
SCALES = {
    "l2": "squared Euclidean distance of the 256 x 256 x 3 RGB pixels, values 0..255",
    "fc7": "squared Euclidean distance of VGG-16's 4,096 fc7 activations (after the ReLU)",
    "dssim": "(1 - SSIM) / 2 on the 256 x 256 copies, 35-pixel window, 0..1",
}
REVIEW_COLUMNS = ("candidate_id", "metric", "reference_id")


def _pairs_from_rows(rows, where: str) -> set:
    pairs = set()
    for n, row in enumerate(rows, start=1):
        missing = [c for c in ("candidate_id", "reference_id") if not row.get(c)]
        if missing:
            raise ValueError(f"{where} row {n}: missing {', '.join(missing)}; each reviewed pair needs candidate_id and reference_id")
        pairs.add((str(row["candidate_id"]), str(row["reference_id"]), row.get("reference_source") or None))
    return pairs


def _pairs_from_original(data: dict, where: str) -> set:
    pairs = set()
    for candidate, by_metric in data.items():
        if not isinstance(by_metric, dict):
            raise ValueError(f"{where}: {candidate!r} maps to {type(by_metric).__name__}, expected {{metric: {{reviewer, date, references}}}}")  # noqa: TRY004 - a bad file is a bad value
        for metric, entry in by_metric.items():
            references = entry.get("references") if isinstance(entry, dict) else None
            if not isinstance(references, list):
                raise ValueError(f"{where}: {candidate!r} / {metric!r} has no list 'references'")  # noqa: TRY004 - a bad file is a bad value
            pairs.update((candidate, str(r), None) for r in references)
    return pairs


def read_reviews(path) -> set:
    """Reviewed pairs ``(candidate_id, reference_id, reference_source or None)`` from a reviews file
    (or a review app folder: its ``reviewed_pairs.jsonl`` and ``near_duplicates.json``)."""
    path = Path(path)
    if path.is_dir() and (path / "reviewed_pairs.jsonl").is_file():  # a review app folder
        pairs = read_reviews(path / "reviewed_pairs.jsonl")
        confirmed = path / "near_duplicates.json"
        if confirmed.is_file():  # confirmed pairs were looked at too
            data = json.loads(confirmed.read_text("utf-8"))
            pairs.update((c, str(r), None) for c, refs in data.items() for r in refs)
        return pairs
    if not path.is_file():
        raise FileNotFoundError(f"reviews file {path} does not exist; give the review app's folder or its reviewed_pairs.jsonl")
    suffix = path.suffix.lower()
    if suffix == ".json":
        data = json.loads(path.read_text("utf-8"))
        if isinstance(data, dict):
            return _pairs_from_original(data, str(path))
        if isinstance(data, list):
            return _pairs_from_rows(data, str(path))
        raise ValueError(f"{path}: expected the original's {{candidate: {{metric: ...}}}} object or a list of pairs")
    if suffix == ".jsonl":
        rows = []
        for n, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path} line {n} is not JSON: {e}") from None
        return _pairs_from_rows(rows, str(path))
    if suffix in (".parquet", ".csv"):
        import pyarrow.csv as pcsv
        import pyarrow.parquet as pq

        table = pq.read_table(path) if suffix == ".parquet" else pcsv.read_csv(path)
        return _pairs_from_rows(table.to_pylist(), str(path))
    raise ValueError(f"reviews file {path}: unknown format {suffix!r}; use .jsonl (the review app's), .json, .parquet or .csv")


def _is_reviewed(reviewed: set, candidate: str, reference: str, source: str) -> bool:
    return (candidate, reference, source) in reviewed or (candidate, reference, None) in reviewed


def _status_row(candidate, metric, rows, reviewed, threshold, top_k) -> dict:
    distances = [r["distance"] for r in rows]
    unreviewed = [r for r in rows if not _is_reviewed(reviewed, candidate, r["reference_id"], r["reference_source"])]
    below = [d for d in distances if d <= threshold]
    if unreviewed:
        first = unreviewed[0]
        up_to, bound = float(first["distance"]), False
    elif len(rows) < top_k:  # every reference of the search is listed, and reviewed
        first, up_to, bound = None, float("inf"), False
    else:
        first, up_to, bound = None, float(distances[-1]), True
    return {
        "candidate_id": candidate, "metric": metric, "threshold": float(threshold), "reviewed_up_to": up_to,
        "bound_by_top_k": bound,
        "nearest_unreviewed_id": first["reference_id"] if first else None,
        "nearest_unreviewed_source": first["reference_source"] if first else None,
        "num_below_threshold": len(below),
        "num_unreviewed_below_threshold": sum(1 for r in unreviewed if r["distance"] <= threshold),
        "sufficiently_reviewed": up_to > threshold,
    }


STATUS_SCHEMA = pa.schema([
    ("candidate_id", pa.string()), ("metric", pa.string()), ("threshold", pa.float64()), ("reviewed_up_to", pa.float64()),
    ("bound_by_top_k", pa.bool_()), ("nearest_unreviewed_id", pa.string()), ("nearest_unreviewed_source", pa.string()),
    ("num_below_threshold", pa.int32()), ("num_unreviewed_below_threshold", pa.int32()), ("sufficiently_reviewed", pa.bool_()),
])


def review_status(neighbours: pa.Table, reviewed: set, thresholds: Mapping[str, float], *, top_k: int,
                  candidates: list | None = None, metrics: list | None = None) -> pa.Table:
    """One row per candidate and measure (see the module docs); ``neighbours`` sorted by rank.

    ``candidates`` and ``metrics`` add rows for candidates without any neighbour (no reference at
    all: nothing to review, ``reviewed_up_to`` inf).
    """
    grouped: dict = {}
    for row in neighbours.sort_by([("candidate_id", "ascending"), ("metric", "ascending"), ("rank", "ascending")]).to_pylist():
        grouped.setdefault((row["candidate_id"], row["metric"]), []).append(row)
    for candidate in candidates or ():
        for metric in metrics or ():
            grouped.setdefault((candidate, metric), [])
    unknown = sorted({m for _, m in grouped} - set(thresholds))
    if unknown:
        raise ValueError(f"no review threshold for {', '.join(unknown)}; give one with --threshold {unknown[0]}=VALUE")
    rows = [_status_row(c, m, grouped[(c, m)], reviewed, thresholds[m], top_k) for c, m in sorted(grouped)]
    return pa.Table.from_pylist(rows, schema=STATUS_SCHEMA)


def summary(status: pa.Table) -> dict:
    """Per measure: candidates, sufficiently reviewed, and unreviewed pairs below the threshold."""
    out = {}
    metric = np.asarray(status.column("metric").to_pylist(), dtype=object)
    done = status.column("sufficiently_reviewed").to_numpy(zero_copy_only=False)
    pending = status.column("num_unreviewed_below_threshold").to_numpy()
    for m in dict.fromkeys(metric.tolist()):
        rows = metric == m
        out[m] = {"candidates": int(rows.sum()), "sufficiently_reviewed": int(done[rows].sum()), "pairs_to_review": int(pending[rows].sum())}
    return out
