"""`python -m pipeline report`: the per-model table, Table 2, fits, effective robustness, figures.

Expected values: means and ranks computed by hand from the counts below; fits from numpy's
polyfit on the transformed accuracies; the change interval from statsmodels'
``confint_proportions_2indep(method="newcomb")``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image
from scipy.special import expit, logit, ndtri
from statsmodels.stats.proportion import confint_proportions_2indep

from pipeline.evaluation import report as R
from pipeline.evaluation.results import RESULTS_JSON, make_row

ORIGINAL, NEW_A, NEW_B = "imagenet@validation", "imagenetv2:matched-frequency@test", "imagenetv2:top-images@test"
# model: (original top-1, top-5 correct of 10,000), (new A), (new B)
COUNTS = {
    "m1": ((6000, 8200), (4800, 7200), (6100, 8300)),
    "m2": ((6500, 8600), (5300, 7600), (6600, 8700)),
    "m3": ((7000, 9000), (5900, 8100), (7150, 9050)),
    "m4": ((7500, 9300), (6400, 8500), (7500, 9400)),
    "m5": ((8000, 9500), (7100, 8900), (8050, 9550)),
}


def _row(model: str, dataset: str, role: str, top1: int, top5: int, total: int = 10_000) -> dict:
    from metrics.clopper_pearson_accuracy.clopper_pearson_accuracy import clopper_pearson_interval

    l1, h1 = clopper_pearson_interval(top1, total)
    l5, h5 = clopper_pearson_interval(top5, total)
    return make_row(model=model, source=f"timm:{model}", dataset=dataset, dataset_spec=dataset, role=role, status="ok", error="",
                    total=total, top1_correct=top1, top1_accuracy=top1 / total, top1_ci_low=l1, top1_ci_high=h1,
                    top5_correct=top5, top5_accuracy=top5 / total, top5_ci_low=l5, top5_ci_high=h5, confidence_level=0.95)


def hand_made_rows() -> list[dict]:
    rows = []
    for model, (orig, new_a, new_b) in COUNTS.items():
        rows += [_row(model, ORIGINAL, "original", *orig), _row(model, NEW_A, "new", *new_a), _row(model, NEW_B, "new", *new_b)]
    return rows


def write_results(folder, rows) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RESULTS_JSON).write_text(json.dumps({"columns": [], "rows": rows, "fits": {}, "settings": {}}), encoding="utf-8")
    return str(folder / RESULTS_JSON)


def test_means_ranks_changes_and_intervals():
    document = R.build_report(hand_made_rows(), n_bootstrap=500)
    a = document["sets"][NEW_A]
    assert a["n_models"] == 5
    # by hand: top-1 changes -12, -12, -11, -11, -9 points; top-5 -10, -10, -9, -8, -6
    assert a["mean_top1_change"] == pytest.approx(-0.11)
    assert a["mean_top5_change"] == pytest.approx(-0.086)
    assert document["sets"][NEW_B]["mean_top1_change"] == pytest.approx(0.0080)
    entries = {e["model"]: e for e in document["models"] if e["dataset"] == NEW_B}
    # new B: m3 (71.5) and m4 (75.0) keep their ranks; all in the original order -> no rank change
    assert [entries[m]["rank_original"] for m in COUNTS] == [5, 4, 3, 2, 1]
    assert [entries[m]["rank_change"] for m in COUNTS] == [0, 0, 0, 0, 0]
    m1 = next(e for e in document["models"] if e["model"] == "m1" and e["dataset"] == NEW_A)
    low, high = confint_proportions_2indep(4800, 10_000, 6000, 10_000, compare="diff", method="newcomb")
    assert (m1["top1_change_ci_low"], m1["top1_change_ci_high"]) == pytest.approx((low, high), abs=1e-12)
    assert m1["top1_change"] == pytest.approx(-0.12)
    for key in ("model", "dataset", "original_top1", "new_top1", "top1_change", "top1_change_ci_low", "top1_change_ci_high",
                "rank_original", "rank_new", "effective_robustness"):
        assert key in m1


def test_rank_changes_and_ties():
    rows = hand_made_rows()
    for r in rows:  # m1 becomes the best on new A; m4 and m5 tie
        if r["dataset"] == NEW_A and r["model"] == "m1":
            r.update(_row("m1", NEW_A, "new", 7500, 9000))
        if r["dataset"] == NEW_A and r["model"] == "m4":
            r.update(_row("m4", NEW_A, "new", 7100, 8900))
    entries = {e["model"]: e for e in R.build_report(rows, n_bootstrap=0)["models"] if e["dataset"] == NEW_A}
    assert [entries[m]["rank_new"] for m in COUNTS] == [1, 5, 4, 2, 2]
    assert [entries[m]["rank_change"] for m in COUNTS] == [4, -1, -1, 0, -1]


@pytest.mark.parametrize("scale", ["linear", "probit", "logit"])
def test_fits_come_from_the_metric_on_each_scale(scale):
    document = R.build_report(hand_made_rows(), n_bootstrap=200)
    fit = document["sets"][NEW_A]["fits"][scale]
    x = np.array([c[0][0] for c in COUNTS.values()]) / 10_000
    y = np.array([c[1][0] for c in COUNTS.values()]) / 10_000
    f = {"linear": lambda v: v, "probit": ndtri, "logit": logit}[scale]
    slope, intercept = np.polyfit(f(x), f(y), 1)
    assert fit["status"] == "ok" and fit["scale"] == scale
    assert (fit["slope"], fit["intercept"]) == pytest.approx((slope, intercept), rel=1e-9)
    assert fit["slope_ci_low"] <= fit["slope"] <= fit["slope_ci_high"]


def test_effective_robustness_by_hand_on_a_logit_fit_with_a_baseline():
    rows = hand_made_rows()
    document = R.build_report(rows, baseline="m[1-4]", n_bootstrap=0, effective_robustness_scale="logit")
    x = np.array([c[0][0] for c in COUNTS.values()]) / 10_000
    y = np.array([c[1][0] for c in COUNTS.values()]) / 10_000
    slope, intercept = np.polyfit(logit(x[:4]), logit(y[:4]), 1)  # the line through the baseline m1..m4 only
    expected = y - expit(slope * logit(x) + intercept)
    entries = [e for e in document["models"] if e["dataset"] == NEW_A]
    assert [e["effective_robustness"] for e in entries] == pytest.approx(expected.tolist(), abs=1e-12)
    assert [e["baseline"] for e in entries] == [True, True, True, True, False]
    assert document["sets"][NEW_A]["fits"]["logit"]["n_models"] == 4
    assert expected[4] > 0.005  # m5 lies above the baseline's line (71.0 against 70.3 predicted)


def test_report_command_writes_tables_and_figures(tmp_path, capsys):
    from pipeline.__main__ import main

    results = write_results(tmp_path / "eval", hand_made_rows())
    out = tmp_path / "report"
    assert main(["report", results, "--output", str(out), "--n-bootstrap", "300"]) == 0
    document = json.loads((out / "report.json").read_text())
    assert set(document["sets"]) == {NEW_A, NEW_B}
    assert set(document["sets"][NEW_A]) >= {"n_models", "mean_top1_change", "mean_top5_change", "fits"}
    assert set(document["sets"][NEW_A]["fits"]) == {"linear", "probit", "logit"}
    markdown = (out / "report.md").read_text()
    assert f"| {NEW_A} | 5 | -11.00 | -8.60 |" in markdown
    for name in document["files"]:
        assert (out / name).is_file(), name
        if name.endswith(".png"):
            with Image.open(out / name) as image:
                assert image.size[0] > 300 and image.size[1] > 200
    assert len([f for f in document["files"] if f.endswith(".png")]) == 3
    printed = capsys.readouterr().out
    assert "report.md" in printed and "figures" in printed
    # a second run replaces its own report; a foreign folder is refused
    assert main(["report", results, "--output", str(out), "--n-bootstrap", "0"]) == 0
    foreign = tmp_path / "thesis"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    assert main(["report", results, "--output", str(foreign)]) == 1
    assert (foreign / "notes.txt").read_text() == "mine"


def test_figure_for_300_models(tmp_path):
    rng = np.random.default_rng(0)
    rows = []
    for i in range(300):
        orig = int(rng.integers(4000, 9000))
        new = int(np.clip(1.1 * orig - 2000 + rng.normal(0, 200), 100, 9900))
        rows += [_row(f"model-{i}", ORIGINAL, "original", orig, min(orig + 1500, 9990)),
                 _row(f"model-{i}", NEW_A, "new", new, min(new + 1500, 9990))]
    document = R.write_report(tmp_path / "r", rows, n_bootstrap=200)
    assert document["sets"][NEW_A]["n_models"] == 300
    with Image.open(tmp_path / "r" / "figures" / f"fit-{'imagenetv2_matched-frequency_test'}.png") as image:
        image.load()
        assert image.size == (1100, 550)


def test_baseline_field_in_the_model_file(tmp_path):
    from pipeline.__main__ import main

    results = write_results(tmp_path / "eval", hand_made_rows())
    models = tmp_path / "models.json"
    models.write_text(json.dumps([{"source": f"timm:m{i}", "baseline": i != 5} for i in range(1, 6)]))
    assert main(["report", results, "--output", str(tmp_path / "r"), "--models", str(models), "--n-bootstrap", "0"]) == 0
    document = json.loads((tmp_path / "r" / "report.json").read_text())
    assert document["sets"][NEW_A]["fits"]["linear"]["n_models"] == 4


def test_bad_inputs_are_named(tmp_path):
    rows = [r for r in hand_made_rows() if r["role"] == "new"]
    with pytest.raises(ValueError, match="0 original datasets"):
        R.build_report(rows)
    with pytest.raises(ValueError, match="matches none of the models"):
        R.build_report(hand_made_rows(), baseline="resnet*")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        R.load_results([tmp_path / "missing.json"])


# --- accuracy by selection frequency ---------------------------------------------------------


def test_accuracy_by_bin_counts_by_hand():
    from metrics.clopper_pearson_accuracy.clopper_pearson_accuracy import clopper_pearson_interval
    from pipeline.evaluation.selection_bins import accuracy_by_bin

    # bins: [0, .2) [.2, .4) [.4, .6) [.6, .8) [.8, 1]; 0.8 goes to the top bin, NaN is left out
    sf = [0.1, 0.19, 0.2, 0.5, 0.79, 0.8, 1.0, float("nan")]
    correct = [0, 1, 1, 1, 0, 1, 1, 1]
    bins = accuracy_by_bin(correct, sf)
    assert [(b["correct"], b["total"]) for b in bins] == [(1, 2), (1, 1), (1, 1), (0, 1), (2, 2)]
    assert (bins[0]["ci_low"], bins[0]["ci_high"]) == clopper_pearson_interval(1, 2)
    assert bins[4]["accuracy"] == 1.0 and bins[3]["accuracy"] == 0.0


def test_selection_frequency_bins_from_an_evaluation_folder(tmp_path, capsys):
    """Two models, an original and a new set as local parquet datasets with ids, a pool-style SF table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.__main__ import main
    from pipeline.evaluation.results import write_predictions

    rng = np.random.default_rng(0)
    n = 50
    sets = {"orig": [f"ILSVRC2012_val_{i:08d}.JPEG" for i in range(n)], "new": [f"{i:040x}" for i in range(n)]}
    sf_rows, rows = [], []
    for name, ids in sets.items():
        folder = tmp_path / name
        folder.mkdir()
        labels = rng.integers(0, 3, n)
        column = "image_id" if name == "orig" else "candidate_id"
        pq.write_table(pa.table({column: ids, "label": labels}), folder / "test.parquet")
        frequency = np.round(rng.uniform(0, 1, n), 1)
        # a pool's table: each image under its own class, originals also as a negative control of another class
        sf_rows += [{"image_id": i, "wnid": "n01", "selection_frequency": float(f)} for i, f in zip(ids, frequency)]
        sf_rows += [{"image_id": i, "wnid": "n02", "selection_frequency": 0.0} for i in ids[:5]]
        for m, p_right in (("a", 0.9), ("b", 0.6)):
            top1 = np.where(rng.random(n) < p_right, labels, (labels + 1) % 3)
            topk = np.stack([top1, (top1 + 1) % 3, (top1 + 2) % 3], axis=1)
            key = f"{m}__{name}"
            rel = write_predictions(tmp_path / "eval", key, {"index": np.arange(n), "label": labels, "topk": topk,
                                                             "topk_logits": np.zeros((n, 3), np.float32)})
            k = int(np.sum(top1 == labels))
            rows.append(_row(m, f"{name}@test", "original" if name == "orig" else "new", k, n, total=n) | {
                "predictions": rel, "dataset_spec": str(folder), "top5_correct": n, "top5_accuracy": 1.0, "top5_ci_low": 0.93, "top5_ci_high": 1.0})
        expected_sf = dict(zip(ids, frequency))
        if name == "new":
            expected_new = (labels, expected_sf)
    pool = tmp_path / "pool"
    pool.mkdir()
    pq.write_table(pa.Table.from_pylist(sf_rows), pool / "selection_frequencies.parquet")
    pq.write_table(pa.table({"candidate_id": sets["new"], "wnid": ["n01"] * n}), pool / "candidates.parquet")
    pq.write_table(pa.table({"image_id": sets["orig"], "wnid": ["n01"] * n}), pool / "originals.parquet")
    results = write_results(tmp_path / "eval", rows)
    out = tmp_path / "report"
    assert main(["report", results, "--output", str(out), "--pool", str(pool), "--n-bootstrap", "0"]) == 0, capsys.readouterr().err
    document = json.loads((out / "report.json").read_text())
    bins = document["selection_frequency_bins"]
    assert bins["new_sets"] == ["new@test"] and bins["edges"] == [0.2, 0.4, 0.6, 0.8]
    entry = next(e for e in bins["models"] if e["model"] == "a" and e["dataset"] == "new@test")
    assert entry["images_with_selection_frequency"] == n
    # by hand from the predictions file and the table
    from pipeline.evaluation.paired import per_image_correct
    from pipeline.rebuild.sampling_rules import histogram_bin

    _, _, right = per_image_correct(tmp_path / "eval", next(r for r in rows if r["model"] == "a" and r["dataset"] == "new@test"))
    labels, expected_sf = expected_new
    b = histogram_bin([expected_sf[i] for i in sets["new"]])
    assert [x["total"] for x in entry["bins"]] == np.bincount(b, minlength=5).tolist()
    assert [x["correct"] for x in entry["bins"]] == np.bincount(b, weights=right, minlength=5).astype(int).tolist()
    assert "selection-frequency.png" in " ".join(document["files"])
    with Image.open(out / "figures" / "selection-frequency.png") as image:
        image.load()
    # without --pool the repeated ids are refused, naming the fix
    assert main(["report", results, "--output", str(tmp_path / "r2"), "--selection-frequencies",
                 str(pool / "selection_frequencies.parquet")]) == 1
    assert "--pool" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["pipeline.evaluation.report", "pipeline.evaluation.paired", "pipeline.evaluation.selection_bins",
                                  "pipeline.rebuild.selection_prior"])
