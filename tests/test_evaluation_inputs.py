"""The fast input path against the reference preprocessing it replaces.

The reference is timm's own eval transform (``timm.data.create_transform``) on a full Pillow
decode, and a transformers image processor on the full decode: what the model's authors use.
"""

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import datasets
from pipeline.toys.synthetic import photo_like_jpeg, tiny_jpeg

torch = pytest.importorskip("torch", reason="the input pipeline needs the eval extra (torch, timm)")
timm = pytest.importorskip("timm", reason="the input pipeline needs the eval extra (torch, timm)")

from pipeline.evaluation.inputs import (  # noqa: E402
    FileFetch,
    ImageRows,
    ProcessorTransform,
    TableFetch,
    TimmCenterCrop,
    TimmTransform,
    draft_decode,
    make_loader,
    timm_preprocessing,
)

pytestmark = pytest.mark.torch

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def config(interpolation="bilinear", size=224, crop_pct=0.875, crop_mode="center"):
    return {"input_size": (3, size, size), "interpolation": interpolation, "mean": MEAN, "std": STD, "crop_pct": crop_pct, "crop_mode": crop_mode}


def reference(cfg, data):
    return timm.data.create_transform(**cfg)(Image.open(io.BytesIO(data)).convert("RGB"))


def ours(preprocess, data):
    return preprocess.finish(preprocess(data)[None], "cpu")[0]


def grey_levels(a, b):
    """Absolute differences of two normalised images, in grey levels (0..255 units)."""
    return ((a - b) * torch.tensor(STD).view(3, 1, 1) * 255).abs()


@pytest.fixture(scope="module")
def photos():
    rng = np.random.default_rng(0)
    return {size: photo_like_jpeg(rng, *size) for size in [(500, 375), (375, 500), (333, 500), (1024, 768), (64, 48)]}


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic", "lanczos"])
@pytest.mark.parametrize("size", [(500, 375), (375, 500), (333, 500), (1024, 768), (64, 48)])
def test_center_crop_matches_timm_within_one_grey_level(photos, size, interpolation):
    cfg = config(interpolation)
    preprocess = timm_preprocessing(cfg, draft=False)
    assert isinstance(preprocess, TimmCenterCrop)
    diff = grey_levels(ours(preprocess, photos[size]), reference(cfg, photos[size]))
    assert diff.max() <= 1 + 1e-3
    assert diff.mean() < 0.01  # rounding differences on under 1% of values


def test_draft_mode_only_where_the_image_is_twice_the_target(photos):
    cfg = config()
    # 500x375 -> 341x256: not twice the target, decoded at full size: the same pixels as without draft
    exact, fast = timm_preprocessing(cfg, draft=False), timm_preprocessing(cfg, draft=True)
    assert torch.equal(exact(photos[(500, 375)]), fast(photos[(500, 375)]))
    image, factor = draft_decode(Image.open(io.BytesIO(photos[(500, 375)])), (341, 256))
    assert factor == 1 and image.size == (500, 375)
    # 1024x768 -> 341x256: decoded at half size; close to, but not the same as, the full decode
    image, factor = draft_decode(Image.open(io.BytesIO(photos[(1024, 768)])), (341, 256))
    assert factor == 2 and image.size == (512, 384)
    diff = grey_levels(ours(fast, photos[(1024, 768)]), reference(cfg, photos[(1024, 768)]))
    assert 0 < diff.mean() < 3 and diff.max() < 32
    # not a JPEG: nothing to draft
    png = io.BytesIO()
    Image.new("RGB", (1000, 1000)).save(png, format="PNG")
    assert draft_decode(Image.open(png), (100, 100))[1] == 1


def test_other_timm_transforms_run_timm_itself(photos):
    for cfg in (config(crop_mode="squash"), config(crop_pct=1.1), config(crop_mode="border")):
        preprocess = timm_preprocessing(cfg)
        assert isinstance(preprocess, TimmTransform)
        assert grey_levels(ours(preprocess, photos[(333, 500)]), reference(cfg, photos[(333, 500)])).max() < 1e-3


def test_grayscale_and_cmyk_jpegs_become_rgb():
    cfg = config()
    for mode in ("L", "CMYK"):
        buffer = io.BytesIO()
        Image.new(mode, (300, 200), 90).save(buffer, format="JPEG")
        out = timm_preprocessing(cfg)(buffer.getvalue())
        assert out.shape == (224, 224, 3) and out.dtype == torch.uint8


