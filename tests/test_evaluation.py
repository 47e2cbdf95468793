"""Unit tests of the evaluation package's pure parts: specs, label spaces, records, results, fits.

None of these needs torch. Expected values come from the ImageNet class list shipped with the
package (imagenetv2/data/class_info.json), from numpy's least squares (np.polyfit), and from
scipy's exact binomial interval (scipy.stats.binomtest(...).proportion_ci(method="exact")).
"""

import csv
import doctest
import importlib
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats
from scipy.special import ndtri

from imagenetv2.classes import class_names, imagenet_classes, wnids
from pipeline.evaluation import results as R
from pipeline.evaluation.datasets_spec import DatasetSpec, find_columns, parse_dataset_spec
from pipeline.evaluation.labels import LabelSpaceError, dataset_label_space, match_labels, read_label_map
from pipeline.evaluation.models import ModelRecord, load_model_file, parse_model_spec

CIFAR10 = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
DOCS = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.parametrize(
    "name",
    ["pipeline.evaluation.labels", "pipeline.evaluation.datasets_spec", "pipeline.evaluation.results", "pipeline.evaluation.models"],
)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


# --- dataset specs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, path, config, split",
    [
        ("ILSVRC/imagenet-1k@validation", "ILSVRC/imagenet-1k", None, "validation"),
        ("uoft-cs/cifar10@test", "uoft-cs/cifar10", None, "test"),
        ("./imagenetv2:matched-frequency", "./imagenetv2", "matched-frequency", None),
        ("hub/cifar10_1:v4@test", "hub/cifar10_1", "v4", "test"),
        ("./a:b:threshold-0.7", "./a:b", "threshold-0.7", None),
        ("user/repo", "user/repo", None, None),
        ("./x@y/z", "./x@y/z", None, None),  # '@' followed by a path separator is part of the path
    ],
)
def test_parse_dataset_spec(text, path, config, split):
    assert parse_dataset_spec(text) == DatasetSpec(text, path, config, split)


def test_existing_path_with_colon_wins(tmp_path):
    folder = tmp_path / "sets:v2@final"
    folder.mkdir()
    spec = parse_dataset_spec(str(folder))
    assert (spec.path, spec.config, spec.split) == (str(folder), None, None)
    assert spec.name("test") == "sets:v2@final@test"


@pytest.mark.parametrize("text, message", [("", "empty"), ("x:@test", "empty config"), ("x@", "empty split"), (":cfg", "no path")])
def test_bad_dataset_specs(text, message):
    with pytest.raises(ValueError, match=message):
        parse_dataset_spec(text)


def test_find_columns():
    import datasets

    features = datasets.Features({"img": datasets.Image(), "label": datasets.ClassLabel(names=CIFAR10), "index": datasets.Value("int64")})
    assert find_columns(features) == ("img", "label", CIFAR10)
    plain = datasets.Features({"image": datasets.Image(), "label": datasets.Value("int64")})
    with pytest.raises(ValueError, match="not a ClassLabel"):
        find_columns(plain, "'x'")
    with pytest.raises(ValueError, match="no image column"):
        find_columns(datasets.Features({"label": datasets.ClassLabel(names=CIFAR10)}))


# --- label spaces ------------------------------------------------------------------------------


def test_imagenet_is_recognised_from_every_naming():
    hf_names = [", ".join(c.synset) for c in imagenet_classes()]  # as transformers' id2label writes them
    for names in (class_names(), wnids(), hf_names):
        space = dataset_label_space(names)
        assert space.kind == "imagenet-1k" and list(space.keys) == wnids()
    space = dataset_label_space(class_names())
    for names in (hf_names, wnids(), class_names()):
        assert match_labels(1000, names, space).how == "names"


def test_permuted_model_labels_are_reordered():
    space = dataset_label_space(class_names())
    perm = np.random.default_rng(0).permutation(1000)
    match = match_labels(1000, [wnids()[p] for p in perm], space)
    assert match.how == "names-reordered"
    # output dataset_to_model[d] of the model means dataset class d
    assert all(perm[match.dataset_to_model[d]] == d for d in range(1000))


def test_ambiguous_names_in_another_order_are_rejected():
    hf_names = [", ".join(c.synset) for c in imagenet_classes()]
    crane = [i for i, n in enumerate(hf_names) if n == "crane"]
    assert len(crane) == 2  # the bird and the machine are both spelled "crane"
    names = list(reversed(hf_names))
    with pytest.raises(LabelSpaceError, match="'crane' is ambiguous"):
        match_labels(1000, names, dataset_label_space(class_names()))


