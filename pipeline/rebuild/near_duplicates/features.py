"""Features of the near-duplicate measures, computed once and kept on disk as memory-mapped arrays.

- ``pixels``: the 256 x 256 RGB copy, 196,608 values as uint8 (the exact values; half the size of
  float16, and converted to float32 many times faster); the ``l2`` search runs on it and
  ``dssim`` reads its images back from it;
- ``fc7``: VGG-16's penultimate-layer activations (4,096, after the ReLU) of the 224 x 224
  resize, ImageNet-normalised, as float32 (or float16 with ``dtype``).

A :class:`FeatureStore` is one folder per feature kind and collection holding shards
(``shard-00000.npy`` + ``shard-00000.ids.json``), each written to a temporary name and renamed
when complete; a re-run computes only the ids that no shard holds yet. Images are decoded a
batch at a time, so memory does not grow with the collection.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.core.atomic import atomic_write_text, make_temp_path

logger = logging.getLogger(__name__)

COPY_SIZE = 256
FC7_SIZE = 224
PIXELS_DIM = COPY_SIZE * COPY_SIZE * 3
FC7_DIM = 4096
SHARD_ROWS = 512
BATCH = 32
_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
_STD = np.array([0.229, 0.224, 0.225], np.float32)


@dataclass(frozen=True)
class Segment:
    """Rows of one shard file (all when ``rows`` is None): a picklable piece of a feature matrix."""

    path: str
    rows: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.rows) if self.rows is not None else int(np.load(self.path, mmap_mode="r").shape[0])

    def open(self) -> np.ndarray:
        return np.load(self.path, mmap_mode="r", allow_pickle=False)

    def dim(self) -> int:
        return int(np.load(self.path, mmap_mode="r").shape[1])

    def _index(self, start: int, stop: int):
        if self.rows is None:
            return slice(start, stop)
        rows = self.rows[start:stop]
        if len(rows) and rows[-1] - rows[0] == len(rows) - 1 and (np.diff(rows) == 1).all():
            return slice(int(rows[0]), int(rows[-1]) + 1)  # a run of rows: read it as one slice
        return rows

    def read(self, start: int, stop: int) -> np.ndarray:
        return np.asarray(self.open()[self._index(start, stop)])

    def read_into(self, start: int, stop: int, out: np.ndarray) -> None:
        """Rows ``start:stop`` converted into ``out`` (one pass over the mapped file)."""
        np.copyto(out, self.open()[self._index(start, stop)], casting="unsafe")


def decode_copies(source, want_fc7: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The 256 x 256 copy (uint8 HWC) and, if asked, the 224 x 224 resize of one image."""
    from PIL import Image

    from .collections import open_image

    image = open_image(source)
    copy = image if image.size == (COPY_SIZE, COPY_SIZE) else image.resize((COPY_SIZE, COPY_SIZE), Image.BILINEAR)
    small = np.asarray(image.resize((FC7_SIZE, FC7_SIZE), Image.BILINEAR)) if want_fc7 else None
    return np.asarray(copy), small


class Fc7Model:
    """VGG-16 up to fc7 (after its ReLU) from torchvision or timm; random weights when not pretrained.

    ``name`` is ``torchvision:vgg16`` or ``timm:<model>`` (e.g. ``timm:vgg16.tv_in1k``).
    """

    def __init__(self, name: str = "torchvision:vgg16", pretrained: bool = True, device: str = "cpu"):
        try:
            import torch
        except ImportError:
            raise ValueError("the fc7 measure needs torch (pip install '.[eval]'); or leave it out: --metrics l2,dssim") from None
        library, _, model_name = name.partition(":")
        torch.manual_seed(0)  # random weights (--no-pretrained) are the same on every run
        if library == "torchvision":
            import torchvision

            weights = "IMAGENET1K_V1" if pretrained else None
            net = getattr(torchvision.models, model_name)(weights=weights)
            self.forward = lambda x: net.classifier[:5](torch.flatten(net.avgpool(net.features(x)), 1))
        elif library == "timm":
            import timm

            net = timm.create_model(model_name, pretrained=pretrained, num_classes=0)
            self.forward = lambda x: net.forward_head(net.forward_features(x), pre_logits=True)
        else:
            raise ValueError(f"unknown fc7 model {name!r}: write torchvision:vgg16 or timm:MODEL")
        self.net, self.torch, self.device = net.eval().to(device), torch, device
        self.key = f"{library}-{model_name}-{'pretrained' if pretrained else 'random'}".replace("/", "_")

    def __call__(self, images: np.ndarray) -> np.ndarray:
        x = (images.astype(np.float32) / 255.0 - _MEAN) / _STD
        with self.torch.inference_mode():
            tensor = self.torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2))).to(self.device)
            return self.forward(tensor).float().cpu().numpy().reshape(len(images), -1)


