"""The images workers see: annotation copies (longest side 500) under public names, and where they live.

``upload/`` holds one JPEG per public name, for any static host. :func:`image_url` builds the
URL a task shows; an ``s3://bucket/prefix`` base means :func:`upload_to_s3` puts the files there
with boto3 (credentials the usual AWS way) and the tasks show the bucket's HTTPS URLs.

>>> image_url("https://example.org/t", "ab" * 16)
'https://example.org/t/abababababababababababababababab.jpg'
>>> image_url("s3://bucket/tasks/r1", "ab" * 16)
'https://bucket.s3.amazonaws.com/tasks/r1/abababababababababababababababab.jpg'
>>> image_url(None, "ab" * 16)
'upload/abababababababababababababababab.jpg'
"""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path
from typing import Iterable, Mapping, Optional, Union
from urllib.parse import urlparse

from pipeline.rebuild.task_key import IMAGE_SUFFIX, UPLOAD

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]
LONGEST_SIDE = 500
JPEG_QUALITY = 90
ORIENTATION_TAG = 0x0112


def s3_location(base: str) -> tuple[str, str]:
    """``(bucket, prefix)`` of an ``s3://bucket/prefix`` base."""
    parsed = urlparse(base)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ValueError(f"not an s3://bucket/prefix address: {base!r}")
    return parsed.netloc, parsed.path.strip("/")


def image_url(base: Optional[str], name: str) -> str:
    """The URL of the image ``name`` under ``base`` (relative ``upload/...`` when there is no base)."""
    file = name + IMAGE_SUFFIX
    if base is None:
        return f"{UPLOAD}/{file}"
    if base.startswith("s3://"):
        bucket, prefix = s3_location(base)
        return f"https://{bucket}.s3.amazonaws.com/{prefix + '/' if prefix else ''}{file}"
    if not base.startswith(("http://", "https://")):
        raise ValueError(f"--image-base-url must start with https://, http:// or s3://, got {base!r}")
    return f"{base.rstrip('/')}/{file}"


def annotation_copy(data: bytes) -> bytes:
    """The copy workers see: EXIF orientation applied, RGB, longest side 500, JPEG quality 90.

    A JPEG that already is such a copy is kept byte for byte.
    """
    from PIL import Image, ImageOps

    with Image.open(io.BytesIO(data)) as image:
        oriented = image.getexif().get(ORIENTATION_TAG, 1) not in (None, 1)
        if image.format == "JPEG" and image.mode == "RGB" and max(image.size) == LONGEST_SIDE and not oriented:
            return data
        image = ImageOps.exif_transpose(image).convert("RGB")
        scale = LONGEST_SIDE / max(image.size)
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        image = image.resize(size, Image.Resampling.LANCZOS)
        out = io.BytesIO()
        image.save(out, format="JPEG", quality=JPEG_QUALITY)
        return out.getvalue()


def original_image_store(source: PathLike) -> dict[str, Union[bytes, Path]]:
    """Original image id → its file or bytes, from a folder of files named by id or a Parquet table."""
    source = Path(source)
    if source.is_file() and source.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(source)
        if not {"image_id", "image"} <= set(table.column_names):
            raise ValueError(f"{source.name}: an originals image table needs the columns image_id and image (bytes)")
        return dict(zip(table.column("image_id").to_pylist(), table.column("image").to_pylist()))
    if not source.is_dir():
        raise FileNotFoundError(f"--original-images {source} is neither a folder nor a .parquet table")
    store: dict[str, Union[bytes, Path]] = {}
    for root, _dirs, files in os.walk(source):
        for name in files:
            store.setdefault(name, Path(root) / name)
    return store


def write_upload(folder: Path, sources: Mapping[str, Union[bytes, Path]], progress=lambda it: it) -> int:
    """Write ``folder/upload/<name>.jpg`` for every public name → source; return how many."""
    target = folder / UPLOAD
    target.mkdir()
    for name, source in progress(sorted(sources.items())):
        data = source if isinstance(source, (bytes, bytearray)) else Path(source).read_bytes()
        try:
            copy = annotation_copy(bytes(data))
        except Exception as e:  # noqa: BLE001 - Pillow raises many types for a bad file
            raise ValueError(f"cannot make the annotation copy of {source if isinstance(source, Path) else name}: {e}") from None
        (target / (name + IMAGE_SUFFIX)).write_bytes(copy)
    return len(sources)


def upload_to_s3(folder: Path, base: str, names: Iterable[str], progress=lambda it: it) -> int:
    """Put ``folder/upload/<name>.jpg`` at ``base`` (``s3://bucket/prefix``) with boto3; return how many."""
    import boto3

    bucket, prefix = s3_location(base)
    client = boto3.client("s3")
    count = 0
    for name in progress(sorted(names)):
        key = f"{prefix + '/' if prefix else ''}{name}{IMAGE_SUFFIX}"
        client.put_object(Bucket=bucket, Key=key, Body=(folder / UPLOAD / (name + IMAGE_SUFFIX)).read_bytes(), ContentType="image/jpeg")
        count += 1
    logger.info("uploaded %d images to s3://%s/%s", count, bucket, prefix)
    return count
