"""Decode once for many models: the models of a group share one pass over a dataset's images.

Models whose preprocessing hands over the same pixels (equal :meth:`~.inputs.Preprocessing.key`:
timm's resolved data config or an image processor's parameters decide; mean and std do not, as
they are applied on the device) form a group. The first model of a group decodes in the
DataLoader workers as usual and every batch is also written into a :class:`PixelStore`; the
other models of the group read the stored uint8 tensors back, so a group costs one decoding
pass whatever its size, and each model sees exactly the bytes it would have decoded alone.

A store lives in memory while the stores held at once fit ``--cache-memory`` (GiB), else in a
memory-mapped ``.npy`` file under ``OUTPUT/cache/`` that a re-run reuses (a model added later
to a sweep decodes nothing) and ``--no-cache`` removes. A store is freed when the last model
of its group that still has to run is done.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Iterable, Iterator, Optional

import numpy as np

from .loaders import ImageRows, stream

logger = logging.getLogger(__name__)

CACHE_DIR = "cache"
FORMAT = 1


def rows_digest(rows: Iterable[int]) -> str:
    """A short fingerprint of the row indices a store holds.

    >>> rows_digest([0, 1, 2]) == rows_digest(np.arange(3))
    True
    """
    return hashlib.sha256(np.asarray(list(rows), dtype=np.int64).tobytes()).hexdigest()[:16]


class PixelStore:
    """The preprocessed images of one (dataset rows, preprocessing key), position by position.

    ``put`` fills it batch by batch (in row order); once full, ``batches`` reads it back. In
    memory (``folder=None``) or as ``pixels.npy``/``labels.npy``/``index.npy`` in ``folder``
    (written under a temporary name and renamed when complete, with ``meta.json``).
    """

    def __init__(self, size: int, meta: dict, folder: Optional[Path] = None, budget: Optional["MemoryBudget"] = None, spill: Optional[Path] = None):
        self.size, self.meta, self.folder, self.budget, self.spill = size, dict(meta), folder, budget, spill
        self.pixels = self.labels = self.index = None
        self.filled = 0
        self.complete = False
        self.nbytes = 0

    @classmethod
    def open(cls, folder: Path, meta: dict) -> Optional["PixelStore"]:
        """A complete store left in ``folder`` by an earlier run with the same ``meta``; None otherwise."""
        try:
            stored = json.loads((folder / "meta.json").read_text("utf-8"))
        except (OSError, ValueError):
            return None
        if {k: stored.get(k) for k in meta} != json.loads(json.dumps(meta)):
            return None
        store = cls(int(meta["size"]), meta, folder)
        try:
            store.pixels = np.load(folder / "pixels.npy", mmap_mode="r", allow_pickle=False)
            store.labels = np.load(folder / "labels.npy", allow_pickle=False)
            store.index = np.load(folder / "index.npy", allow_pickle=False)
        except (OSError, ValueError):
            return None
        if len(store.pixels) != store.size or len(store.index) != store.size:
            return None
        store.filled, store.complete = store.size, True
        return store

    def _allocate(self, item_shape, dtype) -> None:
        self.nbytes = int(np.prod(item_shape)) * np.dtype(dtype).itemsize * self.size
        if self.folder is None and self.budget is not None and not self.budget.take(self.nbytes):
            self.folder = self.spill
            logger.info("pixel store of %.2f GiB is over the memory budget: memory-mapped in %s", self.nbytes / 2**30, self.folder)
        shape = (self.size, *item_shape)
        if self.folder is None:
            self.pixels = np.empty(shape, dtype=dtype)
        else:
            self.tmp = self.folder.with_name(f".{self.folder.name}.tmp-{os.getpid()}")
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp.mkdir(parents=True)
            self.pixels = np.lib.format.open_memmap(self.tmp / "pixels.npy", mode="w+", dtype=dtype, shape=shape)
        self.labels = np.empty(self.size, dtype=np.int64)
        self.index = np.empty(self.size, dtype=np.int64)

    def put(self, position: int, images, labels, index) -> None:
        """Store one batch (torch tensors) at ``position``; rows before it must be stored already."""
        if position > self.filled:
            raise ValueError(f"pixel store filled up to {self.filled}, cannot store a batch at {position}")
        array = images.numpy()
        if array.dtype == np.uint8:  # HWC images are kept plane by plane (NCHW memory), as collated for the CPU
            array = array.transpose(0, 3, 1, 2)
        if self.pixels is None:
            self._allocate(array.shape[1:], array.dtype)
        end = position + len(array)
        self.pixels[position:end] = array
        self.labels[position:end] = labels.numpy()
        self.index[position:end] = index.numpy()
        self.filled = max(self.filled, end)
        if self.filled == self.size:
            self._finish()

    def _finish(self) -> None:
        self.complete = True
        if self.folder is None:
            return
        self.pixels.flush()
        np.save(self.tmp / "labels.npy", self.labels)
        np.save(self.tmp / "index.npy", self.index)
        (self.tmp / "meta.json").write_text(json.dumps(self.meta, indent=2) + "\n", encoding="utf-8")
        del self.pixels
        shutil.rmtree(self.folder, ignore_errors=True)
        os.replace(self.tmp, self.folder)
        self.pixels = np.load(self.folder / "pixels.npy", mmap_mode="r", allow_pickle=False)

    def batches(self, start: int, batch_size: int, pin_memory: bool = False) -> Iterator[tuple]:
        """``(images, labels, index)`` torch batches from position ``start`` of a complete store."""
        import torch

        if not self.complete:
            raise ValueError("pixel store is not complete")
        for begin in range(start, self.size, batch_size):
            end = min(begin + batch_size, self.size)
            chunk = self.pixels[begin:end]
            images = torch.from_numpy(chunk if chunk.flags.writeable else np.array(chunk))  # a read-only map: copied
            if images.dtype == torch.uint8:
                images = images.permute(0, 2, 3, 1)  # the NHWC view of the planes
            if pin_memory:
                images = images.pin_memory()
            yield images, torch.from_numpy(self.labels[begin:end].copy()), torch.from_numpy(self.index[begin:end].copy())

    def release(self, keep_on_disk: bool) -> None:
        """Free the memory (and the budget); remove the files unless ``keep_on_disk``."""
        self.pixels = self.labels = self.index = None
        if self.folder is None and self.budget is not None and self.nbytes:
            self.budget.give(self.nbytes)
        if self.folder is not None:
            shutil.rmtree(getattr(self, "tmp", self.folder), ignore_errors=True)
            if not keep_on_disk or not self.complete:
                shutil.rmtree(self.folder, ignore_errors=True)


class MemoryBudget:
    """Bytes of pixel stores that may be held in memory at once (the others are memory-mapped files)."""

    def __init__(self, limit_bytes: int):
        self.left = int(limit_bytes)

    def take(self, nbytes: int) -> bool:
        if nbytes > self.left:
            return False
        self.left -= nbytes
        return True

    def give(self, nbytes: int) -> None:
        self.left += nbytes


class SharedInputs:
    """The batch sources of a run: one store per (dataset rows, preprocessing key) with 2+ models.

    ``expect(group)`` counts a pending job of a group (before the run); ``source(...)`` gives a
    job its batches; ``done(group)`` is called after each job, which frees the store after its last.
    """

    def __init__(self, output: Path, memory_gib: float = 4.0, keep_on_disk: bool = True):
        self.cache = Path(output) / CACHE_DIR
        self.memory_gib, self.keep_on_disk = memory_gib, keep_on_disk
        self.budget = MemoryBudget(int(memory_gib * 2**30))
        self.pending: dict[str, int] = {}
        self.stores: dict[str, PixelStore] = {}
        self.decode_passes = 0

    @staticmethod
    def group(dataset: str, fingerprint: str, key: Optional[str]) -> Optional[str]:
        """The name of a group: the dataset (name and table fingerprint) and the preprocessing key."""
        return None if key is None else json.dumps([dataset, fingerprint, key])

    def expect(self, group: Optional[str]) -> None:
        if group is None:
            return
        self.pending[group] = self.pending.get(group, 0) + 1

    def _folder(self, group: str) -> Path:
        dataset, _, _ = json.loads(group)
        digest = hashlib.sha256(group.encode()).hexdigest()[:16]  # (rows are checked in meta.json)
        from .results import slug

        return self.cache / f"{slug(dataset)}__{digest}"

    def _meta(self, group: str, rows: ImageRows) -> dict:
        dataset, fingerprint, key = json.loads(group)
        return {
            "format": FORMAT, "dataset": dataset, "fingerprint": fingerprint, "rows": rows_digest(rows.indices),
            "preprocessing": key, "size": len(rows),
        }

    def source(self, group: Optional[str], rows: ImageRows, workers: int, device: str):
        """Where a job of ``group`` gets its batches: a stored pass, a pass that fills a store, or its own."""
        cuda = device.startswith("cuda")
        store = self.stores.get(group)
        if store is None and group is not None and rows.preprocess.output_kind() == "pixels":
            folder = self._folder(group)
            store = PixelStore.open(folder, self._meta(group, rows)) if self.keep_on_disk else None
            if store is not None:
                logger.info("reusing the decoded images in %s", folder)
            elif self.pending.get(group, 0) >= 2:
                store = PixelStore(len(rows), self._meta(group, rows), budget=self.budget, spill=folder)
            if store is not None:
                self.stores[group] = store
        if store is not None and store.complete:
            return StoreSource(store, pin_memory=cuda)
        if store is not None:
            store.filled = 0  # (re)fill from the start, e.g. after a model failed mid-pass
        self.decode_passes += 1
        return stream(rows, workers, device, sink=store)

    def done(self, group: Optional[str]) -> None:
        """One job of ``group`` is finished (or failed); after the last, its store is freed."""
        if group is None:
            return
        self.pending[group] = self.pending.get(group, 1) - 1
        if self.pending[group] <= 0 and group in self.stores:
            self.stores.pop(group).release(self.keep_on_disk)

    def close(self) -> None:
        """Free every store; with ``keep_on_disk=False`` remove the cache folder too."""
        for group in list(self.stores):
            self.stores.pop(group).release(self.keep_on_disk)
        if not self.keep_on_disk and self.cache.is_dir():
            shutil.rmtree(self.cache, ignore_errors=True)


class StoreSource:
    """Batches read back from a complete :class:`PixelStore` (no decoding)."""

    def __init__(self, store: PixelStore, pin_memory: bool = False):
        self.store, self.pin_memory = store, pin_memory

    def __len__(self) -> int:
        return self.store.size

    def batches(self, start: int, batch_size: int):
        return self.store.batches(start, batch_size, self.pin_memory)
