"""Clopper–Pearson accuracy and the linear fit of new against original accuracy.

Recht et al. (2019) report every accuracy with an exact 95% Clopper–Pearson interval and fit
new-test-set accuracy as a linear function of original accuracy across models, with percentile
bootstrap intervals (100,000 resamples of the models) for slope and intercept. Later work fits on
a probit or logit scale and calls a model's distance above the line its effective robustness.

This file is at once the ``evaluate`` metric (two configs, ``default`` and ``linear_fit``) and a
plain library: ``clopper_pearson_interval``, ``accuracy_counts`` and ``linear_fit`` need neither
``evaluate`` nor ``datasets``, and the metric's ``compute`` returns exactly what they return.
It must stay self-contained (numpy, scipy, datasets, evaluate): ``evaluate.load("ns/name")``
downloads this one file from the Hub.
"""

import numbers
import os
from typing import NamedTuple

import datasets
import evaluate
import numpy as np
from scipy import special, stats

SCALES = ("linear", "probit", "logit")
CONFIG_NAMES = ("default", "linear_fit")

# One bootstrap chunk holds at most this many resampled (model) entries, about 1 MiB for each
# float64 array of a chunk: small enough to stay in cache, large enough to amortise numpy calls.
_MAX_CHUNK_ENTRIES = 1 << 17


class ConfidenceInterval(NamedTuple):
    """A two-sided interval; ``low`` and ``high`` are fractions in [0, 1]."""

    low: float
    high: float


# --------------------------------------------------------------------------------------------
# Validation of arguments (shared by the plain functions and the metric)


def _check_confidence_level(confidence_level):
    if (
        isinstance(confidence_level, bool)
        or not isinstance(confidence_level, numbers.Real)
        or not 0 < confidence_level < 1
    ):
        raise ValueError(
            f"confidence_level must be a number in the open interval (0, 1), a fraction such as "
            f"0.95 (not a percentage); got {confidence_level!r}"
        )
    return float(confidence_level)


