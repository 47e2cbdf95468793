"""End-to-end tests of ``python -m pipeline evaluate`` on the synthetic sets.

Models are randomly initialised tiny timm models (``test_*``) and a tiny transformers ViT saved
locally with ``save_pretrained``; datasets are the builders' synthetic Hub folders (ImageNetV2,
CIFAR-10.1) plus stand-in "original" sets in the same label spaces written here. Expected values
are recomputed independently: counts from the saved predictions and the dataset's own labels,
intervals from scipy's exact binomial interval, fits from numpy's least squares, and timm logits
from timm's own transform and a fresh model.
"""

import io
import json
import logging
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402
from scipy.special import ndtri  # noqa: E402

import datasets  # noqa: E402
from fixtures_imagenetv2 import synthetic_jpeg  # noqa: E402
from imagenetv2.classes import imagenet_classes  # noqa: E402
from imagenetv2.features import imagenetv2_features  # noqa: E402
from pipeline.__main__ import main  # noqa: E402
from pipeline.evaluation import results as R  # noqa: E402
from pipeline.evaluation.sampling import limit_sample  # noqa: E402
from pipeline.core.export import ConfigExport, write_hub_folder  # noqa: E402

torch = pytest.importorskip("torch", reason="the evaluate command needs the eval extra (torch, timm, transformers)")

pytestmark = [pytest.mark.torch, pytest.mark.integration]

CIFAR10 = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
TIMM_IMAGENET = ["test_resnet", "test_efficientnet", "test_convnext"]


# --- fixtures: stand-in original sets and a tiny transformers model -------------------------------


def _png(array) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def hf_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("hf-datasets-cache"))


@pytest.fixture(scope="module")
def imagenet_original(tmp_path_factory):
    """A stand-in ImageNet validation set: 60 tiny JPEGs, ImageNetV2's features, one split named validation."""
    n = 60
    labels = [(i * 37) % 1000 for i in range(n)]
    rows = {name: [None] * n for name in imagenetv2_features()}
    rows["image"] = [{"bytes": synthetic_jpeg(c, 9), "path": None} for c in labels]
    rows["label"] = labels
    rows["wnid"] = [imagenet_classes()[c].wnid for c in labels]
    rows["candidate_id"] = [f"val{i}" for i in range(n)]
    table = datasets.Dataset.from_dict(rows, features=imagenetv2_features())
    folder = tmp_path_factory.mktemp("imagenet-original") / "imagenet-val"
    return write_hub_folder(folder, [ConfigExport("default", table, default=True, split="validation")], "# stand-in", {"license": "mit"})


@pytest.fixture(scope="module")
def cifar10_original(tmp_path_factory):
    """A stand-in CIFAR-10 test set laid out like uoft-cs/cifar10 (columns img, label), classes unevenly frequent."""
    rng = np.random.default_rng(7)
    n = 400
    labels = rng.choice(10, size=n, p=np.arange(1, 11) / 55)
    features = datasets.Features({"img": datasets.Image(), "label": datasets.ClassLabel(names=CIFAR10)})
    images = [{"bytes": _png(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)), "path": None} for _ in range(n)]
    table = datasets.Dataset.from_dict({"img": images, "label": labels.tolist()}, features=features)
    folder = tmp_path_factory.mktemp("cifar-original") / "cifar10"
    return write_hub_folder(folder, [ConfigExport("plain_text", table, default=True)], "# stand-in", {"license": "mit"})


@pytest.fixture(scope="module")
def tiny_vit(tmp_path_factory):
    """A randomly initialised ViTForImageClassification with ImageNet's labels as transformers writes them."""
    from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor

    names = [", ".join(c.synset) for c in imagenet_classes()]
    config = ViTConfig(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=37, num_labels=1000, id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)},
    )
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("models") / "tiny-vit"
    ViTForImageClassification(config).save_pretrained(folder)
    ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder


