"""Synthetic ImageNetV2 archives in the exact release layout, and fixtures built from them.

The real archives are 1.2 GB each; these hold the same 10,000 file names (the candidate ids of
the released revision lists, in the folder of their class index) with tiny JPEGs instead of
photos, so that every code path runs on the real format in seconds.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Optional, Sequence

import pytest

from imagenetv2 import PACKAGE, ImageNetV2, get_variant
from imagenetv2.revisions import expected_images, released_revision_json
from pipeline.core.export import export_package
from pipeline.core.integrity import FileChecksum, file_digest
from pipeline.toys.synthetic import tiny_jpeg

__all__ = [
    "Entry",
    "imagenetv2_archive_dir",
    "imagenetv2_cache_dir",
    "imagenetv2_datasets",
    "imagenetv2_hub_folder",
    "release_entries",
    "synthetic_jpeg",
    "write_imagenetv2_archive",
    "write_tar",
]


class Entry:
    """One tar member to write: a file (``data``), a folder, or a link (``link_target``)."""

    def __init__(self, name: str, data: Optional[bytes] = None, *, folder: bool = False, link_target: str = "", hard: bool = False):
        self.name, self.data, self.folder, self.link_target, self.hard = name, data, folder, link_target, hard

    def __repr__(self) -> str:
        return f"Entry({self.name!r})"


@lru_cache(maxsize=None)
def synthetic_jpeg(class_index: int, k: int) -> bytes:
    """A tiny JPEG for the k-th image of a class (distinct bytes per image, coloured by class)."""
    color = ((class_index * 37) % 256, (class_index * 91) % 256, (class_index * 53) % 256)
    return tiny_jpeg(class_index * 10 + k, size=8, color=color)


def release_entries(config_name: str, top_folder: Optional[str] = None) -> list[Entry]:
    """The members of a release archive for ``config_name``: folders, then 10 images per class."""
    variant = get_variant(config_name)
    top = top_folder or variant.top_folder
    expected = expected_images(released_revision_json(variant.revision))
    by_class: dict[int, list[str]] = {}
    for cid, class_index in expected.items():
        by_class.setdefault(class_index, []).append(cid)
    entries = [Entry(top, folder=True)]
    for class_index in range(1000):
        entries.append(Entry(f"{top}/{class_index}", folder=True))
        for k, cid in enumerate(sorted(by_class[class_index])):
            entries.append(Entry(f"{top}/{class_index}/{cid}.jpeg", synthetic_jpeg(class_index, k)))
    return entries


def write_tar(path: Path, entries: Iterable[Entry], compression: Optional[str] = None) -> FileChecksum:
    """Write ``entries`` as a pax tar (gzip-compressed if ``compression == "gz"``); return its checksum."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for e in entries:
            info = tarfile.TarInfo(e.name)
            info.mtime = 1_600_000_000
            if e.folder:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif e.link_target:
                info.type = tarfile.LNKTYPE if e.hard else tarfile.SYMTYPE
                info.linkname = e.link_target
                tar.addfile(info)
            else:
                info.size, info.mode = len(e.data), 0o644
                tar.addfile(info, io.BytesIO(e.data))
    data = raw.getvalue()
    if compression == "gz":
        data = gzip.compress(data, compresslevel=1, mtime=0)
    elif compression is not None:
        raise ValueError(f"compression must be None or 'gz', got {compression!r}")
    path.write_bytes(data)
    digest = file_digest(path)
    return FileChecksum(path.name, digest.size, digest.sha256)


def write_imagenetv2_archive(
    folder: Path,
    config_name: str,
    *,
    compression: Optional[str] = None,
    top_folder: Optional[str] = None,
    entries: Optional[Sequence[Entry]] = None,
    name: Optional[str] = None,
) -> FileChecksum:
    """Write a synthetic archive for ``config_name`` into ``folder`` under its released name.

    ``entries`` replaces the release layout (tests pass a modified copy of
    :func:`release_entries`); the return value is the archive's checksum, for the builder's
    ``archive_checksum``.
    """
    variant = get_variant(config_name)
    entries = entries if entries is not None else release_entries(config_name, top_folder)
    return write_tar(Path(folder) / (name or variant.archive.name), entries, compression)


@pytest.fixture(scope="session")
def imagenetv2_archive_dir(tmp_path_factory) -> tuple[Path, dict[str, FileChecksum]]:
    """A data_dir with synthetic archives of all three configs (matched-frequency as a plain tar
    despite its .tar.gz name, as reported for the real one; the others gzip-compressed), and
    their checksums by config name."""
    folder = tmp_path_factory.mktemp("imagenetv2-archives")
    checksums = {
        "matched-frequency": write_imagenetv2_archive(folder, "matched-frequency", compression=None),
        "threshold-0.7": write_imagenetv2_archive(folder, "threshold-0.7", compression="gz"),
        "top-images": write_imagenetv2_archive(folder, "top-images", compression="gz"),
    }
    return folder, checksums


@pytest.fixture(scope="session")
def imagenetv2_cache_dir(tmp_path_factory) -> Path:
    """The datasets cache shared by the session's synthetic ImageNetV2 builds."""
    return tmp_path_factory.mktemp("imagenetv2-cache")


@pytest.fixture(scope="session")
def imagenetv2_datasets(imagenetv2_archive_dir, imagenetv2_cache_dir) -> dict:
    """The test split of each config, built by the builder from the synthetic archives and checked
    against their checksums (config name → datasets.Dataset)."""
    data_dir, checksums = imagenetv2_archive_dir
    built = {}
    for name, checksum in checksums.items():
        builder = ImageNetV2(config_name=name, data_dir=str(data_dir), cache_dir=str(imagenetv2_cache_dir), archive_checksum=checksum)
        builder.download_and_prepare()
        built[name] = builder.as_dataset(split="test")
    return built


@pytest.fixture(scope="session")
def imagenetv2_hub_folder(tmp_path_factory, imagenetv2_archive_dir, imagenetv2_cache_dir, imagenetv2_datasets) -> Path:
    """A Hub-ready folder exported from the synthetic archives: all three configs, 10,000 rows
    each, checked against the synthetic archives' checksums. The folder is named ``imagenetv2``."""
    data_dir, checksums = imagenetv2_archive_dir
    return export_package(
        PACKAGE,
        tmp_path_factory.mktemp("imagenetv2-hub") / "imagenetv2",
        data_dir=str(data_dir),
        cache_dir=str(imagenetv2_cache_dir),
        builder_kwargs={name: {"archive_checksum": checksum} for name, checksum in checksums.items()},
    )