def _check_int(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _available_memory():
    """Bytes of memory free for this process (None where the system does not say)."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _check_n_bootstrap(n_bootstrap):
    """``n_bootstrap`` checked, and refused before allocating when its arrays cannot fit in memory."""
    n_bootstrap = _check_int(n_bootstrap, "n_bootstrap", 0)
    needed = 32 * n_bootstrap  # slopes and intercepts (8 bytes each), and the percentiles' copies
    available = _available_memory()
    if available is not None and needed > available:
        raise ValueError(
            f"n_bootstrap={n_bootstrap:,} would need about {needed / 2**30:,.1f} GiB of memory (32 bytes "
            f"per resample: its slope and intercept, and their copies for the percentiles), more than the "
            f"{available / 2**30:,.1f} GiB available; pass a smaller n_bootstrap (the paper uses 100,000)"
        )
    return n_bootstrap


def _check_scale(scale):
    if not isinstance(scale, str) or scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(map(repr, SCALES))}; got {scale!r}")
    return scale


def _position(index):
    """The index of an element as text: ``3`` for a flat array, ``(3, 1)`` for a ranked list."""
    return str(index[0]) if len(index) == 1 else str(tuple(int(i) for i in index))


def _ragged_error(values, name):
    lengths = []
    for row in values:
        if isinstance(row, (str, bytes)) or not hasattr(row, "__len__"):
            raise ValueError(
                f"{name} mix class ids and ranked lists ({row!r} beside lists); pass either one "
                f"class id per example or one ranked list (best first) per example"
            )
        lengths.append(len(row))
    raise ValueError(
        f"{name} are ragged: ranked top-k lists must all have the same length k; got lengths "
        f"{sorted(set(lengths))}"
    )


def _number_array(values, name, what, ranked=False):
    """``values`` as a numpy array of numbers, or a ValueError naming the first bad element."""
    if values is None:
        raise ValueError(f"{name} is missing: pass a list of {what}")
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{name} must be a list of {what}; got the string {values!r}")
    try:
        array = np.asarray(values)
    except ValueError:  # numpy refuses lists of unequal length
        if not ranked:
            raise ValueError(f"{name} must be a flat list of {what}") from None
        _ragged_error(values, name)
    if array.ndim == 0:
        raise ValueError(f"{name} must be a list of {what}; got the single value {values!r}")
    if (
        ranked
        and array.dtype.kind == "O"
        and array.ndim == 1
        and any(hasattr(row, "__len__") and not isinstance(row, (str, bytes)) for row in values)
    ):
        _ragged_error(values, name)  # some numpy versions build object arrays from ragged lists
    if array.dtype.kind == "b":
        raise ValueError(
            f"{name} are booleans; pass {what} (booleans are refused because a list of "
            f"True/False is more likely per-example correctness than labels)"
        )
    if array.dtype.kind not in "iuf":
        for index, value in np.ndenumerate(np.asarray(values, dtype=object)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValueError(
                    f"{name} must contain {what}; got {value!r} at index {_position(index)}"
                )
        array = array.astype(np.float64)
    if array.dtype.kind == "f":
        bad = ~np.isfinite(array)
        if bad.any():
            index = tuple(np.argwhere(bad)[0])
            raise ValueError(
                f"{name} contain {array[index].item()!r} at index {_position(index)}; only finite "
                f"{what} are allowed"
            )
    return array


def _labels(values, name, allow_ranked):
    """Class ids (1-D) or ranked top-k lists (2-D, best first) as an int64 array."""
    what = "non-negative integer class ids"
    array = _number_array(values, name, what, ranked=allow_ranked)
    if array.dtype.kind == "f":
        fractional = array != np.floor(array)
        if fractional.any():
            index = tuple(np.argwhere(fractional)[0])
            raise ValueError(
                f"{name} contain the non-integer label {array[index].item()!r} at index "
                f"{_position(index)}; labels must be {what}"
            )
    too_large = array >= 2.0**63 if array.dtype.kind == "f" else array > np.iinfo(np.int64).max
    if too_large.any():
        index = tuple(np.argwhere(too_large)[0])
        value = np.asarray(values, dtype=object)[index]
        raise ValueError(
            f"{name} contain the label {value!r} at index {_position(index)}, which is out of range: "
            f"labels are class ids that fit in int64 (at most {np.iinfo(np.int64).max})"
        )
    negative = array < 0
    if negative.any():
        index = tuple(np.argwhere(negative)[0])
        raise ValueError(
            f"{name} contain the negative label {array[index].item()!r} at index "
            f"{_position(index)}; labels must be {what}"
        )
    if array.ndim == 2 and allow_ranked:
        if array.shape[1] == 0 and array.shape[0] > 0:
            raise ValueError(f"{name} are empty ranked lists; each ranked list needs k >= 1 ids")
        _check_distinct(array, name)
    elif array.ndim != 1:
        allowed = (
            "one class id or one ranked list per example"
            if allow_ranked
            else "one class id per example"
        )
        raise ValueError(f"{name} must hold {allowed}; got an array of shape {array.shape}")
    return array.astype(np.int64)


def _check_distinct(ranked, name):
    """Refuse a ranked list that names a class twice (top-k would count it k times over)."""
    ordered = np.sort(ranked, axis=1)
    repeated = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
    if repeated.any():
        row = int(np.flatnonzero(repeated)[0])
        label = ordered[row, 1:][ordered[row, 1:] == ordered[row, :-1]][0].item()
        raise ValueError(
            f"{name}[{row}] repeats the label {label!r} ({ranked[row].tolist()!r}); a ranked top-k "
            f"list names k different classes, best first"
        )


def _predictions_and_references(predictions, references):
    """Checked ``(predictions, references)``: the pair ``accuracy_counts`` accepts."""
    predictions = _labels(predictions, "predictions", allow_ranked=True)
    references = _labels(references, "references", allow_ranked=False)
    if len(predictions) != len(references):
        raise ValueError(
            f"length mismatch: {len(predictions)} predictions but {len(references)} references; "
            f"pass one prediction (a class id or a ranked list) per reference"
        )
    if len(references) == 0:
        raise ValueError("empty input: no predictions and references; pass at least one example")
    return predictions, references


def _accuracies(values, name):
    """Accuracies as a flat float64 array of fractions in [0, 1]."""
    array = _number_array(values, name, "accuracies (fractions in [0, 1])").astype(np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be a flat list of accuracies; got shape {array.shape}")
    outside = (array < 0) | (array > 1)
    if outside.any():
        index = int(np.flatnonzero(outside)[0])
        raise ValueError(
            f"{name}[{index}] = {array[index].item()!r} is outside [0, 1]; pass accuracies as "
            f"fractions (76.1% is 0.761)"
        )
    return array


# --------------------------------------------------------------------------------------------
# Exact intervals


def clopper_pearson_interval(
    correct: int, total: int, confidence_level: float = 0.95
) -> ConfidenceInterval:
    """The exact (Clopper–Pearson) two-sided interval for ``correct`` out of ``total``.

    ``low`` is the ``(1 - confidence_level) / 2`` quantile of Beta(k, n - k + 1) and ``high`` the
    ``(1 + confidence_level) / 2`` quantile of Beta(k + 1, n - k); ``low`` is exactly 0 at k = 0
    and ``high`` exactly 1 at k = n. Equal (to the root finder's tolerance) to
    ``scipy.stats.binomtest(k, n).proportion_ci(confidence_level, method="exact")``.
    Returns a ``ConfidenceInterval(low, high)``, a named tuple of floats.

    >>> low, high = clopper_pearson_interval(7_500, 10_000)
    >>> round(low, 4), round(high, 4)
    (0.7414, 0.7585)
    >>> clopper_pearson_interval(0, 20)  # doctest: +ELLIPSIS
    ConfidenceInterval(low=0.0, high=0.168...)
    >>> clopper_pearson_interval(20, 20).high
    1.0
    >>> clopper_pearson_interval(3, 2)
    Traceback (most recent call last):
    ...
    ValueError: correct must be between 0 and total (2); got 3
    """
    total = _check_int(total, "total", 1)
    correct = _check_int(correct, "correct", 0)
    if correct > total:
        raise ValueError(f"correct must be between 0 and total ({total}); got {correct}")
    tail = (1 - _check_confidence_level(confidence_level)) / 2
    low = 0.0 if correct == 0 else float(stats.beta.ppf(tail, correct, total - correct + 1))
    high = 1.0 if correct == total else float(stats.beta.isf(tail, correct + 1, total - correct))
    return ConfidenceInterval(low, high)


def _rate(prefix, correct, total, confidence_level):
    low, high = clopper_pearson_interval(correct, total, confidence_level)
    return {
        f"{prefix}accuracy": correct / total,
        f"{prefix}ci_low": low,
        f"{prefix}ci_high": high,
        f"{prefix}correct": correct,
    }


def accuracy_counts(predictions, references, confidence_level=0.95) -> dict:
    """Accuracy with its exact Clopper–Pearson interval, keeping the raw counts.

    ``predictions`` are class ids, or ranked top-k lists (best first, all of one length k);
    ``references`` are class ids. Returns ``accuracy``, ``ci_low``, ``ci_high``, ``correct``,
    ``total`` and ``confidence_level``; for ranked lists ``accuracy`` is top-1 (the first entry)
    and ``top{k}_accuracy``, ``top{k}_ci_low``, ``top{k}_ci_high``, ``top{k}_correct`` are added.
    Labels must be non-negative integers (integral floats such as ``3.0`` are accepted, booleans
    are not); anything else raises ``ValueError``. This is what the metric's ``compute`` returns.

    >>> result = accuracy_counts([0, 1, 2, 2], [0, 1, 1, 2])
    >>> result["accuracy"], result["correct"], result["total"]
    (0.75, 3, 4)
    >>> round(result["ci_low"], 4), round(result["ci_high"], 4)
    (0.1941, 0.9937)
    >>> ranked = accuracy_counts([[3, 1], [2, 0], [1, 2]], [1, 2, 0])
    >>> ranked["accuracy"], ranked["top2_correct"], round(ranked["top2_accuracy"], 4)
    (0.3333333333333333, 2, 0.6667)
    >>> accuracy_counts([1, 2], [1])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: length mismatch: 2 predictions but 1 references; pass one prediction ...
    """
    confidence_level = _check_confidence_level(confidence_level)
    predictions, references = _predictions_and_references(predictions, references)
    total = len(references)
    top1 = predictions if predictions.ndim == 1 else predictions[:, 0]
    result = _rate("", int(np.count_nonzero(top1 == references)), total, confidence_level)
    result |= {"total": total, "confidence_level": confidence_level}
    if predictions.ndim == 2:
        k = predictions.shape[1]
        correct_k = int(np.count_nonzero((predictions == references[:, None]).any(axis=1)))
        result |= _rate(f"top{k}_", correct_k, total, confidence_level)
    return result


# --------------------------------------------------------------------------------------------
# Linear fit across models


def _to_scale(accuracy, name, scale):
    if scale == "linear":
        return accuracy
    edge = (accuracy == 0) | (accuracy == 1)
    if edge.any():
        index = int(np.flatnonzero(edge)[0])
        raise ValueError(
            f"{name}[{index}] = {accuracy[index].item()!r} is exactly 0 or 1, which the {scale} "
            f"scale maps to infinity; use scale='linear', or clip accuracies measured on n images "
            f"into (0, 1) first, e.g. to [0.5/n, 1 - 0.5/n]"
        )
    return special.ndtri(accuracy) if scale == "probit" else special.logit(accuracy)


def _from_scale(value, scale):
    """Accuracy from a value on ``scale`` (the inverse of ``_to_scale``)."""
    if scale == "linear":
        return value
    return special.ndtr(value) if scale == "probit" else special.expit(value)


def _baseline_mask(baseline, n_models):
    """Which models the line is fitted to: all, or the ones ``baseline`` marks True."""
    if baseline is None:
        return np.ones(n_models, bool)
    if isinstance(baseline, (str, bytes)) or not hasattr(baseline, "__len__"):
        raise ValueError(f"baseline must be a list of booleans, one per model; got {baseline!r}")
    values = list(baseline)
    bad = [v for v in values if not isinstance(v, (bool, np.bool_))]
    if bad or len(values) != n_models:
        raise ValueError(
            f"baseline must be {n_models} booleans (True: fit the line to this model); got "
            f"{len(values)} values" + (f", e.g. {bad[0]!r}" if bad else "")
        )
    mask = np.asarray(values, bool)
    if mask.sum() < 3:
        raise ValueError(
            f"need at least 3 baseline models for a fit with intervals; {int(mask.sum())} of "
            f"{n_models} are marked True"
        )
    return mask


def _ols(x, y):
    """Least-squares ``(slope, intercept)`` of y on x (two-pass, centred)."""
    dx = x - x.mean()
    slope = float(np.dot(dx, y - y.mean()) / np.dot(dx, dx))
    return slope, float(y.mean() - slope * x.mean())


def _bootstrap(x, y, n_bootstrap, seed):
    """Slopes and intercepts of ``n_bootstrap`` resamples of the models (rows of ``x``, ``y``).

    Each resample draws ``len(x)`` models with replacement; its indices come from ``len(x)``
    consecutive doubles of one PCG64 stream, so the result does not depend on the chunk size.
    Resamples whose original accuracies are all equal (no slope) are skipped and the stream goes
    on, so the result is ``n_bootstrap`` resamples drawn conditionally on a defined slope.
    """
    n = len(x)
    rng = np.random.Generator(np.random.PCG64(seed))
    x_mean, y_mean = x.mean(), y.mean()
    xc, yc = x - x_mean, y - y_mean  # centring keeps the one-pass sums well conditioned
    slopes, intercepts = np.empty(n_bootstrap), np.empty(n_bootstrap)
    rows_per_chunk = max(1, _MAX_CHUNK_ENTRIES // n)
    filled = 0
    while filled < n_bootstrap:
        rows = min(rows_per_chunk, n_bootstrap - filled)
        # floor(u * n) of doubles u in [0, 1); int32 because numpy casts to it far faster
        index = (rng.random((rows, n)) * n).astype(np.int32)
        xs, ys = np.take(xc, index), np.take(yc, index)
        mx, my = xs.sum(axis=1) / n, ys.sum(axis=1) / n
        sxx = np.einsum("ij,ij->i", xs, xs) - n * mx * mx
        sxy = np.einsum("ij,ij->i", xs, ys) - n * mx * my
        keep = (np.ptp(xs, axis=1) > 0) & (sxx > 0)
        mx, my = mx[keep], my[keep]
        slope = sxy[keep] / sxx[keep]
        intercept = (my + y_mean) - slope * (mx + x_mean)
        take = min(len(slope), n_bootstrap - filled)
        slopes[filled : filled + take] = slope[:take]
        intercepts[filled : filled + take] = intercept[:take]
        filled += take
    return slopes, intercepts


def linear_fit(
    original_accuracy,
    new_accuracy,
    scale="linear",
    n_bootstrap=100_000,
    confidence_level=0.95,
    seed=0,
    baseline=None,
) -> dict:
    """Least-squares line of new against original accuracy across models, with bootstrap intervals.

    Accuracies are fractions in [0, 1], one pair per model, transformed first by ``scale``:
    ``linear`` (none), ``probit`` (Φ⁻¹) or ``logit`` (log p / (1 - p)). Returns ``slope`` and
    ``intercept`` in the units of that scale, percentile-bootstrap intervals
    ``slope_ci_low``/``slope_ci_high`` and ``intercept_ci_low``/``intercept_ci_high`` from
    ``n_bootstrap`` resamples of the models (with replacement; resamples whose original
    accuracies are all equal have no slope and are redrawn), ``r2`` of the fit, ``n_models``,
    ``scale``, ``residuals`` (each model's new accuracy minus the line, in the fitted scale and
    the input order), ``predicted_new_accuracy`` (the line at each model's original accuracy,
    mapped back to accuracy), ``effective_robustness`` (new accuracy minus that prediction, in
    accuracy as a fraction: Taori et al. 2020), ``baseline`` (which models the line was fitted
    to), and the ``n_bootstrap``, ``confidence_level`` and ``seed`` used. ``baseline``, one
    boolean per model, fits the line (and ``r2``, ``n_models``, the bootstrap) on the models
    marked True only and evaluates every model against it; ``None`` fits all. With
    ``n_bootstrap=0`` the four interval ends are ``None``. All values are
    plain Python numbers, lists or strings. This is what the metric's ``compute`` returns for
    the ``linear_fit`` config.

    >>> original = [0.60, 0.65, 0.70, 0.75, 0.80]
    >>> fit = linear_fit(original, [0.47, 0.52, 0.58, 0.63, 0.69], n_bootstrap=2_000)
    >>> round(fit["slope"], 3), round(fit["intercept"], 3), round(fit["r2"], 4)
    (1.1, -0.192, 0.999)
    >>> fit["slope_ci_low"] <= fit["slope"] <= fit["slope_ci_high"]
    True
    >>> [round(r, 3) for r in fit["residuals"]]
    [0.002, -0.003, 0.002, -0.003, 0.002]
    >>> sub = linear_fit(original, [0.47, 0.52, 0.58, 0.63, 0.75], n_bootstrap=0,
    ...                  baseline=[True, True, True, True, False])
    >>> sub["n_models"], round(sub["predicted_new_accuracy"][4], 3), round(sub["effective_robustness"][4], 3)
    (4, 0.685, 0.065)
    >>> probit = linear_fit([0.6, 0.7, 0.8], [0.5, 0.6, 0.7], scale="probit", n_bootstrap=0)
    >>> round(probit["slope"], 3), probit["slope_ci_low"]
    (0.89, None)
    >>> linear_fit([0.6, 0.7], [0.5, 0.6])
    Traceback (most recent call last):
    ...
    ValueError: need at least 3 models for a fit with intervals; got 2
    """
    scale = _check_scale(scale)
    confidence_level = _check_confidence_level(confidence_level)
    n_bootstrap = _check_n_bootstrap(n_bootstrap)
    seed = _check_int(seed, "seed", 0)
    original = _accuracies(original_accuracy, "original_accuracy")
    new = _accuracies(new_accuracy, "new_accuracy")
    if len(original) != len(new):
        raise ValueError(
            f"length mismatch: {len(original)} original accuracies but {len(new)} new "
            f"accuracies; pass one pair per model"
        )
    if len(original) == 0:
        raise ValueError("empty input: no models; pass at least 3 (original, new) accuracy pairs")
    if len(original) < 3:
        raise ValueError(f"need at least 3 models for a fit with intervals; got {len(original)}")
    x_all = _to_scale(original, "original_accuracy", scale)
    y_all = _to_scale(new, "new_accuracy", scale)
    fitted = _baseline_mask(baseline, len(original))
    x, y, original = x_all[fitted], y_all[fitted], original[fitted]
    if np.ptp(x - x.mean()) == 0:
        raise ValueError(
            f"original_accuracy has zero variance (every model has {original[0].item()!r}), so the "
            f"slope is undefined; pass models with at least two different original accuracies"
        )
    slope, intercept = _ols(x, y)
    residuals = y - (slope * x + intercept)
    predicted = _from_scale(slope * x_all + intercept, scale)
    total_variation = float(np.sum((y - y.mean()) ** 2))
    # Constant new accuracy: the flat line fits exactly, so r2 is 1 by convention.
    r2 = 1.0 if np.ptp(y) == 0 else 1.0 - float(np.sum(residuals**2)) / total_variation
    ends = {"slope": (None, None), "intercept": (None, None)}
    if n_bootstrap > 0:
        slopes, intercepts = _bootstrap(x, y, n_bootstrap, seed)
        tails = [(1 - confidence_level) / 2, (1 + confidence_level) / 2]
        ends = {
            "slope": tuple(float(v) for v in np.quantile(slopes, tails)),
            "intercept": tuple(float(v) for v in np.quantile(intercepts, tails)),
        }
    return {
        "slope": slope,
        "intercept": intercept,
        "slope_ci_low": ends["slope"][0],
        "slope_ci_high": ends["slope"][1],
        "intercept_ci_low": ends["intercept"][0],
        "intercept_ci_high": ends["intercept"][1],
        "r2": r2,
        "n_models": len(x),
        "scale": scale,
        "residuals": [float(r) for r in y_all - (slope * x_all + intercept)],
        "predicted_new_accuracy": [float(p) for p in predicted],
        "effective_robustness": [float(v) for v in new - predicted],
        "baseline": [bool(b) for b in fitted],
        "n_bootstrap": n_bootstrap,
        "confidence_level": confidence_level,
        "seed": seed,
    }


# --------------------------------------------------------------------------------------------
# The evaluate metric

_CITATION = """\
@inproceedings{recht2019imagenet,
  title     = {Do {ImageNet} Classifiers Generalize to {ImageNet}?},
  author    = {Recht, Benjamin and Roelofs, Rebecca and Schmidt, Ludwig and Shankar, Vaishaal},
  booktitle = {Proceedings of the 36th International Conference on Machine Learning},
  series    = {Proceedings of Machine Learning Research},
  volume    = {97},
  pages     = {5389--5400},
  year      = {2019},
}
@article{clopper1934use,
  title   = {The Use of Confidence or Fiducial Limits Illustrated in the Case of the Binomial},
  author  = {Clopper, C. J. and Pearson, E. S.},
  journal = {Biometrika},
  volume  = {26},
  number  = {4},
  pages   = {404--413},
  year    = {1934},
}
"""

_DESCRIPTION = """\
Accuracy with an exact Clopper–Pearson confidence interval and raw counts (config `default`;
class ids or ranked top-k lists), and the least-squares line of new against original accuracy
across models on a linear, probit or logit scale with percentile-bootstrap intervals and
per-model residuals (effective robustness) (config `linear_fit`), as in Recht et al. (2019).
"""

_KWARGS_DESCRIPTION = """
Config `default`:
    predictions: class ids (int), or ranked top-k lists of class ids (best first, one length k).
    references: class ids (int).
    confidence_level: float in (0, 1), default 0.95.
Returns accuracy, ci_low, ci_high, correct, total, confidence_level; with ranked lists of
length k also top{k}_accuracy, top{k}_ci_low, top{k}_ci_high, top{k}_correct.

Config `linear_fit`:
    original_accuracy: one accuracy per model on the original test set, fractions in [0, 1].
    new_accuracy: the same models' accuracies on the new test set, fractions in [0, 1].
    scale: "linear" (default), "probit" or "logit".
    n_bootstrap: resamples of the models for the intervals, default 100_000 (0: none).
    confidence_level: float in (0, 1), default 0.95.
    seed: int >= 0, default 0, seeds numpy's PCG64 for the bootstrap.
    baseline: optional, one boolean per model: fit the line to the True ones only.
Returns slope, intercept, slope_ci_low, slope_ci_high, intercept_ci_low, intercept_ci_high,
r2, n_models, scale, residuals, predicted_new_accuracy, effective_robustness (in input order),
baseline, n_bootstrap, confidence_level, seed.

Examples:
    >>> import evaluate
    >>> metric = evaluate.load("metrics/clopper_pearson_accuracy")
    >>> result = metric.compute(predictions=[0, 1, 2, 2], references=[0, 1, 1, 2])
    >>> result["accuracy"], round(result["ci_low"], 4), round(result["ci_high"], 4)
    (0.75, 0.1941, 0.9937)
    >>> fit = evaluate.load("metrics/clopper_pearson_accuracy", "linear_fit")
    >>> result = fit.compute(
    ...     original_accuracy=[0.6, 0.7, 0.8], new_accuracy=[0.5, 0.6, 0.7], n_bootstrap=1_000
    ... )
    >>> round(result["slope"], 6), round(result["intercept"], 6)
    (1.0, -0.1)
"""

_FIT_INPUTS = ("original_accuracy", "new_accuracy")
_OPTIONS = {
    "default": ("confidence_level",),
    "linear_fit": ("scale", "n_bootstrap", "confidence_level", "seed", "baseline"),
}


class ClopperPearsonAccuracy(evaluate.Metric):
    """Accuracy with exact Clopper–Pearson intervals, and the linear fit across models."""

    def _info(self):
        if self.config_name not in CONFIG_NAMES:
            raise ValueError(
                f"unknown config {self.config_name!r}; allowed: "
                f"{', '.join(map(repr, CONFIG_NAMES))}"
            )
        if self.config_name == "linear_fit":
            features = datasets.Features({name: datasets.Value("float64") for name in _FIT_INPUTS})
        else:
            # evaluate picks the first schema the first example fits: ranked lists, then class ids.
            features = [
                datasets.Features(
                    {
                        "predictions": datasets.Sequence(datasets.Value("int64")),
                        "references": datasets.Value("int64"),
                    }
                ),
                datasets.Features(
                    {"predictions": datasets.Value("int64"), "references": datasets.Value("int64")}
                ),
            ]
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=features,
            reference_urls=[
                "https://arxiv.org/abs/1902.10811",
                "https://doi.org/10.1093/biomet/26.4.404",
            ],
        )

    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Check a batch at once (evaluate would silently cast 1.5 to 1), then store it."""
        if self.config_name == "linear_fit":
            unknown = sorted(set(kwargs) - set(_FIT_INPUTS))
            if predictions is not None or references is not None or unknown:
                given = ["predictions"] * (predictions is not None) + ["references"] * (
                    references is not None
                )
                raise ValueError(
                    f"the linear_fit config takes original_accuracy and new_accuracy; got "
                    f"{given + unknown}"
                )
            columns = {name: _accuracies(kwargs.get(name), name) for name in _FIT_INPUTS}
            if len(columns["original_accuracy"]) != len(columns["new_accuracy"]):
                raise ValueError(
                    f"length mismatch: {len(columns['original_accuracy'])} original accuracies "
                    f"but {len(columns['new_accuracy'])} new accuracies; pass one pair per model"
                )
            if len(columns["original_accuracy"]) == 0:
                raise ValueError("empty input: no models; pass at least 3 accuracy pairs")
            return super().add_batch(**{name: column.tolist() for name, column in columns.items()})
        if kwargs:
            raise ValueError(
                f"the default config takes predictions and references; got {sorted(kwargs)}"
            )
        predictions, references = _predictions_and_references(predictions, references)
        form = (
            "class ids"
            if predictions.ndim == 1
            else f"ranked lists of length {predictions.shape[1]}"
        )
        if self.writer is None:  # first batch since the last compute
            self._prediction_form = form
        elif form != self._prediction_form:
            raise ValueError(
                f"this batch's predictions are {form} but earlier batches' are "
                f"{self._prediction_form}; every batch of one computation must use the same form"
            )
        return super().add_batch(predictions=predictions.tolist(), references=references.tolist())

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Check and store one example (one model's accuracy pair for ``linear_fit``)."""
        if self.config_name == "linear_fit":
            return self.add_batch(**{name: [value] for name, value in kwargs.items()})
        return self.add_batch(predictions=[prediction], references=[reference], **kwargs)

    def compute(self, *, predictions=None, references=None, **kwargs):
        """Check the options first, so that a bad one leaves the stored examples untouched."""
        inputs = _FIT_INPUTS if self.config_name == "linear_fit" else ()
        unknown = sorted(set(kwargs) - set(inputs) - set(_OPTIONS[self.config_name]))
        if inputs and (predictions is not None or references is not None):
            raise ValueError(
                "the linear_fit config takes original_accuracy and new_accuracy, not "
                "predictions and references"
            )
        if unknown:
            raise ValueError(
                f"unknown argument(s) {unknown} for the {self.config_name} config; allowed "
                f"options: {list(_OPTIONS[self.config_name])}"
            )
        if "confidence_level" in kwargs:
            _check_confidence_level(kwargs["confidence_level"])
        if "scale" in kwargs:
            _check_scale(kwargs["scale"])
        if "n_bootstrap" in kwargs:
            _check_n_bootstrap(kwargs["n_bootstrap"])
        if "seed" in kwargs:
            _check_int(kwargs["seed"], "seed", 0)
        given = [predictions, references] + [kwargs.get(name) for name in inputs]
        if self.writer is None and all(value is None for value in given):
            raise ValueError("empty input: nothing to compute; pass inputs or call add_batch first")
        return super().compute(predictions=predictions, references=references, **kwargs)

    def _compute(
        self,
        predictions=None,
        references=None,
        original_accuracy=None,
        new_accuracy=None,
        **options,
    ):
        try:
            if self.config_name == "linear_fit":
                return linear_fit(original_accuracy, new_accuracy, **options)
            return accuracy_counts(predictions, references, **options)
        except ValueError:
            # Checks of all the data at once (fewer than 3 models, zero variance, 0 or 1 under
            # probit) fail here, after evaluate has gathered the stored examples; drop them and
            # their lock as evaluate does after a successful compute, so the next call is clean.
            self._discard_gathered_examples()
            raise

    def _discard_gathered_examples(self):
        self.data = None
        if self.buf_writer is not None:  # keep_in_memory
            self.buf_writer = None
            return
        for lock, path in reversed(list(zip(self.filelocks or [], self.file_paths or []))):
            if os.path.exists(path):
                os.remove(path)
            lock.release()
        self.filelocks = self.file_paths = None
