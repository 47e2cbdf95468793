"""Result rows, run files, prediction files, the results table and the fits.

The output folder::

    runs/<model>__<dataset>.json         one finished (model, dataset): {"row": ..., "signature": ...}
    predictions/<model>__<dataset>.npz   per image: index, label, topk, topk_logits
    results.json                         {"columns", "rows", "fits", "settings"}
    results.csv                          the rows, columns in COLUMNS order
    fit.png                              original vs new accuracy, intervals, fit, y = x

Every file is written atomically; a run file is written after its predictions, so a run file
marks a finished job and a re-run skips it (if its signature, the settings that change the
numbers, is the same). Accuracies are stored unrounded beside the raw counts.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from pipeline.core.atomic import atomic_file, atomic_write_text

RUNS_DIR = "runs"
PREDICTIONS_DIR = "predictions"
RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"
FIT_PNG = "fit.png"
FIT_SCALES = ("linear", "probit")


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    description: str


# The one declaration of the result table; results.csv, results.json and the README follow it.
COLUMNS: tuple[Column, ...] = (
    Column("model", "str", "model name (from the model record)"),
    Column("source", "str", "`timm:<name>` or `hf:<repo or folder>`"),
    Column("dataset", "str", "dataset as `<folder or Hub id>[:config]@split`"),
    Column("dataset_spec", "str", "the dataset as written on the command line"),
    Column("role", "str", "`original` or `new`"),
    Column("status", "str", "`ok`, or `error` when the model failed on this dataset"),
    Column("error", "str", "the exception (`Type: message`) when status is `error`, else empty"),
    Column("total", "int", "images scored"),
    Column("top1_correct", "int", "images whose top prediction is the label"),
    Column("top1_accuracy", "float", "top1_correct / total, unrounded"),
    Column("top1_ci_low", "float", "lower end of the exact Clopper–Pearson interval of top-1 accuracy"),
    Column("top1_ci_high", "float", "upper end of that interval"),
    Column("top5_correct", "int", "images whose label is among the 5 top predictions (all, with under 5 classes)"),
    Column("top5_accuracy", "float", "top5_correct / total, unrounded"),
    Column("top5_ci_low", "float", "lower end of the Clopper–Pearson interval of top-5 accuracy"),
    Column("top5_ci_high", "float", "upper end of that interval"),
    Column("confidence_level", "float", "confidence level of the intervals"),
    Column("split_size", "int", "images in the split before `--limit`"),
    Column("limit", "int", "`--limit` (empty when the whole split was scored)"),
    Column("label_match", "str", "how outputs met classes: `names`, `names-reordered`, `count` or `label-map`"),
    Column("preprocessing", "str", "the preprocessing the model used (and whether draft decoding was on)"),
    Column("pretrained", "bool", "whether pretrained weights were loaded"),
    Column("batch_size", "int", "batch size that finished (smaller than asked after out-of-memory retries)"),
    Column("device", "str", "device the model ran on"),
    Column("precision", "str", "`fp32`, `bf16` or `fp16` (autocast)"),
    Column("seconds", "float", "wall time of the scoring pass (model loading excluded)"),
    Column("images_per_second", "float", "total / seconds"),
    Column("predictions", "str", "the predictions file, relative to the output folder"),
    Column("finished_at", "str", "UTC time the result was stored (ISO 8601)"),
)
COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)


def slug(text: str) -> str:
    """A file-name-safe form of a model or dataset name.

    >>> slug("imagenetv2:matched-frequency@test"), slug("google/vit-base")
    ('imagenetv2_matched-frequency_test', 'google_vit-base')
    """
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "_"


def job_key(model: str, dataset: str) -> str:
    """The file stem of a (model, dataset) job: ``<model>__<dataset>``."""
    return f"{slug(model)}__{slug(dataset)}"


def make_row(**values: Any) -> dict:
    """A result row with exactly the declared columns (missing ones are None)."""
    unknown = set(values) - set(COLUMN_NAMES)
    if unknown:
        raise KeyError(f"not result columns: {sorted(unknown)}")
    return {name: values.get(name) for name in COLUMN_NAMES}


def now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def score(topk: np.ndarray, labels: np.ndarray, confidence_level: float) -> dict:
    """Top-1 and top-5 counts, accuracies and Clopper–Pearson intervals from the metric module.

    ``topk`` holds each image's top predictions (best first) as dataset class ids.
    """
    from metrics.clopper_pearson_accuracy import clopper_pearson_accuracy as cpa

    topk = np.asarray(topk)
    counts = cpa.accuracy_counts(topk, np.asarray(labels), confidence_level=confidence_level)
    k = topk.shape[1]
    return {
        "total": counts["total"],
        "top1_correct": counts["correct"],
        "top1_accuracy": counts["accuracy"],
        "top1_ci_low": counts["ci_low"],
        "top1_ci_high": counts["ci_high"],
        "top5_correct": counts[f"top{k}_correct"],
        "top5_accuracy": counts[f"top{k}_accuracy"],
        "top5_ci_low": counts[f"top{k}_ci_low"],
        "top5_ci_high": counts[f"top{k}_ci_high"],
        "confidence_level": counts["confidence_level"],
    }


# --- files -----------------------------------------------------------------------------------


def run_path(output: Path, key: str) -> Path:
    return Path(output) / RUNS_DIR / f"{key}.json"


def predictions_relpath(key: str) -> str:
    return f"{PREDICTIONS_DIR}/{key}.npz"


def write_predictions(output: Path, key: str, arrays: Mapping[str, np.ndarray]) -> str:
    """Write ``index``, ``label``, ``topk``, ``topk_logits`` as an ``.npz`` (no pickles); return its relative path."""
    rel = predictions_relpath(key)
    with atomic_file(Path(output) / rel, "wb") as f:
        np.savez(f, **{k: np.asarray(v) for k, v in arrays.items()})
    return rel


def read_predictions(path: Path) -> dict[str, np.ndarray]:
    """The arrays of a predictions file."""
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def write_run(output: Path, key: str, row: Mapping, signature: Mapping) -> Path:
    """Store a finished job's row (after its predictions)."""
    text = json.dumps({"row": dict(row), "signature": dict(signature)}, indent=2, sort_keys=False)
    return atomic_write_text(run_path(output, key), text + "\n")


