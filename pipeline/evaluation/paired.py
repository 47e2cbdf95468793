"""Two accuracies compared: independent test sets, or two models on the same images.

* :func:`newcombe_difference_interval`: the difference of two *independent* proportions
  (a model on the original set against the same model on a new set, which share no images), by
  Newcombe's hybrid score interval (Newcombe 1998, Statistics in Medicine 17: 873-890, method
  10): Wilson score intervals of each proportion, combined by the square-and-add rule. It is
  what statsmodels calls ``confint_proportions_2indep(..., compare="diff", method="newcomb")``.
* :func:`paired_comparison`: two models scored on the same images. The exact McNemar test (a
  two-sided binomial test of the discordant images: only A right against only B right, p = 1/2)
  and Newcombe's interval for the difference of *paired* proportions (Newcombe 1998,
  Statistics in Medicine 17: 2635-2650, method 10: the square-and-add rule with the correlation
  of the two models' correctness).
* :func:`compare_models`: the same from an ``evaluate`` output folder's per-image predictions.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from .results import RESULTS_JSON, read_predictions


def _z(confidence_level: float) -> float:
    from scipy.special import ndtri

    if not isinstance(confidence_level, (int, float)) or isinstance(confidence_level, bool) or not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must be a fraction in (0, 1) such as 0.95; got {confidence_level!r}")
    return float(ndtri((1 + confidence_level) / 2))


def _check_counts(correct: int, total: int, name: str) -> None:
    if isinstance(total, bool) or int(total) != total or total < 1:
        raise ValueError(f"{name}: total must be a positive integer; got {total!r}")
    if isinstance(correct, bool) or int(correct) != correct or not 0 <= correct <= total:
        raise ValueError(f"{name}: correct must be an integer between 0 and total ({total}); got {correct!r}")


def wilson_interval(correct: int, total: int, confidence_level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of ``correct / total`` (no continuity correction).

    >>> [round(v, 4) for v in wilson_interval(81, 263)]
    [0.2553, 0.3662]
    """
    _check_counts(correct, total, "wilson_interval")
    z = _z(confidence_level)
    p = correct / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_difference_interval(
    correct_a: int, total_a: int, correct_b: int, total_b: int, confidence_level: float = 0.95
) -> tuple[float, float]:
    """Newcombe's hybrid score interval for ``correct_a/total_a - correct_b/total_b`` (independent samples).

    >>> low, high = newcombe_difference_interval(56, 70, 48, 80)  # Newcombe (1998), example (b)
    >>> round(low, 4), round(high, 4)
    (0.0524, 0.3339)
    """
    _check_counts(correct_a, total_a, "first proportion")
    _check_counts(correct_b, total_b, "second proportion")
    p1, p2 = correct_a / total_a, correct_b / total_b
    l1, u1 = wilson_interval(correct_a, total_a, confidence_level)
    l2, u2 = wilson_interval(correct_b, total_b, confidence_level)
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


@dataclass(frozen=True)
class PairedComparison:
    """Two models on the same images: the 2×2 counts, McNemar's exact test, the paired difference."""

    both_correct: int
    only_a_correct: int
    only_b_correct: int
    both_wrong: int
    accuracy_a: float
    accuracy_b: float
    difference: float  # accuracy_a - accuracy_b
    difference_ci_low: float
    difference_ci_high: float
    mcnemar_p_value: float  # exact: two-sided binomial test of only_a against only_a + only_b, p = 1/2
    confidence_level: float
    interval: str = "Newcombe (1998) hybrid score interval for paired proportions (method 10)"

    @property
    def total(self) -> int:
        return self.both_correct + self.only_a_correct + self.only_b_correct + self.both_wrong

    def to_json(self) -> dict:
        return asdict(self) | {"total": self.total}


