"""Decode once for many models: groups by preprocessing, pixel stores, bit-identical inputs.

The reference for "the pixels a model sees" is the same model scored alone (its own decoding
pass, no store): every batch handed to its forward must be equal bit for bit.
"""

import doctest
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

torch = pytest.importorskip("torch", reason="the input pipeline needs the eval extra (torch, timm)")
pytest.importorskip("timm", reason="the input pipeline needs the eval extra (torch, timm)")

from pipeline.evaluation import jobs, shared  # noqa: E402
from pipeline.evaluation import results as R  # noqa: E402
from pipeline.evaluation.datasets_spec import parse_dataset_spec  # noqa: E402
from pipeline.evaluation.inputs import TimmCenterCrop  # noqa: E402
from pipeline.evaluation.loaders import FileFetch, ImageRows, StreamSource  # noqa: E402
from pipeline.evaluation.models import ModelRecord, preprocessing_key  # noqa: E402
from pipeline.evaluation.runner import Options, evaluate  # noqa: E402
from pipeline.evaluation.shared import PixelStore, SharedInputs  # noqa: E402
from pipeline.toys.synthetic import photo_like_jpeg  # noqa: E402

pytestmark = pytest.mark.torch

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def test_docstring_examples():
    result = doctest.testmod(shared, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


@pytest.fixture(scope="module")
def photo_rows(tmp_path_factory):
    folder = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(3)
    paths = []
    for i, size in enumerate([(500, 375), (375, 500), (1024, 768), (64, 48), (333, 500)] * 2):
        path = folder / f"{i}.jpeg"
        path.write_bytes(photo_like_jpeg(rng, *size))
        paths.append(str(path))
    preprocess = TimmCenterCrop(img_size=64, crop_pct=0.875, interpolation="bicubic", mean=MEAN, std=STD)
    return ImageRows(FileFetch(paths, list(range(len(paths)))), len(paths), preprocess)


def alone(rows, batch_size=3):
    return [b for b in StreamSource(rows, workers=0).batches(0, batch_size)]


@pytest.mark.parametrize("on_disk", [False, True])
def test_a_store_gives_back_the_pixels_of_a_pass_alone(photo_rows, tmp_path, on_disk):
    folder = tmp_path / "store" if on_disk else None
    store = PixelStore(len(photo_rows), {"size": len(photo_rows), "key": "k"}, folder=folder)
    filled = list(StreamSource(photo_rows, workers=0, sink=store).batches(0, 4))
    assert store.complete and (folder / "meta.json").is_file() if on_disk else store.complete
    for batch_size in (3, 10):
        reference, stored = alone(photo_rows, batch_size), list(store.batches(0, batch_size))
        assert len(reference) == len(stored)
        for a, b in zip(reference, stored):
            assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert torch.equal(torch.cat([b[0] for b in filled]), torch.cat([b[0] for b in store.batches(0, 4)]))
    # resuming a pass from a position (out-of-memory retry) reads the rest
    assert [int(i) for b in store.batches(7, 2) for i in b[2]] == [7, 8, 9]
    if on_disk:
        again = PixelStore.open(folder, {"size": len(photo_rows), "key": "k"})
        assert again is not None and torch.equal(next(again.batches(0, 10))[0], next(store.batches(0, 10))[0])
        assert PixelStore.open(folder, {"size": len(photo_rows), "key": "other"}) is None
        store.release(keep_on_disk=False)
        assert not folder.exists()


def test_a_store_refuses_a_gap(photo_rows):
    store = PixelStore(len(photo_rows), {})
    images, labels, index = alone(photo_rows)[1]
    with pytest.raises(ValueError, match="filled up to 0, cannot store a batch at 3"):
        store.put(3, images, labels, index)


def test_memory_budget_spills_to_a_memory_mapped_file(photo_rows, tmp_path):
    inputs = SharedInputs(tmp_path, memory_gib=0)
    group = SharedInputs.group("set@test", "fp", photo_rows.preprocess.key())
    inputs.expect(group), inputs.expect(group)
    first = inputs.source(group, photo_rows, workers=0, device="cpu")
    list(first.batches(0, 4))
    second = inputs.source(group, photo_rows, workers=0, device="cpu")
    assert type(second).__name__ == "StoreSource" and inputs.decode_passes == 1
    (folder,) = (tmp_path / shared.CACHE_DIR).iterdir()
    assert isinstance(second.store.pixels, np.memmap) and json.loads((folder / "meta.json").read_text())["size"] == 10
    inputs.done(group), inputs.done(group)
    assert folder.is_dir()  # kept for re-runs
    inputs.close()


def test_models_group_by_what_decides_their_pixels():
    keys = {name: preprocessing_key(ModelRecord(source=f"timm:{name}")) for name in ("resnet18", "resnet34", "resnet50", "vgg11", "inception_v3")}
    assert keys["resnet18"] == keys["resnet34"] == keys["resnet50"]  # same resize, crop, interpolation
    assert len({keys["resnet18"], keys["vgg11"], keys["inception_v3"]}) == 3
    # mean and std are applied on the device: they do not split a group
    a = TimmCenterCrop(img_size=224, crop_pct=0.875, interpolation="bilinear", mean=MEAN, std=STD)
    b = TimmCenterCrop(img_size=224, crop_pct=0.875, interpolation="bilinear", mean=(0.5,) * 3, std=(0.5,) * 3)
    assert a.key() == b.key() != TimmCenterCrop(img_size=224, crop_pct=0.875, interpolation="bilinear", mean=MEAN, std=STD, draft=False).key()


# --- end to end ---------------------------------------------------------------------------------

MODELS = [
    ModelRecord(source="timm:test_resnet", name="resnet-a", seed=1),
    ModelRecord(source="timm:test_vit", name="vit"),
    ModelRecord(source="timm:test_resnet", name="resnet-b", seed=2),
    ModelRecord(source="timm:test_resnet", name="resnet-c", seed=3, kwargs={"pretrained_cfg_overlay": {"mean": [0.5] * 3, "std": [0.25] * 3}}),
]


@pytest.fixture()
def recorded(monkeypatch):
    """Every batch each model's forward receives, by model name."""
    seen: dict[str, list] = {}
    real = jobs.load_model

    def recording(record, **kwargs):
        model = real(record, **kwargs)
        forward = model.forward

        def spy(x):
            seen.setdefault(record.name, []).append(x.clone())
            return forward(x)

        model.forward = spy
        return model

    monkeypatch.setattr(jobs, "load_model", recording)
    return seen


def run(output, models, hub, **options):
    original, new = parse_dataset_spec(f"{hub}:matched-frequency"), parse_dataset_spec(f"{hub}:threshold-0.7")
    settings = dict(output=str(output), device="cpu", batch_size=5, workers=0, limit=12, pretrained=False, n_bootstrap=0, progress=False)
    return evaluate(models, original, [new], Options(**{**settings, **options}))


def test_models_sharing_preprocessing_see_the_pixels_they_see_alone(tmp_path, imagenetv2_hub_folder, recorded):
    together = run(tmp_path / "together", MODELS, imagenetv2_hub_folder)
    assert together.errors == 0 and together.ran == 8
    # resnet-a, -b and -c share one pass per dataset (-c differs only in mean/std); vit has its own
    assert together.decode_passes == 2 * 2
    grouped = {name: batches for name, batches in recorded.items()}
    recorded.clear()
    for model in MODELS[2:]:  # the models that read the pixels the first one stored
        solo = run(tmp_path / f"alone-{model.name}", [model], imagenetv2_hub_folder)
        assert solo.decode_passes == 2
        assert len(recorded[model.name]) == len(grouped[model.name]) == 6  # 12 images in batches of 5, two datasets
        assert all(torch.equal(a, b) for a, b in zip(recorded[model.name], grouped[model.name]))
        for dataset in ("imagenetv2:matched-frequency@test", "imagenetv2:threshold-0.7@test"):
            key = R.job_key(model.name, dataset)
            a = R.read_predictions(tmp_path / "together" / R.PREDICTIONS_DIR / f"{key}.npz")
            b = R.read_predictions(tmp_path / f"alone-{model.name}" / R.PREDICTIONS_DIR / f"{key}.npz")
            assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not (tmp_path / "together" / shared.CACHE_DIR).exists()  # fitted in memory: nothing on disk


def test_the_disk_cache_is_reused_by_a_later_model_and_removed_with_no_cache(tmp_path, imagenetv2_hub_folder, recorded):
    output = tmp_path / "eval"
    first = run(output, MODELS[:3], imagenetv2_hub_folder, cache_memory=0)
    assert first.decode_passes == 4
    cached = sorted(p.name for p in (output / shared.CACHE_DIR).iterdir())
    assert len(cached) == 2  # the resnet group on each dataset (vit was alone: nothing kept)
    # a model added later to the sweep decodes nothing: it reads the stored pixels
    added = run(output, MODELS, imagenetv2_hub_folder, cache_memory=0)
    assert (added.ran, added.skipped, added.decode_passes) == (2, 6, 0)
    from_cache = recorded.pop("resnet-c")
    solo = run(tmp_path / "solo", MODELS[3:], imagenetv2_hub_folder)
    assert solo.decode_passes == 2 and len(from_cache) == len(recorded["resnet-c"]) == 6
    assert all(torch.equal(a, b) for a, b in zip(from_cache, recorded["resnet-c"]))
    done = run(output, MODELS, imagenetv2_hub_folder, cache_memory=0, cache=False)
    assert done.ran == 0 and not (output / shared.CACHE_DIR).exists()
    assert sorted(p.name for p in output.iterdir()) == sorted([".imagenetv2-hf.json", "fit.png", "predictions", "results.csv", "results.json", "runs"])