class FeatureStore:
    """Shards of one feature kind for one collection, under ``root/<kind>/<collection key>/``."""

    def __init__(self, root: Path, kind: str, collection_key: str, dim: int, dtype: str):
        self.folder = Path(root) / kind / collection_key
        self.kind, self.dim, self.dtype = kind, dim, np.dtype(dtype)

    def index(self) -> dict:
        """id → (shard path, row) of every complete shard."""
        found: dict = {}
        for ids_file in sorted(self.folder.glob("shard-*.ids.json")):
            shard = ids_file.with_name(ids_file.name[: -len(".ids.json")] + ".npy")
            if not shard.is_file():
                continue
            data = np.load(shard, mmap_mode="r")
            if data.shape[1:] != (self.dim,) or data.dtype != self.dtype:
                raise ValueError(
                    f"feature cache {shard} holds {data.dtype} rows of {data.shape[1:]}, not {self.dtype} rows of "
                    f"({self.dim},); it was written with other settings: remove {self.folder} or pass another --cache"
                )
            for row, i in enumerate(json.loads(ids_file.read_text("utf-8"))):
                found.setdefault(i, (str(shard), row))
        return found

    def segments(self, ids: Sequence[str]) -> list[Segment]:
        """The rows holding ``ids``, in that order, as segments (one per run of rows from one shard)."""
        where = self.index()
        segments: list[Segment] = []
        path, rows = None, []
        for i in ids:
            shard, row = where[i]
            if shard != path and rows:
                segments.append(Segment(path, np.asarray(rows)))
                rows = []
            path = shard
            rows.append(row)
        if rows:
            segments.append(Segment(path, np.asarray(rows)))
        return segments

    def writer(self, rows: int) -> _ShardWriter:
        self.folder.mkdir(parents=True, exist_ok=True)
        number = len(list(self.folder.glob("shard-*.ids.json")))
        while (self.folder / f"shard-{number:05d}.ids.json").exists():
            number += 1
        return _ShardWriter(self.folder / f"shard-{number:05d}", rows, self.dim, self.dtype)


class _ShardWriter:
    """Fills a new shard row by row in a temporary file; ``close`` renames it into place."""

    def __init__(self, stem: Path, rows: int, dim: int, dtype):
        self.stem, self.target = stem, stem.with_suffix(".npy")
        self.tmp = make_temp_path(self.target, ".npy")
        self.array = np.lib.format.open_memmap(self.tmp, mode="w+", dtype=dtype, shape=(rows, dim))
        self.ids: list = []

    def add(self, ids: Sequence[str], values: np.ndarray) -> None:
        self.array[len(self.ids) : len(self.ids) + len(ids)] = values
        self.ids.extend(ids)

    def close(self) -> None:
        n = len(self.ids)
        self.array.flush()
        if n < self.array.shape[0]:  # some images were unreadable: keep the filled rows only
            filled = np.lib.format.open_memmap(make_temp_path(self.target, ".npy"), mode="w+", dtype=self.array.dtype, shape=(n, self.array.shape[1]))
            filled[:] = self.array[:n]
            filled.flush()
            del self.array
            os.replace(filled.filename, self.tmp)
        else:
            del self.array
        if n:
            os.replace(self.tmp, self.target)
            atomic_write_text(self.stem.with_suffix(".ids.json"), json.dumps(self.ids) + "\n")
        else:
            os.unlink(self.tmp)

    def abort(self) -> None:
        self.array = None
        Path(self.tmp).unlink(missing_ok=True)


def compute_features(collection, stores: dict, fc7_model: Fc7Model | None, *, workers: int = 2, progress=None) -> list[dict]:
    """Compute the features ``stores`` lack for ``collection``; return the images left out, with reasons.

    ``stores`` maps ``"pixels"`` and/or ``"fc7"`` to a :class:`FeatureStore`.
    """
    cached = {kind: set(store.index()) for kind, store in stores.items()}
    todo = [i for i, cid in enumerate(collection.ids) if any(cid not in ids for ids in cached.values())]
    if not todo:
        return []
    logger.info("%s: computing features of %d of %d images (%s)", collection.name, len(todo), len(collection), ", ".join(stores))
    left_out: list[dict] = []
    bar = progress(total=len(todo), desc=f"features {collection.name}", unit="img") if progress else None
    with ThreadPoolExecutor(max(1, workers)) as pool:
        for start in range(0, len(todo), SHARD_ROWS):
            part = todo[start : start + SHARD_ROWS]
            lacking = {kind: {collection.ids[i] for i in part if collection.ids[i] not in cached[kind]} for kind in stores}
            writers = {kind: stores[kind].writer(len(ids)) for kind, ids in lacking.items() if ids}
            try:
                for b in range(0, len(part), BATCH):
                    batch = part[b : b + BATCH]
                    ok, copies, smalls = _decode_batch(pool, collection, batch, "fc7" in writers, left_out)
                    if ok:
                        _write_batch(writers, lacking, [collection.ids[i] for i in ok], copies, smalls, fc7_model)
                    if bar is not None:
                        bar.update(len(batch))
            except BaseException:
                for writer in writers.values():
                    writer.abort()
                raise
            for writer in writers.values():
                writer.close()
    if bar is not None:
        bar.close()
    return left_out