def read_run(output: Path, key: str) -> Optional[dict]:
    """The stored ``{"row", "signature"}`` of a job, or None if absent or unreadable."""
    path = run_path(output, key)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and "row" in data else None


def is_done(output: Path, key: str, signature: Mapping) -> bool:
    """Whether the job has a stored successful result for the same signature and its predictions file."""
    stored = read_run(output, key)
    if stored is None or stored.get("signature") != json.loads(json.dumps(dict(signature))):
        return False
    row = stored["row"]
    return row.get("status") == "ok" and (Path(output) / str(row.get("predictions"))).is_file()


def rows_to_csv(rows: Iterable[Mapping]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(COLUMN_NAMES), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in COLUMN_NAMES})
    return buffer.getvalue()


def write_results(output: Path, rows: Sequence[Mapping], fits: Mapping, settings: Mapping) -> None:
    """Write results.json and results.csv."""
    output = Path(output)
    document = {"columns": list(COLUMN_NAMES), "rows": [dict(r) for r in rows], "fits": dict(fits), "settings": dict(settings)}
    atomic_write_text(output / RESULTS_JSON, json.dumps(document, indent=2) + "\n")
    atomic_write_text(output / RESULTS_CSV, rows_to_csv(rows))


# --- fits --------------------------------------------------------------------------------------


def paired_accuracies(rows: Sequence[Mapping], original: str, new: str) -> tuple[list[str], list[float], list[float]]:
    """Models with a successful result on both ``original`` and ``new``, and their top-1 accuracies."""
    ok = {(r["model"], r["dataset"]): r for r in rows if r.get("status") == "ok"}
    models = [m for m in dict.fromkeys(r["model"] for r in rows) if (m, original) in ok and (m, new) in ok]
    return models, [ok[(m, original)]["top1_accuracy"] for m in models], [ok[(m, new)]["top1_accuracy"] for m in models]


def compute_fits(
    rows: Sequence[Mapping], original: str, new_datasets: Sequence[str], *, n_bootstrap: int = 100_000, seed: int = 0
) -> dict:
    """For each new dataset and scale, the metric's linear fit of new against original top-1 accuracy.

    Returns ``{new dataset: {scale: fit}}`` where a fit is the metric's dict plus ``status: "ok"``
    and ``models`` (the models in fit order), or ``{"status": "no fit", "reason": ..., "models": [...]}``.
    """
    from metrics.clopper_pearson_accuracy import clopper_pearson_accuracy as cpa

    fits: dict[str, dict] = {}
    for new in new_datasets:
        models, x, y = paired_accuracies(rows, original, new)
        fits[new] = {}
        for scale in FIT_SCALES:
            if len(models) < 3:
                fits[new][scale] = {
                    "status": "no fit",
                    "reason": f"a fit needs at least 3 models with results on both {original} and {new}; {len(models)} have",
                    "models": models,
                }
                continue
            try:
                fit = cpa.linear_fit(x, y, scale=scale, n_bootstrap=n_bootstrap, seed=seed)
            except ValueError as e:
                fits[new][scale] = {"status": "no fit", "reason": str(e), "models": models}
                continue
            fits[new][scale] = {"status": "ok", "models": models, **fit}
    return fits
