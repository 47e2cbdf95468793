"""Build and export time of ImageNetV2 against the floor of reading the archive once.

A synthetic archive in the release layout holds photo-like JPEGs of about 110 KB (the real
archives average 126 KB per image). Measured in the same run on the same (warm) file:

- the floor: one sequential read of the archive plus its sha256; and the floor with writing
  the output bytes once (read + sha256 + write the same bytes to a new file), the true limit of
  a job that must write what it reads;
- ``download_and_prepare`` from ``data_dir`` into a fresh cache (target: <= 1.5x the floor);
- the export, ``python -m imagenetv2 build``'s work (archive -> Hub-ready Parquet folder, in one
  streaming pass; target: <= 2x the floor);
- a rebuilt set (its own checksum, so every JPEG is decoded at 1/8 scale) exported with 1 and 2
  decoding processes: the scaling.

Each figure is wall time (best of the repeats) and CPU time (this process's threads plus its
finished child processes, e.g. the decoders), the latter less sensitive to other load on a shared
machine. Peak memory (the kernel's VmHWM) is measured in fresh processes on archives of N/2 and 2N
images: it must not grow with the archive size.

    python benchmarks/bench_build.py [--images 2000] [--repeats 3] [--skip-memory]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from fixtures_imagenetv2 import Entry, write_tar  # noqa: E402
from imagenetv2 import PACKAGE, ImageNetV2, get_variant  # noqa: E402
from imagenetv2.classes import wnids  # noqa: E402
from pipeline.core.export import export_package  # noqa: E402
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


def floor_seconds(path: Path, write_to: Path | None = None) -> float:
    """One sequential read in 1 MiB chunks plus sha256 (and, with ``write_to``, writing the bytes)."""
    if write_to is None:
        start = time.perf_counter()
        file_digest(path)
        return time.perf_counter() - start
    import hashlib

    start = time.perf_counter()
    digest = hashlib.sha256()
    with open(path, "rb") as src, open(write_to, "wb") as dst:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
            dst.write(chunk)
    return time.perf_counter() - start  # the copy stays, as a build's output does, until the run ends


def builder_kwargs(revision: Path, checksum: FileChecksum, pinned: bool) -> dict:
    """``pinned``: the synthetic archive stands in for the released one (its checksum is the
    variant's pinned checksum), the path every user of the release runs; otherwise it is a
    rebuilt set with its own checksum, whose JPEGs are all decoded."""
    source = {"variant": replace(get_variant(CONFIG), archive=checksum)} if pinned else {"archive_checksum": checksum}
    return {"revision_file": str(revision), **source}


def prepare_seconds(data_dir: Path, revision: Path, checksum: FileChecksum, cache: Path, num_proc: int = 1) -> float:
    """Time ``download_and_prepare`` of the pinned set into a fresh cache."""
    start = time.perf_counter()
    builder = ImageNetV2(config_name=CONFIG, data_dir=str(data_dir), cache_dir=str(cache), **builder_kwargs(revision, checksum, True))
    builder.download_and_prepare(num_proc=num_proc)
    elapsed = time.perf_counter() - start
    n = len(json.loads(revision.read_text())["image_filenames"])
    if builder.as_dataset(split="test").num_rows != n:
        raise RuntimeError("the build lost rows")
    return elapsed


def export_seconds(data_dir: Path, revision: Path, checksum: FileChecksum, out: Path, pinned: bool = True, num_proc: int = 1) -> float:
    """Time the export (``python -m imagenetv2 build``'s work) into a fresh folder."""
    start = time.perf_counter()
    export_package(PACKAGE, out, [CONFIG], data_dir=str(data_dir), cache_dir=str(out.parent / "export-cache"),
                   builder_kwargs={CONFIG: builder_kwargs(revision, checksum, pinned)}, num_proc=num_proc)
    elapsed = time.perf_counter() - start
    shutil.rmtree(out)
    return elapsed


def child_peak_rss(folder: Path, revision: Path, checksum: FileChecksum, what: str) -> tuple[float, float]:
    """Peak RSS (MiB, the kernel's VmHWM, which exec resets unlike ru_maxrss) of a fresh process
    after its imports, and after ``what`` ("prepare" or "export") on the archive."""
    call = {
        "prepare": "b.prepare_seconds(folder, revision, checksum, folder.parent / 'rss-cache')",
        "export": "b.export_seconds(folder, revision, checksum, folder.parent / 'rss-out')",
    }[what]
    code = (
        "import sys, pathlib, json\n"
        f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
        "import bench_build as b, datasets\n"
        "from pipeline.core.integrity import FileChecksum\n"
        "datasets.disable_progress_bars()\n"
        "hwm = lambda: int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])\n"
        f"folder, revision = pathlib.Path({str(folder)!r}), pathlib.Path({str(revision)!r})\n"
        f"checksum = FileChecksum(*{[checksum.name, checksum.size, checksum.sha256]!r})\n"
        "before = hwm()\n"
        f"{call}\n"
        "print(json.dumps([before, hwm()]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    before, after = json.loads(out.strip().splitlines()[-1])
    return before / 1024, after / 1024


def cpu_seconds() -> float:
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def best(f, repeats: int) -> tuple[float, list[float], float]:
    """Best wall time, all wall times, and the CPU time of the best run."""
    runs = []
    for i in range(repeats):
        cpu = cpu_seconds()
        runs.append((f(i), cpu_seconds() - cpu))
    wall, cpu = min(runs)
    return wall, [w for w, _ in runs], cpu


def report_speed(root: Path, n_images: int, repeats: int) -> None:
    tmp, work = root / "data", root / "work"
    tmp.mkdir(), work.mkdir()
    revision, checksum = write_archive(tmp, n_images)
    archive = tmp / checksum.name
    size_mb = checksum.size / 1e6
    print(f"archive: {n_images} images, {size_mb:.1f} MB ({checksum.size / n_images / 1e3:.0f} KB per image); "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    floor, _, floor_cpu = best(lambda i: floor_seconds(archive), repeats + 1)
    floor_w, _, floor_w_cpu = best(lambda i: floor_seconds(archive, work / f"copy{i}.tmp"), repeats)
    print(f"floor (read + sha256): {floor:.3f} s ({size_mb / floor:.0f} MB/s), CPU {floor_cpu:.3f} s")
    print(f"floor with writing the bytes once (read + sha256 + write): {floor_w:.3f} s ({floor_w / floor:.2f}x the floor), "
          f"CPU {floor_w_cpu:.3f} s")
    for name, target, run in (
        ("download_and_prepare", 1.5, lambda i: prepare_seconds(tmp, revision, checksum, work / f"cache{i}")),
        ("export, python -m imagenetv2 build", 2, lambda i: export_seconds(tmp, revision, checksum, work / f"out{i}")),
    ):
        wall, runs, cpu = best(run, repeats)
        print(f"{name} (best of {repeats}: {', '.join(f'{r:.2f}' for r in runs)}): {wall:.3f} s; ratio {wall / floor:.2f} "
              f"to the floor (target <= {target}), {wall / floor_w:.2f} to the floor with writing; "
              f"CPU {cpu:.3f} s, {cpu / floor_cpu:.2f}x the floor's, {cpu / floor_w_cpu:.2f}x with writing")
    decode = {}
    for procs in (1, 2):
        decode[procs], _, cpu = best(lambda i: export_seconds(tmp, revision, checksum, work / f"r{procs}-{i}", False, procs), repeats)
        print(f"rebuilt set, every JPEG decoded at 1/8 scale, --num-proc {procs}: {decode[procs]:.3f} s "
              f"({n_images / decode[procs]:.0f} images/s), ratio {decode[procs] / floor:.2f} to the floor; CPU {cpu:.3f} s")
    print(f"decode scaling 1 -> 2 processes: {decode[1] / decode[2]:.2f}x (wall time)")


def report_memory(n_images: int) -> None:
    for what in ("prepare", "export"):
        for n in (n_images // 2, n_images * 2):
            with tempfile.TemporaryDirectory() as tmp:
                data = Path(tmp) / "data"
                data.mkdir()
                revision, checksum = write_archive(data, n, seed=n)
                before, after = child_peak_rss(data, revision, checksum, what)
            print(f"peak RSS, {what} of {n} images ({checksum.size / 1e6:.0f} MB archive): {after:.0f} MiB "
                  f"(after imports {before:.0f} MiB; growth {after - before:.0f} MiB)")


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
        report_speed(Path(tmp), args.images, args.repeats)
    if not args.skip_memory:
        report_memory(args.images)


if __name__ == "__main__":
    main()
