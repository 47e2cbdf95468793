"""Decode-and-preprocess throughput of the evaluation input pipeline vs torchvision's ImageFolder.

Both pipelines read the same JPEG files (an ImageFolder tree of photo-like JPEGs written to a
temporary folder) through a DataLoader with the same batch size and number of workers, and
produce normalised float batches for a 224-pixel model (resize the shorter side to 256, centre
crop 224, bilinear, ImageNet mean and std):

* baseline: ``torchvision.datasets.ImageFolder`` with ``Resize(256)``, ``CenterCrop(224)``,
  ``ToTensor()``, ``Normalize(...)`` in the workers;
* ours: :class:`pipeline.evaluation.inputs.TimmCenterCrop` in the workers (Pillow draft-mode
  decoding where the image is at least twice the resize target, resize with torch's
  antialiased uint8 kernel, crop, uint8 out), then :meth:`finish` on the batch in
  the main process (float conversion and normalisation, on the CPU here and counted in our time;
  the evaluation does it on the GPU when there is one).

Both wall-clock images/s (the target) and CPU time per image (robust to other load on a shared
machine: main process plus the joined DataLoader workers) are printed.

Image sizes: ImageNetV2's archives average ~126 KB per image (1.26 GB / 10,000), about what
ImageNet's validation images weigh (typically 500×375), so the first size is 500×375 at ~110 KB.
Draft mode cannot help there (the 341×256 resize target is more than half the image); the gain
comes from the cheaper resize and from moving float conversion and normalisation out of the
workers. The Flickr originals behind ImageNetV2 are much larger (median 1936×1371 among the
3,036 search records with a size in ``imagenetv2/data/candidates_in_final_sets.jsonl``), and
other sets or re-downloads may keep more pixels, so the second size is 1024×768, where the JPEG
decoder can decode at half size. (The synthetic photos have more fine texture than real ones, so
entropy decoding, which draft mode does not reduce, weighs more than in real photos: the
1024×768 files are ~440 KB.) Both sizes are reported; the target (≥ 1.5×) is judged on each.

Two more parts (skip them with ``--no-decoders`` / ``--no-sweep``):

* decoders and resize kernels: CPU time per image of each way to decode one JPEG (Pillow, Pillow
  with ``draft``, Pillow's ``reduce``, libjpeg-turbo through ``simplejpeg``, torchvision's
  ``decode_jpeg``) and to resize to the 224-pixel model's 256-pixel shorter side (Pillow,
  Pillow on the crop box only, torch's antialiased kernel), and whether each gives the pixels of
  the reference (Pillow's full decode; for the reduced ones, Pillow's draft decode);
* the sweep: ten timm models (random weights; only their preprocessing matters here) of which
  several share preprocessing, on ``--sweep-images`` photo-like JPEGs: the input CPU time per
  model when every model decodes for itself and with the shared pass of ``evaluate``
  (:mod:`pipeline.evaluation.shared`), with normalisation on the CPU and without it (the CPU
  share of a GPU run), and the number of decoding passes made. The models' forward passes are
  not run: this is the input side only.

Run: ``python benchmarks/bench_eval_input.py [--images 600] [--workers 2] [--sizes 500x375 1024x768]
[--sweep-images 1000]``
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.toys.synthetic import photo_like_jpeg  # noqa: E402

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def write_tree(root: Path, n: int, width: int, height: int, classes: int = 10, seed: int = 0) -> int:
    """An ImageFolder tree of ``n`` photo-like JPEGs; returns the total bytes."""
    rng = np.random.default_rng(seed)
    total = 0
    for i in range(n):
        folder = root / f"class{i % classes:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        # alternate landscape and portrait, as in real photo collections
        w, h = (width, height) if i % 3 else (height, width)
        data = photo_like_jpeg(rng, w, h)
        (folder / f"{i:06d}.jpeg").write_bytes(data)
        total += len(data)
    return total


def baseline_pass(root: Path, batch_size: int, workers: int) -> int:
    import torch
    from torchvision import datasets, transforms

    transform = transforms.Compose(
        [transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    )
    dataset = datasets.ImageFolder(str(root), transform=transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=workers, shuffle=False)
    n = 0
    for images, _ in loader:
        n += images.shape[0]
    return n


def ours_pass(root: Path, batch_size: int, workers: int, device: str | None = "cpu") -> int:
    """Our loader; the batch is normalised on ``device`` (None: left undone, as the GPU does it)."""
    import torch
    from torchvision import datasets

    from pipeline.evaluation.inputs import FileFetch, ImageRows, TimmCenterCrop
    from pipeline.evaluation.loaders import StreamSource

    samples = datasets.ImageFolder(str(root)).samples  # the same files in the same order
    preprocess = TimmCenterCrop(img_size=224, crop_pct=0.875, interpolation="bilinear", mean=MEAN, std=STD)
    rows = ImageRows(FileFetch([p for p, _ in samples], [y for _, y in samples]), len(samples), preprocess)
    cuda = device is not None and device.startswith("cuda")
    n = 0
    source = StreamSource(rows, workers, pin_memory=cuda, planar=device == "cpu")  # as evaluate lays batches out
    for images, _, _ in source.batches(0, batch_size):
        if device is not None:
            images = preprocess.finish(images, device, channels_last=cuda)
        n += images.shape[0]
    if cuda:
        torch.cuda.synchronize()
    return n


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the DataLoader workers, joined at the end of a pass)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(fn, *args) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, images) of one pass."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    n = fn(*args)
    return time.perf_counter() - wall, cpu_seconds() - cpu, n


def bench_size(width: int, height: int, args) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "images"
        total = write_tree(root, args.images, width, height)
        print(
            f"\n{args.images} photo-like JPEGs of {width}x{height} (and portrait), "
            f"mean {total / args.images / 1000:.0f} KB; batch {args.batch_size}, {args.workers} workers"
        )
        variants = [("torchvision ImageFolder + Resize/CenterCrop/ToTensor/Normalize", baseline_pass, ())]
        variants.append((f"ours, normalising the batch on {args.device}", ours_pass, (args.device,)))
        if args.device == "cpu":
            variants.append(("ours, normalisation left to the GPU (CPU share of a GPU run)", ours_pass, (None,)))
        ours_pass(root, args.batch_size, args.workers, args.device)  # warm the page cache and imports
        runs: list[list] = [[] for _ in variants]
        for _ in range(args.repeats):  # interleaved, so load from other processes hits all alike
            for (_, fn, extra), out in zip(variants, runs):
                out.append(timed(fn, root, args.batch_size, args.workers, *extra))
                if out[-1][2] != args.images:
                    raise RuntimeError(f"a pipeline saw {out[-1][2]} images, not {args.images}")
        rates = [args.images / statistics.median(r[0] for r in out) for out in runs]
        cpu = [1000 * statistics.median(r[1] for r in out) / args.images for out in runs]
        for (label, _, _), rate, ms in zip(variants, rates, cpu):
            ratio = "" if rate is rates[0] else f"  ratio {rate / rates[0]:.2f}x images/s, {cpu[0] / ms:.2f}x less CPU"
            print(f"  {label:<64} {rate:7.1f} images/s {ms:6.2f} CPU ms/image{ratio}")
        return {label: (rate / rates[0], cpu[0] / ms) for (label, _, _), rate, ms in zip(variants[1:], rates[1:], cpu[1:])}


# --- decoders and resize kernels --------------------------------------------------------------

SWEEP_MODELS = (  # several share preprocessing (timm's resolved data configs decide the groups)
    "resnet18", "resnet34", "resnet50", "resnet101", "convnext_tiny",
    "efficientnet_b0", "mobilenetv3_large_100", "densenet121", "vgg11", "vgg16",
)


def decoders(width: int, height: int):
    """``{name: (decode function, reduction)}``: each returns an RGB uint8 HWC array."""
    import io
    import warnings

    import simplejpeg
    import torch
    from PIL import Image
    from torchvision.io import ImageReadMode, decode_jpeg

    def pillow(data, draft=None):
        image = Image.open(io.BytesIO(data))
        if draft:
            image.draft("RGB", (width // draft, height // draft))
        return np.asarray(image.convert("RGB"))

    def torchvision(data):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return decode_jpeg(torch.frombuffer(bytearray(data), dtype=torch.uint8), mode=ImageReadMode.RGB).permute(1, 2, 0).numpy()

    half = dict(min_factor=2, min_width=-(-width // 2), min_height=-(-height // 2))
    return {
        "Pillow": (pillow, 1),
        "Pillow draft 1/2": (lambda d: pillow(d, 2), 2),
        "Pillow + reduce(2)": (lambda d: np.asarray(Image.open(io.BytesIO(d)).convert("RGB").reduce(2)), 2),
        "simplejpeg (libjpeg-turbo)": (lambda d: simplejpeg.decode_jpeg(d), 1),
        "simplejpeg 1/2 scale": (lambda d: simplejpeg.decode_jpeg(d, **half), 2),
        "simplejpeg fastdct+fastupsample": (lambda d: simplejpeg.decode_jpeg(d, fastdct=True, fastupsample=True), 1),
        "torchvision decode_jpeg": (torchvision, 1),
    }


def resizers(pixels: np.ndarray):
    """``{name: resize function}`` to the 224-model's shorter side 256 (then the 224 crop)."""
    import torch
    from PIL import Image

    from pipeline.evaluation.decode import center_crop_offset, resize_then_crop, shorter_side_size

    h, w = pixels.shape[:2]
    size = shorter_side_size(w, h, 256)
    left, top = center_crop_offset(*size, 224)
    image, scale = Image.fromarray(pixels), w / size[0]
    box = (left * scale, top * scale, (left + 224) * scale, (top + 224) * scale)
    tensor = torch.from_numpy(np.array(pixels))
    return {
        "Pillow bilinear, whole image + crop": lambda: image.resize(size, Image.Resampling.BILINEAR).crop((left, top, left + 224, top + 224)),
        "Pillow bilinear, crop box only": lambda: image.resize((224, 224), Image.Resampling.BILINEAR, box=box),
        "torch antialiased bilinear uint8 (ours)": lambda: resize_then_crop(tensor, size, (left, top, 224), "bilinear").contiguous(),
    }


