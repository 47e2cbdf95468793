"""Build time of the ImageNetV2 builder against the floor of reading the archive once.

A synthetic archive in the release layout holds photo-like JPEGs of about 110 KB (the real
archives average 126 KB per image). The floor is one sequential read of the archive plus its
sha256, measured in the same run on the same (warm) file; the build is ``download_and_prepare``
from ``data_dir`` into a fresh cache, which reads the archive once, hashes it, checks every
member and decodes every JPEG at 1/8 scale, and writes the Arrow cache. Target: build ≤ 2× floor.

Peak memory is measured in child processes on archives of N and 2N images: it must not grow
with the archive size.

    python benchmarks/bench_build.py [--images 2000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402

from fixtures_imagenetv2 import Entry, write_tar  # noqa: E402
from imagenetv2 import ImageNetV2, get_variant  # noqa: E402
from imagenetv2.classes import wnids  # noqa: E402
from pipeline.core.integrity import FileChecksum, file_digest  # noqa: E402
from pipeline.toys.synthetic import photo_like_jpeg  # noqa: E402

CONFIG = "matched-frequency"


def distinct_copy(jpeg: bytes, rng: random.Random) -> bytes:
    """The same JPEG with a random comment segment: distinct bytes, same decoding cost."""
    comment = rng.randbytes(16)
    return jpeg[:2] + b"\xff\xfe" + (len(comment) + 2).to_bytes(2, "big") + comment + jpeg[2:]


def write_archive(folder: Path, n_images: int, seed: int = 0) -> tuple[Path, FileChecksum]:
    """A synthetic archive with ``n_images`` photo-like JPEGs over the 1000 classes, and its revision."""
    rng = np.random.default_rng(seed)
    prng = random.Random(seed)
    bases = [photo_like_jpeg(rng) for _ in range(min(64, n_images))]
    variant = get_variant(CONFIG)
    top = variant.top_folder
    all_wnids = wnids()
    entries = [Entry(top, folder=True)]
    pairs = []
    for i in range(n_images):
        class_index = i % 1000
        candidate_id = f"{prng.getrandbits(160):040x}"
        pairs.append([candidate_id, all_wnids[class_index]])
        entries.append(Entry(f"{top}/{class_index}/{candidate_id}.jpeg", distinct_copy(bases[i % len(bases)], prng)))
    checksum = write_tar(folder / variant.archive.name, entries)
    revision = folder / "revision.json"
    revision.write_text(json.dumps({"output_filename": "bench.json", "image_filenames": pairs}))
    return revision, checksum


def floor_seconds(path: Path) -> float:
    start = time.perf_counter()
    file_digest(path)  # one sequential read in 1 MiB chunks plus sha256
    return time.perf_counter() - start


def copy_seconds(path: Path, target: Path) -> float:
    """Read the archive and write the same bytes to a new file: what any builder that writes its
    cache on this disk pays at least (reported for context; the target is against the floor)."""
    start = time.perf_counter()
    with open(path, "rb") as src, open(target, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    elapsed = time.perf_counter() - start
    target.unlink()
    return elapsed


def build_seconds(data_dir: Path, revision: Path, checksum: FileChecksum, cache: Path, pinned: bool = True) -> float:
    """Time one build. ``pinned``: the synthetic archive stands in for the released one (its
    checksum is the variant's pinned checksum), the path every user of the release runs; otherwise
    it is a rebuilt set with its own checksum, whose JPEGs are also fully decoded."""
    variant = get_variant(CONFIG)
    source = {"variant": replace(variant, archive=checksum)} if pinned else {"archive_checksum": checksum}
    start = time.perf_counter()
    builder = ImageNetV2(config_name=CONFIG, data_dir=str(data_dir), cache_dir=str(cache), revision_file=str(revision), **source)
    builder.download_and_prepare()
    elapsed = time.perf_counter() - start
    assert builder.as_dataset(split="test").num_rows == json.loads(revision.read_text())["image_filenames"].__len__()
    return elapsed


def child_peak_rss(folder: Path, revision: Path, checksum: FileChecksum) -> tuple[float, float]:
    """Peak RSS (MiB, the kernel's VmHWM, which exec resets unlike ru_maxrss) of a fresh process
    after its imports, and after building the archive."""
    code = (
        "import sys, pathlib, json\n"
        f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
        "import bench_build as b, datasets\n"
        "from pipeline.core.integrity import FileChecksum\n"
        "datasets.disable_progress_bars()\n"
        "hwm = lambda: int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])\n"
        "before = hwm()\n"
        f"b.build_seconds(pathlib.Path({str(folder)!r}), pathlib.Path({str(revision)!r}), "
        f"FileChecksum(*{[checksum.name, checksum.size, checksum.sha256]!r}), pathlib.Path({str(folder / 'rss-cache')!r}))\n"
        "print(json.dumps([before, hwm()]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    before, after = json.loads(out.strip().splitlines()[-1])
    return before / 1024, after / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    import datasets

    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        revision, checksum = write_archive(tmp, args.images)
        size_mb = checksum.size / 1e6
        print(f"archive: {args.images} images, {size_mb:.1f} MB ({checksum.size / args.images / 1e3:.0f} KB per image)")
        floor = min(floor_seconds(tmp / checksum.name) for _ in range(args.repeats + 1))
        builds = [build_seconds(tmp, revision, checksum, tmp / f"cache{i}") for i in range(args.repeats)]
        build = min(builds)
        copy = min(copy_seconds(tmp / checksum.name, tmp / "copy.tmp") for _ in range(args.repeats))
        print(f"floor (read + sha256): {floor:.3f} s  ({size_mb / floor:.0f} MB/s)")
        print(f"context: copying the archive (read + write): {copy:.3f} s  ({copy / floor:.2f}x the floor)")
        print(f"build (best of {args.repeats}): {build:.3f} s  ({args.images / build:.0f} images/s; runs {', '.join(f'{b:.2f}' for b in builds)})")
        print(f"ratio build / floor: {build / floor:.2f}  (target <= 2)")
        rebuilt = min(build_seconds(tmp, revision, checksum, tmp / f"rcache{i}", pinned=False) for i in range(args.repeats))
        print(f"rebuilt set (own checksum, every JPEG decoded at 1/8 scale): {rebuilt:.3f} s, ratio {rebuilt / floor:.2f}")
    if not args.skip_memory:
        for n in (args.images // 2, args.images * 2):
            with tempfile.TemporaryDirectory() as tmp:
                revision, checksum = write_archive(Path(tmp), n, seed=n)
                before, after = child_peak_rss(Path(tmp), revision, checksum)
            print(f"peak RSS building {n} images ({checksum.size / 1e6:.0f} MB archive): {after:.0f} MiB "
                  f"(after imports {before:.0f} MiB; growth {after - before:.0f} MiB)")


if __name__ == "__main__":
    main()