def test_processor_transform_matches_the_processor(photos):
    from transformers import ConvNextImageProcessor, ViTImageProcessor

    for processor in (ViTImageProcessor(size={"height": 64, "width": 64}), ConvNextImageProcessor(size={"shortest_edge": 64}, crop_pct=0.875)):
        transform = ProcessorTransform(processor, draft=False)
        data = photos[(500, 375)]
        expected = processor(images=Image.open(io.BytesIO(data)).convert("RGB"), return_tensors="pt")["pixel_values"][0]
        assert torch.allclose(transform.finish(transform(data)[None], "cpu")[0], expected)
    assert ProcessorTransform(ViTImageProcessor(size={"height": 224, "width": 224})).target == ("exact", 224, 224)
    assert ProcessorTransform(ConvNextImageProcessor(size={"shortest_edge": 224}, crop_pct=0.875)).target == ("shortest", 256, 256)


def test_finish_layouts():
    batch = torch.randint(0, 256, (2, 8, 8, 3), dtype=torch.uint8)
    pre = TimmCenterCrop(img_size=8, crop_pct=1.0, interpolation="bilinear", mean=MEAN, std=STD)
    plain, last = pre.finish(batch, "cpu"), pre.finish(batch, "cpu", channels_last=True)
    assert plain.shape == (2, 3, 8, 8) and plain.is_contiguous()
    assert last.is_contiguous(memory_format=torch.channels_last)
    expected = (batch.permute(0, 3, 1, 2).float() / 255 - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)
    assert torch.allclose(plain, expected, atol=1e-6) and torch.equal(plain, last)


def test_loader_keeps_row_order_with_workers():
    n = 23
    labels = [(i * 7) % 10 for i in range(n)]
    table = datasets.Dataset.from_dict(
        {"img": [{"bytes": tiny_jpeg(i, size=16), "path": None} for i in range(n)], "label": labels},
        features=datasets.Features({"img": datasets.Image(), "label": datasets.ClassLabel(num_classes=10)}),
    )
    pre = timm_preprocessing(config(size=16, crop_pct=1.0))
    rows = ImageRows(TableFetch(table, "img", "label"), n, pre)
    results = []
    for workers in (0, 2):
        batches = list(make_loader(rows, batch_size=5, num_workers=workers))
        assert [len(b[2]) for b in batches] == [5, 5, 5, 5, 3]
        results.append(tuple(torch.cat([b[i] for b in batches]) for i in range(3)))
    assert all(torch.equal(a, b) for a, b in zip(*results))
    images, got_labels, index = results[0]
    assert index.tolist() == list(range(n)) and got_labels.tolist() == labels
    assert torch.equal(images[3], pre(tiny_jpeg(3, size=16)))
    # resuming from a position (as after an out-of-memory retry) gives the remaining rows
    assert [int(i) for _, _, i in (rows.subset(20)[p] for p in range(3))] == [20, 21, 22]


def test_file_rows(tmp_path):
    paths = []
    for i in range(3):
        path = tmp_path / f"{i}.jpeg"
        path.write_bytes(tiny_jpeg(i, size=40))
        paths.append(str(path))
    rows = ImageRows(FileFetch(paths, [2, 1, 0]), 3, timm_preprocessing(config(size=32)))
    image, label, index = rows[1]
    assert image.shape == (32, 32, 3) and (label, index) == (1, 1)


@pytest.mark.slow
def test_benchmark_runs_and_prints_its_ratio():
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_eval_input.py"
    out = subprocess.run(
        [sys.executable, str(script), "--images", "24", "--repeats", "1", "--workers", "1", "--sizes", "500x375", "--sweep-images", "12"],
        capture_output=True, text=True, timeout=600, check=True,
    ).stdout
    assert "ratio vs torchvision" in out and "500x375" in out and "images/s" in out
    assert "simplejpeg (libjpeg-turbo)" in out and "same pixels" in out  # the decoder comparison
    assert "sweep: 10 timm models" in out and "shared vs alone" in out
    passes = [int(line.split("decoding passes")[0].split()[-1]) for line in out.splitlines() if "decoding passes" in line]
    assert passes[0] == 10 and 1 <= passes[1] < 10  # one pass per model alone, one per group shared
