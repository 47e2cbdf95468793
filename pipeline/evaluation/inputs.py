"""Decode and preprocess images fast, with each model's own preprocessing.

The work is split so that the DataLoader workers do as little as possible and the device does
the rest:

* workers decode the JPEG (at reduced size with Pillow's draft mode when the model's input is at
  most half the image), resize and crop in one ``Image.resize(..., box=...)`` call, and hand
  over uint8 HWC arrays (4× less to copy between processes than float32);
* the main process stacks a batch, moves it to the device, and there converts to float,
  normalises and lays it out channels-last (:meth:`Preprocessing.finish`).

For timm models with the usual center-crop eval transform (``crop_mode="center"``, square
input, ``crop_pct <= 1``) :class:`TimmCenterCrop` reproduces timm's transform
(``Resize(floor(img_size / crop_pct))``, ``CenterCrop(img_size)``, ``ToTensor``, ``Normalize``)
to within one grey level (resizing only the crop region computes the same filter taps up to
float rounding). Other timm transforms run timm's own transform (:class:`TimmTransform`);
transformers models run their image processor (:class:`ProcessorTransform`).

Draft mode changes pixels. A JPEG decoded at 1/2, 1/4 or 1/8 scale is downsampled inside the
IDCT, not by the antialiased filter of the full-size path, so the model sees slightly different
pixels (typically a few grey levels, mostly at edges). Draft mode is only used when the decoded
image is still at least as large as the resize target in both dimensions (so the final resize
still downsamples), and ``draft=False`` (``--no-draft``) turns it off for bit-exact comparisons
with the reference preprocessing. Every result row records whether it was on.
"""

from __future__ import annotations

import functools
import io
import math
import os
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np
from PIL import Image

# timm / torchvision interpolation names -> Pillow resampling filters
INTERPOLATIONS = {
    "nearest": Image.Resampling.NEAREST,
    "bilinear": Image.Resampling.BILINEAR,
    "bicubic": Image.Resampling.BICUBIC,
    "lanczos": Image.Resampling.LANCZOS,
    "box": Image.Resampling.BOX,
    "hamming": Image.Resampling.HAMMING,
}


def open_image(source: Any) -> Image.Image:
    """A lazily decoded Pillow image from bytes, a path, or a datasets ``{"bytes", "path"}`` dict."""
    if isinstance(source, dict):
        source = source.get("bytes") or source.get("path")
        if source is None:
            raise ValueError("image entry has neither bytes nor path")
    if isinstance(source, (bytes, bytearray, memoryview)):
        return Image.open(io.BytesIO(source))
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            return Image.open(io.BytesIO(f.read()))
    if isinstance(source, Image.Image):
        return source
    raise TypeError(f"cannot read an image from {type(source).__name__}; give bytes, a path or a PIL image")


def shorter_side_size(width: int, height: int, short: int) -> tuple[int, int]:
    """``(w, h)`` after resizing the shorter side to ``short``, exactly as torchvision's ``Resize(int)``.

    >>> shorter_side_size(500, 375, 256)
    (341, 256)
    """
    if width <= height:
        return short, int(short * height / width)
    return int(short * width / height), short


def center_crop_offset(width: int, height: int, crop: int) -> tuple[int, int]:
    """``(left, top)`` of a centred ``crop`` × ``crop`` window, as torchvision's ``CenterCrop``."""
    return int(round((width - crop) / 2.0)), int(round((height - crop) / 2.0))


def draft_decode(image: Image.Image, min_size: tuple[int, int]) -> tuple[Image.Image, int]:
    """Ask the JPEG decoder for a 1/2, 1/4 or 1/8 scale image no smaller than ``min_size``.

    Returns the image (not yet decoded) and the reduction factor (1 when nothing was reduced:
    not a JPEG, or not at least twice ``min_size``).
    """
    if image.format != "JPEG":
        return image, 1
    width = image.size[0]
    result = image.draft(image.mode, (max(1, min_size[0]), max(1, min_size[1])))
    if result is None:
        return image, 1
    return image, max(1, round(width / result[1][2]))


def to_rgb(image: Image.Image) -> Image.Image:
    return image if image.mode == "RGB" else image.convert("RGB")


def pil_to_tensor(image: Image.Image):
    """An RGB image as a uint8 HWC tensor, sharing Pillow's pixel buffer (read-only: not written to)."""
    import torch

    with warnings.catch_warnings():  # torch warns (once) that the buffer is read-only
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(np.asarray(image))


# interpolations done with torch's antialiased uint8 kernels (vectorised; within one grey level
# of Pillow on <0.5% of pixels); the others go through Pillow
TORCH_INTERPOLATIONS = ("bilinear", "bicubic")