def run_cli(*args) -> int:
    return main(["evaluate", "--no-progress", "--n-bootstrap", "2000", *map(str, args)])


def load_rows(output):
    return json.loads((output / R.RESULTS_JSON).read_text())["rows"]


def dataset_labels(folder, config, split):
    """Every label of the split, in row order."""
    table = datasets.load_dataset(str(folder), config, split=split)
    return np.asarray(table["label"])


def scored_rows(all_labels, limit):
    """The rows a run scores: all, or the --limit sample spread over the classes."""
    return np.arange(len(all_labels)) if limit is None else limit_sample(all_labels, limit)


def assert_counts_match_predictions(output, row, all_labels):
    """The row's counts and intervals, recomputed from its predictions file and the dataset's labels."""
    saved = R.read_predictions(output / row["predictions"])
    n = row["total"]
    rows = scored_rows(all_labels, row["limit"])
    assert len(rows) == n
    assert np.array_equal(saved["index"], rows)
    labels = all_labels[rows]
    assert np.array_equal(saved["label"], labels)
    assert saved["topk"].shape == (n, 5) and saved["topk_logits"].shape == (n, 5)
    assert all(len(set(r)) == 5 for r in saved["topk"].tolist())
    assert np.all(np.diff(saved["topk_logits"], axis=1) <= 0)  # best first
    top1 = int((saved["topk"][:, 0] == labels).sum())
    top5 = int((saved["topk"] == labels[:, None]).any(axis=1).sum())
    assert (row["top1_correct"], row["top5_correct"]) == (top1, top5)
    assert row["top1_accuracy"] == top1 / n and row["top5_accuracy"] == top5 / n
    for k, correct in (("top1", top1), ("top5", top5)):
        ci = stats.binomtest(correct, n).proportion_ci(0.95, method="exact")
        assert row[f"{k}_ci_low"] == pytest.approx(ci.low, abs=1e-9)
        assert row[f"{k}_ci_high"] == pytest.approx(ci.high, abs=1e-9)


# --- tests -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_scores_imagenet_models_on_original_and_new(tmp_path, imagenet_original, imagenetv2_hub_folder, tiny_vit, hf_cache, caplog):
    output = tmp_path / "eval"
    limit = 30
    caplog.set_level(logging.INFO)
    models = [f"--model=timm:{name}" for name in TIMM_IMAGENET] + [f"--model=hf:{tiny_vit}"]
    code = run_cli(
        *models, "--no-pretrained", "--original", imagenet_original,
        "--new", f"{imagenetv2_hub_folder}:matched-frequency", "--new", f"{imagenetv2_hub_folder}:threshold-0.7",
        "--limit", limit, "--batch-size", 8, "--workers", 1, "--output", output, "--cache-dir", hf_cache,
    )
    assert code == 0
    rows = load_rows(output)
    datasets_ = ["imagenet-val@validation", "imagenetv2:matched-frequency@test", "imagenetv2:threshold-0.7@test"]
    assert [(r["model"], r["dataset"]) for r in rows] == [(m, d) for m in [*TIMM_IMAGENET, "tiny-vit"] for d in datasets_]
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    labels = {
        datasets_[0]: dataset_labels(imagenet_original, None, "validation"),
        datasets_[1]: dataset_labels(imagenetv2_hub_folder, "matched-frequency", "test"),
        datasets_[2]: dataset_labels(imagenetv2_hub_folder, "threshold-0.7", "test"),
    }
    for row in rows:
        assert row["total"] == limit and row["limit"] == limit
        assert row["split_size"] == (60 if row["role"] == "original" else 10_000)
        assert row["label_match"] == ("names" if row["model"] == "tiny-vit" else "count")
        assert row["images_per_second"] > 0
        assert_counts_match_predictions(output, row, labels[row["dataset"]])
    # the table, both ways
    import csv

    with open(output / R.RESULTS_CSV, newline="") as f:
        table = list(csv.DictReader(f))
    assert list(table[0]) == list(R.COLUMN_NAMES) and len(table) == len(rows)
    assert [float(t["top1_accuracy"]) for t in table] == [r["top1_accuracy"] for r in rows]
    assert rows == [json.loads((output / "runs" / f"{R.job_key(r['model'], r['dataset'])}.json").read_text())["row"] for r in rows]
    # fits: one per new set and scale, each either a fit or the reason there is none
    fits = json.loads((output / R.RESULTS_JSON).read_text())["fits"]
    assert set(fits) == set(datasets_[1:])
    for per_scale in fits.values():
        assert set(per_scale) == {"linear", "probit"}
        for fit in per_scale.values():
            assert fit["status"] == "ok" or fit["reason"]
    # the plot: a PNG with one panel per new set
    from PIL import Image

    with Image.open(output / R.FIT_PNG) as png:
        assert png.format == "PNG" and png.size[0] > 1.8 * png.size[1] and png.size[1] >= 500
    assert "images/s" in caplog.text


