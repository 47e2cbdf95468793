"""The GPU input path's batching code, run on the CPU (no GPU in CI).

With ``decode_on="device"`` the workers hand over JPEG bytes (and pixels for what the device
decoder cannot take), the collate keeps them as a list, and ``finish`` decodes the batch in one
``torchvision.io.decode_jpeg`` call on the batch's device (nvJPEG on CUDA; libjpeg-turbo here),
then resizes, crops and normalises there. On the CPU the decoder is the same libjpeg-turbo as the
workers' path, so the pixels must agree with it (to the one grey level the resize kernels'
memory layouts may differ by).
"""

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch", reason="the input pipeline needs the eval extra (torch, timm)")

from pipeline.evaluation.inputs import TimmCenterCrop  # noqa: E402
from pipeline.evaluation.loaders import FileFetch, ImageRows, stream  # noqa: E402
from pipeline.evaluation.predict import predict  # noqa: E402
from pipeline.toys.synthetic import photo_like_jpeg  # noqa: E402

pytestmark = pytest.mark.torch

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jpegs")
    rng = np.random.default_rng(5)
    paths = []
    for i, size in enumerate([(500, 375), (375, 500), (1024, 768), (333, 500), (640, 480), (300, 200), (96, 64)]):
        path = folder / f"{i}.jpeg"
        path.write_bytes(photo_like_jpeg(rng, *size))
        paths.append(str(path))
    png = folder / "png.jpeg"  # not a JPEG: decoded in the worker even on the device path
    buffer = io.BytesIO()
    Image.new("RGB", (200, 150), (10, 200, 30)).save(buffer, format="PNG")
    png.write_bytes(buffer.getvalue())
    return paths + [str(png)]


def preprocessing(decode_on, draft=False):
    return TimmCenterCrop(img_size=64, crop_pct=0.875, interpolation="bilinear", mean=MEAN, std=STD, draft=draft, decode_on=decode_on)


def batches(paths, pre, workers):
    rows = ImageRows(FileFetch(paths, list(range(len(paths)))), len(paths), pre)
    return list(stream(rows, workers, "cpu").batches(0, 3))


@pytest.mark.parametrize("workers", [0, 2])
def test_device_decoding_batches_give_the_workers_pixels(files, workers):
    device, cpu = preprocessing("device"), preprocessing("workers")
    got = batches(files, device, workers)
    assert isinstance(got[0][0], list) and got[0][0][0].dim() == 1  # JPEG bytes, decoded in finish()
    assert got[-1][0][-1].dim() == 3  # the PNG: pixels from the worker
    expected = batches(files, cpu, workers)
    for (images, labels, index), (reference, ref_labels, ref_index) in zip(got, expected):
        assert torch.equal(labels, ref_labels) and torch.equal(index, ref_index)
        ours, theirs = device.finish(images, "cpu"), cpu.finish(reference, "cpu")
        assert ours.shape == theirs.shape == (len(index), 3, 64, 64)
        diff = ((ours - theirs) * torch.tensor(STD).view(1, 3, 1, 1) * 255).abs()
        assert diff.max() <= 1 + 1e-3 and diff.mean() < 0.05


def test_draft_reduced_images_are_decoded_in_the_worker(files):
    # 1024x768 for a 73-pixel shorter side is decoded at 1/8 scale by the worker (nvJPEG has no scaled decode)
    pre = preprocessing("device", draft=True)
    items = [pre(path) for path in files]
    assert items[2].dim() == 3 and items[0].dim() == 3  # both reduced (500x375 -> 1/4 for 73 pixels)
    assert items[-2].dim() == 1  # 96x64 cannot be reduced: bytes


def test_predict_over_device_decoded_batches(files):
    pre = preprocessing("device")
    rows = ImageRows(FileFetch(files, list(range(len(files)))), len(files), pre)
    seen = []

    def forward(x):
        seen.append(x.shape)
        return x.mean(dim=(2, 3)).repeat(1, 4)  # 12 "classes"

    result = predict(forward, stream(rows, 0, "cpu"), preprocessing=pre, batch_size=4, device="cpu", progress=False)
    assert seen == [(4, 3, 64, 64), (4, 3, 64, 64)]
    assert result.index.tolist() == list(range(len(files))) and result.topk.shape == (len(files), 5)


def test_gpu_benchmark_says_there_is_no_gpu():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the benchmark measures instead")
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_eval_gpu.py"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no CUDA GPU here" in done.stderr and "nothing to measure" in done.stderr