@functools.lru_cache(maxsize=None)
def _torchvision_jpeg_decoder():
    """torchvision's libjpeg-turbo decoder (deprecated since torchvision 0.29 in favour of
    TorchCodec, still present up to the pinned 0.29.1), or None where it is gone."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from torchvision.io import ImageReadMode, decode_jpeg
    except ImportError:
        return None
    return functools.partial(decode_jpeg, mode=ImageReadMode.RGB)


def decode_jpeg_tensor(image: Image.Image):
    """The JPEG behind a lazily opened Pillow image as a uint8 HWC tensor: decoded by torchvision
    straight into a tensor (the same libjpeg-turbo pixels as Pillow, ~20% faster), else by Pillow."""
    import torch

    decode = _torchvision_jpeg_decoder()
    if decode is None:
        return pil_to_tensor(to_rgb(image))
    image.fp.seek(0)
    data = torch.frombuffer(bytearray(image.fp.read()), dtype=torch.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return decode(data).permute(1, 2, 0)


def resize_then_crop(image, size: tuple[int, int], crop: tuple[int, int, int], interpolation: str):
    """Resize ``image`` (Pillow RGB, or uint8 HWC tensor) to ``size`` (w, h) with torch's antialiased
    kernel, then crop ``(left, top, side)``."""
    import torch.nn.functional as F

    pixels = image if not isinstance(image, Image.Image) else pil_to_tensor(image)
    x = pixels.permute(2, 0, 1).unsqueeze(0)  # NCHW view, channels-last strides
    if (x.shape[3], x.shape[2]) != tuple(size):
        x = F.interpolate(x, size=(size[1], size[0]), mode=interpolation, antialias=True, align_corners=False)
    left, top, side = crop
    return x[0, :, top : top + side, left : left + side].permute(1, 2, 0)  # a view; collate copies


class Preprocessing:
    """One model's preprocessing: ``__call__`` runs in a worker, ``finish`` on the batch on device."""

    output = "uint8-hwc"  # what __call__ returns: "uint8-hwc" arrays or "float-chw" tensors

    def __call__(self, source: Any):  # pragma: no cover - interface
        raise NotImplementedError

    def finish(self, batch, device, channels_last: bool = False):
        """A float NCHW batch on ``device`` from the stacked worker outputs."""
        import torch

        batch = batch.to(device, non_blocking=True)
        if self.output == "uint8-hwc":
            batch = batch.permute(0, 3, 1, 2)  # a channels-last view of NCHW
            if not channels_last:
                batch = batch.contiguous()  # cheaper in uint8 than in float
            # (x / 255 - mean) / std as one multiply and one subtract, in place
            scale = torch.tensor([1 / (255 * s) for s in self.std], device=device).view(1, -1, 1, 1)
            shift = torch.tensor([m / s for m, s in zip(self.mean, self.std)], device=device).view(1, -1, 1, 1)
            return batch.float().mul_(scale).sub_(shift)
        if channels_last:
            return batch.contiguous(memory_format=torch.channels_last)
        return batch.contiguous()

    def describe(self) -> str:
        """A short record of the preprocessing, stored with every result."""
        return type(self).__name__


@dataclass
class TimmCenterCrop(Preprocessing):
    """timm's center-crop eval transform, done in one resize call (optionally from a draft decode).

    >>> import numpy as np
    >>> from pipeline.toys.synthetic import photo_like_jpeg
    >>> t = TimmCenterCrop(img_size=224, crop_pct=0.875, interpolation="bilinear",
    ...                    mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    >>> t(photo_like_jpeg(np.random.default_rng(0))).shape
    torch.Size([224, 224, 3])
    """

    img_size: int
    crop_pct: float
    interpolation: str
    mean: tuple
    std: tuple
    draft: bool = True

    def __post_init__(self):
        if self.interpolation not in INTERPOLATIONS:
            raise ValueError(f"unknown interpolation {self.interpolation!r}; known: {sorted(INTERPOLATIONS)}")
        self.scale_size = math.floor(self.img_size / self.crop_pct)
        if self.scale_size < self.img_size:
            raise ValueError(f"crop_pct must be <= 1 for a center crop, got {self.crop_pct}")
        self.resample = INTERPOLATIONS[self.interpolation]

    def __call__(self, source: Any):
        image = open_image(source)
        width, height = image.size
        resized_w, resized_h = shorter_side_size(width, height, self.scale_size)
        left, top = center_crop_offset(resized_w, resized_h, self.img_size)
        factor = 1
        if self.draft:
            image, factor = draft_decode(image, (resized_w, resized_h))
        crop = (left, top, self.img_size)
        if self.interpolation in TORCH_INTERPOLATIONS:
            if factor == 1 and image.format == "JPEG" and image.mode in ("RGB", "L"):
                # full-size decode straight into a tensor (libjpeg-turbo, as Pillow), no Pillow image
                return resize_then_crop(decode_jpeg_tensor(image), (resized_w, resized_h), crop, self.interpolation)
            return resize_then_crop(to_rgb(image), (resized_w, resized_h), crop, self.interpolation)
        image = to_rgb(image)
        # Pillow-only filters: resize the whole image, then crop (exactly timm's steps)
        image = image.resize((resized_w, resized_h), self.resample)
        return pil_to_tensor(image.crop((left, top, left + self.img_size, top + self.img_size)))

    def describe(self) -> str:
        return (
            f"timm center crop {self.img_size} from shorter side {self.scale_size} "
            f"(crop_pct {self.crop_pct}, {self.interpolation}), draft={self.draft}"
        )