def test_docstring_examples(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


# --- end to end: evaluate on several models, then report and compare ----------------------------


def _stand_in_set(folder, n: int, offset: int, split: str):
    """A tiny ImageNet-labelled set with ImageNetV2's features (ids ``c<offset + i>``) as a Hub-ready folder."""
    import datasets
    from fixtures_imagenetv2 import synthetic_jpeg

    from imagenetv2.classes import imagenet_classes
    from imagenetv2.features import imagenetv2_features
    from pipeline.core.export import ConfigExport, write_hub_folder

    labels = [((i + offset) * 37) % 1000 for i in range(n)]
    rows = {name: [None] * n for name in imagenetv2_features()}
    rows |= {"image": [{"bytes": synthetic_jpeg(c, 9), "path": None} for c in labels], "label": labels,
             "wnid": [imagenet_classes()[c].wnid for c in labels], "candidate_id": [f"c{offset + i}" for i in range(n)]}
    table = datasets.Dataset.from_dict(rows, features=imagenetv2_features())
    return write_hub_folder(folder, [ConfigExport("default", table, default=True, split=split)], "# stand-in", {"license": "mit"})


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.integration
def test_evaluate_then_report_and_compare(tmp_path, capsys, monkeypatch):
    pytest.importorskip("timm", reason="evaluate needs the eval extra (torch, timm)")
    from pipeline.__main__ import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    original = _stand_in_set(tmp_path / "imagenet-val", 40, 0, "validation")
    new = _stand_in_set(tmp_path / "rebuilt", 30, 1000, "test")
    models = [f"--model=timm:{name}" for name in ("test_resnet", "test_efficientnet", "test_convnext")]
    assert main(["evaluate", "--no-progress", *models, "--no-pretrained", "--original", str(original), "--new", str(new),
                 "--batch-size", "8", "--workers", "0", "--n-bootstrap", "200", "--output", str(tmp_path / "eval"),
                 "--cache-dir", str(tmp_path / "cache")]) == 0
    frequencies = tmp_path / "sf.csv"
    ids = [f"c{i}" for i in range(40)] + [f"c{1000 + i}" for i in range(30)]
    frequencies.write_text("candidate_id,selection_frequency\n" + "".join(f"{c},{(i % 10) / 10}\n" for i, c in enumerate(ids)))
    out = tmp_path / "report"
    assert main(["report", str(tmp_path / "eval" / "results.json"), "--output", str(out), "--n-bootstrap", "200",
                 "--selection-frequencies", str(frequencies), "--cache-dir", str(tmp_path / "cache")]) == 0, capsys.readouterr().err
    document = json.loads((out / "report.json").read_text())
    assert document["sets"]["rebuilt@test"]["n_models"] == 3
    assert {e["images_with_selection_frequency"] for e in document["selection_frequency_bins"]["models"]} == {40, 30}
    rows = json.loads((tmp_path / "eval" / "results.json").read_text())["rows"]
    by = {(r["model"], r["dataset"]): r for r in rows}
    entry = next(e for e in document["models"] if e["model"] == "test_resnet")
    assert entry["top1_change"] == pytest.approx(by[("test_resnet", "rebuilt@test")]["top1_accuracy"]
                                                 - by[("test_resnet", "imagenet-val@validation")]["top1_accuracy"])
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "eval"), "--model", "test_resnet", "--model", "test_convnext",
                 "--dataset", "rebuilt@test", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["total"] == 30 and result["accuracy_a"] == pytest.approx(by[("test_resnet", "rebuilt@test")]["top1_accuracy"])
