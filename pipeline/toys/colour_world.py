"""The demo's colour world: 16x16 JPEGs whose quadrant colours code the class, and classifiers that read them.

An image is blended toward the colours of a similar class the harder it is (the lower its true
selection frequency), plus pixel noise; a nearest-colour classifier with more noise is a weaker
model. The demo evaluates a few of them on the originals and on each new set.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.toys.synthetic_pool import SyntheticPool

IMAGE_SIZE = 16
_HALF = IMAGE_SIZE // 2
_QUADRANTS = tuple((slice(r, r + _HALF), slice(c, c + _HALF)) for r in (0, _HALF) for c in (0, _HALF))
PIXEL_NOISE = 12.0
MAX_BLEND = 0.8  # how far toward the similar class an image with true selection frequency 0 is


@dataclass(frozen=True)
class ColourClassifier:
    """A nearest-prototype classifier on the mean colours of the image's four quadrants.

    Its prototypes are the class codes plus Gaussian noise (``prototype_noise``), and it adds
    ``feature_noise`` to what it sees: more noise, a weaker model.
    """

    name: str
    prototype_noise: float
    feature_noise: float
    seed: int

    def predict(self, features: np.ndarray, codes: np.ndarray) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        prototypes = codes + rng.normal(0, self.prototype_noise, codes.shape)
        seen = features + rng.normal(0, self.feature_noise, features.shape)
        out = np.empty(len(seen), np.int64)
        squared = (prototypes**2).sum(axis=1)
        for start in range(0, len(seen), 4096):
            chunk = seen[start : start + 4096]
            out[start : start + 4096] = np.argmin(squared[None, :] - 2 * chunk @ prototypes.T, axis=1)
        return out


CLASSIFIERS = (
    ColourClassifier("colour-a (strongest)", 3.0, 3.0, 1),
    ColourClassifier("colour-b", 10.0, 10.0, 2),
    ColourClassifier("colour-c", 14.0, 14.0, 3),
    ColourClassifier("colour-d", 18.0, 18.0, 4),
    ColourClassifier("colour-e (weakest)", 24.0, 24.0, 5),
)


# --- the synthetic inputs --------------------------------------------------------------------


def class_codes(n_classes: int, seed: int) -> np.ndarray:
    """The four RGB colours (12 numbers, one per quadrant) that code each class."""
    return np.random.default_rng([seed, 7]).uniform(30, 225, (n_classes, 12))


def image_codes(pool: SyntheticPool, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The noiseless 12-number code of every candidate and original, blended toward a similar class."""
    from pipeline.toys.synthetic_pool import _negative_control_classes

    similar = _negative_control_classes(pool.wnids)

    def blend(classes, true_sf):
        t = (MAX_BLEND * (1 - true_sf))[:, None]
        return (1 - t) * codes[classes] + t * codes[similar[classes]]

    return blend(pool.candidate_class, pool.candidate_true_sf), blend(pool.original_class, pool.original_true_sf)


def encode_images(codes12: np.ndarray, seed: int, progress) -> list[bytes]:
    """One 16×16 JPEG per image: quadrant q (row-major) has colour ``codes12[:, 3q:3q+3]``, plus noise."""
    from pipeline.toys.synthetic import encode_jpeg

    rng = np.random.default_rng([seed, 11])
    encoded = []
    for start in progress(range(0, len(codes12), 1024)):
        block = codes12[start : start + 1024]
        pixels = np.empty((len(block), IMAGE_SIZE, IMAGE_SIZE, 3))
        for q, (rows, cols) in enumerate(_QUADRANTS):
            pixels[:, rows, cols] = block[:, None, None, 3 * q : 3 * q + 3]
        pixels += rng.normal(0, PIXEL_NOISE, pixels.shape)
        encoded.extend(encode_jpeg(array, quality=90) for array in np.clip(pixels, 0, 255).astype(np.uint8))
    return encoded


def write_image_table(path: Path, id_column: str, ids, images: list[bytes]) -> Path:
    """An image dump as a downloader might leave it: a Parquet table of ids and JPEG bytes."""
    import pyarrow as pa

    from pipeline.rebuild.tables import write_table

    return write_table(pa.table({id_column: pa.array(list(ids), pa.string()), "image": pa.array(images, pa.binary())}), path)


def features_of_jpeg(data: bytes) -> np.ndarray:
    """The classifier's input: the mean colours of the four quadrants (12 numbers)."""
    import io

    from PIL import Image

    array = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=float)
    return np.concatenate([array[rows, cols].mean(axis=(0, 1)) for rows, cols in _QUADRANTS])