class TimmTransform(Preprocessing):
    """Any other timm eval transform, run as timm builds it (uint8 out, normalised on device)."""

    def __init__(self, data_config: dict):
        from timm.data import create_transform

        self.data_config = dict(data_config)
        self.mean, self.std = tuple(data_config["mean"]), tuple(data_config["std"])
        self.transform = create_transform(**self.data_config, is_training=False, use_prefetcher=True)

    def __call__(self, source: Any):
        tensor = self.transform(to_rgb(open_image(source)))  # uint8 CHW
        return tensor.permute(1, 2, 0).contiguous()

    def describe(self) -> str:
        cfg = self.data_config
        return f"timm transform {cfg.get('input_size')} crop_mode={cfg.get('crop_mode')} crop_pct={cfg.get('crop_pct')}"


def _size_field(size, key: str):
    """A field of an image processor's ``size`` (a dict, or transformers' ``SizeDict``)."""
    value = size.get(key) if isinstance(size, dict) else getattr(size, key, None)
    return int(value) if value else None


def processor_target_size(processor) -> Optional[tuple[str, int, int]]:
    """What an image processor resizes to: ``("exact", w, h)`` or ``("shortest", n, n)``; None if unknown."""
    size = getattr(processor, "size", None)
    if not size or not getattr(processor, "do_resize", True):
        return None
    height, width, shortest = (_size_field(size, k) for k in ("height", "width", "shortest_edge"))
    if height and width:
        return "exact", width, height
    if shortest:
        crop_pct = getattr(processor, "crop_pct", None)
        if crop_pct and shortest < 384:  # ConvNext-style: resize to n / crop_pct, then crop n
            shortest = int(shortest / crop_pct)
        return "shortest", shortest, shortest
    return None


class ProcessorTransform(Preprocessing):
    """A transformers image processor, run per image in the workers (float CHW out)."""

    output = "float-chw"

    def __init__(self, processor, draft: bool = True):
        self.processor = processor
        self.draft = draft
        self.target = processor_target_size(processor)

    def __call__(self, source: Any):
        image = open_image(source)
        if self.draft and self.target is not None:
            kind, w, h = self.target
            if kind == "shortest":
                scale = w / min(image.size)
                w, h = math.ceil(image.size[0] * scale), math.ceil(image.size[1] * scale)
            image, _ = draft_decode(image, (w, h))
        return self.processor(images=to_rgb(image), return_tensors="pt")["pixel_values"][0]

    def describe(self) -> str:
        target = self.target and f"{self.target[0]} {self.target[1]}x{self.target[2]}"
        return f"{type(self.processor).__name__} (resize {target}), draft={self.draft}"


def timm_preprocessing(data_config: dict, draft: bool = True) -> Preprocessing:
    """The fast center-crop path where timm's config allows it, else timm's own transform."""
    _, height, width = data_config["input_size"]
    crop_pct = data_config.get("crop_pct") or 0.875
    if (
        data_config.get("crop_mode", "center") == "center"
        and height == width
        and crop_pct <= 1
        and not data_config.get("crop_border_pixels")
        and data_config.get("interpolation", "bilinear") in INTERPOLATIONS
    ):
        return TimmCenterCrop(
            img_size=height,
            crop_pct=crop_pct,
            interpolation=data_config.get("interpolation", "bilinear"),
            mean=tuple(data_config["mean"]),
            std=tuple(data_config["std"]),
            draft=draft,
        )
    return TimmTransform(data_config)


# --- datasets and loaders ------------------------------------------------------------------


class ImageRows:
    """A map-style dataset over images (bytes, paths or datasets image dicts) and labels.

    Items are ``(preprocessed image, label, row index)``; ``__getitems__`` fetches a whole batch
    of sources at once (one Arrow slice for a datasets table).
    """

    def __init__(self, fetch: Callable[[Sequence[int]], tuple[list, list]], size: int, preprocess: Preprocessing, indices=None):
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


def collate(items: list):
    """Stack ``(image, label, index)`` items into ``(images, labels, indices)`` tensors."""
    import torch

    return (
        torch.stack([item[0] for item in items]),
        torch.tensor([item[1] for item in items], dtype=torch.int64),
        torch.tensor([item[2] for item in items], dtype=torch.int64),
    )


def make_loader(dataset: ImageRows, batch_size: int, num_workers: int, pin_memory: bool = False):
    """A DataLoader in row order with ``num_workers`` worker processes.

    Workers are not persistent: each loader makes exactly one pass (a new loader is made only
    when out-of-memory retry shrinks the batch).
    """
    from torch.utils.data import DataLoader

    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=False,
        num_workers=num_workers,
        collate_fn=collate,
        pin_memory=pin_memory,
        prefetch_factor=4 if num_workers > 0 else None,
    )