def test_unnamed_models_are_matched_by_count():
    space = dataset_label_space(class_names())
    assert match_labels(1000, None, space).how == "count"
    assert match_labels(1000, [f"LABEL_{i}" for i in range(1000)], space).how == "count"


def test_background_class_is_rejected_with_the_fix():
    with pytest.raises(LabelSpaceError) as info:
        match_labels(1001, None, dataset_label_space(class_names()), model="model 'tf'", dataset="dataset 'v2'")
    message = str(info.value)
    assert "1001 outputs" in message and "1000 ImageNet-1k classes" in message
    assert "background" in message and "--label-map" in message


def test_cifar_model_on_imagenet_is_rejected():
    with pytest.raises(LabelSpaceError, match="10 outputs but .* 1000 ImageNet-1k classes"):
        match_labels(10, CIFAR10, dataset_label_space(class_names()))
    with pytest.raises(LabelSpaceError, match="does not match|do not match"):
        match_labels(10, ["plane", "car", *CIFAR10[2:]], dataset_label_space(CIFAR10))


def test_cifar_names_match_case_insensitively():
    space = dataset_label_space(CIFAR10)
    assert space.kind == "names"
    assert match_labels(10, [n.upper() for n in CIFAR10], space).how == "names"


def test_label_map_drops_a_background_class(tmp_path):
    space = dataset_label_space(class_names())
    path = tmp_path / "map.json"
    path.write_text(json.dumps([None] + list(range(1000))))
    match = match_labels(1001, None, space, str(path))
    assert match.how == "label-map" and match.dataset_to_model == tuple(range(1, 1001))
    # names and an object form work too
    assert read_label_map({"2": "cat", "0": "dog"}, 3, dataset_label_space(["cat", "dog"])) == (2, 0)


@pytest.mark.parametrize(
    "label_map, message",
    [
        ([0, 1], "3 outputs"),
        ([0, 0, None], "both to class"),
        ([0, None, None], "without an output"),
        ([0, 1, "zebra"], "not one of the dataset's class names"),
        ([0, 1, 7], "outside"),
        ({"5": 0}, "outputs 0..2"),
    ],
)
def test_bad_label_maps(label_map, message):
    with pytest.raises(LabelSpaceError, match=message):
        read_label_map(label_map, 3, dataset_label_space(["cat", "dog"]))


# --- model records -------------------------------------------------------------------------------


def test_model_specs():
    assert parse_model_spec("timm:resnet50.a1_in1k").name == "resnet50.a1_in1k"
    assert parse_model_spec("hf:google/vit-base-patch16-224").name == "google/vit-base-patch16-224"
    for bad in ("resnet50", "torch:resnet50", "timm:"):
        with pytest.raises(ValueError, match="timm:"):
            parse_model_spec(bad)


def test_model_files_json_and_yaml(tmp_path):
    (tmp_path / "maps").mkdir()
    records = [
        {"name": "r", "source": "timm:test_resnet", "batch_size": 8, "kwargs": {"num_classes": 10}},
        {"source": "hf:some/repo", "label_map": "maps/m.json"},
    ]
    (tmp_path / "models.json").write_text(json.dumps(records))
    (tmp_path / "models.yaml").write_text(yaml.safe_dump({"models": records}))
    for name in ("models.json", "models.yaml"):
        loaded = load_model_file(tmp_path / name)
        assert [r.name for r in loaded] == ["r", "some/repo"]
        assert loaded[0].batch_size == 8 and loaded[0].kwargs == {"num_classes": 10}
        assert loaded[1].label_map == str((tmp_path / "maps" / "m.json").resolve())


@pytest.mark.parametrize(
    "content, message",
    [
        ("[]", "non-empty list"),
        ('[{"name": "x"}]', "needs 'source'"),
        ('[{"source": "timm:a", "batchsize": 3}]', "unknown field"),
        ('[{"source": "timm:a", "batch_size": 0}]', "positive integer"),
        ('[{"source": "hf:a", "kwargs": {"x": 1}}]', "timm models only"),
        ("[{", "not valid JSON"),
    ],
)
def test_bad_model_files(tmp_path, content, message):
    path = tmp_path / "models.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_model_file(path)