def test_timm_predictions_match_timm_reference(tmp_path, imagenetv2_hub_folder, imagenet_original, hf_cache):
    """Our fast input path and label handling give the logits of timm's own transform on full decodes."""
    import timm
    from PIL import Image

    output = tmp_path / "eval"
    limit = 12
    code = run_cli(
        "--model", "timm:test_resnet", "--no-pretrained", "--no-draft", "--original", imagenet_original,
        "--new", f"{imagenetv2_hub_folder}:top-images", "--limit", limit, "--workers", 0, "--output", output,
        "--cache-dir", hf_cache,
    )
    assert code == 0
    row = next(r for r in load_rows(output) if r["role"] == "new")
    saved = R.read_predictions(output / row["predictions"])
    torch.manual_seed(0)  # the record's default seed
    model = timm.create_model("test_resnet", pretrained=False).eval()
    transform = timm.data.create_transform(**timm.data.resolve_data_config({}, model=model))
    table = datasets.load_dataset(str(imagenetv2_hub_folder), "top-images", split="test")
    assert np.array_equal(saved["index"], limit_sample(table["label"], limit))
    table = table.select(saved["index"])
    images = torch.stack([transform(Image.open(io.BytesIO(x["bytes"])).convert("RGB")) for x in table.cast_column("image", datasets.Image(decode=False))["image"]])
    with torch.inference_mode():
        reference = model(images).numpy()
    np.testing.assert_allclose(saved["topk_logits"], np.take_along_axis(reference, saved["topk"].astype(np.int64), 1), rtol=1e-4, atol=1e-5)
    expected_top5 = np.argsort(-reference, axis=1, kind="stable")[:, :5]
    assert np.array_equal(np.sort(saved["topk"], axis=1), np.sort(expected_top5, axis=1))


def _fit_models(tmp_path):
    """Random 10-class timm models that take 32-pixel inputs (CIFAR-sized)."""
    overlay = {"input_size": [3, 32, 32], "crop_pct": 1.0, "interpolation": "bilinear"}
    records = [
        {"name": "resnet", "source": "timm:test_resnet", "kwargs": {"num_classes": 10, "pretrained_cfg_overlay": overlay}},
        {"name": "convnext", "source": "timm:test_convnext", "kwargs": {"num_classes": 10, "pretrained_cfg_overlay": overlay}},
        {"name": "efficientnet", "source": "timm:test_efficientnet", "kwargs": {"num_classes": 10, "pretrained_cfg_overlay": overlay}},
        {"name": "vit", "source": "timm:test_vit", "seed": 3, "kwargs": {"num_classes": 10, "img_size": 32, "pretrained_cfg_overlay": overlay}},
    ]
    path = tmp_path / "models.json"
    path.write_text(json.dumps(records))
    return path


