"""One CIFAR-10.1 version as released: its files found, verified, read and checked, row by row.

The builder calls these in order: :func:`expected_checksums` (the table's, or overrides),
:func:`locate_files` (``data_dir`` mode) or a download, :func:`verify_files`, :func:`read_release`.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Iterator, Mapping, NamedTuple, Optional

import numpy as np
from PIL import Image

from pipeline.core.integrity import FileChecksum, verify_file

from .arrays import check_images, check_labels, check_same_length, load_npy
from .provenance import image_keywords, ti_indices
from .variants import VARIANTS, Variant


class Release(NamedTuple):
    """The arrays of one version and each image's provenance, all of the same length."""

    version: str
    images: np.ndarray  # (N, 32, 32, 3) uint8
    labels: np.ndarray  # (N,) int64, 0-9
    ti_indices: list[int]
    keywords: list[str]

    def __len__(self) -> int:
        return len(self.labels)

    def tables(self, schema, batch_rows: int = 1000) -> Iterator:
        """The dataset rows in array order as Arrow tables of ``schema`` (the features'); images as
        PNG bytes, which decode to the array exactly."""
        import pyarrow as pa

        for start in range(0, len(self.labels), batch_rows):
            stop = min(start + batch_rows, len(self.labels))
            pngs = [encode_png(self.images[i]) for i in range(start, stop)]
            columns = {
                "image": pa.StructArray.from_arrays(
                    [pa.array(pngs, pa.binary()), pa.nulls(stop - start, pa.string())], names=["bytes", "path"]
                ),
                "label": pa.array(self.labels[start:stop], pa.int64()),
                "index": pa.array(range(start, stop), pa.int32()),
                "ti_index": pa.array(self.ti_indices[start:stop], pa.int64()),
                "keyword": pa.array(self.keywords[start:stop], pa.string()),
            }
            yield pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)


def encode_png(array: np.ndarray) -> bytes:
    """Lossless PNG bytes of an RGB uint8 array.

    >>> a = np.arange(32 * 32 * 3, dtype=np.uint8).reshape(32, 32, 3)
    >>> np.array_equal(np.asarray(Image.open(io.BytesIO(encode_png(a)))), a)
    True
    """
    buffer = io.BytesIO()
    Image.fromarray(array, mode="RGB").save(buffer, format="PNG")
    return buffer.getvalue()


def expected_checksums(variant: Variant, overrides: Optional[Mapping[str, FileChecksum]] = None) -> dict[str, FileChecksum]:
    """The pinned checksum of each of ``variant``'s files by role, with ``overrides`` (by file name) applied.

    Overrides let a build verify other bytes than the release's (for example synthetic test
    files) through the same verification. They may name the files of any CIFAR-10.1 version
    (those of other versions are ignored); any other name is refused.

    >>> from cifar10_1.variants import get_variant
    >>> v4 = get_variant("v4")
    >>> expected_checksums(v4, {"cifar10.1_v4_data.npy": FileChecksum("cifar10.1_v4_data.npy", 3, "ab")})["images"].size
    3
    >>> expected_checksums(v4, {"cifar10.1_v4_data.np": FileChecksum("cifar10.1_v4_data.np", 3, "ab")})
    Traceback (most recent call last):
    ...
    ValueError: checksum override for 'cifar10.1_v4_data.np', which is not a released CIFAR-10.1 file; the files are ...
    """
    files = dict(variant.files)
    role_of = {f.name: role for role, f in files.items()}
    released = sorted(f.name for v in VARIANTS for f in v.files.values())
    for name, checksum in (overrides or {}).items():
        if name not in released:
            raise ValueError(
                f"checksum override for {name!r}, which is not a released CIFAR-10.1 file; the files are {released}."
            )
        if not isinstance(checksum, FileChecksum) or checksum.name != name:
            raise ValueError(f"checksum override for {name!r} must be a FileChecksum named {name!r}, got {checksum!r}")
        if name in role_of:
            files[role_of[name]] = checksum
    return files


def locate_files(variant: Variant, data_dir: os.PathLike | str) -> dict[str, Path]:
    """Paths of ``variant``'s files in ``data_dir``, under their released names."""
    folder = Path(data_dir).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"data_dir {str(data_dir)!r} is not a folder; give the folder holding the released .npy files.")
    paths = {role: folder / f.name for role, f in variant.files.items()}
    missing = [p.name for p in paths.values() if not p.is_file()]
    if missing:
        urls = ", ".join(variant.url(f) for f in variant.files.values() if f.name in missing)
        raise FileNotFoundError(
            f"data_dir {str(data_dir)!r} lacks {', '.join(missing)} (CIFAR-10.1 {variant.config_name} needs "
            f"{', '.join(f.name for f in variant.files.values())} under these names). Download them from "
            f"{urls}, or leave data_dir unset to download them automatically."
        )
    return paths


def verify_files(paths: Mapping[str, os.PathLike | str], expected: Mapping[str, FileChecksum]) -> None:
    """Check the size and sha256 of every file; :class:`~pipeline.core.integrity.ChecksumError` names the first bad one."""
    for role, path in paths.items():
        verify_file(path, expected[role])


def read_release(variant: Variant, paths: Mapping[str, os.PathLike | str]) -> Release:
    """Load and check the arrays, then derive every image's Tiny Images index and keyword."""
    images_name, labels_name = variant.images.name, variant.labels.name
    images = load_npy(paths["images"])
    check_images(images, images_name)
    labels = check_labels(load_npy(paths["labels"]), labels_name)
    check_same_length(images, labels, images_name, labels_name)
    indices = ti_indices(variant.config_name)
    if len(indices) != len(labels):
        raise ValueError(
            f"{images_name} and {labels_name} hold {len(labels)} images, but CIFAR-10.1 {variant.config_name} "
            f"has {len(indices)} (its metadata lists {len(indices)} Tiny Images indices); these are not "
            f"the {variant.config_name} files."
        )
    keywords = image_keywords(variant.config_name, indices, labels)
    return Release(variant.config_name, images, labels, indices, keywords)
