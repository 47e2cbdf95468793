"""Issue 11, the metric: repeated labels in a ranked list, labels beyond int64, a bootstrap too big for memory."""

import evaluate
import numpy as np
import pytest

from metrics.clopper_pearson_accuracy import clopper_pearson_accuracy as cpa

METRIC_DIR = "metrics/clopper_pearson_accuracy"


@pytest.fixture(scope="module")
def metric():
    from pathlib import Path

    return evaluate.load(str(Path(__file__).parents[1] / METRIC_DIR))


@pytest.mark.parametrize(
    "predictions, message",
    [
        ([[1, 1, 1], [2, 3, 4]], "predictions[0] repeats the label 1 ([1, 1, 1])"),
        ([[0, 1, 2], [5, 3, 5]], "predictions[1] repeats the label 5 ([5, 3, 5])"),
        (np.array([[7, 8], [9, 9]]), "predictions[1] repeats the label 9"),
    ],
)
def test_ranked_lists_with_repeated_labels_are_refused_with_the_row(predictions, message):
    with pytest.raises(ValueError) as error:
        cpa.accuracy_counts(predictions, [1, 2])
    assert message in str(error.value) and "names k different classes" in str(error.value)


def test_repeated_labels_through_evaluate(metric):
    with pytest.raises(ValueError, match=r"predictions\[0\] repeats the label 1"):
        metric.compute(predictions=[[1, 1, 1], [0, 2, 3]], references=[1, 0])
    assert metric.compute(predictions=[[1, 0, 2], [0, 2, 3]], references=[1, 0])["top3_correct"] == 2  # the metric is still usable


@pytest.mark.parametrize(
    "predictions, references, message",
    [
        ([2**63, 1], [1, 1], "predictions contain the label 9223372036854775808 at index 0, which is out of range"),
        ([1, 2], [2**70, 1], "references contain the label 1180591620717411303424 at index 0, which is out of range"),
        ([[1, 2**64 + 5]], [1], "predictions contain the label 18446744073709551621 at index (0, 1), which is out of range"),
        ([float(2**63)], [1], "which is out of range"),
    ],
)
def test_labels_beyond_int64_are_out_of_range_not_negative(predictions, references, message):
    with pytest.raises(ValueError) as error:
        cpa.accuracy_counts(predictions, references)
    assert message in str(error.value) and "negative" not in str(error.value)
    assert "fit in int64 (at most 9223372036854775807)" in str(error.value)


def test_labels_beyond_int64_through_evaluate(metric):
    with pytest.raises(ValueError, match="out of range"):
        metric.compute(predictions=[2**63], references=[1])


def test_largest_int64_label_is_still_a_label():
    big = 2**63 - 1
    assert cpa.accuracy_counts([big, 0], [big, 1])["correct"] == 1


def test_huge_n_bootstrap_is_refused_before_allocating(monkeypatch):
    monkeypatch.setattr(cpa, "_available_memory", lambda: 16 * 2**30)
    monkeypatch.setattr(cpa.np, "empty", lambda *a, **k: pytest.fail("allocated"))
    with pytest.raises(ValueError) as error:
        cpa.linear_fit([0.6, 0.7, 0.8], [0.5, 0.6, 0.7], n_bootstrap=10**11)
    message = str(error.value)
    assert "n_bootstrap=100,000,000,000 would need about 2,980.2 GiB of memory" in message
    assert "more than the 16.0 GiB available; pass a smaller n_bootstrap" in message


def test_huge_n_bootstrap_through_evaluate_is_refused_and_keeps_the_examples(monkeypatch):
    from pathlib import Path

    fit = evaluate.load(str(Path(__file__).parents[1] / METRIC_DIR), "linear_fit")
    fit.add_batch(original_accuracy=[0.6, 0.7, 0.8], new_accuracy=[0.5, 0.6, 0.7])
    with pytest.raises(ValueError, match="n_bootstrap=100,000,000,000 would need about"):
        fit.compute(n_bootstrap=10**11)
    assert fit.compute(n_bootstrap=100)["n_models"] == 3


def test_bootstrap_within_memory_still_runs(monkeypatch):
    monkeypatch.setattr(cpa, "_available_memory", lambda: 32 * 1000)
    assert cpa.linear_fit([0.6, 0.7, 0.8], [0.5, 0.6, 0.7], n_bootstrap=1000)["n_bootstrap"] == 1000
    with pytest.raises(ValueError, match="n_bootstrap=1,001 would need"):
        cpa.linear_fit([0.6, 0.7, 0.8], [0.5, 0.6, 0.7], n_bootstrap=1001)