@pytest.mark.slow
def test_cifar_fit_across_models(tmp_path, cifar10_original, cifar10_1_hub_folder, hf_cache):
    output = tmp_path / "eval"
    code = run_cli(
        "--models", _fit_models(tmp_path), "--no-pretrained", "--original", f"{cifar10_original}:plain_text",
        "--new", f"{cifar10_1_hub_folder}:v6", "--new", f"{cifar10_1_hub_folder}:v4",
        "--batch-size", 256, "--workers", 0, "--output", output, "--cache-dir", hf_cache,
    )
    assert code == 0
    rows = load_rows(output)
    assert len(rows) == 12 and all(r["status"] == "ok" for r in rows)
    assert {r["dataset"]: r["total"] for r in rows} == {"cifar10:plain_text@test": 400, "hub:v6@test": 2000, "hub:v4@test": 2021}
    fits = json.loads((output / R.RESULTS_JSON).read_text())["fits"]
    for new in ("hub:v6@test", "hub:v4@test"):
        x = np.array([r["top1_accuracy"] for r in rows if r["role"] == "original"])
        y = np.array([r["top1_accuracy"] for r in rows if r["dataset"] == new])
        assert np.ptp(x) > 0, f"precondition: the random models' original accuracies differ ({x})"
        linear = fits[new]["linear"]
        assert linear["status"] == "ok" and linear["n_models"] == 4 and linear["models"] == ["resnet", "convnext", "efficientnet", "vit"]
        assert (linear["slope"], linear["intercept"]) == pytest.approx(tuple(np.polyfit(x, y, 1)), rel=1e-9, abs=1e-12)
        assert linear["n_bootstrap"] == 2000 and linear["slope_ci_low"] <= linear["slope"] <= linear["slope_ci_high"]
        probit = fits[new]["probit"]
        assert probit["status"] == "ok"
        assert probit["slope"] == pytest.approx(np.polyfit(ndtri(x), ndtri(y), 1)[0], rel=1e-9)
    labels = dataset_labels(cifar10_1_hub_folder, "v4", "test")
    for row in rows:
        if row["dataset"] == "hub:v4@test":
            assert_counts_match_predictions(output, row, labels)
    assert (output / R.FIT_PNG).stat().st_size > 10_000


