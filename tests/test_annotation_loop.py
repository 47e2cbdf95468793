"""The whole crowd round trip on the toys: tasks → simulated workers → ingest --tasks → selection-frequency.

The workers select each image with its known true probability, so the selection frequencies
must recover those probabilities: each true value lies in the exact (Clopper–Pearson, statsmodels'
``proportion_confint(method="beta")``) 99.9% interval of its observed count for all but a
handful of images (about 0.1% are expected outside).
"""

import numpy as np
import pyarrow.parquet as pq
import pytest
from statsmodels.stats.proportion import proportion_confint

from pipeline.rebuild.ingest import ingest
from pipeline.rebuild.selection_frequency import selection_frequency_stage
from pipeline.rebuild.tasks import TasksConfig, make_tasks
from pipeline.rebuild.task_grid import GridConfig
from pipeline.toys.annotators import answer_tasks, toy_truth, write_toy_pool
from pipeline.toys.synthetic_pool import NEGATIVE_CONTROL_SELECTION_FREQUENCY

SECRET = {"TASKS_SECRET": "loop test secret 0123456789"}


def outside_interval(table, truth, confidence=0.999):
    """Rows whose true probability lies outside statsmodels' exact (``method="beta"``) interval."""
    k = np.array([r["num_selected"] for r in table])
    n = np.array([r["num_shown"] for r in table])
    low, high = proportion_confint(k, n, alpha=1 - confidence, method="beta")
    true = np.array([truth(r["image_id"], r["wnid"]) for r in table])
    return [r for r, miss in zip(table, (true < low) | (true > high)) if miss]


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    root = tmp_path_factory.mktemp("loop")
    pool = write_toy_pool(root / "pool0", n_classes=5, candidates_per_class=60, originals_per_class=10, seed=4)
    pool.write_candidates_jsonl(root / "candidates.jsonl")
    pool.write_originals_csv(root / "originals.csv")
    config = TasksConfig(grid=GridConfig(assignments=20), upload=False)
    make_tasks(root / "pool0", root / "round1", config, environ=SECRET)
    answers = answer_tasks(root / "round1", root / "results1.csv", toy_truth(pool), workers=60, seed=1, rejected_fraction=0.05)
    ingest(root / "pool1", candidates=root / "candidates.jsonl", originals=root / "originals.csv",
           results=[root / "results1.csv"], tasks=[root / "round1"])
    return root, pool, answers


def test_selection_frequencies_recover_the_true_probabilities(loop):
    root, pool, answers = loop
    path, report = selection_frequency_stage(root / "pool1")
    assert report["annotation_rows"]["rejected"] > 0 and not answers["spammers"]
    table = pq.read_table(path).to_pylist()
    truth = toy_truth(pool)
    candidates = [r for r in table if not r["is_original"]]
    assert {r["image_id"] for r in candidates} == set(pool.candidate_ids.tolist())
    assert min(r["num_shown"] for r in candidates) >= 10
    misses = outside_interval(table, truth)
    assert len(misses) <= 3, misses[:3]
    negatives = [r for r in table if r["is_original"] and truth(r["image_id"], r["wnid"]) == NEGATIVE_CONTROL_SELECTION_FREQUENCY]
    assert negatives and sum(r["num_selected"] for r in negatives) / sum(r["num_shown"] for r in negatives) < 0.12
    # the estimates track the truth closely overall
    observed = np.array([r["selection_frequency"] for r in candidates])
    true = np.array([truth(r["image_id"], r["wnid"]) for r in candidates])
    assert np.corrcoef(observed, true)[0, 1] > 0.9


def test_spammers_fail_the_hidden_controls(loop, tmp_path):
    import json

    root, pool, _ = loop
    answers = answer_tasks(root / "round1", tmp_path / "spam.csv", toy_truth(pool), workers=60, seed=5, spammer_fraction=0.2)
    ingest(tmp_path / "pool", candidates=root / "candidates.jsonl", originals=root / "originals.csv",
           results=[tmp_path / "spam.csv"], tasks=[root / "round1"])
    rows = json.loads((tmp_path / "pool" / "ingest.json").read_text())["worker_control_accuracy"]
    accuracy = {r["worker_id"]: r["control_accuracy"] for r in rows}
    spammers = set(answers["spammers"])
    spam = [accuracy[w] for w in spammers if w in accuracy]
    honest = [a for w, a in accuracy.items() if w not in spammers]
    assert len(spam) >= 5 and np.mean(spam) < 0.6 and np.mean(honest) > 0.75
    _, report = selection_frequency_stage(tmp_path / "pool", min_control_accuracy=0.6)  # the filter reads the same accuracies
    dropped = {w["worker_id"]: w["control_accuracy"] for w in report["worker_filter"]["dropped"]}
    assert all(dropped[w] == accuracy[w] for w in dropped) and len(set(dropped) & spammers) >= len(spam) / 2
    assert len(set(dropped) - spammers) <= 0.1 * len(honest)


def test_a_follow_up_round_fills_what_is_short(loop):
    root, pool, _ = loop
    config = TasksConfig(grid=GridConfig(assignments=20), follow_up=True, min_annotations=18, min_originals=9, upload=False)
    summary = make_tasks(root / "pool1", root / "round2", config, environ=SECRET)
    assert summary["tasks"] > 0 and any("annotated originals" in r for r in summary["reasons"])
    answer_tasks(root / "round2", root / "results2.csv", toy_truth(pool), workers=60, seed=2, id_prefix="R2")
    ingest(root / "pool2", candidates=root / "candidates.jsonl", originals=root / "originals.csv",
           results=[root / "results1.csv", root / "results2.csv"], tasks=[root / "round1", root / "round2"])
    path, _ = selection_frequency_stage(root / "pool2")
    table = pq.read_table(path).to_pylist()
    own = [r for r in table if r["is_original"] and toy_truth(pool)(r["image_id"], r["wnid"]) != NEGATIVE_CONTROL_SELECTION_FREQUENCY]
    for wnid in pool.wnids:
        assert sum(1 for r in own if r["wnid"] == wnid and r["num_shown"] >= 18) >= 9
    assert len(outside_interval(table, toy_truth(pool))) <= 3
