"""Decoding JPEGs and resizing pixels: the fastest path that gives the reference pixels.

Measured on this project's photo-like JPEGs (``benchmarks/bench_eval_input.py --decoders``):
libjpeg-turbo through ``simplejpeg`` is the fastest decoder that gives Pillow's pixels bit for
bit, full size and at Pillow's draft scales (1/2, 1/4, 1/8) alike; torchvision's
``decode_jpeg`` gives the same pixels a little slower, Pillow slower still. torch's
antialiased uint8 kernels on a channels-last view resize several times faster than Pillow
and stay within one grey level of it. So :func:`decode_rgb` uses simplejpeg where it is
installed and the JPEG is YCbCr or greyscale, else Pillow (CMYK, PNG, anything else), and
:func:`resize_then_crop` uses torch for bilinear and bicubic.

:func:`decode_jpeg_batch` decodes a batch of JPEGs with torchvision, on the CPU or with nvJPEG
on a CUDA device (``device="cuda"``): the GPU input path, whose batching code runs on the CPU too.
"""

from __future__ import annotations

import functools
import io
import os
import warnings
from typing import Any, Optional, Sequence

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

# interpolations done with torch's antialiased uint8 kernels (vectorised; within one grey level
# of Pillow on <0.5% of pixels); the others go through Pillow
TORCH_INTERPOLATIONS = ("bilinear", "bicubic")

DRAFT_SCALES = (8, 4, 2, 1)


def source_bytes(source: Any) -> Optional[bytes]:
    """The encoded bytes of bytes, a path, or a datasets ``{"bytes", "path"}`` dict (None for a PIL image)."""
    if isinstance(source, dict):
        source = source.get("bytes") or source.get("path")
        if source is None:
            raise ValueError("image entry has neither bytes nor path")
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            return f.read()
    if isinstance(source, Image.Image):
        return None
    raise TypeError(f"cannot read an image from {type(source).__name__}; give bytes, a path or a PIL image")


def open_image(source: Any) -> Image.Image:
    """A lazily decoded Pillow image from bytes, a path, or a datasets ``{"bytes", "path"}`` dict."""
    data = source_bytes(source)
    return source if data is None else Image.open(io.BytesIO(data))


def shorter_side_size(width: int, height: int, short: int) -> tuple[int, int]:
    """``(w, h)`` after resizing the shorter side to ``short``, exactly as torchvision's ``Resize(int)``.

    >>> shorter_side_size(500, 375, 256)
    (341, 256)
    """
    if width <= height:
        return short, int(short * height / width)
    return int(short * width / height), short


def center_crop_offset(width: int, height: int, crop: int) -> tuple[int, int]:
    """``(left, top)`` of a centred ``crop`` × ``crop`` window, as torchvision's ``CenterCrop``.

    >>> center_crop_offset(341, 256, 224)
    (58, 16)
    """
    return int(round((width - crop) / 2.0)), int(round((height - crop) / 2.0))


def draft_scale(size: tuple[int, int], min_size: tuple[int, int]) -> int:
    """The reduction Pillow's ``draft`` picks: the largest of 8, 4, 2, 1 that keeps ``min_size``.

    >>> draft_scale((1024, 768), (341, 256)), draft_scale((500, 375), (341, 256)), draft_scale((300, 200), (384, 256))
    (2, 1, 1)
    """
    room = min(size[0] // max(1, min_size[0]), size[1] // max(1, min_size[1]))
    return next((s for s in DRAFT_SCALES if room >= s), 1)


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


@functools.lru_cache(maxsize=None)
def _simplejpeg():
    try:
        import simplejpeg
    except ImportError:
        return None
    return simplejpeg


def jpeg_header(data: bytes) -> Optional[tuple[int, int]]:
    """``(width, height)`` of a YCbCr or greyscale JPEG that simplejpeg decodes; None otherwise."""
    lib = _simplejpeg()
    if lib is None or data[:2] != b"\xff\xd8":
        return None
    try:
        height, width, colorspace, _ = lib.decode_jpeg_header(data)
    except ValueError:
        return None
    return (width, height) if colorspace in ("YCbCr", "Gray") else None


def decode_rgb(data: bytes, size: tuple[int, int], scale: int = 1):
    """A JPEG that :func:`jpeg_header` accepted as a uint8 HWC tensor, at 1/``scale`` of ``size``
    (the pixels of Pillow's full or draft decode, bit for bit)."""
    import torch

    width, height = size
    array = _simplejpeg().decode_jpeg(
        data, colorspace="RGB", min_factor=scale, min_width=-(-width // scale), min_height=-(-height // scale)
    )
    return torch.from_numpy(array)


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


def decode_jpeg_batch(datas: Sequence, device: str = "cpu") -> list:
    """Decode a batch of JPEGs (uint8 byte tensors) to uint8 CHW tensors on ``device``.

    On CUDA this is one batched nvJPEG call; on the CPU torchvision's libjpeg-turbo decoder
    (Pillow's pixels) image by image.
    """
    decode = _torchvision_jpeg_decoder()
    if decode is None:
        raise RuntimeError("decoding on the device needs torchvision.io.decode_jpeg (torchvision <= 0.29)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return decode(list(datas), device=device)


def resize_then_crop(image, size: tuple[int, int], crop: tuple[int, int, int], interpolation: str, layout: str = "hwc"):
    """Resize ``image`` (Pillow RGB, or a uint8 tensor, HWC or ``layout="chw"``, on any device) to
    ``size`` (w, h) with torch's antialiased kernel, then crop ``(left, top, side)``: uint8 HWC."""
    import torch.nn.functional as F

    pixels = image if not isinstance(image, Image.Image) else pil_to_tensor(image)
    x = (pixels if layout == "chw" else pixels.permute(2, 0, 1)).unsqueeze(0)  # NCHW (a view)
    if (x.shape[3], x.shape[2]) != tuple(size):
        x = F.interpolate(x, size=(size[1], size[0]), mode=interpolation, antialias=True, align_corners=False)
    left, top, side = crop
    return x[0, :, top : top + side, left : left + side].permute(1, 2, 0)  # a view; collate copies
