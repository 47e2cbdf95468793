"""Reading the released ``.npy`` files: never a pickle, and only arrays shaped like the release.

Each check names the file, what it holds and what the release holds, so that a wrong download,
a file from another dataset or a hand-edited array is caught before anything is written.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .variants import CLASS_NAMES, IMAGE_SHAPE

NPY_MAGIC = b"\x93NUMPY"


def load_npy(path: os.PathLike | str) -> np.ndarray:
    """Load a ``.npy`` file with ``allow_pickle=False``; refuse pickles and other formats by name.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.npy"
    >>> np.save(p, np.array([{"a": 1}], dtype=object))
    >>> load_npy(p)
    Traceback (most recent call last):
    ...
    ValueError: ...x.npy holds pickled Python objects (dtype object), not a plain array; ...
    """
    path = Path(path)
    with open(path, "rb") as f:
        magic = f.read(len(NPY_MAGIC))
    if magic != NPY_MAGIC:
        kind = "a Python pickle" if magic[:1] == b"\x80" else "not a .npy file"
        raise ValueError(
            f"{path} is {kind} (it starts with {magic!r}, a .npy file starts with {NPY_MAGIC!r}); "
            f"the released CIFAR-10.1 files are plain .npy arrays: download the file again."
        )
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as e:
        if "pickle" not in str(e):
            raise ValueError(f"{path} is not a readable .npy array ({e}); download the file again.") from e
        raise ValueError(
            f"{path} holds pickled Python objects (dtype object), not a plain array; it is refused "
            f"because loading a pickle can run arbitrary code. The released CIFAR-10.1 files are "
            f"plain numeric arrays: download the file again."
        ) from None
    return array


def check_images(images: np.ndarray, name: str) -> None:
    """Raise ``ValueError`` unless ``images`` is an (N, 32, 32, 3) uint8 array."""
    expected = "(N, " + ", ".join(map(str, IMAGE_SHAPE)) + ")"
    if images.ndim != 4 or images.shape[1:] != IMAGE_SHAPE:
        raise ValueError(
            f"{name} has shape {images.shape}, but CIFAR-10.1 images are an array of shape {expected} "
            f"(N images of 32×32 pixels, RGB channels last); this is not a released CIFAR-10.1 image file."
        )
    if images.dtype != np.uint8:
        raise ValueError(
            f"{name} has dtype {images.dtype}, but CIFAR-10.1 images are uint8 (pixel values 0-255); "
            f"this is not a released CIFAR-10.1 image file."
        )


def check_labels(labels: np.ndarray, name: str) -> np.ndarray:
    """Return ``labels`` as int64 after checking it is a 1-D integer array of class indices 0-9."""
    if labels.ndim != 1:
        raise ValueError(f"{name} has shape {labels.shape}, but CIFAR-10.1 labels are a 1-D array (N,).")
    if labels.dtype.kind not in "iu":
        raise ValueError(
            f"{name} has dtype {labels.dtype}, but CIFAR-10.1 labels are integers (class indices 0-9)."
        )
    bad = np.flatnonzero((labels < 0) | (labels >= len(CLASS_NAMES)))
    if bad.size:
        shown = ", ".join(f"{labels[i]} at position {i}" for i in bad[:5])
        raise ValueError(
            f"{name} has {bad.size} label(s) outside 0-{len(CLASS_NAMES) - 1} ({shown}); CIFAR-10.1 "
            f"labels index the CIFAR-10 classes {', '.join(CLASS_NAMES)}."
        )
    return labels.astype(np.int64)


def check_same_length(images: np.ndarray, labels: np.ndarray, images_name: str, labels_name: str) -> None:
    """Raise ``ValueError`` unless there is one label per image."""
    if len(images) != len(labels):
        raise ValueError(
            f"{images_name} holds {len(images)} images but {labels_name} holds {len(labels)} labels; "
            f"they must be the two files of the same CIFAR-10.1 version."
        )