def test_record_fields_are_documented():
    text = DOCS.read_text(encoding="utf-8")
    for name in ModelRecord.__dataclass_fields__:
        assert f"`{name}`" in text, f"model record field {name} missing from the README"


# --- results and fits ------------------------------------------------------------------------------


def test_columns_are_declared_once_and_documented():
    text = DOCS.read_text(encoding="utf-8")
    documented = re.findall(r"^\| `([a-z0-9_]+)` \| (?:str|int|float|bool) \|", text, flags=re.M)
    assert documented == list(R.COLUMN_NAMES)


def test_score_matches_scipy_exact_intervals():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 10, 200)
    topk = np.stack([rng.permutation(10)[:5] for _ in range(200)])
    for i in range(60):  # at least 60 right at top-1 (each ranked list naming 5 different classes)
        topk[i] = [labels[i], *[c for c in rng.permutation(10) if c != labels[i]][:4]]
    counts = R.score(topk, labels, 0.95)
    top1 = int((topk[:, 0] == labels).sum())
    top5 = int((topk == labels[:, None]).any(axis=1).sum())
    assert (counts["top1_correct"], counts["top5_correct"], counts["total"]) == (top1, top5, 200)
    for k, correct in (("top1", top1), ("top5", top5)):
        ci = stats.binomtest(correct, 200).proportion_ci(0.95, method="exact")
        assert counts[f"{k}_ci_low"] == pytest.approx(ci.low, abs=1e-9)
        assert counts[f"{k}_ci_high"] == pytest.approx(ci.high, abs=1e-9)
        assert counts[f"{k}_accuracy"] == correct / 200


def test_rows_and_csv_follow_the_declared_columns():
    row = R.make_row(model="m", total=3, top1_accuracy=1 / 3)
    assert list(row) == list(R.COLUMN_NAMES)
    with pytest.raises(KeyError, match="not result columns"):
        R.make_row(accuracy=0.5)
    parsed = list(csv.DictReader(io.StringIO(R.rows_to_csv([row]))))
    assert list(parsed[0]) == list(R.COLUMN_NAMES)
    assert float(parsed[0]["top1_accuracy"]) == 1 / 3  # not rounded


def _rows(original, new, accuracies):
    rows = []
    for i, (a, b) in enumerate(accuracies):
        for dataset, acc in ((original, a), (new, b)):
            rows.append(R.make_row(model=f"m{i}", dataset=dataset, status="ok", top1_accuracy=acc))
    return rows


def test_fits_match_least_squares_on_both_scales():
    pairs = [(0.60, 0.48), (0.70, 0.57), (0.75, 0.64), (0.80, 0.68)]
    rows = _rows("orig", "new", pairs)
    rows.append(R.make_row(model="broken", dataset="orig", status="error", error="RuntimeError: x"))
    fits = R.compute_fits(rows, "orig", ["new"], n_bootstrap=2000)
    x, y = np.array(pairs).T
    linear, probit = fits["new"]["linear"], fits["new"]["probit"]
    assert linear["status"] == "ok" and linear["models"] == ["m0", "m1", "m2", "m3"]
    assert (linear["slope"], linear["intercept"]) == pytest.approx(tuple(np.polyfit(x, y, 1)), rel=1e-9)
    assert (probit["slope"], probit["intercept"]) == pytest.approx(tuple(np.polyfit(ndtri(x), ndtri(y), 1)), rel=1e-9)
    assert linear["slope_ci_low"] <= linear["slope"] <= linear["slope_ci_high"]


def test_no_fit_records_why():
    fits = R.compute_fits(_rows("orig", "new", [(0.6, 0.5), (0.7, 0.6)]), "orig", ["new"])
    assert fits["new"]["linear"]["status"] == "no fit" and "at least 3 models" in fits["new"]["linear"]["reason"]
    fits = R.compute_fits(_rows("orig", "new", [(0.0, 0.0), (0.1, 0.05), (0.2, 0.1)]), "orig", ["new"], n_bootstrap=100)
    assert fits["new"]["linear"]["status"] == "ok"
    assert fits["new"]["probit"]["status"] == "no fit" and "exactly 0 or 1" in fits["new"]["probit"]["reason"]


def test_job_keys_are_file_safe():
    assert R.job_key("google/vit-base", "imagenetv2:matched-frequency@test") == "google_vit-base__imagenetv2_matched-frequency_test"
