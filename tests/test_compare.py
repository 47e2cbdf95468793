"""Intervals and the paired comparison (`python -m pipeline compare`).

References: statsmodels' Wilson interval and ``confint_proportions_2indep(method="newcomb")``
for the independent difference, Newcombe (1998) Table II example (b) (56/70 - 48/80:
0.0524 to 0.3339), scipy's ``binomtest`` on the discordant pairs for McNemar's exact test, and
a coverage simulation for the paired interval (statsmodels has no paired-difference interval).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import binomtest
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from pipeline.evaluation import paired as P
from pipeline.evaluation.results import RESULTS_JSON, make_row, write_predictions

DATASET = "imagenetv2:matched-frequency@test"


@pytest.mark.parametrize("k, n", [(0, 20), (1, 20), (7, 20), (20, 20), (81, 263), (7600, 10_000)])
def test_wilson_matches_statsmodels(k, n):
    assert P.wilson_interval(k, n) == pytest.approx(proportion_confint(k, n, method="wilson"), abs=1e-12)


@pytest.mark.parametrize("a, n1, b, n2", [(56, 70, 48, 80), (9, 10, 3, 10), (0, 10, 0, 20), (10, 10, 0, 20), (4800, 10_000, 6000, 10_000)])
def test_newcombe_independent_matches_statsmodels(a, n1, b, n2):
    expected = confint_proportions_2indep(a, n1, b, n2, compare="diff", method="newcomb")
    assert P.newcombe_difference_interval(a, n1, b, n2) == pytest.approx(expected, abs=1e-12)


def test_newcombe_published_example():
    low, high = P.newcombe_difference_interval(56, 70, 48, 80)
    assert (round(low, 4), round(high, 4)) == (0.0524, 0.3339)


def _pairs(rng, n, p_a, p_b, rho_like):
    """Correlated correctness: B copies A's outcome with probability rho_like, else draws its own."""
    a = rng.random(n) < p_a
    b = np.where(rng.random(n) < rho_like, a, rng.random(n) < p_b)
    return a, b


def test_mcnemar_is_the_binomial_test_of_the_discordant_pairs():
    rng = np.random.default_rng(3)
    a, b = _pairs(rng, 1000, 0.76, 0.74, 0.6)
    result = P.paired_comparison(a, b)
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    assert (result.only_a_correct, result.only_b_correct) == (only_a, only_b)
    assert result.mcnemar_p_value == pytest.approx(binomtest(only_a, only_a + only_b, 0.5).pvalue, rel=1e-12)
    assert result.difference == pytest.approx(a.mean() - b.mean())
    assert result.difference_ci_low < result.difference < result.difference_ci_high
    assert result.total == 1000


def test_identical_models():
    correct = np.array([True, False, True, True])
    result = P.paired_comparison(correct, correct)
    assert result.mcnemar_p_value == 1.0 and result.difference == 0.0
    assert result.difference_ci_low < 0 < result.difference_ci_high


def test_paired_interval_covers_the_true_difference():
    # A: p = 0.70; B copies A half of the time, else p = 0.60: true difference 0.05
    rng = np.random.default_rng(0)
    hits = 0
    reps = 1500
    for _ in range(reps):
        a, b = _pairs(rng, 300, 0.70, 0.60, 0.5)
        r = P.paired_comparison(a, b)
        hits += r.difference_ci_low <= 0.05 <= r.difference_ci_high
    assert 0.93 <= hits / reps <= 0.97
    # paired intervals are narrower than the independent ones when the models agree often
    r = P.paired_comparison(*_pairs(np.random.default_rng(1), 10_000, 0.7, 0.6, 0.8))
    n = 10_000
    low, high = P.newcombe_difference_interval(round(r.accuracy_a * n), n, round(r.accuracy_b * n), n)
    assert r.difference_ci_high - r.difference_ci_low < 0.7 * (high - low)


def test_bad_correctness_is_refused():
    with pytest.raises(ValueError, match="same order"):
        P.paired_comparison([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="booleans"):
        P.paired_comparison([1, 2], [1, 0])


def _evaluation(tmp_path, predictions: dict, labels: np.ndarray, index=None) -> str:
    rows = []
    for model, top1 in predictions.items():
        n = len(labels)
        idx = np.arange(n) if index is None or model == "a" else index
        topk = np.stack([top1, (top1 + 1) % 10, (top1 + 2) % 10, (top1 + 3) % 10, (top1 + 4) % 10], axis=1)
        rel = write_predictions(tmp_path, f"{model}__x", {"index": idx[::-1].copy(), "label": labels[::-1].copy(),
                                                          "topk": topk[::-1].copy(), "topk_logits": np.zeros((n, 5), np.float32)})
        correct = int(np.sum(top1 == labels))
        rows.append(make_row(model=model, dataset=DATASET, dataset_spec="./sets:matched-frequency", role="new", status="ok",
                             total=n, top1_correct=correct, top1_accuracy=correct / n, predictions=rel))
    (tmp_path / RESULTS_JSON).write_text(json.dumps({"rows": rows}), encoding="utf-8")
    return str(tmp_path / RESULTS_JSON)


def test_compare_command_from_saved_predictions(tmp_path, capsys):
    from pipeline.__main__ import main

    rng = np.random.default_rng(5)
    labels = rng.integers(0, 10, 400)
    a = np.where(rng.random(400) < 0.8, labels, (labels + 1) % 10)
    b = np.where(rng.random(400) < 0.7, labels, (labels + 3) % 10)
    results = _evaluation(tmp_path, {"a": a, "b": b}, labels)
    assert main(["compare", results, "--model", "a", "--model", "b", "--dataset", DATASET, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    right_a, right_b = a == labels, b == labels
    assert printed["only_a_correct"] == int(np.sum(right_a & ~right_b))
    assert printed["only_b_correct"] == int(np.sum(~right_a & right_b))
    assert printed["mcnemar_p_value"] == pytest.approx(
        binomtest(printed["only_a_correct"], printed["only_a_correct"] + printed["only_b_correct"]).pvalue)
    top5 = P.compare_models(results, "a", "b", DATASET, top=5)
    assert top5.accuracy_a >= printed["accuracy_a"]
    assert main(["compare", results, "--model", "a", "--model", "b", "--dataset", DATASET]) == 0
    assert "exact McNemar" in capsys.readouterr().out


def test_compare_refuses_what_it_cannot_pair(tmp_path, capsys):
    from pipeline.__main__ import main

    labels = np.arange(10) % 10
    results = _evaluation(tmp_path, {"a": labels, "b": labels}, labels, index=np.arange(10, 20))
    with pytest.raises(ValueError, match="same images"):
        P.compare_models(results, "a", "b", DATASET)
    assert main(["compare", results, "--model", "a", "--model", "c", "--dataset", DATASET]) == 1
    assert "no result for model 'c'" in capsys.readouterr().err
    assert main(["compare", results, "--model", "a", "--dataset", DATASET]) == 1
