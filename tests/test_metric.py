"""Tests of the clopper_pearson_accuracy metric (issue 4).

Every expected value comes from an independent reference, named in each test: scipy's exact
binomial interval (``scipy.stats.binomtest(...).proportion_ci(method="exact")``), closed forms
of the interval at k = 0 and k = n, ``numpy.polyfit`` and statsmodels OLS for the fit, hand
counts for accuracies, or the paper's line.
"""

import ast
import doctest
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import statsmodels.api as sm
import yaml
from scipy import stats

from metrics.clopper_pearson_accuracy import clopper_pearson_accuracy as cpa

ROOT = Path(__file__).resolve().parents[1]
METRIC_DIR = ROOT / "metrics" / "clopper_pearson_accuracy"
SCRIPT = METRIC_DIR / "clopper_pearson_accuracy.py"


@pytest.fixture(scope="module")
def evaluate_module():
    return pytest.importorskip("evaluate")


@pytest.fixture(scope="module")
def accuracy_metric(evaluate_module, tmp_path_factory):
    return evaluate_module.load(str(METRIC_DIR), cache_dir=str(tmp_path_factory.mktemp("metric")))


@pytest.fixture(scope="module")
def fit_metric(evaluate_module, tmp_path_factory):
    return evaluate_module.load(
        str(METRIC_DIR), "linear_fit", cache_dir=str(tmp_path_factory.mktemp("fit"))
    )


def models_near_paper_line(n_models, seed=0, noise=0.01):
    """Made-up accuracies around the paper's ImageNet line new = 1.11 * original - 0.202."""
    rng = np.random.default_rng(seed)
    original = rng.uniform(0.55, 0.85, n_models)
    return original, np.clip(1.11 * original - 0.202 + rng.normal(0, noise, n_models), 0.01, 0.99)


# ---------------------------------------------------------------------------------------------
# clopper_pearson_interval


