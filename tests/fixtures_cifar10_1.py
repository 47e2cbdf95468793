"""CIFAR-10.1 test data: synthetic image arrays beside the real label files, in the released layout.

The images are random (the real ones are not redistributed here); the labels are the released
files (``tests/data/cifar10.1_<v>_labels.npy``, matching the pinned sha256), so row counts, class
counts and the keyword derivation are the real ones. The synthetic image files have other
sha256 than the pinned ones: tests pass their checksums to the builder (``checksums=``), so the
real verification runs against them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from pipeline.core.integrity import FileChecksum, file_digest

LABELS_DIR = Path(__file__).parent / "data"

__all__ = [
    "write_cifar10_1_files",
    "checksum_of",
    "cifar10_1_data_dir",
    "cifar10_1_checksums",
    "cifar10_1_hub_folder",
]


def checksum_of(path: Path) -> FileChecksum:
    """The FileChecksum (name, size, sha256) of a file as it is now."""
    digest = file_digest(path)
    return FileChecksum(Path(path).name, digest.size, digest.sha256)


def write_cifar10_1_files(folder, version: str, *, rng_seed: int = 0) -> dict[str, FileChecksum]:
    """Write ``cifar10.1_<version>_data.npy`` (random uint8 (N, 32, 32, 3)) and a copy of the real
    label file into ``folder``; return their checksums by file name."""
    from cifar10_1.variants import get_variant

    variant = get_variant(version)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    labels_path = folder / variant.labels.name
    shutil.copyfile(LABELS_DIR / variant.labels.name, labels_path)
    n = len(np.load(labels_path, allow_pickle=False))
    rng = np.random.default_rng([rng_seed, int(version.lstrip("v"))])
    images_path = folder / variant.images.name
    np.save(images_path, rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8))
    return {p.name: checksum_of(p) for p in (images_path, labels_path)}


@pytest.fixture(scope="session")
def cifar10_1_data_dir(tmp_path_factory) -> Path:
    """A folder with both versions' files under their released names (synthetic images, real labels).

    Shared by the session: copy it before changing a file.
    """
    folder = tmp_path_factory.mktemp("cifar10_1_files")
    for version in ("v4", "v6"):
        write_cifar10_1_files(folder, version)
    return folder


@pytest.fixture(scope="session")
def cifar10_1_checksums(cifar10_1_data_dir) -> dict[str, FileChecksum]:
    """Checksums of the files in ``cifar10_1_data_dir`` by name: the builder's ``checksums=`` override."""
    return {p.name: checksum_of(p) for p in sorted(cifar10_1_data_dir.glob("*.npy"))}


@pytest.fixture(scope="session")
def cifar10_1_hub_folder(tmp_path_factory, cifar10_1_data_dir, cifar10_1_checksums) -> Path:
    """A Hub-ready folder with v6 (default) and v4 exported from the synthetic files, verified."""
    from cifar10_1 import PACKAGE
    from pipeline.core.export import export_package

    root = tmp_path_factory.mktemp("cifar10_1_export")
    return export_package(
        PACKAGE,
        root / "hub",
        data_dir=str(cifar10_1_data_dir),
        cache_dir=str(root / "cache"),
        builder_kwargs={name: {"checksums": cifar10_1_checksums} for name in PACKAGE.config_names},
    )
