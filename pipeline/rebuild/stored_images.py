"""The downloaded image store: the copies of each candidate's image that the later stages use.

``download`` (and ``search --from-folder/--from-dataset``) write, per candidate, after fixing the
EXIF orientation and converting to RGB::

    original/<id[:2]>/<id>.<ext>        the bytes as downloaded (any image format)
    annotation/<id[:2]>/<id>.jpeg       longest side at most 500, JPEG quality 90 (the crowd tasks, the sets)
    near_duplicate/<id[:2]>/<id>.jpeg   256 x 256, JPEG quality 90 (pixel and SSIM near-duplicate search)
    images.jsonl                        one record per stored candidate: id, wnid, the three paths, sha256, size
    failures.jsonl                      one record per candidate left out: id, url, reason

Each file is written atomically and the two lists only at the end of a run, so a folder never
lists a half-written image. ``ingest --images STORE`` reads such a folder: the pool points at the
annotation copies, and the failed candidates are left out (:func:`read_store`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path
from typing import Iterable, Optional, Union

from pipeline.core.atomic import atomic_file

PathLike = Union[str, "os.PathLike[str]"]

MANIFEST = "images.jsonl"
FAILURES = "failures.jsonl"
COPIES = ("original", "annotation", "near_duplicate")
ANNOTATION_LONGEST_SIDE = 500
NEAR_DUPLICATE_SIZE = (256, 256)
JPEG_QUALITY = 90
SUFFIXES = {"JPEG": "jpeg", "PNG": "png", "GIF": "gif", "WEBP": "webp", "TIFF": "tiff", "BMP": "bmp", "MPO": "jpeg"}


class NotAnImage(ValueError):
    """The bytes are not an image Pillow can decode; the message says what they look like."""


def copy_path(kind: str, cid: str, suffix: str = "jpeg") -> str:
    """Where copy ``kind`` of candidate ``cid`` lies in a store, relative to the store.

    >>> copy_path("annotation", "a93094d8cd98f17e56a1ba6744709598c5e6ca74")
    'annotation/a9/a93094d8cd98f17e56a1ba6744709598c5e6ca74.jpeg'
    """
    if kind not in COPIES:
        raise ValueError(f"unknown image copy {kind!r}; the copies are {', '.join(COPIES)}")
    return f"{kind}/{cid[:2]}/{cid}.{suffix}"


def decode(data: bytes, where: str = "image"):
    """The image in ``data`` turned upright (EXIF orientation) and converted to RGB, and its format."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(data))
        fmt = image.format or "unknown"
        image.load()
        image = ImageOps.exif_transpose(image)
    except UnidentifiedImageError:
        looks = "empty" if not data else f"starts with {data[:12]!r}"
        raise NotAnImage(f"{where}: not an image ({len(data)} bytes, {looks})") from None
    except (OSError, ValueError, Image.DecompressionBombError) as e:
        raise NotAnImage(f"{where}: cannot decode the image ({e})") from None
    return image.convert("RGB"), fmt


def jpeg_bytes(image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return buffer.getvalue()


def annotation_copy(image):
    """The image with its longest side at most 500 pixels (never enlarged)."""
    from PIL import Image

    scale = ANNOTATION_LONGEST_SIDE / max(image.size)
    if scale >= 1:
        return image
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return image.resize(size, Image.Resampling.LANCZOS)


def near_duplicate_copy(image):
    """The image resized to 256 x 256 (aspect ratio not kept, as the original near-duplicate search did)."""
    from PIL import Image

    return image.resize(NEAR_DUPLICATE_SIZE, Image.Resampling.BILINEAR)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "wb") as f:
        f.write(data)