def test_resume_after_an_interrupted_run(tmp_path, monkeypatch, imagenet_original, imagenetv2_hub_folder, hf_cache, capsys):
    from pipeline.evaluation import jobs as runner

    output = tmp_path / "eval"

    def args(limit=10):
        return (
            "--model", "timm:test_resnet", "--model", "timm:test_convnext", "--no-pretrained",
            "--original", imagenet_original, "--new", f"{imagenetv2_hub_folder}:matched-frequency",
            "--limit", limit, "--workers", 0, "--output", output, "--cache-dir", hf_cache,
        )

    real_score_job = runner.score_job
    calls = []

    def interrupted(*a, **k):  # the process is stopped while scoring the second job
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_score_job(*a, **k)

    monkeypatch.setattr(runner, "score_job", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_cli(*args())
    assert sorted(p.name for p in (output / "runs").iterdir()) == ["test_resnet__imagenet-val_validation.json"]
    assert not (output / R.RESULTS_JSON).exists()
    first = (output / "runs" / "test_resnet__imagenet-val_validation.json").read_text()

    monkeypatch.setattr(runner, "score_job", real_score_job)
    capsys.readouterr()
    assert run_cli(*args()) == 0
    assert "(3 run now, 1 reused)" in capsys.readouterr().out
    assert (output / "runs" / "test_resnet__imagenet-val_validation.json").read_text() == first
    assert len(load_rows(output)) == 4
    assert run_cli(*args()) == 0
    assert "(0 run now, 4 reused)" in capsys.readouterr().out
    # a setting that changes the numbers invalidates the stored results
    assert run_cli(*args(limit=5)) == 0
    assert "(4 run now, 0 reused)" in capsys.readouterr().out
    assert {r["total"] for r in load_rows(output)} == {5}


def test_failures_and_label_space_mismatches_are_error_rows(tmp_path, imagenet_original, imagenetv2_hub_folder, hf_cache, capsys):
    output = tmp_path / "eval"
    background_first = tmp_path / "background_first.json"
    background_first.write_text(json.dumps([None] + list(range(1000))))
    records = [
        {"name": "ok", "source": "timm:test_resnet"},
        {"name": "missing", "source": "timm:no_such_model_anywhere"},
        {"name": "with-background", "source": "timm:test_resnet", "kwargs": {"num_classes": 1001}},
        {"name": "cifar-model", "source": "timm:test_resnet", "kwargs": {"num_classes": 10}},
        {"name": "background-mapped", "source": "timm:test_resnet", "kwargs": {"num_classes": 1001}, "label_map": str(background_first)},
    ]
    (tmp_path / "models.json").write_text(json.dumps(records))
    args = (
        "--models", tmp_path / "models.json", "--no-pretrained", "--original", imagenet_original,
        "--new", f"{imagenetv2_hub_folder}:matched-frequency", "--limit", 8, "--workers", 0,
        "--output", output, "--cache-dir", hf_cache,
    )
    assert run_cli(*args) == 1
    captured = capsys.readouterr()
    assert "6 (model, dataset) pairs failed" in captured.err
    rows = {(r["model"], r["role"]): r for r in load_rows(output)}
    assert len(rows) == 10
    for role in ("original", "new"):
        assert rows[("ok", role)]["status"] == "ok"
        mapped = rows[("background-mapped", role)]
        assert mapped["status"] == "ok" and mapped["label_match"] == "label-map"
        missing = rows[("missing", role)]
        assert missing["status"] == "error" and "Unknown model (no_such_model_anywhere)" in missing["error"]
        background = rows[("with-background", role)]["error"]
        assert background.startswith("LabelSpaceError") and "1001 outputs" in background and "background" in background
        cifar = rows[("cifar-model", role)]["error"]
        assert "10 outputs" in cifar and "1000 ImageNet-1k classes" in cifar
        assert rows[("missing", role)]["total"] is None and rows[("missing", role)]["top1_accuracy"] is None
    # a mapped background class: predictions never name it; scores are over the 1000 classes
    saved = R.read_predictions(output / rows[("background-mapped", "new")]["predictions"])
    assert saved["topk"].max() < 1000
    # error rows are retried on the next run; finished ones are not
    assert run_cli(*args) == 1
    assert "(6 run now, 4 reused)" in capsys.readouterr().out


def test_out_of_memory_retries_with_half_the_batch(tmp_path, monkeypatch, imagenet_original, imagenetv2_hub_folder, hf_cache):
    from pipeline.evaluation import jobs as runner

    def run(output, *extra):
        return run_cli(
            "--model", "timm:test_resnet", "--no-pretrained", "--original", imagenet_original,
            "--new", f"{imagenetv2_hub_folder}:matched-frequency", "--limit", 20, "--workers", 0,
            "--batch-size", 16, "--output", output, "--cache-dir", hf_cache, *extra,
        )

    assert run(tmp_path / "plain") == 0
    real_load_model = runner.load_model
    attempts = []

    def load_with_small_memory(*a, **k):  # a device that only fits 4 images at a time
        model = real_load_model(*a, **k)
        forward = model.forward

        def limited(x):
            attempts.append(x.shape[0])
            if x.shape[0] > 4:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return forward(x)

        model.forward = limited
        return model

    monkeypatch.setattr(runner, "load_model", load_with_small_memory)
    assert run(tmp_path / "oom") == 0
    assert attempts[:3] == [16, 8, 4]
    for plain, oom in zip(load_rows(tmp_path / "plain"), load_rows(tmp_path / "oom")):
        assert oom["status"] == "ok" and oom["batch_size"] == 4 and plain["batch_size"] == 16
        assert (oom["top1_correct"], oom["top5_correct"]) == (plain["top1_correct"], plain["top5_correct"])
        a, b = R.read_predictions(tmp_path / "plain" / plain["predictions"]), R.read_predictions(tmp_path / "oom" / oom["predictions"])
        assert all(np.array_equal(a[k], b[k]) for k in ("index", "label", "topk"))


def test_out_of_memory_at_batch_size_one_is_an_error_row(tmp_path, monkeypatch, imagenet_original, imagenetv2_hub_folder, hf_cache):
    from pipeline.evaluation import jobs as runner

    real_load_model = runner.load_model

    def never_fits(*a, **k):
        model = real_load_model(*a, **k)

        def forward(x):
            raise RuntimeError("CUDA error: out of memory")

        model.forward = forward
        return model

    monkeypatch.setattr(runner, "load_model", never_fits)
    code = run_cli(
        "--model", "timm:test_resnet", "--no-pretrained", "--original", imagenet_original,
        "--new", f"{imagenetv2_hub_folder}:matched-frequency", "--limit", 4, "--workers", 0, "--batch-size", 4,
        "--output", tmp_path / "eval", "--cache-dir", hf_cache,
    )
    assert code == 1
    assert all("out of memory" in r["error"] for r in load_rows(tmp_path / "eval"))


@pytest.mark.slow
def test_ray_local_gives_the_local_results(tmp_path, imagenet_original, imagenetv2_hub_folder, tiny_vit, hf_cache):
    ray = pytest.importorskip("ray")
    args = (
        "--model", "timm:test_resnet", "--model", "timm:test_vit", "--model", f"hf:{tiny_vit}",
        "--model", "timm:no_such_model_anywhere", "--no-pretrained", "--original", imagenet_original,
        "--new", f"{imagenetv2_hub_folder}:matched-frequency", "--limit", 10, "--workers", 0, "--cache-dir", hf_cache,
    )
    assert run_cli(*args, "--output", tmp_path / "local") == 1
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        assert run_cli(*args, "--output", tmp_path / "ray", "--ray", "local") == 1
    finally:
        ray.shutdown()
    local, distributed = load_rows(tmp_path / "local"), load_rows(tmp_path / "ray")
    assert [(r["model"], r["dataset"], r["status"]) for r in distributed] == [(r["model"], r["dataset"], r["status"]) for r in local]
    assert [r["source"] for r in distributed] == [r["source"] for r in local]  # as written, not made absolute
    for a, b in zip(local, distributed):
        if a["status"] != "ok":
            assert "Unknown model" in b["error"]
            continue
        assert {k: a[k] for k in ("total", "top1_correct", "top5_correct", "top1_ci_low")} == {k: b[k] for k in ("total", "top1_correct", "top5_correct", "top1_ci_low")}
        pa, pb = R.read_predictions(tmp_path / "local" / a["predictions"]), R.read_predictions(tmp_path / "ray" / b["predictions"])
        assert np.array_equal(pa["topk"], pb["topk"])
    assert (tmp_path / "ray" / R.FIT_PNG).is_file()


def test_bad_command_lines_say_what_is_wrong(tmp_path, imagenet_original, capsys):
    assert run_cli("--model", "resnet50", "--original", imagenet_original, "--new", imagenet_original, "--output", tmp_path) == 2
    assert "must be 'timm:<name>' or 'hf:<repo or folder>'" in capsys.readouterr().err
    assert run_cli("--model", "timm:test_resnet", "--original", f"{imagenet_original}@test", "--new", imagenet_original, "--output", tmp_path) == 2
    assert "has no split 'test'; its splits are ['validation']" in capsys.readouterr().err
    assert run_cli("--model", "timm:test_resnet", "--original", imagenet_original, "--new", imagenet_original, "--output", tmp_path) == 2
    assert "datasets must be distinct" in capsys.readouterr().err
    assert run_cli("--model", "timm:a", "--model", "timm:a", "--original", imagenet_original, "--new", f"{imagenet_original}@validation", "--output", tmp_path) == 2
    assert "two models are named 'a'" in capsys.readouterr().err
