"""DSSIM = (1 - SSIM) / 2 on 256 x 256 RGB copies, as the original pipeline computed it.

SSIM is scikit-image's ``structural_similarity(a, b, win_size=35, channel_axis=-1,
data_range=255)``: a uniform 35 x 35 window, sample covariance (``N / (N - 1)``), K1 = 0.01,
K2 = 0.03, the SSIM map cropped by half a window on each side, averaged over the pixels and the
three channels. The per-image parts (window means and variances) are computed once per image
(:class:`SsimStats`) and only the cross term per pair, which makes a pair about a third of the
cost of a call to scikit-image.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> a = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
>>> round(dssim(a, a), 6)
0.0
>>> 0.0 < float(dssim(a, 255 - a)) <= 1.0
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.ndimage import uniform_filter1d

WINDOW = 35
DATA_RANGE = 255.0
K1, K2 = 0.01, 0.03
_C1 = (K1 * DATA_RANGE) ** 2
_C2 = (K2 * DATA_RANGE) ** 2


@dataclass(frozen=True)
class SsimStats:
    """Window means and sample variances of a batch of images (cropped to the valid region)."""

    pixels: np.ndarray  # (n, h, w, c) float32, the images
    mean: np.ndarray  # (n, h', w', c) float32
    variance: np.ndarray  # (n, h', w', c) float32, sample variance (N / (N - 1))
    window: int


def _box(values: np.ndarray, window: int) -> np.ndarray:
    """Window means over axes 1 and 2, cropped to the positions whose window lies inside the image."""
    pad = (window - 1) // 2
    rows = uniform_filter1d(values, window, axis=1, mode="reflect")[:, pad : values.shape[1] - pad]
    return uniform_filter1d(rows, window, axis=2, mode="reflect")[:, :, pad : values.shape[2] - pad]


def _check_images(images: np.ndarray, window: int) -> np.ndarray:
    images = np.asarray(images)
    if images.ndim == 3:
        images = images[None]
    if images.ndim != 4:
        raise ValueError(f"expected images shaped (n, height, width, channels), got shape {images.shape}")
    if window < 3 or window % 2 == 0:
        raise ValueError(f"the SSIM window must be odd and at least 3, got {window}")
    if min(images.shape[1:3]) < window:
        raise ValueError(f"images of {images.shape[1]} x {images.shape[2]} are smaller than the {window}-pixel SSIM window")
    return images


def ssim_stats(images: np.ndarray, window: int = WINDOW) -> SsimStats:
    """The per-image parts of SSIM for ``images`` (n, h, w, c) or one image (h, w, c), pixel scale 0..255."""
    images = _check_images(images, window)
    pixels = images.astype(np.float32)
    as64 = pixels.astype(np.float64)
    mean = _box(as64, window)
    norm = window * window / (window * window - 1.0)
    variance = norm * (_box(as64 * as64, window) - mean * mean)
    return SsimStats(pixels, mean.astype(np.float32), variance.astype(np.float32), window)


def ssim_against(query: SsimStats, index: int, references: SsimStats) -> np.ndarray:
    """SSIM of image ``index`` of ``query`` against every image of ``references`` (a float64 array).

    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> a = rng.integers(0, 256, (3, 40, 40, 3), dtype=np.uint8)
    >>> s = ssim_stats(a)
    >>> float(ssim_against(s, 0, s)[0].round(6))
    1.0
    """
    if query.pixels.shape[1:] != references.pixels.shape[1:]:
        raise ValueError(
            f"cannot compare images of shape {query.pixels.shape[1:]} with images of shape "
            f"{references.pixels.shape[1:]}: SSIM needs images of one size (the near-duplicate copies are 256 x 256)"
        )
    if query.window != references.window:
        raise ValueError(f"SSIM statistics with windows {query.window} and {references.window} cannot be combined")
    window = query.window
    norm = np.float32(window * window / (window * window - 1.0))
    x = query.pixels[index]
    mx, vx = query.mean[index], query.variance[index]
    out = np.empty(len(references.pixels))
    mx2 = (mx * mx)[None]
    for start in range(0, len(out), 16):
        stop = start + 16
        y = references.pixels[start:stop]
        my, vy = references.mean[start:stop], references.variance[start:stop]
        covariance = _box(y * x[None], window)
        covariance -= my * mx[None]
        covariance *= 2 * norm
        covariance += _C2
        numerator = my * (2 * mx[None])
        numerator += _C1
        numerator *= covariance
        denominator = my * my
        denominator += mx2 + _C1
        denominator *= vy + (vx[None] + _C2)
        numerator /= denominator
        out[start:stop] = numerator.mean(axis=(1, 2, 3), dtype=np.float64)
    return out


def ssim(a: np.ndarray, b: np.ndarray, window: int = WINDOW) -> float:
    """SSIM of two images of one shape (h, w, c), pixel scale 0..255."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise ValueError(f"cannot compare an image of shape {a.shape} with one of shape {b.shape}; resize both to 256 x 256 first")
    return float(ssim_against(ssim_stats(a, window), 0, ssim_stats(b, window))[0])


def dssim(a: np.ndarray, b: np.ndarray, window: int = WINDOW) -> float:
    """(1 - SSIM) / 2 of two images of one shape: 0 for identical images, at most 1."""
    return (1.0 - ssim(a, b, window)) / 2.0