def store_image(store: Path, cid: str, wnid: str, data: bytes, **extra) -> dict:
    """Write the three copies of one image (the original last) and return its manifest record.

    Raises :class:`NotAnImage` (nothing written) when ``data`` is not an image.
    """
    image, fmt = decode(data, f"candidate {cid}")
    suffix = SUFFIXES.get(fmt, fmt.lower())
    paths = {"original": copy_path("original", cid, suffix), "annotation": copy_path("annotation", cid), "near_duplicate": copy_path("near_duplicate", cid)}
    _write(store / paths["near_duplicate"], jpeg_bytes(near_duplicate_copy(image)))
    _write(store / paths["annotation"], jpeg_bytes(annotation_copy(image)))
    _write(store / paths["original"], data)
    return {"candidate_id": cid, "wnid": wnid, **paths, "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data), "format": fmt, "width": image.width, "height": image.height, **extra}


def is_complete(store: Path, record: dict) -> bool:
    """Whether every copy a manifest record names is on disk."""
    return all((store / record[kind]).is_file() for kind in COPIES)


def write_lists(store: Path, stored: Iterable[dict], failures: Iterable[dict]) -> None:
    """Write ``images.jsonl`` and ``failures.jsonl`` atomically, sorted by candidate id."""
    for name, records in ((MANIFEST, stored), (FAILURES, failures)):
        with atomic_file(store / name, "w") as f:
            for record in sorted(records, key=lambda r: r["candidate_id"]):
                f.write(json.dumps(record, sort_keys=True) + "\n")


def is_store(folder: PathLike) -> bool:
    """Whether ``folder`` is an image store written by ``download`` (it has ``images.jsonl``)."""
    return (Path(folder) / MANIFEST).is_file()


def read_store(folder: PathLike, copy: str = "annotation") -> tuple[dict[str, Path], dict[str, str]]:
    """``({candidate id: path of its copy}, {failed candidate id: reason})`` of a store."""
    folder = Path(folder)
    if copy not in COPIES:
        raise ValueError(f"unknown image copy {copy!r}; the copies are {', '.join(COPIES)}")
    if not is_store(folder):
        raise FileNotFoundError(f"{folder} is not a finished image store (no {MANIFEST}); run `python -m pipeline download` to the end")
    paths, failed = {}, {}
    for name, target in ((MANIFEST, paths), (FAILURES, failed)):
        path = folder / name
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                raise ValueError(f"{path} line {number}: not valid JSON; the store is damaged, run download again") from None
            target[record["candidate_id"]] = folder / record[copy] if name == MANIFEST else record.get("reason", "")
    return paths, failed


def manifest_record(store: Path, cid: str) -> Optional[dict]:
    """The manifest record of ``cid`` in a finished store, or None."""
    path = store / MANIFEST
    if not path.is_file():
        return None
    for line in path.read_text("utf-8").splitlines():
        if line.strip() and json.loads(line).get("candidate_id") == cid:
            return json.loads(line)
    return None


def written_by_download(folder: PathLike) -> bool:
    """Whether ``folder`` is an image store (finished or not) that ``download`` or ``search --from-*`` wrote."""
    from pipeline.core.ownership import owner

    folder = Path(folder)
    return folder.is_dir() and (is_store(folder) or (owner(folder) or {}).get("command") == "download")


def image_table(folder: PathLike, candidate_ids: set, relative_to: PathLike):
    """The pool's images table for a store: each candidate's annotation copy, relative to ``relative_to``."""
    from pipeline.rebuild.records import RecordError
    from pipeline.rebuild.tables import from_rows

    paths, _failed = read_store(folder)
    unknown = sorted(set(paths) - candidate_ids)
    if unknown:
        raise RecordError(
            f"image store {folder} holds {len(unknown)} candidate(s) the candidates file does not list "
            f"(first: {unknown[0]}); pass the candidates file the store was downloaded from"
        )
    base = Path(relative_to).resolve()
    rows = [{"candidate_id": cid, "path": os.path.relpath(paths[cid].resolve(), base)} for cid in sorted(paths)]
    return from_rows(rows, "images", str(folder))


def drop_failed(candidates, images: Optional[PathLike]):
    """``(candidates without the failed downloads of store images, how many were dropped)``."""
    import pyarrow.compute as pc
    import pyarrow as pa

    if images is None or not written_by_download(images):
        return candidates, 0
    _paths, failed = read_store(images)
    if not failed:
        return candidates, 0
    keep = pc.invert(pc.is_in(candidates.column("candidate_id"), value_set=pa.array(sorted(failed))))
    kept = candidates.filter(keep)
    return kept, candidates.num_rows - kept.num_rows