def cpu_ms(fn, items, repeats: int = 2) -> float:
    """Median CPU milliseconds per call of ``fn`` over ``items`` (this process, one thread)."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        for item in items:
            fn(item)
        times.append(1000 * (time.process_time() - start) / len(items))
    return statistics.median(times)


def bench_decoders(width: int, height: int, n: int = 30) -> None:
    import torch

    torch.set_num_threads(1)
    rng = np.random.default_rng(1)
    datas = [photo_like_jpeg(rng, width, height) for _ in range(n)]
    table = decoders(width, height)
    reference = {1: table["Pillow"][0](datas[0]), 2: table["Pillow draft 1/2"][0](datas[0])}
    print(f"\ndecoders, {width}x{height} ({n} JPEGs, one thread): CPU ms/image, pixels vs Pillow (full / draft)")
    for name, (fn, reduction) in table.items():
        same = np.array_equal(fn(datas[0]), reference[reduction])
        print(f"  {name:<40} {cpu_ms(fn, datas):6.2f} ms  {'same pixels' if same else 'different pixels'} (1/{reduction})")
    pixels = reference[1]
    print(f"resize {width}x{height} -> shorter side 256, crop 224:")
    for name, fn in resizers(pixels).items():
        print(f"  {name:<40} {cpu_ms(lambda _: fn(), range(n)):6.2f} ms")


# --- the sweep: ten models, one pass per preprocessing ------------------------------------------


def sweep_pass(source, preprocess, batch_size: int) -> float:
    """Iterate a batch source, normalising on the CPU; the CPU seconds spent normalising."""
    finishing = 0.0
    for images, _, _ in source.batches(0, batch_size):
        start = time.process_time()
        preprocess.finish(images, "cpu")
        finishing += time.process_time() - start
    return finishing


def sweep_mode(models, rows_of, args, shared) -> tuple[float, float, int]:
    """(total CPU s, of which normalising, decoding passes) of the input side for every model."""
    from pipeline.evaluation.loaders import stream

    start, finishing, passes = cpu_seconds(), 0.0, 0
    for _, preprocess in models if shared is not None else ():
        shared.expect(shared.group("sweep", "", preprocess.key()))
    for name, preprocess in models:
        rows = rows_of(preprocess)
        if shared is None:
            source, passes = stream(rows, args.workers, "cpu"), passes + 1
        else:
            group = shared.group("sweep", "", preprocess.key())
            source = shared.source(group, rows, args.workers, "cpu")
        finishing += sweep_pass(source, preprocess, args.batch_size)
        if shared is not None:
            shared.done(group)
    if shared is not None:
        passes = shared.decode_passes
        shared.close()
    return cpu_seconds() - start, finishing, passes


def bench_sweep(args) -> dict:
    from torchvision import datasets

    from pipeline.evaluation.loaders import FileFetch, ImageRows
    from pipeline.evaluation.models import ModelRecord, preprocessing_for
    from pipeline.evaluation.shared import SharedInputs

    models = [(name, preprocessing_for(ModelRecord(source=f"timm:{name}"))) for name in SWEEP_MODELS]
    groups: dict[str, list[str]] = {}
    for name, preprocess in models:
        groups.setdefault(preprocess.key(), []).append(name)
    models.sort(key=lambda m: list(groups).index(m[1].key()))  # as evaluate orders them
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "images"
        write_tree(root, args.sweep_images, 500, 375)
        samples = datasets.ImageFolder(str(root)).samples
        fetch = FileFetch([p for p, _ in samples], [y for _, y in samples])

        def rows_of(preprocess):
            return ImageRows(fetch, len(samples), preprocess)

        print(f"\nsweep: {len(models)} timm models on {args.sweep_images} photo-like JPEGs of 500x375, "
              f"{len(groups)} preprocessing groups: " + "; ".join(f"{k.split(' draft')[0]}: {', '.join(v)}" for k, v in groups.items()))
        alone = sweep_mode(models, rows_of, args, None)
        together = sweep_mode(models, rows_of, args, SharedInputs(Path(tmp) / "out", memory_gib=4))
    n = len(models) * args.sweep_images
    result = {}
    for label, (total, finishing, passes) in (("each model decodes for itself", alone), ("shared pass", together)):
        cpu, gpu_share = 1000 * total / n, 1000 * (total - finishing) / n
        result[label] = (cpu, gpu_share, passes)
        print(f"  {label:<32} {passes:3d} decoding passes  {cpu:6.2f} CPU ms/image/model (normalising on the CPU)  "
              f"{gpu_share:6.2f} without normalising (CPU share of a GPU run)")
    (a_cpu, a_gpu, _), (b_cpu, b_gpu, _) = result.values()
    print(f"  input CPU time per model, shared vs alone (target >= 3x less): {a_cpu / b_cpu:.2f}x less normalising on the CPU, "
          f"{a_gpu / b_gpu:.2f}x less as the CPU share of a GPU run")
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=600)
    parser.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", nargs="+", default=["500x375", "1024x768"], metavar="WxH")
    parser.add_argument("--device", default=None, help="where our batches are normalised (default: cuda if available, else cpu)")
    parser.add_argument("--sweep-images", type=int, default=1000, help="JPEGs of the ten-model sweep")
    parser.add_argument("--no-decoders", action="store_true", help="skip the decoder and resize comparison")
    parser.add_argument("--no-sweep", action="store_true", help="skip the ten-model sweep")
    args = parser.parse_args(argv)
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    print("images/s: wall clock, median of the repeats; CPU ms/image: this process plus its DataLoader workers")
    summary = []
    for size in args.sizes:
        width, height = (int(v) for v in size.lower().split("x"))
        for label, (ratio, cpu_ratio) in bench_size(width, height, args).items():
            summary.append(f"{size} {label.removeprefix('ours, ')}: {ratio:.2f}x images/s, {cpu_ratio:.2f}x less CPU")
    print("\nratio vs torchvision (target >= 1.5x; 2x for the CPU share of a GPU run): " + "; ".join(summary))
    if not args.no_decoders:
        for size in args.sizes:
            bench_decoders(*(int(v) for v in size.lower().split("x")))
    if not args.no_sweep:
        bench_sweep(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