def _k_n_grid():
    rng = np.random.default_rng(4)
    pairs = set()
    for n in (1, 2, 3, 5, 10, 37, 100, 2_000, 10_000, 50_000):
        pairs |= {(k, n) for k in {0, 1, n // 3, n // 2, n - 1, n} if 0 <= k <= n}
        pairs |= {(int(k), n) for k in rng.integers(0, n + 1, 3)}
    return sorted(pairs)


@pytest.mark.parametrize("confidence_level", [0.5, 0.9, 0.95, 0.99, 0.999])
def test_interval_equals_scipy_exact(confidence_level):
    """Expected: scipy.stats.binomtest(k, n).proportion_ci(confidence_level, method="exact"),
    which finds the ends by root-finding on the binomial tails (brentq, xtol 2e-12)."""
    for k, n in _k_n_grid():
        expected = stats.binomtest(k, n).proportion_ci(confidence_level, method="exact")
        low, high = cpa.clopper_pearson_interval(k, n, confidence_level)
        assert low == pytest.approx(expected.low, abs=1e-10), (k, n)
        assert high == pytest.approx(expected.high, abs=1e-10), (k, n)
        assert 0.0 <= low <= k / n <= high <= 1.0


@pytest.mark.parametrize("n", [1, 2, 7, 100, 10_000])
@pytest.mark.parametrize("confidence_level", [0.9, 0.95, 0.99])
def test_interval_edges_are_exact(n, confidence_level):
    """Expected: at k = 0 the lower end is exactly 0 and the upper end solves (1 - p)^n = α/2,
    i.e. 1 - (α/2)^(1/n); at k = n symmetrically (closed forms of the Clopper–Pearson ends)."""
    tail = (1 - confidence_level) / 2
    low, high = cpa.clopper_pearson_interval(0, n, confidence_level)
    assert low == 0.0
    assert high == pytest.approx(1 - tail ** (1 / n), rel=1e-12)
    low, high = cpa.clopper_pearson_interval(n, n, confidence_level)
    assert high == 1.0
    assert low == pytest.approx(tail ** (1 / n), rel=1e-12)


def test_interval_is_a_named_tuple_of_floats():
    interval = cpa.clopper_pearson_interval(np.int64(7), np.int64(10))
    assert isinstance(interval, tuple) and interval._fields == ("low", "high")
    assert all(type(end) is float for end in interval)


@pytest.mark.parametrize(
    "args, match",
    [
        ((3, 2), r"correct must be between 0 and total \(2\); got 3"),
        ((-1, 5), r"correct must be an integer >= 0; got -1"),
        ((1.5, 5), r"correct must be an integer >= 0; got 1\.5"),
        ((True, 5), r"correct must be an integer >= 0; got True"),
        ((0, 0), r"total must be an integer >= 1; got 0"),
        ((1, 5.0), r"total must be an integer >= 1; got 5\.0"),
        ((1, 5, 0.0), r"open interval \(0, 1\).*got 0\.0"),
        ((1, 5, 1.0), r"open interval \(0, 1\).*got 1\.0"),
        ((1, 5, 95), r"not a percentage\); got 95"),
        ((1, 5, float("nan")), r"open interval \(0, 1\).*got nan"),
        ((1, 5, "0.95"), r"open interval \(0, 1\).*got '0\.95'"),
    ],
)
def test_interval_rejects_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        cpa.clopper_pearson_interval(*args)


# ---------------------------------------------------------------------------------------------
# accuracy_counts and the default config


def test_accuracy_counts_class_ids():
    """Expected: hand count (3 of 4 right) and scipy's exact interval for (3, 4)."""
    result = cpa.accuracy_counts([0, 1, 2, 2], [0, 1, 1, 2], confidence_level=0.9)
    expected = stats.binomtest(3, 4).proportion_ci(0.9, method="exact")
    assert list(result) == ["accuracy", "ci_low", "ci_high", "correct", "total", "confidence_level"]
    assert result["accuracy"] == 0.75 and result["correct"] == 3 and result["total"] == 4
    assert result["confidence_level"] == 0.9
    assert result["ci_low"] == pytest.approx(expected.low, abs=1e-10)
    assert result["ci_high"] == pytest.approx(expected.high, abs=1e-10)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_accuracy_counts_ranked_lists(k):
    """Expected: top-1 and top-k counted by a Python loop over the rows; intervals from scipy."""
    rng = np.random.default_rng(k)
    references = rng.integers(0, 10, 500)
    ranked = np.array([rng.permutation(10)[:k] for _ in references])
    result = cpa.accuracy_counts(ranked.tolist(), references.tolist())
    top1 = sum(int(row[0] == ref) for row, ref in zip(ranked, references))
    topk = sum(int(ref in row) for row, ref in zip(ranked, references))
    assert result["correct"] == top1 and result["accuracy"] == top1 / 500
    assert result[f"top{k}_correct"] == topk and result[f"top{k}_accuracy"] == topk / 500
    expected = stats.binomtest(topk, 500).proportion_ci(0.95, method="exact")
    assert result[f"top{k}_ci_low"] == pytest.approx(expected.low, abs=1e-10)
    assert result[f"top{k}_ci_high"] == pytest.approx(expected.high, abs=1e-10)
    assert set(result) == {
        "accuracy",
        "ci_low",
        "ci_high",
        "correct",
        "total",
        "confidence_level",
    } | {f"top{k}_{name}" for name in ("accuracy", "ci_low", "ci_high", "correct")}


def test_accuracy_counts_accepts_numpy_and_integral_floats():
    """Expected: the same result as the plain-int call (hand count 2 of 3)."""
    expected = cpa.accuracy_counts([1, 2, 3], [1, 2, 0])
    assert cpa.accuracy_counts(np.array([1, 2, 3], dtype=np.uint8), np.array([1, 2, 0])) == expected
    assert cpa.accuracy_counts([1.0, 2.0, 3.0], [1, 2, 0]) == expected
    assert cpa.accuracy_counts(np.array([[1], [2], [3]]), [1, 2, 0])["top1_correct"] == 2


BAD_LABELS = [
    ([1, 2], [1], r"length mismatch: 2 predictions but 1 references"),
    ([], [], r"empty input"),
    ([1, float("nan")], [1, 2], r"predictions contain nan at index 1; only finite"),
    ([1, 2], [1, float("inf")], r"references contain inf at index 1; only finite"),
    ([1, -2], [1, 2], r"predictions contain the negative label -2 at index 1"),
    ([1, 2], [-1, 2], r"references contain the negative label -1 at index 0"),
    ([1, 2.5], [1, 2], r"non-integer label 2\.5 at index 1"),
    (
        [[1, 2], [3]],
        [1, 3],
        r"ragged: ranked top-k lists must all have the same length k; got lengths \[1, 2\]",
    ),
    ([1, [2, 3]], [1, 2], r"mix class ids and ranked lists"),
    ([[1, 2], [3, 0.5]], [1, 3], r"non-integer label 0\.5 at index \(1, 1\)"),
    ([True, False], [1, 0], r"predictions are booleans"),
    (["cat", "dog"], [1, 0], r"predictions must contain non-negative integer class ids; got 'cat'"),
    (
        [1, None],
        [1, 0],
        r"predictions must contain non-negative integer class ids; got None at index 1",
    ),
    (
        "12",
        [1, 2],
        r"predictions must be a list of non-negative integer class ids; got the string '12'",
    ),
    (3, [3], r"got the single value 3"),
    (
        [1, 2],
        [[1], [2]],
        r"references must hold one class id per example; got an array of shape \(2, 1\)",
    ),
    ([[[1]], [[2]]], [1, 2], r"predictions must hold one class id or one ranked list per example"),
    ([[], []], [1, 2], r"empty ranked lists"),
    (None, [1], r"predictions is missing"),
]


@pytest.mark.parametrize("predictions, references, match", BAD_LABELS)
def test_accuracy_counts_rejects_bad_labels(predictions, references, match):
    with pytest.raises(ValueError, match=match):
        cpa.accuracy_counts(predictions, references)


@pytest.mark.parametrize("predictions, references, match", BAD_LABELS)
def test_metric_rejects_bad_labels(accuracy_metric, predictions, references, match):
    with pytest.raises(ValueError, match=match):
        accuracy_metric.compute(predictions=predictions, references=references)
    # nothing half-stored: the next computation is unaffected
    assert accuracy_metric.compute(predictions=[1], references=[1])["correct"] == 1


@pytest.mark.parametrize("level", [0, 1, 1.5, -0.1, 95, float("nan")])
def test_metric_rejects_bad_confidence_level(accuracy_metric, level):
    with pytest.raises(
        ValueError, match=r"confidence_level must be a number in the open interval \(0, 1\)"
    ):
        accuracy_metric.compute(predictions=[1], references=[1], confidence_level=level)
    assert accuracy_metric.compute(predictions=[1], references=[1])["total"] == 1


def test_metric_rejects_unknown_option(accuracy_metric):
    with pytest.raises(
        ValueError, match=r"unknown argument\(s\) \['scale'\] for the default config"
    ):
        accuracy_metric.compute(predictions=[1], references=[1], scale="probit")


def test_metric_rejects_empty_compute(accuracy_metric):
    with pytest.raises(ValueError, match="empty input: nothing to compute"):
        accuracy_metric.compute()


@pytest.mark.parametrize("ranked", [False, True], ids=["class_ids", "ranked_top5"])
def test_compute_and_add_batch_equal_accuracy_counts(accuracy_metric, ranked):
    """Expected: accuracy_counts on the whole data (itself checked above against hand counts and
    scipy); one compute call and add_batch over uneven batches must both return it exactly."""
    rng = np.random.default_rng(7)
    references = rng.integers(0, 20, 1_000)
    scores = rng.normal(size=(1_000, 20))
    scores[np.arange(1_000), references] += 1.0  # about half right at top-1
    predictions = np.argsort(-scores, axis=1)[:, :5] if ranked else scores.argmax(axis=1)
    expected = cpa.accuracy_counts(predictions, references, confidence_level=0.99)

    assert (
        accuracy_metric.compute(
            predictions=predictions.tolist(), references=references.tolist(), confidence_level=0.99
        )
        == expected
    )
    for start, stop in [(0, 1), (1, 333), (333, 334), (334, 1_000)]:
        accuracy_metric.add_batch(
            predictions=predictions[start:stop], references=references[start:stop]
        )
    assert accuracy_metric.compute(confidence_level=0.99) == expected
    for prediction, reference in zip(predictions.tolist(), references.tolist()):
        accuracy_metric.add(prediction=prediction, reference=reference)
    assert accuracy_metric.compute(confidence_level=0.99) == expected


def test_add_batch_checks_each_batch_and_keeps_one_form(accuracy_metric):
    """evaluate itself would cast 1.5 to 1; the metric refuses it at add_batch."""
    with pytest.raises(ValueError, match=r"non-integer label 1\.5"):
        accuracy_metric.add_batch(predictions=[1.5], references=[1])
    accuracy_metric.add_batch(predictions=[[1, 2]], references=[1])
    with pytest.raises(
        ValueError, match="are class ids but earlier batches' are ranked lists of length 2"
    ):
        accuracy_metric.add_batch(predictions=[1], references=[1])
    with pytest.raises(
        ValueError,
        match="are ranked lists of length 3 but earlier batches' are ranked lists of length 2",
    ):
        accuracy_metric.add_batch(predictions=[[1, 2, 3]], references=[1])
    assert accuracy_metric.compute()["top2_correct"] == 1
    accuracy_metric.add_batch(predictions=[1], references=[1])  # a new computation may change form
    assert accuracy_metric.compute()["correct"] == 1


# ---------------------------------------------------------------------------------------------
# linear_fit and the linear_fit config


def _fitted_scale(values, scale):
    values = np.asarray(values, dtype=float)
    return {
        "linear": values,
        "probit": stats.norm.ppf(values),
        "logit": np.log(values / (1 - values)),
    }[scale]


@pytest.mark.parametrize("scale", cpa.SCALES)
def test_point_fit_equals_numpy_polyfit_and_statsmodels(scale):
    """Expected: numpy.polyfit(x, y, 1) for slope and intercept; statsmodels OLS for params, R²
    and residuals; x and y transformed with scipy.stats.norm.ppf (probit) or log(p/(1-p))."""
    original, new = models_near_paper_line(40, seed=1, noise=0.02)
    fit = cpa.linear_fit(original, new, scale=scale, n_bootstrap=0)
    x, y = _fitted_scale(original, scale), _fitted_scale(new, scale)
    slope, intercept = np.polyfit(x, y, 1)
    ols = sm.OLS(y, sm.add_constant(x)).fit()
    assert fit["slope"] == pytest.approx(slope, rel=1e-10)
    assert fit["intercept"] == pytest.approx(intercept, rel=1e-10, abs=1e-12)
    assert [fit["intercept"], fit["slope"]] == pytest.approx(list(ols.params), rel=1e-10)
    assert fit["r2"] == pytest.approx(ols.rsquared, rel=1e-10)
    assert fit["residuals"] == pytest.approx(list(ols.resid), abs=1e-12)
    assert fit["n_models"] == 40 and fit["scale"] == scale
    assert fit["slope_ci_low"] is None and fit["intercept_ci_high"] is None


def test_fit_recovers_the_paper_line():
    """Expected: the paper's ImageNet top-1 line, new = 1.11 * original - 0.202 (as fractions;
    Recht et al. 2019 quote 1.11 x - 20.2 in percent); points exactly on it give r2 = 1."""
    original = np.linspace(0.55, 0.85, 12)
    fit = cpa.linear_fit(original, 1.11 * original - 0.202, n_bootstrap=1_000)
    assert fit["slope"] == pytest.approx(1.11, rel=1e-12)
    assert fit["intercept"] == pytest.approx(-0.202, rel=1e-10)
    assert fit["r2"] == pytest.approx(1.0, abs=1e-12)
    assert fit["slope_ci_low"] == pytest.approx(1.11) and fit["slope_ci_high"] == pytest.approx(
        1.11
    )
    assert max(abs(r) for r in fit["residuals"]) < 1e-12


def test_bootstrap_matches_a_polyfit_loop_over_the_same_draws():
    """Expected: numpy.polyfit on each resample, the resample's indices floor(u * n) from n
    consecutive doubles u of numpy's PCG64(seed) (the documented draw), then numpy.quantile."""
    original, new = models_near_paper_line(20, seed=2)
    rng = np.random.Generator(np.random.PCG64(5))
    fits = []
    for _ in range(2_000):
        index = (rng.random(20) * 20).astype(np.intp)
        fits.append(np.polyfit(original[index], new[index], 1))
    slopes, intercepts = np.array(fits).T
    fit = cpa.linear_fit(original, new, n_bootstrap=2_000, seed=5, confidence_level=0.9)
    assert [fit["slope_ci_low"], fit["slope_ci_high"]] == pytest.approx(
        np.quantile(slopes, [0.05, 0.95]), rel=1e-9
    )
    assert [fit["intercept_ci_low"], fit["intercept_ci_high"]] == pytest.approx(
        np.quantile(intercepts, [0.05, 0.95]), rel=1e-9
    )


def test_bootstrap_intervals_are_stable_across_seeds():
    """Expected: at 100,000 resamples the Monte Carlo error of a 95% percentile end is ~1e-3, so
    two seeds agree within 0.01; and the intervals are close to the classical OLS interval
    (statsmodels conf_int) for homoscedastic synthetic models, within 25% in width."""
    original, new = models_near_paper_line(64, seed=3)
    fits = [cpa.linear_fit(original, new, seed=seed) for seed in (0, 1, 2)]
    for name in ("slope_ci_low", "slope_ci_high", "intercept_ci_low", "intercept_ci_high"):
        values = [fit[name] for fit in fits]
        assert max(values) - min(values) < 0.01, name
    assert fits[0]["slope_ci_low"] != fits[1]["slope_ci_low"]
    ols_low, ols_high = sm.OLS(new, sm.add_constant(original)).fit().conf_int(0.05)[1]
    width = fits[0]["slope_ci_high"] - fits[0]["slope_ci_low"]
    assert 0.75 < width / (ols_high - ols_low) < 1.25
    assert fits[0]["slope_ci_low"] < fits[0]["slope"] < fits[0]["slope_ci_high"]


def test_bootstrap_is_deterministic_and_independent_of_chunk_size(monkeypatch):
    """Expected: the same seed gives identical ends, also when chunks hold 7 resamples."""
    original, new = models_near_paper_line(10, seed=4)
    reference = cpa.linear_fit(original, new, n_bootstrap=5_000, seed=11, scale="logit")
    assert cpa.linear_fit(original, new, n_bootstrap=5_000, seed=11, scale="logit") == reference
    monkeypatch.setattr(cpa, "_MAX_CHUNK_ENTRIES", 7 * 10)
    assert cpa.linear_fit(original, new, n_bootstrap=5_000, seed=11, scale="logit") == reference


def test_degenerate_resamples_are_skipped():
    """With 3 models, 1/3 of resamples draw only the two tied models (0.5, 0.5, 0.6): hand
    computation (2/3)^3 + (1/3)^3. Those have no slope; the result still holds n_bootstrap
    finite slopes, each one of the slopes of the 2-point or 3-point subsets."""
    x = np.array([0.5, 0.5, 0.6])
    y = np.array([0.4, 0.45, 0.5])
    slopes, intercepts = cpa._bootstrap(x, y, 3_000, seed=0)
    assert len(slopes) == 3_000 and np.isfinite(slopes).all() and np.isfinite(intercepts).all()
    fit = cpa.linear_fit(x, y, n_bootstrap=3_000)
    assert math.isfinite(fit["slope_ci_low"]) and math.isfinite(fit["slope_ci_high"])
    # every resample with a slope pairs 0.6 with a mix of the two tied models: slope in [0.5, 1.0]
    assert slopes.min() == pytest.approx(0.5) and slopes.max() == pytest.approx(1.0)


def test_fit_result_is_plain_json():
    original, new = models_near_paper_line(8, seed=5)
    fit = cpa.linear_fit(original, new, n_bootstrap=500, scale="probit")
    assert json.loads(json.dumps(fit, allow_nan=False)) == fit
    assert all(type(value) in (float, int, str, list) for value in fit.values())
    assert all(type(r) is float for r in fit["residuals"])


def test_constant_new_accuracy_has_r2_one():
    fit = cpa.linear_fit([0.5, 0.6, 0.7], [0.4, 0.4, 0.4], n_bootstrap=100)
    assert fit["slope"] == pytest.approx(0.0, abs=1e-12) and fit["r2"] == 1.0


BAD_FITS = [
    (
        dict(original_accuracy=[0.5, 0.6, 0.7], new_accuracy=[0.5, 0.6]),
        r"length mismatch: 3 original accuracies but 2 new",
    ),
    (dict(original_accuracy=[], new_accuracy=[]), r"empty input"),
    (
        dict(original_accuracy=[0.5, 0.6], new_accuracy=[0.5, 0.6]),
        r"need at least 3 models .*got 2",
    ),
    (
        dict(original_accuracy=[0.5, float("nan"), 0.7], new_accuracy=[0.5, 0.6, 0.7]),
        r"original_accuracy contain nan at index 1",
    ),
    (
        dict(original_accuracy=[0.5, 0.6, 0.7], new_accuracy=[0.5, float("-inf"), 0.7]),
        r"new_accuracy contain -inf at index 1",
    ),
    (
        dict(original_accuracy=[0.5, 76.1, 0.7], new_accuracy=[0.5, 0.6, 0.7]),
        r"original_accuracy\[1\] = 76\.1 is outside \[0, 1\]; pass accuracies as fractions",
    ),
    (
        dict(original_accuracy=[0.5, 0.6, 0.7], new_accuracy=[-0.1, 0.6, 0.7]),
        r"new_accuracy\[0\] = -0\.1 is outside \[0, 1\]",
    ),
    (
        dict(original_accuracy=[0.6, 0.6, 0.6], new_accuracy=[0.5, 0.6, 0.7]),
        r"zero variance \(every model has 0\.6\)",
    ),
    (
        dict(original_accuracy=[0.5, 0.6, 0.7], new_accuracy=[0.5, 0.6, 0.7], confidence_level=1.0),
        r"open interval \(0, 1\)",
    ),
    (
        dict(original_accuracy=[0.5, 0.6, 0.7], new_accuracy=[0.5, 0.6, 0.7], scale="log"),
        r"scale must be one of 'linear', 'probit', 'logit'; got 'log'",
    ),
    (
        dict(original_accuracy=[0.5, 0.6, 1.0], new_accuracy=[0.5, 0.6, 0.7], scale="probit"),
        r"original_accuracy\[2\] = 1\.0 is exactly 0 or 1, which the probit scale",
    ),
    (
        dict(original_accuracy=[0.5, 0.6, 0.7], new_accuracy=[0.0, 0.6, 0.7], scale="logit"),
        r"new_accuracy\[0\] = 0\.0 is exactly 0 or 1, which the logit scale",
    ),
    (
        dict(original_accuracy=[0.5, 0.6, 0.7], new_accuracy=[0.5, 0.6, 0.7], n_bootstrap=-1),
        r"n_bootstrap must be an integer >= 0; got -1",
    ),
    (
        dict(original_accuracy=[0.5, 0.6, 0.7], new_accuracy=[0.5, 0.6, 0.7], n_bootstrap=1e5),
        r"n_bootstrap must be an integer >= 0; got 100000\.0",
    ),
    (
        dict(original_accuracy=[0.5, 0.6, 0.7], new_accuracy=[0.5, 0.6, 0.7], seed=-3),
        r"seed must be an integer >= 0; got -3",
    ),
    (
        dict(original_accuracy=[0.5, "x", 0.7], new_accuracy=[0.5, 0.6, 0.7]),
        r"original_accuracy must contain accuracies",
    ),
    (
        dict(original_accuracy=[[0.5], [0.6, 0.7]], new_accuracy=[0.5, 0.6, 0.7]),
        r"original_accuracy must be a flat list of accuracies",
    ),
    (
        dict(original_accuracy=[True, False, True], new_accuracy=[0.5, 0.6, 0.7]),
        r"original_accuracy are booleans",
    ),
]


@pytest.mark.parametrize("kwargs, match", BAD_FITS)
def test_linear_fit_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cpa.linear_fit(**kwargs)


@pytest.mark.parametrize("kwargs, match", BAD_FITS)
def test_fit_metric_rejects_bad_input(fit_metric, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_metric.compute(**kwargs)
    assert (
        fit_metric.compute(
            original_accuracy=[0.5, 0.6, 0.7], new_accuracy=[0.4, 0.5, 0.7], n_bootstrap=10
        )["n_models"]
        == 3
    )


def test_fit_metric_compute_and_add_batch_equal_linear_fit(fit_metric):
    """Expected: linear_fit itself (checked above against numpy.polyfit and statsmodels)."""
    original, new = models_near_paper_line(30, seed=6)
    options = dict(scale="probit", n_bootstrap=20_000, confidence_level=0.9, seed=3)
    expected = cpa.linear_fit(original, new, **options)
    assert fit_metric.compute(original_accuracy=original, new_accuracy=new, **options) == expected
    for start in range(0, 30, 8):
        fit_metric.add_batch(
            original_accuracy=original[start : start + 8], new_accuracy=new[start : start + 8]
        )
    assert fit_metric.compute(**options) == expected
    for o, n in zip(original, new):
        fit_metric.add(original_accuracy=o, new_accuracy=n)
    assert fit_metric.compute(**options) == expected


@pytest.mark.parametrize("keep_in_memory", [False, True])
def test_fit_metric_failing_on_gathered_data_leaves_nothing_behind(
    evaluate_module, tmp_path, keep_in_memory
):
    """Checks of the whole data (here: 2 models) fail after evaluate gathered the batches; the
    stored examples and their lock must go, as after a successful compute."""
    metric = evaluate_module.load(
        str(METRIC_DIR), "linear_fit", cache_dir=str(tmp_path), keep_in_memory=keep_in_memory
    )
    metric.add_batch(original_accuracy=[0.5, 0.6], new_accuracy=[0.4, 0.5])
    with pytest.raises(ValueError, match="need at least 3 models for a fit with intervals; got 2"):
        metric.compute()
    assert not list(tmp_path.rglob("*.arrow"))
    result = metric.compute(
        original_accuracy=[0.5, 0.6, 0.7], new_accuracy=[0.4, 0.5, 0.7], n_bootstrap=10
    )
    assert result["n_models"] == 3 and not list(tmp_path.rglob("*.arrow"))


def test_fit_metric_rejects_predictions_and_unknown_options(fit_metric):
    with pytest.raises(
        ValueError, match="the linear_fit config takes original_accuracy and new_accuracy"
    ):
        fit_metric.compute(predictions=[1, 2, 3], references=[1, 2, 3])
    with pytest.raises(ValueError, match=r"unknown argument\(s\) \['bootstrap'\]"):
        fit_metric.compute(
            original_accuracy=[0.5, 0.6, 0.7], new_accuracy=[0.5, 0.6, 0.7], bootstrap=10
        )


# ---------------------------------------------------------------------------------------------
# Loading, docs and the Space files


def test_module_docstring_examples():
    """The examples in the module's docstrings run as doctests."""
    result = doctest.testmod(cpa, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 15 and result.failed == 0


def test_usage_examples_run_with_evaluate_load(monkeypatch, evaluate_module):
    """The Examples shown in compute's docstring (_KWARGS_DESCRIPTION), run from the repo root."""
    monkeypatch.chdir(ROOT)
    test = doctest.DocTestParser().get_doctest(cpa._KWARGS_DESCRIPTION, {}, "usage", str(SCRIPT), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.summarize(verbose=False) == doctest.TestResults(0, len(test.examples))


def test_both_configs_load_from_the_folder(accuracy_metric, fit_metric, evaluate_module, tmp_path):
    assert (
        accuracy_metric.name == "clopper_pearson_accuracy"
        and accuracy_metric.config_name == "default"
    )
    assert fit_metric.config_name == "linear_fit"
    assert set(fit_metric.features) == {"original_accuracy", "new_accuracy"}
    assert [set(features) for features in accuracy_metric.features] == [
        {"predictions", "references"}
    ] * 2
    with pytest.raises(
        ValueError, match=r"unknown config 'probit'; allowed: 'default', 'linear_fit'"
    ):
        evaluate_module.load(str(METRIC_DIR), "probit", cache_dir=str(tmp_path))


def test_script_is_self_contained():
    """evaluate.load("ns/name") downloads only the script: no relative imports, and only
    numpy, scipy, datasets, evaluate beside the standard library."""
    tree = ast.parse(SCRIPT.read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative import"
            imported.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
    assert imported <= {"numbers", "os", "typing", "numpy", "scipy", "datasets", "evaluate"}
    assert cpa.SCALES == ("linear", "probit", "logit")


def _front_matter():
    text = (METRIC_DIR / "README.md").read_text(encoding="utf-8")
    match = re.match(r"^---\n(.*?)\n---\n(.*)$", text, flags=re.DOTALL)
    assert match, "README.md must start with YAML front matter between --- lines"
    return yaml.safe_load(match.group(1)), match.group(2)


def test_space_files_and_card():
    for name in ("clopper_pearson_accuracy.py", "README.md", "app.py", "requirements.txt"):
        assert (METRIC_DIR / name).is_file(), name
    meta, body = _front_matter()
    for key in (
        "title",
        "emoji",
        "colorFrom",
        "colorTo",
        "sdk",
        "sdk_version",
        "app_file",
        "pinned",
        "tags",
        "description",
    ):
        assert key in meta, key
    assert meta["sdk"] == "gradio" and meta["app_file"] == "app.py" and meta["pinned"] is False
    assert {"evaluate", "metric"} <= set(meta["tags"])
    headings = re.findall(r"^## (.+)$", body, flags=re.MULTILINE)
    for section in (
        "Metric description",
        "How to use",
        "Inputs",
        "Outputs",
        "Values from the paper",
        "Limitations and bias",
        "Citation",
    ):
        assert section in headings, section
    assert "Recht" in body and "Clopper" in body and "1934" in body


def test_app_and_requirements():
    compile((METRIC_DIR / "app.py").read_text(encoding="utf-8"), "app.py", "exec")
    requirements = (METRIC_DIR / "requirements.txt").read_text(encoding="utf-8").split()
    names = {re.split(r"[<>=!~ ]", line)[0] for line in requirements}
    assert {"evaluate", "numpy", "scipy", "gradio", "datasets"} <= names
    meta, _ = _front_matter()
    assert (
        f"gradio=={meta['sdk_version']}" in requirements
    ), "sdk_version and the gradio pin must agree"


def test_card_interval_table_matches_the_code():
    """The card's interval table is recomputed here with scipy's exact interval."""
    _, body = _front_matter()
    rows = re.findall(
        r"^\| ([\d,]+) / ([\d,]+) \| [\d.]+ \| \[([\d.]+), ([\d.]+)\]", body, flags=re.MULTILINE
    )
    assert len(rows) >= 5
    for k, n, low, high in rows:
        k, n = int(k.replace(",", "")), int(n.replace(",", ""))
        expected = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
        assert (float(low), float(high)) == (round(expected.low, 4), round(expected.high, 4))


def test_benchmark_prints_its_ratio(monkeypatch, capsys):
    """A small run of benchmarks/bench_metric.py: it must print the ratio and agree with polyfit."""
    import runpy

    argv = ["bench_metric.py", "--resamples", "2000", "--loop-resamples", "200", "--repeats", "1"]
    monkeypatch.setattr("sys.argv", argv)
    runpy.run_path(str(ROOT / "benchmarks" / "bench_metric.py"), run_name="__main__")
    output = capsys.readouterr().out
    assert re.search(r"ratio \(loop / vectorised\): [\d.]+x", output)
    difference = float(
        re.search(r"largest slope difference vectorised vs polyfit: (\S+)", output)[1]
    )
    assert difference < 1e-9
