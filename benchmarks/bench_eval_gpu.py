"""End-to-end GPU throughput of ``evaluate``'s input path against synthetic tensors on the device.

For ``resnet50`` and ``vit_base_patch16_224`` (random weights) at batch 256, bf16 autocast,
channels-last, measured in one run on one GPU:

* the ceiling: the same model on a synthetic batch already on the device (no input at all);
* end to end: photo-like 500x375 JPEGs on disk through ``evaluate``'s own path
  (:func:`pipeline.evaluation.predict.predict` over a DataLoader batch source: decoding in CPU
  workers into pinned memory, copies overlapping compute, normalisation on the device), with
  decoding in the workers and with nvJPEG batch decoding on the device (``--decode device``).

The target is end-to-end images/s at least 80% of the ceiling. Without a CUDA GPU the script
says so and exits with status 2 (nothing is measured).

    python benchmarks/bench_eval_gpu.py [--images 4096] [--workers N] [--batch-size 256]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODELS = ("resnet50", "vit_base_patch16_224")


def _write(job) -> None:
    from pipeline.toys.synthetic import photo_like_jpeg

    path, seed = job
    w, h = (500, 375) if seed % 3 else (375, 500)
    Path(path).write_bytes(photo_like_jpeg(np.random.default_rng(seed), w, h))


def write_jpegs(folder: Path, n: int, processes: int) -> list[str]:
    paths = [str(folder / f"{i:06d}.jpeg") for i in range(n)]
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        pool.map(_write, list(zip(paths, range(n))), chunksize=64)
    return paths


def synthetic_rate(model, batch_size: int, steps: int = 20) -> float:
    """Images/s of ``model`` on a batch already on the device (bf16 autocast, channels-last)."""
    import torch

    x = torch.randn(batch_size, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
        for _ in range(5):
            model(x).float().topk(5, dim=1)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(steps):
            model(x).float().topk(5, dim=1)
        torch.cuda.synchronize()
    return steps * batch_size / (time.perf_counter() - start)


def end_to_end_rate(model, paths, decode_on: str, args) -> float:
    """Images/s of evaluate's path from JPEG files to top-5 predictions."""
    import torch
    from timm.data import resolve_data_config

    from pipeline.evaluation.inputs import timm_preprocessing
    from pipeline.evaluation.loaders import FileFetch, ImageRows, stream
    from pipeline.evaluation.predict import predict

    preprocessing = timm_preprocessing(resolve_data_config({}, model=model), decode_on=decode_on)
    rows = ImageRows(FileFetch(paths, [0] * len(paths)), len(paths), preprocessing)
    run = dict(preprocessing=preprocessing, batch_size=args.batch_size, device="cuda", precision="bf16", channels_last=True, progress=False)
    predict(model, stream(ImageRows(rows.fetch, len(paths), preprocessing, range(2 * args.batch_size)), args.workers, "cuda"), **run)
    torch.cuda.synchronize()
    result = predict(model, stream(rows, args.workers, "cuda"), **run)
    return len(paths) / result.seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4096)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("bench_eval_gpu.py: no CUDA GPU here (torch.cuda.is_available() is False), so there is nothing to "
              "measure; run it on a machine with a GPU (the CPU input path is measured by bench_eval_input.py)", file=sys.stderr)
        return 2
    import timm

    print(f"{torch.cuda.get_device_name()}, {os.cpu_count()} CPUs, {args.workers} workers, batch {args.batch_size}, bf16, channels-last")
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_jpegs(Path(tmp), args.images, args.workers)
        for name in args.models:
            model = timm.create_model(name, pretrained=False).eval().cuda().to(memory_format=torch.channels_last)
            ceiling = synthetic_rate(model, args.batch_size)
            print(f"{name}: synthetic tensors on the device {ceiling:8.0f} images/s")
            for decode_on in ("workers", "device"):
                rate = end_to_end_rate(model, paths, decode_on, args)
                print(f"  {name}: JPEG files, decoded in the {decode_on:<7} {rate:8.0f} images/s = {100 * rate / ceiling:5.1f}% "
                      f"of synthetic (target >= 80%)")
            del model
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
