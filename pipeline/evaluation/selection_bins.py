"""Accuracy by selection frequency (Figures 15-17 of Recht et al. 2019).

Each image of a set whose selection frequency is known (a rebuilt set's pool, or a table of
``candidate_id``/``image_id`` and ``selection_frequency``) goes into the bin MatchedFrequency
uses (edges 0.2, 0.4, 0.6, 0.8; :func:`pipeline.rebuild.sampling_rules.histogram_bin`), the
original images and the new images alike; per model, set and bin the report gives the top-1
accuracy with its Clopper–Pearson interval and the raw counts.

:func:`selection_frequency_report` works on arrays (the demo calls it); :func:`
selection_frequency_report_from_files` reads an ``evaluate`` folder's per-image predictions,
the sets' image ids (through ``datasets``) and the selection frequencies.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Mapping, Optional, Sequence

import numpy as np

from pipeline.rebuild.sampling_rules import STANDARD_BINS, histogram_bin

logger = logging.getLogger(__name__)

ID_COLUMNS = ("candidate_id", "image_id", "id")


def accuracy_by_bin(correct, selection_frequency, edges: Sequence[float] = STANDARD_BINS, confidence_level: float = 0.95) -> list[dict]:
    """Per selection-frequency bin: ``low``, ``high``, ``total``, ``correct``, ``accuracy``, ``ci_low``, ``ci_high``.

    Images whose selection frequency is NaN (unknown) are left out.

    >>> [(b["total"], b["correct"]) for b in accuracy_by_bin([1, 0, 1, 1], [0.1, 0.1, 0.9, float("nan")])]
    [(2, 1), (0, 0), (0, 0), (0, 0), (1, 1)]
    """
    from metrics.clopper_pearson_accuracy.clopper_pearson_accuracy import clopper_pearson_interval

    correct = np.asarray(correct, bool)
    frequency = np.asarray(selection_frequency, float)
    if correct.shape != frequency.shape:
        raise ValueError(f"need one selection frequency per image; got {frequency.shape} for {correct.shape} images")
    known = ~np.isnan(frequency)
    bins = histogram_bin(frequency[known], edges)
    n_bins = len(edges) + 1
    totals = np.bincount(bins, minlength=n_bins)
    rights = np.bincount(bins, weights=correct[known], minlength=n_bins).astype(int)
    out = []
    for b, (low, high) in enumerate(zip([0.0, *edges], [*edges, 1.0])):
        n, k = int(totals[b]), int(rights[b])
        ci = clopper_pearson_interval(k, n, confidence_level) if n else (None, None)
        out.append({"low": float(low), "high": float(high), "total": n, "correct": k,
                    "accuracy": k / n if n else None, "ci_low": ci[0], "ci_high": ci[1]})
    return out


def selection_frequency_report(
    correct: Mapping[tuple[str, str], np.ndarray],
    frequencies: Mapping[tuple[str, str], np.ndarray],
    original: str,
    *,
    edges: Sequence[float] = STANDARD_BINS,
    confidence_level: float = 0.95,
) -> dict:
    """The report's ``selection_frequency_bins``: per (model, dataset), accuracy per bin.

    ``correct[(model, dataset)]`` is each image's top-1 correctness and ``frequencies[(model,
    dataset)]`` its selection frequency (NaN: unknown), in the same order.
    """
    models = []
    for (model, dataset), right in correct.items():
        frequency = np.asarray(frequencies[(model, dataset)], float)
        models.append({"model": model, "dataset": dataset, "role": "original" if dataset == original else "new",
                       "images_with_selection_frequency": int(np.sum(~np.isnan(frequency))),
                       "bins": accuracy_by_bin(right, frequency, edges, confidence_level)})
    new_sets = list(dict.fromkeys(m["dataset"] for m in models if m["role"] == "new"))
    return {"edges": [float(e) for e in edges], "original": original, "new_sets": new_sets, "models": models}


# --- from files ------------------------------------------------------------------------------


def _read_table(path: Path):
    import pyarrow.csv
    import pyarrow.json
    import pyarrow.parquet

    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return pyarrow.parquet.read_table(path)
    if suffix == ".csv":
        return pyarrow.csv.read_csv(path)
    if suffix in (".jsonl", ".json"):
        return pyarrow.json.read_json(path)
    raise ValueError(f"{path}: selection frequencies must be .parquet, .csv or .jsonl (JSON Lines); got {suffix or 'no suffix'}")


def read_selection_frequencies(path, pool: Optional[Path] = None) -> dict[str, float]:
    """Image id → selection frequency, from a table with an id column and ``selection_frequency``.

    A pool's table has one row per (image, class) shown; with ``pool`` only each image's own
    class (from the pool's candidates and originals) is kept.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; pass a table of candidate_id (or image_id) and selection_frequency")
    table = _read_table(path)
    id_column = next((c for c in ID_COLUMNS if c in table.column_names), None)
    if id_column is None or "selection_frequency" not in table.column_names:
        raise ValueError(f"{path} has columns {table.column_names}; it needs candidate_id (or image_id) and selection_frequency")
    ids = [str(v) for v in table.column(id_column).to_pylist()]
    values = table.column("selection_frequency").to_pylist()
    if pool is not None and "wnid" in table.column_names:
        own = _own_classes(Path(pool))
        wnids = table.column("wnid").to_pylist()
        keep = [own.get(i) == w for i, w in zip(ids, wnids)]
        ids, values = [i for i, k in zip(ids, keep) if k], [v for v, k in zip(values, keep) if k]
    frequencies = dict(zip(ids, (float(v) for v in values)))
    if len(frequencies) != len(ids):
        raise ValueError(
            f"{path} gives some images more than one selection frequency (one per class they were shown for); "
            f"pass --pool POOL so that each image's own class is used"
        )
    return frequencies


def _own_classes(pool: Path) -> dict[str, str]:
    import pyarrow.parquet

    own = {}
    for name, column in (("candidates.parquet", "candidate_id"), ("originals.parquet", "image_id")):
        path = pool / name
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist; --pool must be a pool folder written by `ingest`")
        table = pyarrow.parquet.read_table(path, columns=[column, "wnid"])
        own |= dict(zip(table.column(column).to_pylist(), table.column("wnid").to_pylist()))
    return own


def dataset_image_ids(spec_text: str, dataset: str, cache_dir: Optional[str] = None) -> list[Optional[str]]:
    """Each row's image id: an id column (candidate_id, image_id, id), else the image file's name."""
    import datasets

    from .datasets_spec import find_columns, parse_dataset_spec

    spec = parse_dataset_spec(spec_text)
    split = dataset.rsplit("@", 1)[-1]
    try:
        table = datasets.load_dataset(spec.path, spec.config, split=split, cache_dir=cache_dir)
    except Exception as e:  # noqa: BLE001 - re-raised with the spec named
        raise ValueError(f"cannot load {spec_text!r} to read its image ids: {e}") from e
    for column in ID_COLUMNS:
        if column in table.column_names:
            return [None if v is None else str(v) for v in table[column]]
    image, _, _ = find_columns(table.features, repr(spec_text))
    paths = table.cast_column(image, datasets.Image(decode=False))[image]
    return [Path(p["path"]).name if p and p.get("path") else None for p in paths]


def _lookup(frequencies: Mapping[str, float], image_id: Optional[str]) -> float:
    if image_id is None:
        return float("nan")
    if image_id in frequencies:
        return frequencies[image_id]
    return frequencies.get(Path(image_id).stem, float("nan"))


def selection_frequency_report_from_files(
    rows: Sequence[Mapping], folders: Mapping[tuple[str, str], Path], *, pool=None, selection_frequencies=None,
    cache_dir=None, confidence_level: float = 0.95,
) -> dict:
    """:func:`selection_frequency_report` from an ``evaluate`` output's predictions files."""
    from .paired import per_image_correct
    from .report import split_roles

    if selection_frequencies is None:
        selection_frequencies = Path(pool) / "selection_frequencies.parquet"
    frequencies = read_selection_frequencies(selection_frequencies, pool)
    original, _ = split_roles(rows)
    ids: dict[str, list] = {}
    correct, per_image = {}, {}
    for row in rows:
        if row.get("status") != "ok" or not row.get("predictions"):
            continue
        key = (row["model"], row["dataset"])
        if row["dataset"] not in ids:
            ids[row["dataset"]] = dataset_image_ids(row["dataset_spec"], row["dataset"], cache_dir)
        index, _, right = per_image_correct(folders[key], row)
        correct[key] = right
        per_image[key] = np.array([_lookup(frequencies, ids[row["dataset"]][i]) for i in index])
    known = sum(int(np.sum(~np.isnan(v))) for v in per_image.values())
    if not known:
        raise ValueError(f"no image of the evaluated sets has a selection frequency in {selection_frequencies}; check that its ids are the sets' ids")
    return selection_frequency_report(correct, per_image, original, confidence_level=confidence_level)
