"""The image store of a pool: which candidate has which image, as a file path or the bytes.

``ingest`` builds it from a folder of ``<candidate id>.<jpeg|jpg|png>`` files (any depth; the
pool records their paths relative to the pool folder) or from a Parquet table of
``candidate_id`` and ``image`` (the file's bytes; the pool embeds them). Every image is checked
to be a JPEG or PNG by its first bytes, so that a text file or an HTML error page saved as
``.jpeg`` is refused by name, not found by ``build-set`` or a user later.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

import pyarrow as pa

from pipeline.rebuild.records import RecordError
from pipeline.rebuild.tables import conform, from_rows

PathLike = Union[str, "os.PathLike[str]"]

IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")
IMAGE_SIGNATURES = {b"\xff\xd8\xff": "JPEG", b"\x89PNG\r\n\x1a\n": "PNG"}


def image_kind(head: bytes) -> Optional[str]:
    """``"JPEG"`` or ``"PNG"`` from a file's first bytes, None for anything else.

    >>> image_kind(b"\\xff\\xd8\\xff\\xe0..."), image_kind(b"\\x89PNG\\r\\n\\x1a\\n..."), image_kind(b"<html>")
    ('JPEG', 'PNG', None)
    """
    return next((kind for signature, kind in IMAGE_SIGNATURES.items() if head.startswith(signature)), None)


def check_image(head: bytes, where: str) -> str:
    """The image's kind, or a :class:`RecordError` naming ``where`` and what the bytes look like."""
    kind = image_kind(head)
    if kind is None:
        looks = "empty" if not head else f"starts with {head[:8]!r}"
        raise RecordError(f"{where}: not an image (not a JPEG or PNG file: {looks}); replace it with the image's file, or remove it")
    return kind


def image_store_from_table(path: PathLike, candidate_ids: set) -> pa.Table:
    """The images table from a Parquet file of ``candidate_id`` and ``image`` (the file's bytes), embedded."""
    import pyarrow.parquet as pq

    path = Path(path)
    table = pq.read_table(path)
    missing = [c for c in ("candidate_id", "image") if c not in table.column_names]
    if missing:
        raise RecordError(f"{path.name}: missing column(s) {', '.join(missing)}; an image table has candidate_id and image (bytes)")
    ids = table.column("candidate_id").to_pylist()
    seen: dict[str, int] = {}
    for row, cid in enumerate(ids, start=1):
        if cid not in candidate_ids:
            raise RecordError(f"{path.name} row {row}: no candidate has the id {cid!r}")
        if cid in seen:
            raise RecordError(f"{path.name} row {row}: candidate {cid} already has an image (row {seen[cid]})")
        seen[cid] = row
    images = table.column("image")
    if images.null_count:
        raise RecordError(f"{path.name}: {images.null_count} row(s) have no image bytes")
    for row, data in enumerate(images.to_pylist(), start=1):
        check_image(data[:8] if isinstance(data, (bytes, bytearray)) else b"", f"{path.name} row {row} (candidate {ids[row - 1]})")
    return conform(table.select(["candidate_id", "image"]), "images", str(path)).sort_by("candidate_id")


def image_store_from_folder(folder: PathLike, candidate_ids: set, relative_to: PathLike) -> pa.Table:
    """The images table for the files ``<candidate id>.<jpeg|jpg|png>`` under ``folder``.

    Paths are stored relative to ``relative_to`` (the pool folder). A file whose name is not a
    known candidate id, a candidate with two files, or a file that is not a JPEG or PNG is an error.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"image folder {folder} does not exist")
    found: dict[str, Path] = {}
    for root, _dirs, files in os.walk(folder):
        for name in sorted(files):
            stem, suffix = os.path.splitext(name)
            if suffix.lower() not in IMAGE_SUFFIXES or name.startswith("."):
                continue
            path = Path(root) / name
            if stem not in candidate_ids:
                raise RecordError(f"{path}: no candidate has the id {stem!r}; image files must be named <candidate id>.jpeg")
            if stem in found:
                raise RecordError(f"{path}: candidate {stem} already has an image file ({found[stem]})")
            with open(path, "rb") as f:
                check_image(f.read(8), str(path))
            found[stem] = path
    base = Path(relative_to).resolve()
    ids = sorted(found)
    paths = [os.path.relpath(found[i].resolve(), base) for i in ids]
    return from_rows([{"candidate_id": i, "path": p} for i, p in zip(ids, paths)], "images", str(folder))
