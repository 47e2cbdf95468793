"""Rows of a dataset as batches: fetching image sources, the DataLoader, and batch sources.

A *batch source* yields ``(images, labels, row indices)`` batches from a position on (so that an
out-of-memory retry resumes where it stopped): :class:`StreamSource` decodes in DataLoader
workers (and may hand every batch to a sink, e.g. a :class:`~.shared.PixelStore` being filled),
a filled store reads its pixels back (:meth:`~.shared.PixelStore.batches`).
"""

from __future__ import annotations

import functools
from typing import Callable, Iterator, Optional, Sequence


class ImageRows:
    """A map-style dataset over images (bytes, paths or datasets image dicts) and labels.

    Items are ``(preprocessed image, label, row index)``; ``__getitems__`` fetches a whole batch
    of sources at once (one Arrow slice for a datasets table).
    """

    def __init__(self, fetch: Callable[[Sequence[int]], tuple[list, list]], size: int, preprocess, indices=None):
        self.fetch, self.size, self.preprocess = fetch, size, preprocess
        self.indices = list(range(size)) if indices is None else list(indices)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitems__(self, positions: Sequence[int]) -> list:
        rows = [self.indices[p] for p in positions]
        sources, labels = self.fetch(rows)
        return [(self.preprocess(s), int(y), i) for s, y, i in zip(sources, labels, rows)]

    def __getitem__(self, position: int):
        return self.__getitems__([position])[0]

    def subset(self, start: int) -> "ImageRows":
        """The same rows from position ``start`` on (to resume a pass with another batch size)."""
        return ImageRows(self.fetch, self.size, self.preprocess, self.indices[start:])


class TableFetch:
    """Fetch image sources and labels from a datasets table (image column not decoded)."""

    def __init__(self, table, image_column: str, label_column: str):
        import datasets

        table = table.select_columns([image_column, label_column])
        self.table = table.cast_column(image_column, datasets.Image(decode=False))
        self.image_column, self.label_column = image_column, label_column

    def __call__(self, rows: Sequence[int]):
        batch = self.table[list(rows)]
        return batch[self.image_column], batch[self.label_column]


class FileFetch:
    """Fetch image files by path (the benchmark's ImageFolder-like tree)."""

    def __init__(self, paths: Sequence[str], labels: Sequence[int]):
        self.paths, self.labels = list(paths), list(labels)

    def __call__(self, rows: Sequence[int]):
        return [self.paths[r] for r in rows], [self.labels[r] for r in rows]


def collate(items: list, planar: bool = False):
    """Stack ``(image, label, index)`` items into ``(images, labels, indices)`` tensors.

    Images of one shape are stacked; otherwise (JPEG bytes for decoding on the device) they stay a
    list. With ``planar``, uint8 HWC images are laid out plane by plane (NCHW memory, seen through
    an NHWC view), so that normalising on the CPU needs no transposition in the main process.
    """
    import torch

    images = [item[0] for item in items]
    same = all(x.dim() == 3 and x.shape == images[0].shape for x in images)
    if same and planar and images[0].dtype == torch.uint8:
        batch = stack([x.permute(2, 0, 1) for x in images]).permute(0, 2, 3, 1)
    else:
        batch = stack(images) if same else images
    return (
        batch,
        torch.tensor([item[1] for item in items], dtype=torch.int64),
        torch.tensor([item[2] for item in items], dtype=torch.int64),
    )


def stack(images: list):
    """``torch.stack``, straight into shared memory in a DataLoader worker (as torch's default collate
    does), so that handing the batch to the main process copies nothing more."""
    import torch
    from torch.utils.data import get_worker_info

    if get_worker_info() is None:
        return torch.stack(images)
    first = images[0]
    storage = first._typed_storage()._new_shared(len(images) * first.numel(), device=first.device)
    out = first.new(storage).resize_(len(images), *first.shape)
    return torch.stack(images, out=out)


def make_loader(dataset: ImageRows, batch_size: int, num_workers: int, pin_memory: bool = False, planar: bool = False):
    """A DataLoader in row order with ``num_workers`` worker processes (``planar``: see :func:`collate`).

    Workers are not persistent: each loader makes exactly one pass (a new loader is made only
    when out-of-memory retry shrinks the batch).
    """
    from torch.utils.data import DataLoader

    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=False,
        num_workers=num_workers,
        collate_fn=functools.partial(collate, planar=planar),
        pin_memory=pin_memory,
        prefetch_factor=4 if num_workers > 0 else None,
    )


class StreamSource:
    """Batches decoded by DataLoader workers; each batch also goes to ``sink.put(position, ...)`` if given.

    Loading overlaps with compute: the workers decode the next batches (``prefetch_factor`` 4
    each) while the model runs on this one, into pinned memory when the model is on CUDA.
    """

    def __init__(self, rows: ImageRows, workers: int, pin_memory: bool = False, sink=None, planar: bool = False):
        self.rows, self.workers, self.pin_memory, self.sink, self.planar = rows, workers, pin_memory, sink, planar
        self.passes = 0  # decoding passes started (a resumed pass counts again)

    def __len__(self) -> int:
        return len(self.rows)

    def batches(self, start: int, batch_size: int) -> Iterator[tuple]:
        self.passes += 1
        position = start
        for images, labels, index in make_loader(self.rows.subset(start), batch_size, self.workers, self.pin_memory, self.planar):
            if self.sink is not None:
                self.sink.put(position, images, labels, index)
            position += len(index)
            yield images, labels, index


def stream(rows: ImageRows, workers: int, device: str, sink: Optional[object] = None) -> StreamSource:
    """The batch source of a model decoding for itself: into pinned memory, channels-last, for CUDA;
    planar (NCHW memory) for the CPU."""
    cuda = device.startswith("cuda")
    return StreamSource(rows, workers, pin_memory=cuda, sink=sink, planar=not cuda)