def _paired_interval(a: int, b: int, c: int, d: int, confidence_level: float) -> tuple[float, float]:
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_interval(a + b, n, confidence_level)
    l2, u2 = wilson_interval(a + c, n, confidence_level)
    denominator = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / math.sqrt(denominator) if denominator > 0 else 0.0
    diff = p1 - p2
    lower = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    upper = (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2
    return max(-1.0, diff - math.sqrt(max(lower, 0.0))), min(1.0, diff + math.sqrt(max(upper, 0.0)))


def paired_comparison(correct_a, correct_b, confidence_level: float = 0.95) -> PairedComparison:
    """McNemar's exact test and the paired difference of two models' per-image correctness.

    ``correct_a`` and ``correct_b`` are booleans, one per image, in the same image order.

    >>> r = paired_comparison([1, 1, 1, 1, 0, 1, 0, 0], [1, 0, 0, 0, 0, 1, 1, 0])
    >>> r.only_a_correct, r.only_b_correct, r.difference, round(r.mcnemar_p_value, 3)
    (3, 1, 0.25, 0.625)
    """
    from scipy.stats import binomtest

    a_ok, b_ok = np.asarray(correct_a), np.asarray(correct_b)
    if a_ok.ndim != 1 or a_ok.shape != b_ok.shape or len(a_ok) == 0:
        raise ValueError(
            f"need one correctness value per image for both models, in the same order; got shapes {a_ok.shape} and {b_ok.shape}"
        )
    for name, values in (("correct_a", a_ok), ("correct_b", b_ok)):
        if not np.isin(values, (0, 1)).all():
            raise ValueError(f"{name} must be booleans (or 0/1) per image; got values such as {values[~np.isin(values, (0, 1))][0]!r}")
    a_ok, b_ok = a_ok.astype(bool), b_ok.astype(bool)
    both, only_a = int(np.sum(a_ok & b_ok)), int(np.sum(a_ok & ~b_ok))
    only_b, neither = int(np.sum(~a_ok & b_ok)), int(np.sum(~a_ok & ~b_ok))
    discordant = only_a + only_b
    p_value = 1.0 if discordant == 0 else float(binomtest(only_a, discordant, 0.5).pvalue)
    low, high = _paired_interval(both, only_a, only_b, neither, confidence_level)
    n = len(a_ok)
    return PairedComparison(
        both_correct=both, only_a_correct=only_a, only_b_correct=only_b, both_wrong=neither,
        accuracy_a=(both + only_a) / n, accuracy_b=(both + only_b) / n, difference=(only_a - only_b) / n,
        difference_ci_low=low, difference_ci_high=high, mcnemar_p_value=p_value, confidence_level=float(confidence_level),
    )


# --- from an evaluate output folder ----------------------------------------------------------


def read_results_file(results: Path) -> tuple[Path, list[dict]]:
    """The folder and the rows of a ``results.json`` (or of the folder holding it), with clear errors."""
    results = Path(results)
    path = results / RESULTS_JSON if results.is_dir() else results
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; pass a results.json written by `python -m pipeline evaluate` (or its folder)")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not JSON ({e.msg} at line {e.lineno}); pass a results.json written by `evaluate`") from None
    if not isinstance(document, dict) or not isinstance(document.get("rows"), list):
        raise ValueError(f"{path} has no \"rows\" list; pass a results.json written by `python -m pipeline evaluate`")
    return path.parent, document["rows"]


def _row(rows: Sequence[Mapping], model: str, dataset: str) -> Mapping:
    matches = [r for r in rows if r.get("model") == model and dataset in (r.get("dataset"), r.get("dataset_spec"))]
    if not matches:
        models = sorted({str(r.get("model")) for r in rows})
        datasets = sorted({str(r.get("dataset")) for r in rows})
        raise ValueError(f"no result for model {model!r} on dataset {dataset!r}; models: {models}; datasets: {datasets}")
    row = matches[-1]
    if row.get("status") != "ok" or not row.get("predictions"):
        raise ValueError(f"model {model!r} on {dataset!r} has no successful result with predictions (status {row.get('status')!r})")
    return row


def per_image_correct(folder: Path, row: Mapping, top: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(index, label, correct)`` of a result row's predictions file, sorted by image index."""
    path = Path(folder) / str(row["predictions"])
    if not path.is_file():
        raise FileNotFoundError(f"{path} (the predictions of {row['model']} on {row['dataset']}) is missing")
    arrays = read_predictions(path)
    order = np.argsort(arrays["index"], kind="stable")
    index, label, topk = arrays["index"][order], arrays["label"][order], arrays["topk"][order]
    return index, label, (topk[:, :top] == label[:, None]).any(axis=1)


def compare_models(results: Path, model_a: str, model_b: str, dataset: str, *, top: int = 1, confidence_level: float = 0.95) -> PairedComparison:
    """Compare two models on the same images of ``dataset`` from an ``evaluate`` output (results.json or its folder).

    ``top`` is 1 (top-1 correctness) or 5. Both models must have been scored on the same images.
    """
    if top not in (1, 5):
        raise ValueError(f"top must be 1 or 5; got {top!r}")
    if model_a == model_b:
        raise ValueError(f"--model A and --model B are both {model_a!r}; name two different models")
    folder, rows = read_results_file(results)
    index_a, label_a, correct_a = per_image_correct(folder, _row(rows, model_a, dataset), top)
    index_b, label_b, correct_b = per_image_correct(folder, _row(rows, model_b, dataset), top)
    if not np.array_equal(index_a, index_b):
        raise ValueError(
            f"{model_a} was scored on {len(index_a)} images of {dataset} and {model_b} on {len(index_b)} others; "
            f"a paired test needs the same images (same --limit)"
        )
    if not np.array_equal(label_a, label_b):
        raise ValueError(f"the two predictions files of {dataset} disagree on the labels; were they scored on the same dataset?")
    return paired_comparison(correct_a, correct_b, confidence_level)