def _decode_one(collection, i: int, want_fc7: bool):
    try:
        return decode_copies(collection.read(i), want_fc7), None
    except (OSError, ValueError, SyntaxError) as e:  # Pillow's errors for unreadable or truncated files
        return None, f"{type(e).__name__}: {e}"


def _decode_batch(pool, collection, batch, want_fc7: bool, left_out: list):
    ok, copies, smalls = [], [], []
    for i, (result, error) in zip(batch, pool.map(lambda i: _decode_one(collection, i, want_fc7), batch)):
        if error is not None:
            logger.warning("%s: image %s left out: %s", collection.name, collection.ids[i], error)
            left_out.append({"source": collection.name, "id": collection.ids[i], "reason": error})
            continue
        ok.append(i)
        copies.append(result[0])
        smalls.append(result[1])
    return ok, copies, smalls


def _write_batch(writers: dict, lacking: dict, ids: list, copies: list, smalls: list, fc7_model) -> None:
    for kind, writer in writers.items():
        keep = [n for n, i in enumerate(ids) if i in lacking[kind]]
        if not keep:
            continue
        if kind == "pixels":
            values = np.stack([copies[n] for n in keep]).reshape(len(keep), -1)
        else:
            values = fc7_model(np.stack([smalls[n] for n in keep])).astype(writer.array.dtype)
        writer.add([ids[n] for n in keep], values)


class RowReader:
    """Random rows of the concatenated segments, read with plain file reads (no mapping, so the
    rows read do not stay resident in this process)."""

    def __init__(self, segments: Sequence[Segment]):
        self.segments = list(segments)
        self.offsets = np.concatenate([[0], np.cumsum([len(s) for s in self.segments])]).astype(np.int64)
        self.layout: dict = {}
        self.files: dict = {}

    def rows(self, indices: np.ndarray) -> np.ndarray:
        indices = np.asarray(indices, np.int64)
        which = np.searchsorted(self.offsets, indices, side="right") - 1
        out = None
        for n in np.unique(which):
            at = np.flatnonzero(which == n)
            rows = self._from(int(n), indices[at] - self.offsets[n])
            if out is None:
                out = np.empty((len(indices),) + rows.shape[1:], rows.dtype)
            out[at] = rows
        return out

    def _from(self, n: int, local: np.ndarray) -> np.ndarray:
        segment = self.segments[n]
        if segment.path not in self.layout:
            mapped = segment.open()
            self.layout[segment.path] = (mapped.offset, mapped.dtype, mapped.shape[1])
            del mapped
        offset, dtype, dim = self.layout[segment.path]
        rows = local if segment.rows is None else segment.rows[local]
        out = np.empty((len(rows), dim), dtype)
        size = dim * dtype.itemsize
        f = self.files.get(segment.path)
        if f is None:
            f = self.files[segment.path] = open(segment.path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
        for i, row in enumerate(rows):
            f.seek(offset + int(row) * size)
            f.readinto(memoryview(out[i]).cast("B"))
        return out

    def close(self) -> None:
        for f in self.files.values():
            f.close()
        self.files.clear()


def read_rows(segments: Sequence[Segment], indices: np.ndarray) -> np.ndarray:
    """The rows at global positions ``indices`` of the concatenated segments, in that order."""
    indices = np.asarray(indices, np.int64)
    lengths = np.array([len(s) for s in segments], np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    which = np.searchsorted(offsets, indices, side="right") - 1
    out = None
    for n in np.unique(which):
        at = np.flatnonzero(which == n)
        segment = segments[n]
        local = indices[at] - offsets[n]
        data = segment.open()
        rows = np.asarray(data[local if segment.rows is None else segment.rows[local]])
        if out is None:
            out = np.empty((len(indices),) + rows.shape[1:], rows.dtype)
        out[at] = rows
    if out is None:
        raise ValueError("no rows asked for")
    return out
