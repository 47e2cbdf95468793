"""Where the review app's images come from: an index from image id to bytes or file, built at start.

A request names an image by its id only; the server looks the id up in these indexes and never
opens a path taken from a request, so no request can reach a file outside them.

- candidates: the pool's image store (``images.parquet``: a path relative to the pool, or bytes);
- originals (``--originals``): the original validation images, a folder of files named by their
  id (``ILSVRC2012_val_00000001.JPEG``, any depth) or a Parquet table of ``image_id`` and ``image``
  bytes (as the demo writes);
- references (``--references``, repeatable): the near-duplicate search's other references, in
  the same two forms.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

PathLike = Union[str, "os.PathLike[str]"]
ImageEntry = Union[bytes, Path]
IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png", ".webp", ".gif")
ID_COLUMNS = ("image_id", "reference_id", "candidate_id", "id")


def media_type(data: bytes) -> str:
    """The image type from the first bytes (JPEG, PNG, WebP, GIF), else a generic binary type.

    >>> media_type(b"\\xff\\xd8\\xff\\xe0..."), media_type(b"\\x89PNG\\r\\n\\x1a\\n...")
    ('image/jpeg', 'image/png')
    """
    if data[:3] == b"\xff\xd8\xff":
        return "image/jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "image/png"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    return "application/octet-stream"


def _folder_index(folder: Path) -> dict[str, ImageEntry]:
    index: dict[str, ImageEntry] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink() and path.suffix.lower() in IMAGE_SUFFIXES:
            if path.name in index:
                raise ValueError(f"{folder}: two images are named {path.name} ({index[path.name]} and {path}); ids must be unique")
            index[path.name] = path.resolve()
    return index


def _table_index(path: Path) -> dict[str, ImageEntry]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    id_column = next((c for c in ID_COLUMNS if c in table.column_names), None)
    if id_column is None or "image" not in table.column_names:
        raise ValueError(
            f"{path}: an image table needs an id column ({', '.join(ID_COLUMNS)}) and an `image` column of bytes; "
            f"it has {', '.join(table.column_names)}"
        )
    return {i: d for i, d in zip(table.column(id_column).to_pylist(), table.column("image").to_pylist()) if d is not None}


def image_index(source: PathLike) -> dict[str, ImageEntry]:
    """Image id → bytes or file for a folder of images (named by id) or a Parquet table of id and bytes.

    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "a").mkdir(); _ = (root / "a" / "ILSVRC2012_val_00000001.JPEG").write_bytes(b"\\xff\\xd8\\xff")
    >>> list(image_index(root))
    ['ILSVRC2012_val_00000001.JPEG']
    """
    path = Path(source)
    if path.is_dir():
        return _folder_index(path)
    if path.is_file() and path.suffix.lower() == ".parquet":
        return _table_index(path)
    raise FileNotFoundError(f"image source {path} is neither a folder of images nor a .parquet table of image_id and image")


def merged_index(sources: Sequence[PathLike]) -> dict[str, ImageEntry]:
    """The indexes of several sources; an id in two of them is kept from the first."""
    merged: dict[str, ImageEntry] = {}
    for source in sources:
        for key, value in image_index(source).items():
            merged.setdefault(key, value)
    return merged


class ImageStore:
    """The three indexes, and the only way the server reads an image: by kind and id."""

    KINDS = ("candidate", "original", "reference")

    def __init__(self, candidates: Mapping[str, ImageEntry], originals: Mapping[str, ImageEntry], references: Mapping[str, ImageEntry]):
        self._indexes = {"candidate": dict(candidates), "original": dict(originals), "reference": dict(references)}

    def has(self, kind: str, image_id: str) -> bool:
        return self._entry(kind, image_id) is not None

    def _entry(self, kind: str, image_id: str) -> Optional[ImageEntry]:
        if kind not in self._indexes:
            return None
        if kind == "reference":  # a reference may be a candidate or an original too
            for index in (self._indexes["reference"], self._indexes["candidate"], self._indexes["original"]):
                if image_id in index:
                    return index[image_id]
            return None
        return self._indexes[kind].get(image_id)

    def read(self, kind: str, image_id: str) -> Optional[bytes]:
        """The image's bytes, or None when ``image_id`` is not an image of that kind (or its file is gone)."""
        entry = self._entry(kind, image_id)
        if entry is None or isinstance(entry, (bytes, bytearray)):
            return entry
        try:
            return entry.read_bytes()
        except OSError:
            return None
