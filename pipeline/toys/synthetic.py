"""Synthetic images for tests, benchmarks and the offline demo.

:func:`photo_like_jpeg` makes JPEGs with the size and entropy of real photos (about 110 KB at
500×375, so decoding and I/O cost what they cost on the real sets); :func:`tiny_jpeg` makes
small valid JPEGs fast, for tests that need many files.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image


def photo_like_array(rng: np.random.Generator, width: int = 500, height: int = 375) -> np.ndarray:
    """An RGB uint8 array with smooth structure plus fine texture, like a natural photo."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    image = np.empty((height, width, 3), np.float32)
    for c in range(3):
        fx, fy = rng.uniform(0.5, 6.0, 2) * 2 * np.pi / np.array([width, height])
        phase = rng.uniform(0, 2 * np.pi, 2)
        image[..., c] = 128 + 60 * np.sin(fx * x + phase[0]) * np.cos(fy * y + phase[1])
    for _ in range(int(rng.integers(3, 8))):  # a few blobs
        cx, cy, r = rng.uniform(0, width), rng.uniform(0, height), rng.uniform(20, 120)
        mask = np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * r * r))
        image += mask[..., None] * rng.uniform(-90, 90, 3)
    image += rng.normal(0, 24, image.shape).astype(np.float32)  # sensor-like texture
    return np.clip(image, 0, 255).astype(np.uint8)


def encode_jpeg(array: np.ndarray, quality: int = 90) -> bytes:
    """JPEG bytes of an RGB or grayscale uint8 array."""
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


def photo_like_jpeg(rng: np.random.Generator, width: int = 500, height: int = 375, quality: int = 90) -> bytes:
    """A photo-like JPEG (about 110 KB at the default size).

    >>> data = photo_like_jpeg(np.random.default_rng(0))
    >>> 80_000 < len(data) < 160_000, data[:2] == b"\\xff\\xd8"
    (True, True)
    """
    return encode_jpeg(photo_like_array(rng, width, height), quality)


def tiny_jpeg(seed: int, size: int = 8, color: tuple[int, int, int] | None = None) -> bytes:
    """A small valid JPEG whose pixels depend on ``seed`` (and on ``color`` if given).

    >>> len(tiny_jpeg(1)) < 1000
    True
    """
    rng = np.random.default_rng(seed)
    array = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
    if color is not None:
        array = (array // 4 + np.asarray(color, np.uint8) * 3 // 4).astype(np.uint8)
    return encode_jpeg(array, quality=85)
